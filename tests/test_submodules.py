"""An empty git submodule (a clone without ``--recursive``: LLaVA-pp's LLaVA, pythia's GPT-NeoX,
round 26) is listed as skipped with what to do; a checked-out one is migrated as the project's own."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cli_helpers import cli, write

from cuda2npu.project.submodules import empty_submodules

GITMODULES = """\
[submodule "gpt-neox"]
\tpath = gpt-neox
\turl = https://github.com/EleutherAI/gpt-neox
[submodule "LLaVA"]
\tpath = third_party/LLaVA
\turl = https://github.com/haotian-liu/LLaVA
"""


def _project(root: Path) -> None:
    write(root / "train.py", "import torch\n\nmodel = torch.nn.Linear(2, 2).cuda()\n")
    (root / ".gitmodules").write_text(GITMODULES)
    (root / "gpt-neox").mkdir()  # what `git clone` leaves of an uninitialised submodule
    write(root / "third_party" / "LLaVA" / "llava" / "model.py", "import torch\n\nx = torch.zeros(2).cuda()\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)


def test_only_the_empty_submodule_is_found(tmp_path):
    _project(tmp_path)
    assert empty_submodules(tmp_path) == [tmp_path / "gpt-neox"]


def test_a_missing_submodule_directory_is_empty_too(tmp_path):
    (tmp_path / ".gitmodules").write_text('[submodule "x"]\n    path = "vendor/x"\n')
    assert empty_submodules(tmp_path) == [tmp_path / "vendor" / "x"]


def test_a_path_outside_the_project_is_not_reported(tmp_path):
    (tmp_path / ".gitmodules").write_text('[submodule "x"]\n\tpath = ../elsewhere\n')
    assert empty_submodules(tmp_path) == []


def test_migrate_says_the_empty_submodule_was_not_migrated(tmp_path):
    _project(tmp_path)
    report = tmp_path.parent / "report.json"
    result = cli("migrate", tmp_path, "--allow-dirty", "--report", report)
    assert result.exit_code == 0
    assert "gpt-neox: skipped (an empty git submodule" in result.stderr
    assert "git submodule update --init --recursive" in result.stderr
    files = {Path(e["path"]).name: e for e in json.loads(report.read_text())["files"]}
    assert files["gpt-neox"]["status"] == "skipped"
    assert ".npu()" in (tmp_path / "third_party" / "LLaVA" / "llava" / "model.py").read_text()
