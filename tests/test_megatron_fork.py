"""NPU941 (MindSpeed for Megatron-LM) is not said in a project carrying its own old Megatron."""

from __future__ import annotations

import json

from cli_helpers import cli, write

from cuda2npu.project.facts import megatron_fork

ENTRY = "import torch\nfrom megatron.training import pretrain\n\npretrain(provider, model_provider, forward_step)\n"


def _npu941(root) -> list[str]:
    data = json.loads(cli("check", root, "--format", "json", "--select", "NPU941").stdout)
    return [d["path"].rsplit("/", 1)[-1] for d in data["diagnostics"]]


def test_a_project_carrying_megatron_without_core_gets_no_mindspeed_note(tmp_path):
    write(tmp_path / "megatron" / "__init__.py", "")
    write(tmp_path / "megatron" / "training.py", "def pretrain(*args):\n    pass\n")
    write(tmp_path / "pretrain_gpt.py", ENTRY)
    assert _npu941(tmp_path) == []


def test_megatron_lm_itself_or_as_a_dependency_gets_the_note(tmp_path):
    write(tmp_path / "vendored" / "megatron" / "__init__.py", "")
    write(tmp_path / "vendored" / "megatron" / "core" / "__init__.py", "")
    write(tmp_path / "pretrain_gpt.py", ENTRY)
    assert _npu941(tmp_path) == ["pretrain_gpt.py"]
    (tmp_path / "vendored" / "megatron" / "core" / "__init__.py").unlink()
    assert _npu941(tmp_path) == []


def test_megatron_fork_reads_the_file_list(tmp_path):
    fork = [tmp_path / "megatron" / "__init__.py", tmp_path / "megatron" / "model" / "__init__.py"]
    assert megatron_fork(fork)
    assert not megatron_fork([*fork, tmp_path / "megatron" / "core" / "__init__.py"])
    assert not megatron_fork([tmp_path / "train.py"])
