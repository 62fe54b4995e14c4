"""Behaviour of the commands through the real CLI: modes, selection, exit codes, formats."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_helpers import cuda2npu, tree_digest

SOURCE = "import torch\n\nx = torch.ones(1).cuda()\ntorch.backends.cuda.matmul.allow_tf32 = True\n"


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "train.py").write_text(SOURCE)
    (root / "pkg" / "clean.py").write_text("def f():\n    return 1\n")
    (root / "notes.txt").write_text("cuda notes\n")
    return root


def test_in_place_outside_git(project):
    result = cuda2npu("migrate", project)
    assert result.returncode == 0, result.stderr
    assert (project / "pkg" / "train.py").read_text() == (
        "import torch\nimport torch_npu\n\nx = torch.ones(1).npu()\ntorch.npu.matmul.allow_hf32 = True\n"
    )
    assert "2 files scanned, 1 skipped by prefilter, 0 skipped, 1 changed, 0 failed" in result.stderr


def test_diff_prints_and_writes_nothing(project):
    before = tree_digest(project)
    result = cuda2npu("migrate", project, "--diff")
    assert result.returncode == 1
    assert "-x = torch.ones(1).cuda()" in result.stdout and "+x = torch.ones(1).npu()" in result.stdout
    assert result.stdout.startswith("--- a/")
    assert tree_digest(project) == before


def test_check_mode_exit_codes(project):
    assert cuda2npu("migrate", project, "--check").returncode == 1
    assert cuda2npu("migrate", project).returncode == 0
    assert cuda2npu("migrate", project, "--check").returncode == 0


def test_out_copies_everything_and_refuses_inside(project, tmp_path):
    out = tmp_path / "out"
    assert cuda2npu("migrate", project, "--out", out).returncode == 0
    assert (out / "notes.txt").read_text() == "cuda notes\n"
    assert ".npu()" in (out / "pkg" / "train.py").read_text()
    assert ".cuda()" in (project / "pkg" / "train.py").read_text()
    inside = cuda2npu("migrate", project, "--out", project / "migrated")
    assert inside.returncode == 2 and "inside" in inside.stderr
    same = cuda2npu("migrate", project, "--out", project)
    assert same.returncode == 2
    again = cuda2npu("migrate", project, "--out", out)
    assert again.returncode == 2 and "not an empty directory" in again.stderr


def test_max_tier_and_select(project):
    exact_only = cuda2npu("migrate", project, "--max-tier", "exact", "--diff").stdout
    assert "+x = torch.ones(1).npu()" in exact_only and "+torch.npu.matmul.allow_hf32" not in exact_only
    assert "+# TODO(cuda2npu): NPU105 review: " in exact_only  # the fix above --max-tier is marked
    only_tf32 = cuda2npu("migrate", project, "--select", "NPU105", "--diff").stdout
    assert "allow_hf32" in only_tf32 and ".npu()" not in only_tf32
    ignored = cuda2npu("migrate", project, "--ignore", "NPU1", "--diff")
    assert ignored.returncode == 0 and ignored.stdout == ""
    bad = cuda2npu("migrate", project, "--select", "XYZ9")
    assert bad.returncode == 2 and "matches no rule code" in bad.stderr


def test_no_markers(tmp_path):
    path = tmp_path / "a.py"
    path.write_text("import torch\nimport mamba_ssm\n")
    cuda2npu("migrate", path, "--no-markers")
    assert "TODO(cuda2npu)" not in path.read_text()
    cuda2npu("migrate", path)
    assert path.read_text().count("TODO(cuda2npu): NPU606") == 1
    cuda2npu("migrate", path)
    assert path.read_text().count("TODO(cuda2npu): NPU606") == 1


def _git(root, *args):
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_dirty_git_files_are_refused_unless_allowed(project):
    _git(project, "init", "-q")
    _git(project, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "init")
    refused = cuda2npu("migrate", project)
    assert refused.returncode == 1  # the file is left as it is, reported as not written
    assert "pkg/train.py: skipped (untracked" in refused.stderr and "--allow-dirty" in refused.stderr
    assert ".cuda()" in (project / "pkg" / "train.py").read_text()
    _git(project, "add", ".")
    _git(project, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "add")
    assert cuda2npu("migrate", project).returncode == 0
    (project / "pkg" / "train.py").write_text(SOURCE)  # uncommitted change again
    assert cuda2npu("migrate", project, "--allow-dirty").returncode == 0
    assert ".npu()" in (project / "pkg" / "train.py").read_text()


def test_git_discovery_respects_gitignore(project):
    _git(project, "init", "-q")
    (project / ".gitignore").write_text("ignored/\n")
    (project / "ignored").mkdir()
    (project / "ignored" / "x.py").write_text(SOURCE)
    (project / ".venv" / "lib").mkdir(parents=True)
    (project / ".venv" / "lib" / "y.py").write_text(SOURCE)
    result = json.loads(cuda2npu("check", project, "--format", "json", "--exit-zero").stdout)
    paths = {d["path"].split("proj/")[-1] for d in result["diagnostics"]}
    assert paths == {"pkg/train.py"}


def test_skip_markers(tmp_path):
    (tmp_path / "gen.py").write_text("# @generated by a tool\nimport torch\nx = torch.ones(1).cuda()\n")
    (tmp_path / "skip.py").write_text("# cuda2npu: skip-file\nimport torch\nx = torch.ones(1).cuda()\n")
    result = cuda2npu("check", tmp_path)
    assert result.returncode == 0, result.stdout


def test_check_formats(project):
    text = cuda2npu("check", project)
    assert text.returncode == 1
    assert "train.py:3:19: NPU101 [*]" in text.stdout and "^" in text.stdout
    concise = cuda2npu("check", project, "--format", "concise").stdout.splitlines()
    assert concise[0].endswith("NPU101 [*] `.cuda()` moves data to a CUDA device; use `.npu()`")
    data = json.loads(cuda2npu("check", project, "--format", "json").stdout)
    assert data["version"] == 1
    first = data["diagnostics"][0]
    assert set(first) == {"path", "line", "column", "code", "name", "message", "tier", "fixable"}
    assert [(d["code"], d["tier"]) for d in data["diagnostics"]] == [("NPU101", "exact"), ("NPU105", "numeric")]
    github = cuda2npu("check", project, "--format", "github").stdout.splitlines()
    assert github[0].startswith("::error title=cuda2npu NPU101,file=") and ",line=3,col=19::" in github[0]
    assert cuda2npu("check", project, "--exit-zero").returncode == 0


def test_check_clean_tree_exits_zero(tmp_path):
    (tmp_path / "a.py").write_text("import torch\nx = torch.ones(1)\n")
    result = cuda2npu("check", tmp_path)
    assert result.returncode == 0 and "All checks passed!" in result.stdout


def test_explicit_files_are_used_as_given(project):
    result = cuda2npu("check", project / "pkg" / "train.py", "--format", "concise")
    assert result.returncode == 1 and "NPU101" in result.stdout


def test_rules_command():
    listing = cuda2npu("rules")
    assert listing.returncode == 0
    assert any(line.split()[:3] == ["NPU101", "cuda-method-call", "exact"] for line in listing.stdout.splitlines())
    page = cuda2npu("rules", "NPU104").stdout
    for section in ("What it does:", "Why:", "Fix:", "Example:", "References:"):
        assert section in page
    assert cuda2npu("rules", "NPU999").returncode == 2
    data = json.loads(cuda2npu("rules", "--format", "json").stdout)
    assert {"code", "name", "tier", "fixable"} <= set(data[0])


def test_internal_error_exits_3_with_a_log(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cuda2npu.commands import cli
    from cuda2npu.families.device import device

    def visit_Call(self, node):  # the name matters: libcst collects visit_* methods by name
        raise RuntimeError("rule bug")

    monkeypatch.setattr(device.CudaMethodCall, "visit_Call", visit_Call)
    (tmp_path / "a.py").write_text(SOURCE)
    result = CliRunner().invoke(cli.main, ["check", str(tmp_path), "--jobs", "1"])
    assert result.exit_code == 3
    assert "internal error" in result.output and "cuda2npu-crash" in result.output


def test_parallel_jobs_give_the_same_findings(tmp_path):
    for index in range(40):
        (tmp_path / f"m{index:02}.py").write_text(SOURCE)
    one = cuda2npu("check", tmp_path, "--format", "json", "--jobs", "1").stdout
    two = cuda2npu("check", tmp_path, "--format", "json", "--jobs", "2").stdout
    assert json.loads(one)["diagnostics"] == json.loads(two)["diagnostics"]
    assert len(json.loads(one)["diagnostics"]) == 80


@pytest.mark.parametrize(
    "source",
    [
        b"import torch\nx = torch.ones(1).cuda()",  # no newline at end of file
        b"import torch\n\x0c\nx = torch.ones(1).cuda()\n",  # a form feed is not a line break for patch
    ],
    ids=["no-final-newline", "form-feed"],
)
def test_diff_applies_with_git(tmp_path, source):
    path = tmp_path / "m.py"
    path.write_bytes(source)
    patch = cuda2npu("migrate", "m.py", "--diff", cwd=tmp_path).stdout
    (tmp_path / "m.patch").write_text(patch)
    subprocess.run(["git", "apply", "m.patch"], cwd=tmp_path, check=True, capture_output=True)
    assert path.read_bytes() == source.replace(b"import torch\n", b"import torch\nimport torch_npu\n", 1).replace(
        b".cuda()", b".npu()"
    )


def test_a_cuda_class_whose_npu_class_the_project_implements_is_left_alone(tmp_path):
    """ColossalAI's CudaAccelerator next to npu_accelerator.py's NpuAccelerator: a table picks one per host."""
    (tmp_path / "cuda_accelerator.py").write_text(
        "import torch\n\n\nclass CudaAccelerator:\n    def synchronize(self):\n        torch.cuda.synchronize()\n"
    )
    (tmp_path / "train.py").write_text("import torch\n\ntorch.cuda.synchronize()\n")
    before = cuda2npu("migrate", ".", "--diff", cwd=tmp_path).stdout
    assert "+++ b/cuda_accelerator.py" in before  # no NPU class in the project: migrated
    (tmp_path / "npu_accelerator.py").write_text(
        "import torch\nimport torch_npu\n\n\nclass NpuAccelerator:\n    def synchronize(self):\n"
        "        torch.npu.synchronize()\n"
    )
    after = cuda2npu("migrate", ".", "--diff", cwd=tmp_path).stdout
    assert "cuda_accelerator.py" not in after and "+torch.npu.synchronize()" in after


def test_the_other_cuda_classes_of_that_family_are_left_alone_too(tmp_path):
    """AReaL's UnknownPlatform (a CUDA device that is not NVIDIA's) beside its NPUPlatform: a platform
    of the same family that names CUDA is never chosen on an NPU host; the family's base class, which
    the NPU class inherits, is migrated."""
    platforms = tmp_path / "platforms"
    platforms.mkdir()
    (platforms / "platform.py").write_text(
        "import torch\n\n\nclass Platform:\n    def synchronize(self):\n        torch.cuda.synchronize()\n"
    )
    (platforms / "unknown.py").write_text(
        "import torch\nfrom .platform import Platform\n\n\nclass UnknownPlatform(Platform):\n"
        '    device_type = "cuda"\n\n    def empty_cache(self):\n        torch.cuda.empty_cache()\n'
    )
    (platforms / "npu.py").write_text(
        "import torch\nimport torch_npu\nfrom .platform import Platform\n\n\nclass NPUPlatform(Platform):\n"
        '    device_type = "npu"\n'
    )
    patch = cuda2npu("migrate", ".", "--diff", cwd=tmp_path).stdout
    assert "unknown.py" not in patch and "+        torch.npu.synchronize()" in patch


def test_diff_shows_only_changed_lines_in_a_long_file(tmp_path):
    """difflib's autojunk would show frequent lines (here `atol=1e-3)` and blank lines) removed and added
    again around the changes of a file longer than 200 lines (mmcv's tests)."""
    block = "    check(\n        x.cuda(),\n        atol=1e-3)\n\n"
    source = "import torch\n\n\ndef test(x):\n" + block * 60
    (tmp_path / "m.py").write_text(source)
    patch = cuda2npu("migrate", "m.py", "--diff", cwd=tmp_path).stdout
    removed = [line[1:] for line in patch.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert removed == ["        x.cuda(),"] * 60
    (tmp_path / "m.patch").write_text(patch)
    subprocess.run(["git", "apply", "m.patch"], cwd=tmp_path, check=True, capture_output=True)
    assert (tmp_path / "m.py").read_text().count("x.npu(),") == 60


LEFTOVERS = (
    "import torch\nimport mamba_ssm\n\nmodel = torch.nn.Linear(2, 2).half()\nmodel(x).sum().backward()\nopt.step()\n"
)


def test_review_markers_switches_and_the_marker_summary(tmp_path):
    path = tmp_path / "a.py"
    path.write_text(LEFTOVERS)
    report = tmp_path / "report.json"
    result = cuda2npu("migrate", path, "--report", report)
    text = path.read_text()
    assert "# TODO(cuda2npu): NPU606 `mamba_ssm`" in text and "# TODO(cuda2npu): NPU342 review: " in text
    assert f"TODO(cuda2npu) markers (2): {path.as_posix()}:2, " in result.stderr.replace(
        str(tmp_path), tmp_path.as_posix()
    )
    assert f"(with their findings in {report})" in result.stderr
    assert json.loads(report.read_text())["files"][0]["markers"] == [2, 5]
    again = cuda2npu("migrate", path)
    assert path.read_text() == text and "would change" not in again.stderr
    path.write_text(LEFTOVERS)
    cuda2npu("migrate", path, "--no-review-markers")
    assert "NPU606" in path.read_text() and "NPU342" not in path.read_text()
    path.write_text(LEFTOVERS)
    (tmp_path / "cuda2npu.toml").write_text("review-markers = false\n")
    cuda2npu("migrate", path)
    assert "NPU606" in path.read_text() and "NPU342" not in path.read_text()
    path.write_text(LEFTOVERS)
    cuda2npu("migrate", path, "--no-markers")
    assert "TODO(cuda2npu)" not in path.read_text()


def test_marker_summary_is_capped(tmp_path):
    for index in range(12):
        (tmp_path / f"k{index:02}.py").write_text("import torch\nimport mamba_ssm\n")
    result = cuda2npu("migrate", tmp_path, "--diff")
    assert "TODO(cuda2npu) markers (12): " in result.stderr and "... and 2 more" in result.stderr
    assert "(--report FILE lists them with their findings)" in result.stderr


def test_project_extensions_and_other_frameworks(tmp_path):
    (tmp_path / "setup.py").write_text(
        "from torch.utils.cpp_extension import CUDAExtension\next = CUDAExtension('pkg.nat', ['nat.cu'])\n"
    )
    (tmp_path / "use.py").write_text("import torch\nfrom pkg import nat\nx = torch.ones(1).cuda()\n")
    (tmp_path / "plain.py").write_text("import pkg.nat\n\ny = pkg.nat.f()\n")  # no CUDA word at all
    (tmp_path / "flax_step.py").write_text("import jax\nimport flax\n\nDEVICE = jax.devices('cuda')[0]\n")
    data = json.loads(cuda2npu("check", tmp_path, "--format", "json", "--exit-zero").stdout)
    found = {(Path(d["path"]).name, d["code"], d["line"]) for d in data["diagnostics"]}
    assert {("use.py", "NPU606", 2), ("plain.py", "NPU606", 1)} <= found
    assert not [d for d in data["diagnostics"] if d["path"].endswith("flax_step.py")]
    result = cuda2npu("migrate", tmp_path, "--diff")
    assert "flax_step.py: skipped (not a PyTorch file: imports JAX and no torch module)" in result.stderr
    # both imports marked; use.py imports the extension at module level, unguarded: it cannot load on an
    # NPU host, so its marker is all that changes there (round 22)
    markers = result.stderr.split("markers (3): ")[1].split(" (--report")[0]
    assert [Path(m).name for m in markers.split(", ")] == ["plain.py:1", "setup.py:2", "use.py:2"]
    assert "+x = torch.ones(1).npu()" not in result.stdout
