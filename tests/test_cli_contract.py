"""The command line's contract with users and scripts (issue 16), through the real entry point:
exit codes, closed pipes, colour and terminals, where the results went, ruff's check options."""

from __future__ import annotations

import fcntl
import importlib.metadata
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from cli_helpers import REPO, cuda2npu

CUDA = "import torch\n\nx = torch.ones(1).cuda()\n"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run(*args, cwd=None, env=None, **kwargs) -> subprocess.CompletedProcess:
    """``python -m cuda2npu ARGS`` with extra environment variables (colour ones cleared first)."""
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE")}
    return cuda2npu(*args, cwd=cwd, env={**base, **(env or {})}, **kwargs)


def on_terminal(*args, cwd: Path, columns: int = 80) -> tuple[int, str]:
    """Run with stdout and stderr on a pseudo-terminal ``columns`` wide: (exit code, what it showed)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE", "COLUMNS")}
    env["TERM"] = "xterm"
    process = subprocess.Popen(
        [sys.executable, "-m", "cuda2npu", *map(str, args)],
        cwd=cwd,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    shown = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        shown += data
    os.close(master)
    return process.wait(timeout=300), shown.decode("utf-8", "replace").replace("\r\n", "\n")


# 1. a closed pipe is not a crash


def test_closed_pipe_is_not_a_crash_and_keeps_the_exit_code(tmp_path):
    lines = "".join(f"y{i} = torch.ones({i}).cuda()\n" for i in range(3000))  # a diff far above a pipe buffer
    (tmp_path / "big.py").write_text("import torch\n" + lines)
    for args, expected in ((["migrate", "big.py", "--diff"], 1), (["check", "big.py"], 1)):
        command = f'{sys.executable} -m cuda2npu {" ".join(args)} | head -1; echo "exit=${{PIPESTATUS[0]}}" >&2'
        result = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert f"exit={expected}" in result.stderr, result.stderr
        assert result.stdout.count("\n") == 1
        for crash in ("internal error", "Broken pipe", "Traceback", "Exception ignored"):
            assert crash not in result.stderr, result.stderr


# 2. validate without torch is a usage error naming the extra


def test_validate_without_torch_exits_2_naming_the_extra(tmp_path):
    hide_torch = (
        "import sys; sys.modules['torch'] = None; from cuda2npu.commands.cli import main; main(prog_name='cuda2npu')"
    )
    result = subprocess.run(
        [sys.executable, "-c", hide_torch, "validate", str(tmp_path), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert "pip install 'cuda2npu[validate]'" in result.stderr
    assert "internal error" not in result.stderr


# 4. --check / --diff exit 1 when a file failed


@pytest.mark.parametrize("mode", ["--check", "--diff"])
def test_check_and_diff_exit_1_when_a_file_fails(tmp_path, mode):
    (tmp_path / "broken.py").write_text("import torch\ndef f(:\n    torch.cuda.synchronize()\n")
    result = run("migrate", "broken.py", mode, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "broken.py:2:7: cannot parse" in result.stderr and "1 failed" in result.stderr


# 5. rules accepts a prefix


def test_rules_accepts_prefixes_and_suggests_codes():
    amp = run("rules", "NPU3")
    assert amp.returncode == 0, amp.stderr
    codes = [line.split()[0] for line in amp.stdout.splitlines()[1:]]
    assert codes and all(code.startswith("NPU3") for code in codes)
    everything = [d["code"] for d in json.loads(run("rules", "--format", "json").stdout)]
    colossalai = [d["code"] for d in json.loads(run("rules", "npu5", "--format", "json").stdout)]
    assert colossalai == [code for code in everything if code.startswith("NPU5")] and colossalai
    assert "What it does:" in run("rules", "npu101").stdout
    unknown = run("rules", "NPU96")
    assert unknown.returncode == 2 and "matches no rule code" in unknown.stderr and "did you mean" in unknown.stderr


# 6. syntax errors where CPython reports them, carets under the span


def test_syntax_errors_are_reported_at_cpythons_position(tmp_path):
    source = "import torch\nprint 'device', torch.cuda.current_device()\n"
    (tmp_path / "py2.py").write_text(source)
    with pytest.raises(SyntaxError) as error:
        compile(source, "py2.py", "exec", dont_inherit=True)
    expected = error.value
    result = run("check", "py2.py", cwd=tmp_path)
    assert result.returncode == 1
    assert f"py2.py:{expected.lineno}:{expected.offset}: NPU001 cannot parse: {expected.msg}" in result.stdout
    source_line, carets = result.stdout.splitlines()[1:3]
    assert source_line.endswith(source.splitlines()[1])
    start = source_line.index("print")
    assert carets == " " * start + "^" * (expected.end_offset - expected.offset)


def test_caret_spans_the_reported_range(tmp_path):
    (tmp_path / "tf32.py").write_text("import torch\nif True:\n\ttorch.backends.cuda.matmul.allow_tf32 = True\n")
    text = run("check", "tf32.py", "--select", "NPU105", cwd=tmp_path).stdout.splitlines()
    line, carets = text[1], text[2]
    assert carets.strip() == "^" * len("torch.backends.cuda.matmul.allow_tf32")
    assert carets.index("^") == line.index("torch") and "\t" in carets  # a tab stays a tab: carets line up


def test_carets_line_up_by_display_width_after_wide_characters(tmp_path):
    """CJK strings and comments are common in code written for Ascend: a wide character takes two
    terminal columns, so two blanks under it (and two carets where the range holds one)."""
    source = 'import torch\ny = {"数据": 1}; z = torch.zeros(2).cuda()\n'
    (tmp_path / "a.py").write_text(source, encoding="utf-8")
    line, carets = run("check", "a.py", "--select", "NPU101", cwd=tmp_path).stdout.splitlines()[1:3]
    before = line[: line.index("cuda()")]
    assert carets.index("^") == len(before) + 2  # the two wide characters before the range
    assert carets.strip() == "^^^^"


# 7. the summary says where everything went, what to run next, and what is left where

PROJECT = {
    "pkg/train.py": (
        "import torch\nimport mamba_ssm\n\n"
        "model = torch.nn.Linear(2, 2).cuda()\n"
        "torch.backends.cudnn.benchmark = True\n"
        "for batch in loader:\n    loss = model(batch).sum()\n    loss.backward()\n    print(loss.item())\n"
    ),
    "pkg/util.py": "import torch\nimport mamba_ssm\n",
}


def _project(root: Path) -> Path:
    for name, text in PROJECT.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_out_summary_names_the_outputs_and_the_next_step(tmp_path):
    source, out = _project(tmp_path / "src"), tmp_path / "out"
    result = run("migrate", source, "--out", out)
    assert result.returncode == 0, result.stderr
    stderr = result.stderr
    assert "Migrated: pkg/train.py" in stderr and "Migrated: pkg/util.py" in stderr
    assert f"wrote: the migrated copy {out}/ (2 files changed), its report {out / 'cuda2npu_report.json'}" in stderr
    assert f"{out}/npu_validation/" in stderr and (out / "npu_validation").is_dir()
    assert f"`cuda2npu validate {source} {out} --entry MODULE:FUNCTION`" in stderr
    assert f"`python -m pytest {out}/npu_validation`" in stderr
    report = json.loads((out / "cuda2npu_report.json").read_text())
    assert report["validation_harness"] == "npu_validation/" and (out / report["validation_harness"]).is_dir()


def test_need_a_human_counts_agree_with_the_report_and_the_markers(tmp_path):
    source, out = _project(tmp_path / "src"), tmp_path / "out"
    stderr = run("migrate", source, "--out", out).stderr
    report = json.loads((out / "cuda2npu_report.json").read_text())
    summary = report["summary"]
    need = sum(item["count"] for item in summary["need_a_human"])
    manual = [m for f in report["files"] for m in f["manual"]]
    assert need == sum(not m["advisory"] for m in manual) and need > 0
    assert sum(item["count"] for item in summary["advisories"]) == sum(m["advisory"] for m in manual) > 0
    assert f"need a human: {need} findings (" in stderr
    markers = [f"{f['path']}:{line}" for f in report["files"] for line in f.get("markers", [])]
    written = [
        f"{path.relative_to(out).as_posix()}:{number}"
        for path in sorted(out.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if line.lstrip().startswith("# TODO(cuda2npu)")
    ]
    assert sorted(markers) == sorted(written) and summary["markers"] == len(written)
    assert f"TODO(cuda2npu) markers ({len(written)}): " in stderr
    assert all(where in stderr for where in written)
    assert re.search(
        r"advisories, reported only .*NPU804 host-sync-in-training-loop ×1, NPU805 cudnn-benchmark ×1; `cuda2npu check --select NPU8` lists them",
        stderr,
    )


def test_unmarked_findings_are_listed_with_their_place(tmp_path):
    _project(tmp_path)
    result = run("migrate", "pkg/util.py", "--no-markers", "--diff", cwd=tmp_path)
    assert "not marked in the code (file not written, or markers off): pkg/util.py:2:1 NPU606" in result.stderr


def _hook_entry(hook_id: str) -> list[str]:
    """The arguments of a hook's entry in .pre-commit-hooks.yaml, after `cuda2npu`."""
    hooks = (REPO / ".pre-commit-hooks.yaml").read_text()
    entry = re.search(rf"- id: {hook_id}\n(?:  .*\n)*?  entry: cuda2npu (.*)\n", hooks).group(1)
    return entry.split()


def test_pre_commit_migrate_hook_names_the_files(tmp_path):
    _project(tmp_path)
    # the entry of the cuda2npu-migrate hook (.pre-commit-hooks.yaml), with the staged files pre-commit passes
    entry = _hook_entry("cuda2npu-migrate")
    assert entry == ["migrate", "--allow-dirty", "--exit-non-zero-on-fix", "--exit-non-zero-on-open", "--force-exclude"]
    result = run(*entry, "pkg/train.py", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("Migrated: pkg/train.py\n")


# issue 33, 4: the migrate hook is `ruff check --fix`: it fails while a finding needs a human


def test_exit_non_zero_on_open_while_a_manual_item_is_left(tmp_path):
    (tmp_path / "manual.py").write_text("import torch\nimport mamba_ssm\n\nx = torch.ones(1).cuda()\n")
    (tmp_path / "clean.py").write_text("import torch\n\nx = torch.ones(1)\n")
    (tmp_path / "advice.py").write_text("import torch\n\nmodel = torch.compile(torch.nn.Linear(2, 2))\n")
    hook = _hook_entry("cuda2npu-migrate")
    first = run(*hook, "manual.py", cwd=tmp_path)
    assert first.returncode == 1 and "need a human: 1 finding (NPU606 cuda-only-import ×1)" in first.stderr, (
        first.stderr
    )
    assert "# TODO(cuda2npu): NPU606" in (tmp_path / "manual.py").read_text()
    second = run(*hook, "manual.py", cwd=tmp_path)  # nothing to change: the marker is there already
    assert second.returncode == 1 and "0 changed" in second.stderr and "need a human: 1 finding" in second.stderr
    assert "TODO(cuda2npu) markers (1): manual.py:3" in second.stderr
    without = run("migrate", "--allow-dirty", "--exit-non-zero-on-fix", "manual.py", cwd=tmp_path)
    assert without.returncode == 0  # the old hook let the second commit through
    check_only = run("migrate", "--check", "--exit-non-zero-on-open", "manual.py", cwd=tmp_path)
    assert check_only.returncode == 1 and "Would migrate" not in check_only.stdout
    for name in ("clean.py", "advice.py"):  # nothing left, or only advisories: passes
        result = run(*hook, name, cwd=tmp_path)
        assert result.returncode == 0, name + result.stderr
    assert "advisories, reported only" in run(*hook, "advice.py", cwd=tmp_path).stderr
    source = (tmp_path / "manual.py").read_text()  # suppressed by the person who looked at it
    (tmp_path / "manual.py").write_text(source.replace("import mamba_ssm\n", "import mamba_ssm  # noqa: NPU606\n"))
    assert run(*hook, "manual.py", cwd=tmp_path).returncode == 0


# 8. colour on a terminal, never in a pipe unless forced; NO_COLOR; wrapping; progress


def test_colour_follows_the_terminal_and_the_environment(tmp_path):
    (tmp_path / "a.py").write_text(CUDA)
    assert not ANSI.search(run("check", "a.py", cwd=tmp_path).stdout)
    forced = run("check", "a.py", "--color", "always", cwd=tmp_path).stdout
    assert (
        "\x1b[31m\x1b[1mNPU101\x1b[0m" in forced and ANSI.sub("", forced) == run("check", "a.py", cwd=tmp_path).stdout
    )
    assert ANSI.search(run("check", "a.py", cwd=tmp_path, env={"FORCE_COLOR": "1"}).stdout)
    assert not ANSI.search(run("check", "a.py", cwd=tmp_path, env={"FORCE_COLOR": "1", "NO_COLOR": "1"}).stdout)
    assert ANSI.search(run("check", "a.py", "--color", "always", cwd=tmp_path, env={"NO_COLOR": "1"}).stdout)
    diff = run("migrate", "a.py", "--diff", "--color", "always", cwd=tmp_path).stdout
    assert "\x1b[31m-x = torch.ones(1).cuda()\x1b[0m" in diff and "\x1b[32m+x = torch.ones(1).npu()\x1b[0m" in diff
    code, shown = on_terminal("check", "a.py", cwd=tmp_path)
    assert code == 1 and "\x1b[" in shown
    code, shown = on_terminal("--color", "never", "check", "a.py", cwd=tmp_path)
    assert code == 1 and "\x1b[" not in shown.replace("\x1b[?25l", "").replace("\x1b[?25h", "")


def test_summary_wraps_at_word_boundaries_on_a_terminal(tmp_path):
    _project(tmp_path)
    piped = run("migrate", ".", "--diff", cwd=tmp_path).stderr
    code, shown = on_terminal("migrate", ".", "--diff", cwd=tmp_path, columns=60)
    summary = ANSI.sub("", shown[shown.index("cuda2npu: ") :])
    assert code == 1 and all(len(line) <= 60 for line in summary.splitlines()), summary
    assert summary.split() == piped[piped.index("cuda2npu: ") :].split()  # the same words, none cut
    assert max(len(line) for line in piped.splitlines()) > 60  # off a terminal, one line per item


def test_progress_counts_files_as_workers_finish_them(tmp_path):
    from cuda2npu.core.options import Options
    from cuda2npu.project.runner import run as run_files

    slow = tmp_path / "a_slow.py"  # the first chunk holds the slow file: later chunks finish first
    slow.write_text("import torch\n" + "".join(f"def f{i}(x):\n    return x.cuda() + {i}\n" for i in range(1500)))
    files = [(slow, "a_slow.py")]
    for index in range(60):
        path = tmp_path / f"m{index:02}.py"
        path.write_text(CUDA)
        files.append((path, path.name))
    events = []
    for result in run_files(files, Options(), jobs=2, cache=None, on_done=lambda n: events.append(("done", n))):
        events.append(("result", result.path))
    assert sum(n for kind, n in events if kind == "done") == len(files)
    assert [p for kind, p in events if kind == "result"] == [name for _, name in files]  # still in order
    assert events.index(("result", "a_slow.py")) > 1 and events[0][0] == "done"  # moved before the first result


def test_progress_bar_shows_a_file_count_on_a_terminal(tmp_path):
    for index in range(200):
        (tmp_path / f"m{index:03}.py").write_text(CUDA)
    code, shown = on_terminal("check", ".", "--format", "concise", "--jobs", "2", cwd=tmp_path)
    assert code == 1 and re.search(r"\d+/200 files", ANSI.sub("", shown)), shown[-2000:]


# 9. check like ruff check


def test_check_defaults_to_the_current_directory_quiet_and_statistics(tmp_path):
    (tmp_path / "a.py").write_text(CUDA + "y = torch.ones(2).cuda()\ntorch.backends.cudnn.benchmark = True\n")
    default = run("check", cwd=tmp_path)
    assert default.returncode == 1 and "a.py:3:19: NPU101" in default.stdout
    quiet = run("check", "-q", cwd=tmp_path)
    assert quiet.returncode == 1 and "Found" not in quiet.stdout and "NPU101" in quiet.stdout
    stats = run("check", "--statistics", "--extend-select", "NPU8", cwd=tmp_path)  # advisories: opt-in
    assert stats.returncode == 1
    assert stats.stdout.splitlines() == ["2\tNPU101\t[*] cuda-method-call", "1\tNPU805\t    cudnn-benchmark"]
    assert run("check", "--statistics", cwd=tmp_path).stdout.splitlines() == ["2\tNPU101\t[*] cuda-method-call"]
    data = json.loads(run("check", "--statistics", "--format", "json", "--extend-select", "NPU8", cwd=tmp_path).stdout)
    assert data == [
        {"code": "NPU101", "name": "cuda-method-call", "count": 2, "fixable": True, "fixable_count": 2},
        {"code": "NPU805", "name": "cudnn-benchmark", "count": 1, "fixable": False, "fixable_count": 0},
    ]
    (tmp_path / "a.py").write_text("x = 1\n")
    assert run("check", "-q", cwd=tmp_path).stdout == ""


def test_check_fix_points_to_migrate():
    result = run("check", "--fix", ".")
    assert result.returncode == 2 and "`cuda2npu migrate PATHS` applies the fixes" in result.stderr
    assert "Did you mean" not in result.stderr


def test_unknown_codes_name_the_option_and_suggest_close_ones(tmp_path):
    (tmp_path / "a.py").write_text(CUDA)
    bad = run("check", "--select", "NPU96", cwd=tmp_path)
    assert bad.returncode == 2 and "Invalid value for '--select': 'NPU96' matches no rule code" in bad.stderr
    ignored = run("migrate", ".", "--diff", "--ignore", "NPU1011", cwd=tmp_path)
    assert ignored.returncode == 2 and "'--ignore'" in ignored.stderr and "did you mean NPU101" in ignored.stderr
    (tmp_path / "cuda2npu.toml").write_text('select = ["NPU1011"]\n')
    config = run("check", cwd=tmp_path)
    assert config.returncode == 2 and "did you mean NPU101" in config.stderr
    assert len(re.findall(r"NPU\d{3}", config.stderr)) < 10  # not the whole catalogue


# 10. validate: a line per passing entry, the detail on a mismatch, a closing line

MODEL = """
import torch
{imports}from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a_rather_long_layer_name_that_goes_past_eighty_columns_in_a_table = nn.Linear(4, 3)

    def forward(self, x):
        return self.a_rather_long_layer_name_that_goes_past_eighty_columns_in_a_table(x){change}


def build():
    torch.manual_seed(0)
    return Model().{device}(), (torch.randn(2, 4).{device}(),)
"""


def test_validate_prints_one_line_per_passing_entry_and_the_detail_of_a_mismatch(tmp_path):
    for name, device, change in (("orig", "cuda", ""), ("good", "npu", ""), ("bad", "npu", " * 1.5")):
        (tmp_path / name).mkdir()
        imports = "import torch_npu  # noqa: F401\n" if device == "npu" else ""  # what the migration adds
        (tmp_path / name / "model.py").write_text(MODEL.format(device=device, change=change, imports=imports))
    good = run("validate", tmp_path / "orig", tmp_path / "good", "--entry", "model:build")
    assert good.returncode == 0, good.stdout + good.stderr
    lines = good.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("model:build: EQUIVALENT  (") and "bounds fp32" in lines[0]
    assert lines[1] == "cuda2npu validate: 1 entry: 1 equivalent"
    assert "NumPy" not in good.stderr
    bad = run("validate", tmp_path / "orig", tmp_path / "bad", "--entry", "model:build")
    assert bad.returncode == 1
    assert bad.stdout.splitlines()[0].startswith("model:build: MISMATCH")
    assert "a_rather_long_layer_name_that_goes_past_eighty_columns_in_a_table.weight" in bad.stdout
    assert bad.stdout.splitlines()[-1] == "cuda2npu validate: 1 entry: 1 mismatch"


# 11. an untracked file only holds back itself


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=root, check=True, capture_output=True
    )


def test_untracked_file_does_not_block_the_rest_of_the_tree(tmp_path):
    (tmp_path / "tracked.py").write_text(CUDA)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "tracked.py")
    _git(tmp_path, "commit", "-q", "-m", "init")
    (tmp_path / "new.py").write_text(CUDA)  # untracked and would change
    (tmp_path / "notes.py").write_text("x = 1\n")  # untracked, nothing to change
    result = run("migrate", ".", cwd=tmp_path)
    assert result.returncode == 1  # not everything was migrated
    assert ".npu()" in (tmp_path / "tracked.py").read_text()
    assert (tmp_path / "new.py").read_text() == CUDA
    assert "new.py: skipped (untracked: git has no copy of it; commit it first, or pass --allow-dirty)" in result.stderr
    assert "0 failed" in result.stderr and "1 skipped" in result.stderr  # left as it is, not a failure
    assert "notes.py" not in result.stderr


# 12. an unreadable file is reported; the crash log names the libcst version

DENY = """
import builtins, errno, pathlib, sys
def denied(path):
    raise PermissionError(errno.EACCES, "Permission denied", str(path))
read_bytes = pathlib.Path.read_bytes
pathlib.Path.read_bytes = lambda self: denied(self) if self.name == "x.py" else read_bytes(self)
from cuda2npu.commands.cli import main
main(prog_name="cuda2npu")
"""


def test_unreadable_file_is_reported_not_skipped(tmp_path):
    """Root reads a mode-000 file anyway, so the denial is made where every read goes through."""
    (tmp_path / "x.py").write_text("x = 1\n")  # no CUDA bytes: a prefilter skip if it could be read
    (tmp_path / "a.py").write_text(CUDA)
    check = subprocess.run(
        [sys.executable, "-c", DENY, "check", "--jobs", "1", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 1 and "x.py:1:1: NPU004 cannot read: Permission denied" in check.stdout
    migrate = subprocess.run(
        [sys.executable, "-c", DENY, "migrate", "--jobs", "1", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert migrate.returncode == 1 and "x.py:1:1: cannot read: Permission denied" in migrate.stderr
    assert "1 failed" in migrate.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files regardless of their mode")
def test_mode_000_file_is_reported(tmp_path):
    (tmp_path / "x.py").write_text("x = 1\n")
    (tmp_path / "x.py").chmod(0)
    result = run("check", ".", cwd=tmp_path)
    assert result.returncode == 1 and "x.py:1:1: NPU004" in result.stdout


def test_crash_log_names_the_libcst_version(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cuda2npu.commands import cli
    from cuda2npu.families.device import device

    def visit_Call(self, node):
        raise RuntimeError("rule bug")

    monkeypatch.setattr(device.CudaMethodCall, "visit_Call", visit_Call)
    (tmp_path / "a.py").write_text(CUDA)
    result = CliRunner().invoke(cli.main, ["check", str(tmp_path), "--jobs", "1"])
    assert result.exit_code == 3
    log = Path(re.search(r"Details \(with versions\) in (\S+);", result.output).group(1))
    assert f"libcst {importlib.metadata.version('libcst')}\n" in log.read_text() and "libcst ?" not in log.read_text()
    again = CliRunner().invoke(cli.main, ["check", str(tmp_path), "--jobs", "1"])
    second = Path(re.search(r"Details \(with versions\) in (\S+);", again.output).group(1))
    assert second != log and log.is_file(), "each crash gets its own log"


def test_migrate_docs_summary_example_is_what_migrate_prints(tmp_path):
    """The summary shown in docs/migrate.md's "Usage" section, from the project it describes."""
    page = (REPO / "docs" / "migrate.md").read_text()
    section = page[page.index("## Usage") : page.index("## How a run works")]
    example = re.search(r"```\n(Migrated: .*?)```", section, re.DOTALL).group(1)
    repo = tmp_path / "ex" / "repo" / "pkg"
    repo.mkdir(parents=True)
    (repo / "train.py").write_text(
        "import torch\nimport mamba_ssm\n\nmodel = torch.nn.Linear(2, 2).cuda()\n"
        "x = torch.ones(1).cuda()\ntorch.backends.cudnn.benchmark = True\n"
    )
    (repo / "util.py").write_text("import torch\nimport mamba_ssm\n")
    (repo / "broken.py").write_text("import torch\ndef f(:\n    torch.cuda.synchronize()\n")
    result = run("migrate", "./repo", "--out", "../repo-npu", cwd=tmp_path / "ex")
    assert result.returncode == 1
    assert result.stderr == example


@pytest.mark.parametrize(
    "args",
    [
        ("migrate", "{tree}", "--report", "{missing}/r.json"),
        ("check", "{tree}", "-o", "{missing}/out.json"),
        ("check", "{tree}", "-o", "{tree}"),
        ("validate", "{tree}", "{tree}", "--run", "a.py", "--json", "{missing}/v.json"),
    ],
    ids=["migrate-report", "check-output", "check-output-is-a-directory", "validate-json"],
)
def test_an_output_path_that_cannot_be_written_is_a_usage_error_before_anything_is_written(tmp_path, args):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.py").write_text(CUDA)
    result = run(*(a.format(tree=tree, missing=tmp_path / "nonexistent") for a in args))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "cannot write" in result.stderr and "internal error" not in result.stderr
    assert (tree / "a.py").read_text() == CUDA


def test_version_flag_and_a_path_without_python_files(tmp_path):
    assert run("-V").stdout.strip() == run("--version").stdout.strip() != ""
    for command in ("check", "migrate"):
        result = run(command, tmp_path)
        assert result.returncode == 0 and "warning: No Python files found under the given path(s)" in result.stderr
    (tmp_path / "a.py").write_text("x = 1\n")
    assert "No Python files" not in run("check", tmp_path).stderr


def test_migrate_defaults_to_the_current_directory_as_check_does(tmp_path):
    (tmp_path / "a.py").write_text(CUDA)
    result = run("migrate", "--diff", cwd=tmp_path)
    assert result.returncode == 1, result.stderr  # --diff: 1 when something would change, as ruff
    assert "+++ b/a.py" in result.stdout and ".npu()" in result.stdout
    assert (tmp_path / "a.py").read_text() == CUDA  # --diff writes nothing


def test_the_git_diff_hint_is_given_only_inside_a_git_work_tree(tmp_path):
    plain, repo = tmp_path / "plain", tmp_path / "repo"
    for tree in (plain, repo):
        tree.mkdir()
        (tree / "a.py").write_text(CUDA)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "a.py"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "cuda"], cwd=repo, check=True)
    outside, inside = run("migrate", ".", cwd=plain), run("migrate", ".", cwd=repo)
    assert outside.returncode == inside.returncode == 0, outside.stderr + inside.stderr
    assert "next: review" in outside.stderr and "git diff" not in outside.stderr
    assert "(`git diff` shows the rewrite)" in inside.stderr


def test_validate_entry_typos_are_usage_errors(tmp_path):
    """A mistyped --entry is found before anything runs, with the names the original has."""
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "model_entry.py").write_text("def build():\n    return None\n")
    cases = {
        "model_entry:buidl": "model_entry.py defines no 'buidl'; did you mean build?",
        "model_entr:build": "no module 'model_entr' in",
        "model_entry": "expected MODULE:FUNCTION",
    }
    for entry, message in cases.items():
        result = run("validate", tmp_path / "a", tmp_path / "b", "--entry", entry)
        assert result.returncode == 2 and message in result.stderr, (entry, result.stderr)
    assert (
        "did you mean model_entry?"
        in run("validate", tmp_path / "a", tmp_path / "b", "--entry", "model_entr:build").stderr
    )


# 8. the summary and the report agree with the files


def test_an_interrupted_out_copy_is_named_as_such_on_the_next_run(tmp_path):
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "t.py").write_text(CUDA)
    out = tmp_path / "out"
    assert run("migrate", "proj", "--out", "out", cwd=tmp_path).returncode == 0
    assert not (out / "CUDA2NPU_INCOMPLETE").exists()  # a finished copy carries no note
    refused = run("migrate", "proj", "--out", "out", cwd=tmp_path)
    assert refused.returncode == 2 and "exists and is not an empty directory" in refused.stderr
    (out / "CUDA2NPU_INCOMPLETE").write_text("left by an interrupted run\n")  # what an interrupt leaves
    refused = run("migrate", "proj", "--out", "out", cwd=tmp_path)
    assert refused.returncode == 2
    assert "is an incomplete copy left by an interrupted run; delete it and run again" in refused.stderr


def test_report_summary_separates_manual_work_from_advisories_and_lists_markers_always(tmp_path):
    (tmp_path / "t.py").write_text(
        "import torch\nimport cpm_kernels\n\ntorch.backends.cudnn.benchmark = True\nx = torch.ones(1).cuda()\n"
    )
    (tmp_path / "clean.py").write_text("import torch\n\ny = torch.ones(1).cuda()\n")
    result = run("migrate", ".", "--extend-select", "NPU8", "--report", "r.json", cwd=tmp_path)
    report = json.loads((tmp_path / "r.json").read_text())
    files = {f["path"]: f for f in report["files"]}
    assert files["clean.py"]["markers"] == [] and files["t.py"]["markers"] == [3]
    summary = report["summary"]
    assert [m["code"] for m in summary["manual"]] == ["NPU606"]  # the advisory NPU805 is not manual work
    assert [a["code"] for a in summary["advisories"]] == ["NPU805"]
    assert result.returncode == 0, result.stderr
    checked = json.loads(run("check", ".", "--extend-select", "NPU8", "--output-format", "json", cwd=tmp_path).stdout)
    assert [m["code"] for m in checked["summary"]["manual"]] == ["NPU606"]
    assert [a["code"] for a in checked["summary"]["advisories"]] == ["NPU805"]


def test_rules_table_says_a_manual_rule_fixes_sometimes():
    table = run("rules", "NPU30").stdout
    assert re.search(r"NPU304\s+apex-other-optimizer\s+manual\s+sometimes", table)
    assert re.search(r"NPU301\s+apex-fused-adam\s+review\s+yes", table)
    assert re.search(r"NPU305\s+torch-optim-cuda-kernels\s+review\s+no", table)


# 9. `check -` / `migrate -` with --stdin-filename, as ruff reads editors' buffers


def test_check_reads_stdin_as_the_named_file_with_its_configuration(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.cuda2npu.per-file-ignores]\n"tests/*" = ["NPU101"]\n')
    source = CUDA + "torch.cuda.synchronize()\n"
    named = run("check", "-", "--stdin-filename", "pkg/m.py", "--output-format", "concise", cwd=tmp_path, input=source)
    assert named.returncode == 1
    assert named.stdout.splitlines()[:2] == [
        "pkg/m.py:3:19: NPU101 [*] `.cuda()` moves data to a CUDA device; use `.npu()`",
        "pkg/m.py:4:1: NPU103 [*] `torch.cuda.synchronize` → `torch.npu.synchronize`",
    ]
    ignored = run("check", "-", "--stdin-filename", "tests/t.py", "--output-format", "json", cwd=tmp_path, input=source)
    assert [d["code"] for d in json.loads(ignored.stdout)["diagnostics"]] == ["NPU103"]  # its per-file ignores
    assert not (tmp_path / "pkg").exists() and not (tmp_path / "tests").exists()  # nothing read or written there
    clean = run("check", "-", cwd=tmp_path, input="x = 1\n")
    assert clean.returncode == 0 and "All checks passed!" in clean.stdout


def test_migrate_stdin_prints_the_migrated_text(tmp_path):
    migrated = run("migrate", "-", cwd=tmp_path, input=CUDA + "import cpm_kernels\n")
    assert migrated.returncode == 0, migrated.stderr
    assert migrated.stdout.startswith("import torch\nimport torch_npu\n\nx = torch.ones(1).npu()\n")
    assert "TODO(cuda2npu): NPU606" in migrated.stdout
    assert "TODO(cuda2npu) markers (1): stdin.py:5" in migrated.stderr
    unchanged = run("migrate", "-", cwd=tmp_path, input="x = 1\n")
    assert (unchanged.returncode, unchanged.stdout) == (0, "x = 1\n")
    diff = run("migrate", "-", "--diff", "--stdin-filename", "m.py", cwd=tmp_path, input=CUDA)
    assert diff.returncode == 1 and "+x = torch.ones(1).npu()" in diff.stdout and "--- a/m.py" in diff.stdout
    broken = run("migrate", "-", cwd=tmp_path, input="x = (\n")
    assert broken.returncode == 1 and broken.stdout == "x = (\n" and "stdin.py:1:5: cannot parse" in broken.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args, message",
    [
        (("check", "-", "."), "cannot be combined with other paths"),
        (("check", ".", "--stdin-filename", "a.py"), "pass `-` as the PATH"),
        (("check", "-", "--stdin-filename", "notes.txt"), "stdin is read as a Python file or notebook"),
        (("check", "-", "--add-noqa"), "--add-noqa writes files"),
        (("migrate", "-", "--out", "o"), "--out and --report need files"),
    ],
)
def test_stdin_usage_errors(tmp_path, args, message):
    result = run(*args, cwd=tmp_path, input=CUDA)
    assert result.returncode == 2 and message in result.stderr


def test_show_fixes_enumerates_the_fixes_per_file_and_rule(tmp_path):
    (tmp_path / "a.py").write_text(CUDA + "y = torch.zeros(2).cuda()\ntorch.cuda.synchronize()\n")
    (tmp_path / "b.py").write_text(CUDA + "import cpm_kernels\n")
    expected = [
        "- a.py:",
        "    2 × NPU101 (cuda-method-call)",
        "    1 × NPU103 (torch-cuda-api)",
        "- b.py:",
        "    1 × NPU101 (cuda-method-call)",
    ]
    checked = run("check", ".", "--show-fixes", "--output-format", "concise", cwd=tmp_path).stdout.splitlines()
    assert checked[checked.index("Would fix 4 findings:") + 1 :] == expected  # NPU606 has no fix
    planned = run("migrate", ".", "--diff", "--show-fixes", cwd=tmp_path).stderr.splitlines()
    assert planned[planned.index("Would fix 4 findings:") + 1 :][:5] == expected
    migrated = run("migrate", ".", "--show-fixes", cwd=tmp_path).stderr.splitlines()
    assert migrated[migrated.index("Fixed 4 findings:") + 1 :][:5] == expected
    assert "Fixed" not in run("migrate", ".", "--show-fixes", cwd=tmp_path).stderr  # nothing left to fix
