"""The hosts the two sides of a validation run on (cuda2npu.validation.strict_host): what an NPU host
cannot import, torch_npu only where it is imported (or auto-loaded), and the original's CUDA host
without torch_npu. Each case runs in a fresh interpreter: a host is installed for the whole process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PROBE = """
import importlib, json, sys
from pathlib import Path
import torch
from cuda2npu.validation.strict_host import install_host
install_host({role!r}, Path({tree!r}), autoload={autoload})
sys.path.insert(0, {tree!r})
results = {{}}
for name in {modules!r}:
    try:
        importlib.import_module(name)
        results[name] = "ok"
    except ImportError as exc:
        results[name] = str(exc)
results["torch.npu before import"] = hasattr(torch, "npu")
print(json.dumps(results))
"""


def _host(tmp_path, role, modules, autoload=False):
    code = PROBE.format(role=role, tree=str(tmp_path), autoload=autoload, modules=list(modules))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    import json

    return json.loads(proc.stdout.splitlines()[-1])


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "setup.py").write_text('CUDAExtension("mykernels", ["k.cu"])\n')
    (tmp_path / "flash_attn").mkdir()  # the project is flash-attn itself: its own package imports
    (tmp_path / "flash_attn" / "__init__.py").write_text("")
    return tmp_path


def test_an_npu_host_cannot_import_cuda_only_packages(tree):
    found = _host(
        tree,
        "migrated",
        ["xformers.ops", "apex", "amp_C", "mykernels", "rotary_cuda", "transformer_engine", "flash_attn"],
    )
    assert "No module named 'xformers' on an NPU host: CUDA-only" in found["xformers.ops"]
    assert "NVIDIA apex is built for CUDA" in found["apex"] and "apex" in found["amp_C"]
    assert "CUDA-only" in found["mykernels"] and "CUDA-only" in found["rotary_cuda"]
    assert "TransformerEngine" in found["transformer_engine"]
    assert found["flash_attn"] == "ok"


def test_torch_npu_exists_only_once_imported_unless_autoloaded(tmp_path):
    code = textwrap.dedent(
        """
        from pathlib import Path
        import torch
        from cuda2npu.validation.strict_host import install_host
        install_host("migrated", Path("."), autoload={autoload})
        try:
            torch.zeros(1, device="npu")
            print("device before import")
        except RuntimeError:
            print("no device before import")
        import torch_npu
        print(torch.zeros(1, device="npu").device, hasattr(torch, "npu"))
        """
    )
    for autoload, first in ((False, "no device before import"), (True, "device before import")):
        proc = subprocess.run(
            [sys.executable, "-c", code.format(autoload=autoload)], capture_output=True, text=True, cwd=tmp_path
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split("\n")[:2] == [first, "npu:0 True"]


def test_the_original_cuda_host_has_the_standins_and_no_torch_npu(tmp_path):
    found = _host(tmp_path, "original", ["torch_npu", "flash_attn", "apex.optimizers", "xformers_absent_here"])
    assert "No module named 'torch_npu' on a CUDA host: torch_npu exists only on Ascend hosts" in found["torch_npu"]
    assert found["flash_attn"] == "ok" and found["apex.optimizers"] == "ok"
    assert "xformers_absent_here" in found["xformers_absent_here"] and not found["torch.npu before import"]
