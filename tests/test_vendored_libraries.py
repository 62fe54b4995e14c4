"""Copies of apex, mmcv and flash-attn inside a project are left as written (VisionLLMv2, round 16):
their files are listed as skipped with the reason, the project's own files are migrated."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import cli, write

PROJECT_FILE = """
import torch

model = torch.nn.Linear(2, 2).cuda()
"""


def _project(root):
    write(root / "train.py", PROJECT_FILE)
    write(
        root / "third_party" / "apex" / "setup.py",
        'from setuptools import setup\next = CUDAExtension(name="amp_C", sources=[])\nsetup(\n    name="apex",\n)\n',
    )
    write(root / "third_party" / "apex" / "apex" / "__init__.py", "")
    apex_file = write(root / "third_party" / "apex" / "apex" / "amp" / "scaler.py", PROJECT_FILE)
    write(root / "mmcv" / "setup.py", "setup(name='mmcv' if MMCV_WITH_OPS == '0' else 'mmcv-full')\n")
    write(root / "mmcv" / "mmcv" / "__init__.py", "")
    mmcv_test = write(
        root / "mmcv" / "tests" / "test_nms.py",
        """
        import pytest
        import torch

        @pytest.mark.skipif(not torch.cuda.is_available(), reason="requires CUDA")
        def test_nms():
            boxes = torch.rand(4, 4).cuda()
        """,
    )
    return apex_file, mmcv_test


def test_a_vendored_library_is_skipped_with_its_reason(tmp_path):
    apex_file, mmcv_test = _project(tmp_path)
    before = apex_file.read_text(), mmcv_test.read_text()
    report = tmp_path / "report.json"
    assert cli("migrate", tmp_path, "--report", report).exit_code == 0
    assert ".npu()" in (tmp_path / "train.py").read_text()
    assert (apex_file.read_text(), mmcv_test.read_text()) == before
    entries = json.loads(report.read_text())["files"]
    files = {Path(entry["path"]).relative_to(tmp_path).as_posix(): entry for entry in entries}
    assert files["third_party/apex/apex/amp/scaler.py"]["status"] == "skipped"
    assert "Ascend's apex port" in files["third_party/apex/apex/amp/scaler.py"]["reason"]
    assert "FORCE_NPU=1" in files["mmcv/tests/test_nms.py"]["reason"]


def test_a_file_of_a_vendored_library_named_on_the_command_line_is_skipped_too(tmp_path):
    """pre-commit passes files one by one: `check mmcv/tests/test_nms.py` agrees with `check .`."""
    _, mmcv_test = _project(tmp_path)
    (tmp_path / ".git").mkdir()
    data = json.loads(cli("check", mmcv_test, "--format", "json").stdout)
    assert data["diagnostics"] == []


def test_a_project_that_is_the_library_itself_is_migrated(tmp_path):
    """Only copies below the project root are left: run on apex's own checkout, cuda2npu migrates it."""
    apex_file, _ = _project(tmp_path)
    root = tmp_path / "third_party" / "apex"
    data = json.loads(cli("check", root, "--format", "json").stdout)
    assert {d["path"].rsplit("/", 1)[-1] for d in data["diagnostics"]} == {apex_file.name}


def test_a_directory_naming_another_distribution_is_the_projects_own(tmp_path):
    write(tmp_path / "tools" / "setup.py", 'setup(name="apex-tools")\n')
    write(tmp_path / "tools" / "apex" / "__init__.py", "")
    own = write(tmp_path / "tools" / "apex" / "ops.py", PROJECT_FILE)
    cli("migrate", tmp_path)
    assert ".npu()" in own.read_text()


def test_a_copy_of_deepspeed_or_transformers_is_skipped_too(tmp_path):
    """FlexLLMGen (round 27) carries DeepSpeed 0.7.7 and transformers 4.24.0 (a `src/` layout) for its
    baselines: both run on Ascend themselves from a later release, which replaces the copy."""
    write(tmp_path / "train.py", PROJECT_FILE)
    deepspeed = write(tmp_path / "third_party" / "DeepSpeed" / "deepspeed" / "runtime" / "engine.py", PROJECT_FILE)
    write(tmp_path / "third_party" / "DeepSpeed" / "deepspeed" / "__init__.py", "")
    write(
        tmp_path / "third_party" / "DeepSpeed" / "setup.py", "from setuptools import setup\nsetup(name='deepspeed')\n"
    )
    hf = write(tmp_path / "third_party" / "transformers" / "src" / "transformers" / "trainer.py", PROJECT_FILE)
    write(tmp_path / "third_party" / "transformers" / "src" / "transformers" / "__init__.py", "")
    write(tmp_path / "third_party" / "transformers" / "setup.py", 'setup(\n    name="transformers",\n)\n')
    report = tmp_path / "report.json"
    assert cli("migrate", tmp_path, "--report", report).exit_code == 0
    assert deepspeed.read_text() == hf.read_text() == PROJECT_FILE.lstrip("\n")
    entries = {Path(e["path"]).name: e for e in json.loads(report.read_text())["files"]}
    assert "DeepSpeed, which runs on Ascend NPUs itself from 0.10.1" in entries["engine.py"]["reason"]
    assert "transformers, which runs on Ascend NPUs itself from 4.32.0" in entries["trainer.py"]["reason"]
    assert ".npu()" in (tmp_path / "train.py").read_text()


def test_a_fork_of_transformers_carrying_the_projects_cuda_kernels_is_the_projects(tmp_path):
    """KVQuant (round 30) ships transformers 4.38.0.dev0 forks whose `modeling_llama.py` imports its
    compiled `quant_cuda`: not a copy a release replaces, so migrated (and marked) as the project's."""
    write(tmp_path / "train.py", PROJECT_FILE)
    fork = tmp_path / "deployment" / "transformers"
    write(fork / "setup.py", 'setup(\n    name="transformers",\n)\n')
    write(fork / "src" / "transformers" / "__init__.py", "")
    modeling = write(
        fork / "src" / "transformers" / "models" / "llama" / "modeling_llama.py",
        "import torch\nimport quant_cuda\n\nx = torch.zeros(2).cuda()\n",
    )
    report = tmp_path / "report.json"
    assert cli("migrate", tmp_path, "--report", report).exit_code == 0
    entries = {Path(e["path"]).name: e for e in json.loads(report.read_text())["files"]}
    assert entries["modeling_llama.py"]["status"] != "skipped"
    assert "NPU606 `quant_cuda`" in modeling.read_text()
