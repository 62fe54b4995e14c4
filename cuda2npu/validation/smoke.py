"""A smoke test of the migrated tree alone, on the NPU host (``npu_validation``'s ``test_smoke``).

For each validate entry and each argument-free ``nn.Module`` class of the changed files, in a child
process on the strict NPU host (:mod:`cuda2npu.validation.strict_host`; real torch_npu where it
works): the module imports, the model builds and is on the NPU (an entry places its model itself; a
class is moved there, as the training code would), and, where there are inputs (an entry's, or a
class's ``example_inputs()``), forward, backward and the optimizer step run with finite results; the
dtypes of the outputs are reported. It needs no original tree: run it on an NPU host with the
migrated tree alone. ``python -m cuda2npu.validation.smoke SPEC`` is the child.
"""

from __future__ import annotations

import importlib
import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cuda2npu.validation.failures import child_main
from cuda2npu.validation.harness import SIDE_TIMEOUT_S, run_child


@dataclass
class SmokeResult:
    entry: str
    status: str  # ok | failed | skipped
    checks: list[str] = field(default_factory=list)
    problem: str = ""

    def report(self) -> str:
        lines = [f"{self.entry}: {self.status.upper()}" + (f": {self.problem}" if self.problem else "")]
        return "\n".join(lines + [f"  {check}" for check in self.checks])


def smoke(migrated: Path, entry: str, autoload: bool = False) -> SmokeResult:
    """Run the smoke test of ``entry`` (``module:function`` or ``module:Class``) in ``migrated``."""
    with tempfile.TemporaryDirectory(prefix="cuda2npu-smoke-") as tmp:
        exchange = Path(tmp)
        spec = {
            "tree": str(migrated.resolve()),
            "entry": entry,
            "autoload": autoload,
            "out": str(exchange / "out.json"),
        }
        error = run_child(
            "cuda2npu.validation.smoke",
            "migrated",
            migrated,
            spec,
            exchange / "spec.json",
            exchange / "out.error.json",
            SIDE_TIMEOUT_S,
        )
        if error is not None:
            kind, message = error
            status = "skipped" if kind in ("no example inputs", "entry not found") else "failed"
            return SmokeResult(entry, status, problem=message)
        return SmokeResult(entry, **json.loads((exchange / "out.json").read_text()))


def _finite(tensors, what: str) -> str:
    import torch

    bad = [index for index, t in enumerate(tensors) if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    if bad:
        raise FloatingPointError(f"{what} {bad} are not finite")
    return what


def run(spec: dict) -> dict:
    import torch

    from cuda2npu.validation.side import _call, _tensors, _unpack
    from cuda2npu.validation.strict_host import install_host

    tree = Path(spec["tree"])
    sys.path.insert(0, str(tree))
    backend = install_host("migrated", tree, spec.get("autoload", False))
    module_name, _, name = spec["entry"].partition(":")
    target = getattr(importlib.import_module(module_name), name)
    checks = [f"imports and builds on {backend}"]
    if isinstance(target, type):
        import torch_npu  # noqa: F401 - the training code that moves the class there imports it

        model = target().to("npu")
        example = getattr(model, "example_inputs", None)
        if example is None:
            checks.append("moved to the npu device (no example_inputs(): not run)")
            return {"status": "ok", "checks": checks}
        inputs, factory = example() if callable(example) else example, None
        inputs = inputs if isinstance(inputs, (tuple, list, dict)) else (inputs,)
        inputs = _to_npu(inputs)
    else:
        model, inputs, factory = _unpack(target())
        devices = sorted({p.device.type for p in model.parameters()})
        if devices and devices != ["npu"]:
            return {
                "status": "failed",
                "checks": checks,
                "problem": f"the model's parameters are on {devices}, not npu",
            }
    checks.append("parameters on npu")
    outputs = _tensors(_call(model, inputs))
    checks.append(_finite(outputs, "outputs") + " finite, dtypes " + ", ".join(sorted({str(t.dtype) for t in outputs})))
    floating = [t for t in outputs if t.is_floating_point() and t.requires_grad]
    if floating:
        sum(t.float().sum() for t in floating).backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        checks.append(_finite(grads, "gradients") + " finite")
    if factory is not None:
        factory(model).step()
        checks.append(_finite([p.detach() for p in model.parameters()], "parameters after the step") + " finite")
    torch.npu.synchronize()
    return {"status": "ok", "checks": checks}


def _to_npu(value):
    import torch

    if isinstance(value, torch.Tensor):
        return value.to("npu")
    if isinstance(value, dict):
        return {k: _to_npu(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_to_npu(v) for v in value)
    return value


if __name__ == "__main__":
    sys.exit(child_main(sys.argv, run, "migrated"))
