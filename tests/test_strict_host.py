"""The hosts the two sides of a validation run on (cuda2npu.validation.strict_host): what an NPU host
cannot import, torch_npu only where it is imported (or auto-loaded), and the original's CUDA host
without torch_npu. Each case runs in a fresh interpreter: a host is installed for the whole process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PROBE = """
import importlib, importlib.util, json, sys
from pathlib import Path
import torch
from cuda2npu.validation.strict_host import install_host
sys.path.append({installed!r})  # packages this machine has installed
install_host({role!r}, Path({tree!r}), autoload={autoload})
sys.path.insert(0, {tree!r})
results = {{}}
for name in {modules!r}:
    try:
        importlib.import_module(name)
        results[name] = "ok"
    except ImportError as exc:
        results[name] = str(exc)
def found(name):
    try:
        return importlib.util.find_spec(name.split(".")[0]) is not None
    except ImportError as exc:  # an installed module the host hides
        return str(exc)
results["find_spec"] = {{name: found(name) for name in {modules!r}}}
results["torch.npu before import"] = hasattr(torch, "npu")
print(json.dumps(results))
"""


def _host(tmp_path, role, modules, autoload=False):
    installed = tmp_path.parent / f"{tmp_path.name}-site-packages"
    for name in ("xformers", "torch_npu") if role == "original" else ("xformers",):  # as if installed here
        (installed / name).mkdir(parents=True, exist_ok=True)
        (installed / name / "__init__.py").write_text("")
    code = PROBE.format(
        role=role, tree=str(tmp_path), installed=str(installed), autoload=autoload, modules=list(modules)
    )
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
    modules = ["xformers.ops", "apex", "mykernels", "rotary_cuda", "transformer_engine", "flash_attn"]
    found = _host(tree, "migrated", modules)
    # installed on this machine: hidden, with the reason
    assert "No module named 'xformers' on an NPU host: CUDA-only" in found["xformers.ops"]
    assert "on an NPU host" in found["find_spec"]["xformers.ops"]
    # absent here as there: the usual error, and find_spec answers None (libraries probe that way)
    for name in ("apex", "mykernels", "rotary_cuda", "transformer_engine"):
        assert found[name] == f"No module named '{name}'", found[name]
        assert found["find_spec"][name] is False
    assert found["flash_attn"] == "ok" and found["find_spec"]["flash_attn"]  # the project's own package


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
    assert found["xformers_absent_here"] == "No module named 'xformers_absent_here'"
    assert not found["torch.npu before import"]
