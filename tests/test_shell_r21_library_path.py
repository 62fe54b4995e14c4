"""Rounds 21 and 22 (MOSS-RLHF's train_rm.sh, dart-math's init.sh): a library path set to CUDA's
alone drops CANN's (NPU714), one that extends itself or names no CUDA path is left alone; a CUDA module
named through a variable is NPU714 too."""

from __future__ import annotations

import json

from cli_helpers import cli, write

SCRIPT = """\
#!/bin/bash
export CUDA_HOME=/usr/local/cuda-11.7
export LD_LIBRARY_PATH=${CUDA_HOME}/lib64
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export LD_LIBRARY_PATH=/opt/mylib
LD_LIBRARY_PATH=/opt/cuda/lib python train.py
"""


def test_a_cuda_library_path_that_replaces_the_path_is_marked(tmp_path):
    script = write(tmp_path / "train_rm.sh", SCRIPT)
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    found = [(d["line"], d["code"], d["tier"]) for d in data["diagnostics"]]
    assert found == [(3, "NPU714", "manual"), (6, "NPU714", "manual")]
    assert "drops CANN's libraries" in data["diagnostics"][0]["message"]
    cli("migrate", tmp_path)
    lines = script.read_text().splitlines()
    marked = [lines[i + 1] for i, line in enumerate(lines) if line.startswith("# TODO(cuda2npu): NPU714")]
    assert marked == ["export LD_LIBRARY_PATH=${CUDA_HOME}/lib64", "LD_LIBRARY_PATH=/opt/cuda/lib python train.py"]


def test_r22_a_cuda_module_named_through_a_variable_in_a_function(tmp_path):
    """dart-math's `utils/init.sh`: `load_cuda() { module load "cuda-${ver}"; }` is NPU714 too."""
    write(tmp_path / "init.sh", 'load_cuda() {\n    local ver=$1\n    module load "cuda-${ver}"\n}\n')
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    assert [(d["line"], d["code"]) for d in data["diagnostics"]] == [(3, "NPU714")]
