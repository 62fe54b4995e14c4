"""Run the original code on the emulated CUDA host and the migrated code on the emulated NPU host,
each in its own Python process (only one private-use backend can exist per process), on the same
inputs: the numeric tests of the rewrites compare what the two return."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent

DRIVER = textwrap.dedent(
    """
    import importlib.util
    import sys

    import torch

    side, module_path, inputs_path, output_path, dtype = sys.argv[1:]
    if side == "cuda":
        from cuda2npu.emulation import emulate_cuda

        emulate_cuda()
    else:
        from cuda2npu.emulation import emulate_npu

        emulate_npu()
        import torch_npu  # noqa: F401
    spec = importlib.util.spec_from_file_location("cases", module_path)
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    results = {}
    for name, args in torch.load(inputs_path).items():
        args = [a.to(side) if isinstance(a, torch.Tensor) else a for a in args]
        results[name] = getattr(cases, name)(*args).detach().to("cpu").to(getattr(torch, dtype))
    torch.save(results, output_path)
    """
)


def run_both(sources: dict[str, str], inputs: Path, tmp_path: Path, dtype: str = "float32") -> dict[str, dict]:
    """Each function of the module ``sources[side]`` called with its inputs (``torch.load(inputs)``:
    name -> arguments) on side ``cuda`` (original) and ``npu`` (migrated), in parallel processes;
    results as ``dtype``."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER, encoding="utf-8")
    procs = {}
    for side, source in sources.items():
        module = tmp_path / f"cases_{side}.py"
        module.write_text(source, encoding="utf-8")
        output = tmp_path / f"out_{side}.pt"
        command = [sys.executable, str(driver), side, str(module), str(inputs), str(output), dtype]
        procs[side] = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = {}
    for side, proc in procs.items():
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{side} side failed:\n{stderr[-4000:]}"
        results[side] = torch.load(tmp_path / f"out_{side}.pt")
    return results
