"""What real repositories contain, through the CLI: every odd file gets a diagnostic and the run goes on.

One generated project holds all the cases; ``check`` and ``migrate`` (in place and ``--out``) run
over it once each, and every test reads those runs. Expected outcomes per file:

* lossless rewrites: CRLF, mixed CRLF/LF, a stray ``\\r``, a BOM, latin-1 with a coding cookie,
  a file over 1 MB, a long flat ``and`` chain (deeper than the default recursion limit allows);
* NPU001 with a position, file untouched: Python 2, a cookiecutter template, a symlink stored as
  text, 1000 nested parentheses, latin-1 without a cookie, a binary file, a form feed or a final
  lone ``\\r`` that libcst cannot reproduce byte for byte;
* skipped with a reason: dangling and looping symlinks, an empty file;
* NPU004 (in-place migrate): a read-only file.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

GOOD = b"import torch\nx = torch.ones(1).cuda()\n"
BLOB_LINE = b"0123456789abcdef" * 4 + b"\n"
BIG = (
    b'import torch\nDATA = """\n'
    + BLOB_LINE * 16500
    + b'"""\n'
    + b"".join(b"def f%d(x):\n    return x.cuda()\n" % i for i in range(20))
)

# name -> bytes (symlinks are made separately)
FILES: dict[str, bytes] = {
    "good.py": GOOD,
    "crlf.py": b"import torch\r\n\r\ndef f(x):\r\n    return x.cuda()\r\n",
    "mixed_newlines.py": b"import torch\r\nx = torch.ones(1).cuda()\ny = 2\r\n",
    "stray_cr.py": b"import torch\nx = 1\ry = torch.ones(1).cuda()\n",
    "bom.py": b"\xef\xbb\xbfimport torch\nx = torch.ones(1).cuda()\n",
    "latin1_cookie.py": "# -*- coding: latin-1 -*-\nimport torch\n# café\nx = torch.ones(1).cuda()\n".encode("latin-1"),
    "big.py": BIG,
    "flat_chain.py": b"import torch\nok = torch.ones(1).cuda() and " + b" and ".join([b"flag"] * 600) + b"\n",
    "py2.py": b"import torch\nprint 'device', torch.cuda.current_device()\n",
    "template.py": b"import {{ cookiecutter.package_name }}\nmodel.cuda()\n",
    "symlink_as_text.py": b"../cuda/common.py",
    "deep_parens.py": b"x = " + b"(" * 1000 + b"t.cuda()" + b")" * 1000 + b"\n",
    "latin1_no_cookie.py": "import torch\n# café\nx = torch.ones(1).cuda()\n".encode("latin-1"),
    "binary.py": bytes(range(256)) + b"cuda\x00\x01" * 64,
    "form_feed.py": b"import torch\n\x0cdef f(x):\n    return x.cuda()\n",
    "final_cr.py": b"import torch\rx = torch.ones(1).cuda()\r",
    "empty.py": b"",
    "readonly.py": GOOD,
}
REWRITTEN = [
    "good.py",
    "crlf.py",
    "mixed_newlines.py",
    "stray_cr.py",
    "bom.py",
    "latin1_cookie.py",
    "big.py",
    "flat_chain.py",
]
SOURCE_ERRORS = {  # name -> (line, reason fragment)
    "py2.py": (2, "cannot parse"),
    "template.py": (1, "cannot parse"),
    "symlink_as_text.py": (1, "cannot parse"),
    "deep_parens.py": (1, "too many nested parentheses"),
    "latin1_no_cookie.py": (2, "cannot decode"),
    "binary.py": (3, "cannot decode"),  # bytes 0-255: a LF and a CR come before the first bad byte
    "form_feed.py": (2, "byte for byte"),
    "final_cr.py": (2, "byte for byte"),
}
LINKS = {"dangling.py": "missing_target.py", "loop_a.py": "loop_b.py", "loop_b.py": "loop_a.py"}


def cuda2npu(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cuda2npu", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def make_project(root: Path) -> None:
    root.mkdir(parents=True)
    for name, data in FILES.items():
        (root / name).write_bytes(data)
    for name, target in LINKS.items():
        (root / name).symlink_to(target)
    (root / "readonly.py").chmod(0o444)


def tree_hash(root: Path) -> dict[str, str]:
    """Every entry under ``root``: file contents and modes, symlink targets."""
    entries = {}
    for path in sorted(root.rglob("*")):
        key = path.relative_to(root).as_posix()
        if path.is_symlink():
            entries[key] = "link:" + os.readlink(path)
        elif path.is_file():
            entries[key] = f"{oct(path.stat().st_mode)}:{hashlib.sha256(path.read_bytes()).hexdigest()}"
    return entries


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("robust")
    source = base / "project"
    make_project(source)
    check = cuda2npu("check", "--format", "json", "--jobs", "2", "project", cwd=base)
    before = tree_hash(source)
    out = cuda2npu("migrate", "--out", str(base / "migrated"), "--jobs", "2", "project", cwd=base)
    after_out = tree_hash(source)
    inplace_root = base / "inplace"
    make_project(inplace_root)
    inplace = cuda2npu("migrate", "--jobs", "1", "--report", str(base / "report.json"), ".", cwd=inplace_root)
    return {
        "base": base,
        "check": check,
        "out": out,
        "inplace": inplace,
        "inplace_root": inplace_root,
        "hash_before": before,
        "hash_after_out": after_out,
        "report": json.loads((base / "report.json").read_text()),
    }


def _diagnostics(check) -> dict[str, list[dict]]:
    by_path: dict[str, list[dict]] = {}
    for diag in json.loads(check.stdout)["diagnostics"]:
        by_path.setdefault(Path(diag["path"]).name, []).append(diag)
    return by_path


def test_no_crash_and_documented_exit_codes(runs):
    for name in ("check", "out", "inplace"):
        result = runs[name]
        assert "Traceback" not in result.stderr, result.stderr
        assert "internal error" not in result.stderr, result.stderr
    assert runs["check"].returncode == 1  # findings
    assert runs["out"].returncode == 1  # some files failed
    assert runs["inplace"].returncode == 1


@pytest.mark.parametrize("name", sorted(SOURCE_ERRORS))
def test_source_errors_are_npu001_with_position(runs, name):
    line, reason = SOURCE_ERRORS[name]
    diags = [d for d in _diagnostics(runs["check"]).get(name, []) if d["code"] == "NPU001"]
    if name in ("form_feed.py", "final_cr.py"):  # check rewrites nothing: the rules' findings stand
        assert not diags and _diagnostics(runs["check"])[name]
    else:
        assert diags and diags[0]["line"] == line and reason in diags[0]["message"], diags
    # migrate: `path:line:col: reason` on stderr, the file untouched
    pattern = re.compile(rf"^(\./)?{re.escape(name)}:{line}:\d+: .*{re.escape(reason)}", re.MULTILINE)
    assert pattern.search(runs["inplace"].stderr), runs["inplace"].stderr
    assert (runs["inplace_root"] / name).read_bytes() == FILES[name]
    assert (runs["base"] / "migrated" / name).read_bytes() == FILES[name]


@pytest.mark.parametrize("name", REWRITTEN)
def test_rewritten_files_parse_and_keep_their_bytes(runs, name):
    new = (runs["inplace_root"] / name).read_bytes()
    assert new != FILES[name]
    assert new == (runs["base"] / "migrated" / name).read_bytes()
    ast.parse(new)  # CPython accepts the output
    assert b".cuda()" not in new and b".npu()" in new
    if name != "flat_chain.py":  # every line the rules did not touch is byte-identical
        untouched = [line for line in FILES[name].splitlines(keepends=True) if b"cuda" not in line]
        new_lines = new.splitlines(keepends=True)
        assert all(line in new_lines for line in untouched), name


def test_newlines_encoding_and_bom_are_preserved(runs):
    root = runs["inplace_root"]
    crlf = (root / "crlf.py").read_bytes()
    assert crlf.count(b"\r\n") == crlf.count(b"\n") and b"import torch_npu\r\n" in crlf
    assert (root / "bom.py").read_bytes().startswith(b"\xef\xbb\xbfimport torch\n")
    latin1 = (root / "latin1_cookie.py").read_bytes()
    assert "# café\n".encode("latin-1") in latin1 and latin1.decode("latin-1").count("é") == 1
    assert b"x = 1\ry = torch.ones(1).npu()\n" in (root / "stray_cr.py").read_bytes()
    assert (root / "mixed_newlines.py").read_bytes().endswith(b"x = torch.ones(1).npu()\ny = 2\r\n")


def test_big_file_is_migrated(runs):
    new = (runs["inplace_root"] / "big.py").read_bytes()
    assert len(FILES["big.py"]) > 1_000_000
    assert new.count(b"x.npu()") == 20


def test_symlinks_and_empty_files_are_skipped_with_a_reason(runs):
    stderr = runs["inplace"].stderr
    assert re.search(r"dangling\.py: skipped \(dangling", stderr), stderr
    assert re.search(r"loop_a\.py: skipped \(symlink loop", stderr), stderr
    statuses = {Path(f["path"]).name: f for f in runs["report"]["files"]}
    assert statuses["empty.py"]["status"] == "skipped"
    assert statuses["loop_b.py"]["status"] == "skipped"
    for name in LINKS:
        assert (runs["inplace_root"] / name).is_symlink()


def test_read_only_file_is_reported_npu004_and_left_alone(runs):
    root = runs["inplace_root"]
    assert (root / "readonly.py").read_bytes() == GOOD
    assert re.search(
        r"^(\./)?readonly\.py:\d+:\d+: cannot write: file is read-only", runs["inplace"].stderr, re.MULTILINE
    )
    entry = next(f for f in runs["report"]["files"] if f["path"].endswith("readonly.py"))
    assert entry["status"] == "failed" and any(m["code"] == "NPU004" for m in entry["manual"])
    # the copy made by --out is ours to write
    assert b".npu()" in (runs["base"] / "migrated" / "readonly.py").read_bytes()


def test_out_never_modifies_the_source_tree(runs):
    assert runs["hash_after_out"] == runs["hash_before"]


def test_symlinked_file_is_written_through_the_link(tmp_path):
    project = tmp_path / "p"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "real.py").write_bytes(GOOD)
    (project / "alias.py").symlink_to("pkg/real.py")
    result = cuda2npu("migrate", "--jobs", "1", ".", cwd=project)
    assert result.returncode == 0, result.stderr
    assert (project / "alias.py").is_symlink()
    assert b".npu()" in (project / "pkg" / "real.py").read_bytes()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes regardless of permissions")
def test_unreadable_file_and_read_only_directory(tmp_path):
    project = tmp_path / "p"
    (project / "locked").mkdir(parents=True)
    (project / "unreadable.py").write_bytes(GOOD)
    (project / "unreadable.py").chmod(0)
    (project / "locked" / "a.py").write_bytes(GOOD)
    (project / "locked").chmod(0o555)
    try:
        result = cuda2npu("migrate", "--jobs", "1", ".", cwd=project)
        assert result.returncode == 1
        assert re.search(r"unreadable\.py:1:1: cannot read", result.stderr)
        assert re.search(r"a\.py:\d+:\d+: cannot write", result.stderr)
        assert (project / "locked" / "a.py").read_bytes() == GOOD
    finally:
        (project / "locked").chmod(0o755)


def test_clean_project_exits_zero(tmp_path):
    project = tmp_path / "clean"
    project.mkdir()
    (project / "a.py").write_text("import torch\nx = torch.ones(1)\n")
    assert cuda2npu("check", ".", cwd=project).returncode == 0
    assert cuda2npu("migrate", ".", cwd=project).returncode == 0
    shutil.rmtree(project)
