"""Cog's build file (cuda2npu/filekinds/cog_files.py): `gpu: true` builds on a CUDA base image (NPU717) and
the `run:` commands get a launch script's checks; markers only, idempotent, the YAML unchanged in meaning."""

from __future__ import annotations

import json

import yaml
from cli_helpers import cli, write

COG = """build:
  gpu: true  # Infinity, VoiceCraft, OmniGen (rounds 42-46)
  python_version: "3.10"
  python_packages:
    - "torch==2.3.1"
  run:
    - pip install -U flash-attn --no-build-isolation
    - command: pip install einops
predict: "predict.py:Predictor"
"""


def test_gpu_and_run_commands_are_reported_at_their_lines(tmp_path):
    write(tmp_path / "cog.yaml", COG)
    write(tmp_path / "predict.py", "import torch\n")
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    found = [(d["path"].rsplit("/", 1)[-1], d["line"], d["code"]) for d in data["diagnostics"] if "cog" in d["path"]]
    assert found == [("cog.yaml", 2, "NPU717"), ("cog.yaml", 7, "NPU701")]


def test_migrate_marks_once_and_keeps_the_yaml(tmp_path):
    cog = write(tmp_path / "cog.yaml", COG)
    write(tmp_path / "predict.py", "import torch\n")
    cli("migrate", tmp_path)
    first = cog.read_text()
    cli("migrate", tmp_path)
    assert cog.read_text() == first  # idempotent
    assert first.count("TODO(cuda2npu): NPU717") == 1 and first.count("TODO(cuda2npu): NPU701") == 1
    assert yaml.safe_load(first) == yaml.safe_load(COG)  # markers are comments


def test_a_cog_file_without_a_gpu_is_left_alone(tmp_path):
    text = COG.replace("  gpu: true  # Infinity, VoiceCraft, OmniGen (rounds 42-46)\n", "").replace(
        "    - pip install -U flash-attn --no-build-isolation\n", ""
    )
    cog = write(tmp_path / "cog.yaml", text)
    write(tmp_path / "predict.py", "import torch\n")
    cli("migrate", tmp_path)
    assert cog.read_text() == text
