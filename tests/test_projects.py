"""End-to-end: the example projects migrate through the CLI to their checked-in expected trees.

Regenerate the expected trees with ``pytest tests/test_projects.py --update-golden`` and review
the diff. ``<project>.expected/`` holds the migrated tree including ``cuda2npu_report.json``.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from cli_helpers import REPO, cuda2npu, tree_digest

from cuda2npu.core.catalogue import table

PROJECTS = REPO / "fixtures" / "projects"
NAMES = sorted(p.name for p in PROJECTS.iterdir() if p.is_dir() and not p.name.endswith(".expected"))


@pytest.fixture(params=NAMES)
def migrated(request, tmp_path):
    # a copy: a project without a root marker (aliased_lib) would otherwise take the repository for its root
    source = shutil.copytree(PROJECTS / request.param, tmp_path / request.param)
    before = tree_digest(source)
    out = tmp_path / "out"
    result = cuda2npu("migrate", source, "--out", out)
    assert result.returncode == 0, result.stderr
    assert tree_digest(source) == before, "--out must not modify the source tree"
    return request.param, source, out, result


GENERATED_TEST = "npu_validation/test_npu_validation.py"


def _without_machine_paths(root: Path) -> None:
    """The generated validation test names the original tree relative to the migrated one, which
    depends on where the test's temporary directories are: blank the relative path out."""
    test = root / GENERATED_TEST
    if test.exists():
        test.write_text(re.sub(r"MIGRATED / '[^']*'\)", "MIGRATED / '<original>')", test.read_text()))


def test_matches_expected_tree(migrated, update_golden):
    name, _, out, _ = migrated
    expected = PROJECTS / f"{name}.expected"
    _without_machine_paths(out)
    if update_golden:
        shutil.rmtree(expected, ignore_errors=True)
        shutil.copytree(out, expected, symlinks=True)
    assert tree_digest(out) == tree_digest(expected)


def test_report_lists_every_file_and_manual_item(migrated):
    _, source, out, _ = migrated
    report = json.loads((out / "cuda2npu_report.json").read_text())
    assert report["version"] == 1
    paths = {f["path"] for f in report["files"]}
    python_files = {p.relative_to(source).as_posix() for p in source.rglob("*.py")}
    assert paths == python_files
    changed = {f["path"] for f in report["files"] if f["status"] == "changed"}
    for path in python_files:
        same = (source / path).read_bytes() == (out / path).read_bytes()
        assert same == (path not in changed), path
    unmarked = set(table("markers")["unmarked"])  # advice (NPU8xx) is reported, never marked
    for entry in report["files"]:
        for item in (i for i in entry["manual"] if i["code"] not in unmarked):
            line = (out / entry["path"]).read_text().splitlines()
            assert any(f"TODO(cuda2npu): {item['code']}" in text for text in line), item


def test_check_goes_from_failing_to_clean(migrated):
    _, source, out, _ = migrated
    assert cuda2npu("check", source, "--format", "json").returncode == 1
    after = json.loads(cuda2npu("check", out, "--format", "json", "--exit-zero").stdout)
    assert [d for d in after["diagnostics"] if d["fixable"]] == []
    assert all(d["tier"] == "manual" or d["code"].startswith("NPU8") for d in after["diagnostics"])


def test_second_migrate_changes_nothing(migrated):
    _, _, out, _ = migrated
    result = cuda2npu("migrate", out, "--check")
    assert result.returncode == 0, result.stdout


def test_ddp_project_is_clean_after_migration(tmp_path):
    out = tmp_path / "out"
    assert cuda2npu("migrate", PROJECTS / "ddp_train", "--out", out).returncode == 0
    result = cuda2npu("check", out)  # the advisories are opt-in: no --ignore NPU8 needed (issue 33)
    assert result.returncode == 0, result.stdout
    assert "All checks passed!" in result.stdout
    advice = cuda2npu("check", out, "--format", "json", "--exit-zero", "--extend-select", "NPU8")
    assert {d["code"] for d in json.loads(advice.stdout)["diagnostics"]} <= {f"NPU80{i}" for i in range(1, 7)}
    assert cuda2npu("check", out, "--select", "NPU8").returncode == 1  # NPU805: cudnn.benchmark
