"""benchmarks/validate_real.py without the real projects: its cases name files that exist, and a
corpus that lacks a case's source stops it with the missing pins named (exit 2)."""

from __future__ import annotations

import ast
import importlib.util
import shlex
import subprocess
import sys

import pytest
from cli_helpers import REPO

SCRIPT = REPO / "benchmarks" / "validate_real.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("validate_real", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def _functions(path):
    return {node.name for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)}


def test_every_case_names_an_existing_entry_or_script(bench):
    assert len({case.name for case in bench.CASES}) == len(bench.CASES)
    for case in bench.CASES:
        files = bench.CASES_DIR / case.files if case.files else case.source.directory  # a fixture holds its own
        assert bool(case.entry) != bool(case.run), case.name
        assert case.expected in ("equivalent", "mismatch", "error"), case.name
        if case.entry:
            module, function = case.entry.split(":")
            assert function in _functions(files / f"{module}.py"), case.name
        else:
            script = shlex.split(case.run)[0]
            exported = getattr(case.source, "paths", ())
            in_source = any(f"{case.root}/{script}".lstrip("/").startswith(p) for p in exported)
            assert (files / script).is_file() or in_source, case.name
        if case.prepare:
            assert (files / case.prepare).is_file(), case.name
    assert set(bench.TIMED_CASES) <= {case.name for case in bench.CASES if case.run}


def test_help_runs():
    result = subprocess.run([sys.executable, SCRIPT, "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "--no-measure" in result.stdout, result.stderr


def test_missing_corpus_is_a_clear_exit_2(bench, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(bench.corpus, "CORPUS_DIR", tmp_path / "no-corpus")
    assert bench.main(["nanogpt-train", "x-transformers-train"]) == 2
    err = capsys.readouterr().err
    assert "lacks 3 source(s)" in err
    assert "git --git-dir=<clone of karpathy/nanoGPT> archive 3adf61e154c3" in err
    assert (
        """einops==0.8.1: cd benchmarks && python -c "import corpus; corpus.fetch(corpus.Project(name='einops',"""
        in err
    )
