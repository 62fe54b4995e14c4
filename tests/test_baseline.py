"""--baseline / --write-baseline on fixtures/ci/legacy_project: old findings pass, new ones fail."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_helpers import cli

LEGACY = Path(__file__).resolve().parent.parent / "fixtures" / "ci" / "legacy_project"


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = tmp_path / "legacy"
    shutil.copytree(LEGACY, root)
    monkeypatch.chdir(root)
    return root


def test_baseline_workflow(project, monkeypatch):
    assert cli("check", ".").exit_code == 1
    result = cli("check", ".", "--baseline", "cuda2npu-baseline.json", "--write-baseline")
    assert result.exit_code == 0
    assert "wrote 4 findings" in result.stderr
    baseline = json.loads((project / "cuda2npu-baseline.json").read_text())
    assert baseline["version"] == 1
    assert {(e["path"], e["code"]) for e in baseline["findings"]} == {
        ("pkg/train.py", "NPU101"),
        ("pkg/train.py", "NPU103"),
        ("pkg/utils.py", "NPU103"),
    }
    assert cli("check", ".", "--baseline", "cuda2npu-baseline.json").exit_code == 0

    # unrelated edits above the findings, and re-indentation, do not break the baseline
    train = project / "pkg" / "train.py"
    text = train.read_text()
    text = text.replace('"""A legacy', 'import os\nimport sys\n\nLOG = os.environ.get("LOG")\n\n"""A legacy')
    train.write_text(text.replace("def step(model, batch):", "def helper():\n    pass\n\n\ndef step(model, batch):"))
    result = cli("check", ".", "--baseline", "cuda2npu-baseline.json")
    assert result.exit_code == 0, result.stdout
    assert "4 findings in the baseline not shown" in result.stderr

    # a new CUDA call fails, and only it is reported, in every format
    train.write_text(train.read_text() + "\n\ndef evaluate(model, batch):\n    return model(batch.cuda())\n")
    result = cli("check", ".", "--baseline", "cuda2npu-baseline.json", "--format", "concise")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[:-1] == [
        "pkg/train.py:27:24: NPU101 [*] `.cuda()` moves data to a CUDA device; use `.npu()`"
    ]
    data = json.loads(cli("check", ".", "--baseline", "cuda2npu-baseline.json", "--format", "json").stdout)
    assert [(d["path"], d["line"]) for d in data["diagnostics"]] == [("pkg/train.py", 27)]

    # a duplicate of a baselined line is new too (occurrence index)
    utils = project / "pkg" / "utils.py"
    utils.write_text(utils.read_text() + "\n\ndef again():\n    return torch.cuda.device_count()\n")
    data = json.loads(cli("check", ".", "--baseline", "cuda2npu-baseline.json", "--format", "json").stdout)
    assert sorted((d["path"], d["code"]) for d in data["diagnostics"]) == [
        ("pkg/train.py", "NPU101"),
        ("pkg/utils.py", "NPU103"),
    ]

    # paths are relative to the baseline file: the same result from another directory
    monkeypatch.chdir(project / "pkg")
    data = json.loads(cli("check", ".", "--baseline", "../cuda2npu-baseline.json", "--format", "json").stdout)
    assert len(data["diagnostics"]) == 2


def test_missing_or_bad_baseline_is_a_usage_error(project):
    result = cli("check", ".", "--baseline", "nope.json")
    assert result.exit_code == 2 and "--write-baseline" in result.stderr
    (project / "bad.json").write_text("{}")
    assert cli("check", ".", "--baseline", "bad.json").exit_code == 2
    assert cli("check", ".", "--write-baseline").exit_code == 2
