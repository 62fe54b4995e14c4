"""Bad input never crashes a run or loses a byte (fixtures/bad_inputs)."""

from __future__ import annotations

import json
import shutil

import pytest
from cli_helpers import REPO, cuda2npu, tree_digest

FIXTURE = REPO / "fixtures" / "bad_inputs"


@pytest.fixture
def bad(tmp_path):
    """A copy of the fixture, links kept: a project of its own (not the whole repository's facts)."""
    return shutil.copytree(FIXTURE, tmp_path / "bad_inputs", symlinks=True)


def _report(bad, tmp_path):
    out = tmp_path / "out"
    result = cuda2npu("migrate", bad, "--out", out)
    report = json.loads((out / "cuda2npu_report.json").read_text())
    return result, out, {f["path"]: f for f in report["files"]}


def test_unparsable_files_are_reported_with_position_and_left_untouched(bad, tmp_path):
    result, out, files = _report(bad, tmp_path)
    assert result.returncode == 1  # some files failed
    for name in ("syntax_error.py", "python2.py", "latin1_without_cookie.py", "binary.py"):
        assert files[name]["status"] == "failed", name
        assert (out / name).read_bytes() == (bad / name).read_bytes()
    for name in ("python2.py", "syntax_error.py"):  # where and as CPython reports the error
        line, column, message = _cpython_error(bad / name)
        assert f"{name}:{line}:{column}: cannot parse: {message}" in result.stderr
    assert "python2.py:2:1: cannot parse: Missing parentheses in call to 'print'" in result.stderr
    assert "syntax_error.py:2:24: cannot parse: '(' was never closed" in result.stderr
    assert "latin1_without_cookie.py:2:6: cannot decode" in result.stderr


def _cpython_error(path) -> tuple[int, int, str]:
    try:
        compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        return exc.lineno, exc.offset, exc.msg
    raise AssertionError(f"{path} compiles")


def test_symlinks_are_reported_not_followed_forever(bad, tmp_path):
    result, _, files = _report(bad, tmp_path)
    assert files["loop_a.py"]["reason"] == files["loop_b.py"]["reason"] == "symlink loop"
    assert "dangling" in files["dangling.py"]["reason"]
    assert "loop_a.py: skipped (symlink loop)" in result.stderr


def test_encodings_and_newlines_are_preserved(bad, tmp_path):
    _, out, files = _report(bad, tmp_path)
    crlf = (out / "crlf.py").read_bytes()
    assert crlf == b"import torch\r\nimport torch_npu\r\n\r\nx = torch.ones(1).npu()\r\n"
    assert (out / "bom.py").read_bytes().startswith(b"\xef\xbb\xbfimport torch\nimport torch_npu\n")
    latin = (out / "latin1_with_cookie.py").read_bytes()
    assert b'name = "caf\xe9"' in latin and b".npu()" in latin
    assert files["empty.py"]["status"] == "skipped"
    assert (out / "empty.py").read_bytes() == b""


def test_source_tree_is_never_modified(bad, tmp_path):
    before = tree_digest(bad)
    cuda2npu("migrate", bad, "--out", tmp_path / "out")
    cuda2npu("migrate", bad, "--diff")
    assert tree_digest(bad) == before


def test_syntax_and_decoding_errors_are_reported_whatever_the_selection(tmp_path):
    """Files without any CUDA trigger are not parsed by the rules, but a file CPython cannot compile
    is always NPU001, as ruff always reports syntax errors: with `--select` of another rule too."""
    (tmp_path / "no_trigger_syntax.py").write_text("def f(:\n    pass\n")
    (tmp_path / "random.py").write_bytes(bytes(range(256)) * 2)
    (tmp_path / "nul.py").write_bytes(b"x = 1\n\0\n")
    (tmp_path / "fine.py").write_text("x = 1\n")
    for select in ((), ("--select", "NPU101")):
        result = cuda2npu("check", tmp_path, "--output-format", "concise", "--no-cache", *select)
        assert result.returncode == 1, result.stdout
        lines = sorted(line for line in result.stdout.splitlines() if "NPU001" in line)
        assert [line.split(": NPU001")[0] for line in lines] == [
            f"{tmp_path / 'no_trigger_syntax.py'}:1:7",
            f"{tmp_path / 'nul.py'}:2:1",
            f"{tmp_path / 'random.py'}:3:115",  # after LF (byte 10) and a lone CR (13): byte 0x80
        ], result.stdout
        assert "random.py:3:115: NPU001 cannot decode: invalid start byte (utf-8, byte 0x80)" in result.stdout
        assert "fine.py" not in result.stdout
    result = cuda2npu("migrate", tmp_path, "--out", tmp_path.parent / f"{tmp_path.name}-out")
    assert result.returncode == 1 and "3 failed" in result.stderr, result.stderr
