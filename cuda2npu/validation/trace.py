"""Recording what a training script computes, for the whole-script A/B (``validate --run``).

Runs in a child process (``python -m cuda2npu.validation.trace SPEC``): installs the side's
backend (real CUDA/NPU, else the emulation), seeds every generator, registers torch's global
module hooks and an optimizer-step hook, then runs the user's script as ``__main__``. It records,
in order:

* ``forward``: every module call's output tensors, keyed by the project's own module path
  (``blocks.0.attn``, from ``named_modules()`` of the outermost module called) and the call's
  index within the step, not by class name, so modules the migration replaced on purpose
  (TransformerEngine → generated modules, apex norms → ``torch.nn``) still line up;
* ``loss``: every tensor ``backward()`` is called on;
* ``grad``: each parameter's gradient before an optimizer step (its norm among the statistics);
* ``param``: each parameter after the step.

A tensor is kept as statistics (shape, dtype, sum, mean |x|, max |x|, norm) plus a fixed sample of
at most ``SAMPLE`` elements; at most ``MAX_EVENTS`` events are kept (later ones are counted, not
stored). After ``steps`` optimizer steps the script is stopped and the trace written.
"""

from __future__ import annotations

import json
import os
import random
import runpy
import sys
import traceback
from pathlib import Path

import torch

SAMPLE = 64
MAX_EVENTS = 20_000


class _TraceComplete(BaseException):
    """Raised from the optimizer-step hook to stop the script after the requested steps."""


def tensor_summary(tensor: torch.Tensor) -> dict:
    """Statistics and a fixed strided sample of a tensor, on the CPU in float64."""
    data = tensor.detach().cpu()
    summary = {"shape": list(data.shape), "dtype": str(data.dtype).removeprefix("torch.")}
    if not (data.is_floating_point() or data.is_complex()):
        data = data.double()
    values = data.double().reshape(-1)
    if values.numel() == 0:
        return {**summary, "stats": [0.0, 0.0, 0.0, 0.0], "sample": []}
    stride = max(1, values.numel() // SAMPLE)
    summary["stats"] = [
        float(values.sum()),
        float(values.abs().mean()),
        float(values.abs().max()),
        float(values.norm()),
    ]
    summary["sample"] = values[::stride][:SAMPLE].tolist()
    return summary


def _output_tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, dict):
        return [t for key in sorted(value, key=str) for t in _output_tensors(value[key])]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _output_tensors(item)]
    return []


class Recorder:
    """The global hooks and the events they produce."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.step = 0
        self.events: list[dict] = []
        self.dropped = 0
        self.names: dict[int, str] = {}  # id(module) -> path within its root
        self.param_names: dict[int, str] = {}
        self.roots: list[int] = []
        self.depth = 0
        self.calls: dict[tuple, int] = {}
        self.handles: list = []

    def add(self, event: dict) -> None:
        if len(self.events) < MAX_EVENTS:
            self.events.append({"step": self.step, **event})
        else:
            self.dropped += 1

    def _register_root(self, module: torch.nn.Module) -> None:
        ordinal = len(self.roots)
        self.roots.append(id(module))
        prefix = "" if ordinal == 0 else f"<root {ordinal}>."
        for name, sub in module.named_modules():
            self.names.setdefault(id(sub), (prefix + name) if name else (prefix.rstrip(".") or "<root>"))
        for name, parameter in module.named_parameters():
            self.param_names.setdefault(id(parameter), prefix + name)

    def pre_forward(self, module, args) -> None:
        if self.depth == 0 and id(module) not in self.names:
            self._register_root(module)
        self.depth += 1

    def post_forward(self, module, args, output) -> None:
        self.depth -= 1
        path = self.names.get(id(module))
        if path is None:  # created after its root's first call
            path = f"<unnamed {type(module).__name__}>"
        key = (self.step, path)
        index = self.calls.get(key, 0)
        self.calls[key] = index + 1
        tensors = _output_tensors(output)
        if tensors:
            self.add(
                {"kind": "forward", "module": path, "call": index, "tensors": [tensor_summary(t) for t in tensors]}
            )

    def backward(self, tensor: torch.Tensor) -> None:
        if tensor.numel() == 1:
            key = (self.step, "<loss>")
            index = self.calls.get(key, 0)
            self.calls[key] = index + 1
            self.add({"kind": "loss", "module": "", "call": index, "tensors": [tensor_summary(tensor)]})

    def _named_parameters(self, optimizer) -> list[tuple[str, torch.Tensor]]:
        found = []
        for group_index, group in enumerate(optimizer.param_groups):
            for index, parameter in enumerate(group["params"]):
                found.append((self.param_names.get(id(parameter), f"<group {group_index} param {index}>"), parameter))
        return found

    def pre_step(self, optimizer, args, kwargs) -> None:
        for name, parameter in self._named_parameters(optimizer):
            if parameter.grad is not None:
                self.add({"kind": "grad", "module": name, "call": 0, "tensors": [tensor_summary(parameter.grad)]})

    def post_step(self, optimizer, args, kwargs) -> None:
        for name, parameter in self._named_parameters(optimizer):
            self.add({"kind": "param", "module": name, "call": 0, "tensors": [tensor_summary(parameter)]})
        self.step += 1
        if self.step >= self.steps:
            raise _TraceComplete

    def install(self) -> None:
        from torch.nn.modules import module as modules
        from torch.optim import optimizer as optimizers

        self.handles = [
            modules.register_module_forward_pre_hook(self.pre_forward),
            modules.register_module_forward_hook(self.post_forward),
            optimizers.register_optimizer_step_pre_hook(self.pre_step),
            optimizers.register_optimizer_step_post_hook(self.post_step),
        ]
        original_backward = torch.Tensor.backward
        recorder = self

        def backward(tensor, *args, **kwargs):
            recorder.backward(tensor)
            return original_backward(tensor, *args, **kwargs)

        torch.Tensor.backward = backward


def _share_random_stream() -> None:
    """Random numbers drawn on the emulated npu come from the CPU generator, as the CUDA emulation's
    do, so both runs of a script draw the same data in the same order. (On hardware CUDA's and the
    NPU's generators differ: data drawn on the device differs there whatever the migration.)"""
    from cuda2npu.emulation import npu_device

    npu_device.default_generators = (torch.default_generator,)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy
    except ImportError:
        return
    numpy.random.seed(seed)


def run(spec: dict) -> dict:
    """Run the spec's script in its tree and return the trace (also on a normal exit)."""
    from cuda2npu.validation.side import emulate_backend

    tree = Path(spec["tree"])
    os.chdir(tree)
    sys.path.insert(0, str(tree))
    backend = emulate_backend(spec["role"])
    if backend == "npu (emulated)":
        _share_random_stream()
    seed_everything(spec["seed"])
    recorder = Recorder(spec["steps"])
    recorder.install()
    argv = spec["command"]
    sys.argv = list(argv)
    status = "finished"
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except _TraceComplete:
        status = "steps reached"
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
    return {
        "backend": backend,
        "status": status,
        "steps": recorder.step,
        "events": recorder.events,
        "dropped": recorder.dropped,
    }


def main(argv: list[str]) -> int:
    from cuda2npu.validation.side import classify

    spec = json.loads(Path(argv[1]).read_text())
    out = Path(spec["out"])
    try:
        trace = run(spec)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        error = {
            "error": classify(exc, spec["role"]),
            "message": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
        }
        out.with_suffix(".error.json").write_text(json.dumps(error))
        return 2
    out.write_text(json.dumps(trace))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
