"""What a training script computes, recorded through torch's global hooks (``validate --run``).

One :class:`Recorder` per side, in the child process that runs the script. It records, in order,
events keyed by (step, kind, module, call):

* ``forward``: every module call's floating output tensors, keyed by the project's own module path
  (``blocks.0.attn``, from ``named_modules()`` of the outermost module called) and the call's index
  within the step, with the device type of the module's own parameters;
* ``loss``: every scalar ``backward()`` is called on, divided by the loss scale where a scaler
  made it (``GradScaler.scale``, apex's ``scale_loss``), and ``scale``: that scale;
* ``kernel``: every attention kernel call (the emulated flash-attn, TransformerEngine and
  ``npu_fusion_attention`` kernels, and ``F.scaled_dot_product_attention``) with the drop
  probability and softmax scale it was given, and the line that called it;
* ``grad``: each parameter's gradient before an optimizer step; ``update``: what the step added
  to it (the parameters themselves show in the next step's outputs); ``step``: the line that
  stepped; ``autocast``: where autocast was entered, with which dtype and whether enabled.

Besides the events (at most ``MAX_EVENTS``; later ones are counted, not kept) it keeps what the
comparison needs to judge and to locate them: per step, how many backward passes, kernel calls and
calls of each module path there were; each module path's class, where the class is defined and
where the module was built; each optimizer's class, hyper-parameters and where it was built; the
inputs of the first call of each normalization and attention module (for the probes,
:mod:`cuda2npu.validation.probes`). A place is ``path:line`` relative to the side's tree, the
innermost frame of the tree's own code.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import os
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import torch

from cuda2npu.emulation.controls import CONTROLS, device_type, loss_scale_of, mark_loss_scale, observed_sdpa
from cuda2npu.validation.probes import capture_optimizers, optimizer_record
from cuda2npu.validation.summaries import output_tensors, tensor_summary

MAX_EVENTS = 20_000
PROBED_CLASS = re.compile(r"Norm|Attention|Attn|MHA")


class TraceComplete(BaseException):
    """Raised from a hook to stop the script: the steps were reached, or a limit passed."""


class Places:
    """``path:line`` of the innermost frame inside a tree, and where classes are defined there."""

    def __init__(self, tree: Path) -> None:
        self.tree = tree.resolve()
        self.prefix = str(self.tree) + "/"
        self._classes: dict[type, str | None] = {}

    def relative(self, filename: str) -> str | None:
        filename = os.path.abspath(filename)
        return filename[len(self.prefix) :] if filename.startswith(self.prefix) else None

    def caller(self, skip_self: object = None) -> str | None:
        """The innermost frame of the tree's code on the stack (``path:line``, ``path:first-last`` for a
        statement over several lines); frames whose ``self`` is ``skip_self`` do not count."""
        frame = sys._getframe(2)
        while frame is not None:
            path = self.relative(frame.f_code.co_filename)
            if path is not None and (skip_self is None or frame.f_locals.get("self") is not skip_self):
                return f"{path}:{_lines(frame)}"
            frame = frame.f_back
        return None

    def definition(self, cls) -> str | None:
        """``path:first-last`` of a class (or function) defined in the tree, else None."""
        if cls not in self._classes:
            self._classes[cls] = None
            try:
                path = self.relative(str(Path(inspect.getsourcefile(cls) or "").resolve()))
                lines, first = inspect.getsourcelines(cls)
            except (OSError, TypeError):
                path = None
            if path is not None:
                self._classes[cls] = f"{path}:{first}-{first + len(lines) - 1}"
        return self._classes[cls]

    def entry(self, function) -> str | None:
        """``path:spans`` of where an entry decides its model's and inputs' devices: the function,
        the same module's functions it calls and the module-level names it reads
        (``nanogpt_entry.py:7, 11-22`` for ``device = "npu"`` at line 7 read by ``build``)."""
        own = self.definition(function)
        if own is None or not inspect.isfunction(function):  # a class or another callable: its definition
            return own
        path, _, span = own.partition(":")
        module = sys.modules.get(function.__module__)
        spans = {_span_start(span): span}
        assigned = None  # the module's assignment lines, parsed once and only if a name needs them
        for name in _global_names(function.__code__):
            value = getattr(module, name, None)
            if inspect.isfunction(value) and value is not function and value.__module__ == function.__module__:
                place = self.definition(value)
                if place is not None:
                    called = place.partition(":")[2]
                    spans[_span_start(called)] = called
            elif isinstance(value, (str, int, float, tuple, torch.device, torch.dtype)):
                assigned = _assignment_lines(module) if assigned is None else assigned
                line = assigned.get(name)
                if line is not None:
                    spans.setdefault(line, str(line))
        return f"{path}:{', '.join(spans[start] for start in sorted(spans))}"


def _span_start(span: str) -> int:
    return int(span.partition("-")[0])


def _global_names(code) -> set[str]:
    """The global names a function and the functions defined in it read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _global_names(const)
    return names


def _assignment_lines(module) -> dict[str, int]:
    """The line of each module-level name's last assignment (``name = ...`` or annotated) in ``module``."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):
        return {}
    lines: dict[str, int] = {}
    for statement in tree.body:
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            for node in statement.targets if isinstance(statement, ast.Assign) else [statement.target]:
                lines.update((target.id, statement.lineno) for target in ast.walk(node) if isinstance(target, ast.Name))
    return lines


def _lines(frame) -> str:
    """The line (or first-last lines) of the instruction a frame is executing."""
    positions = list(itertools.islice(frame.f_code.co_positions(), frame.f_lasti // 2, frame.f_lasti // 2 + 1))
    first, last = positions[0][:2] if positions else (None, None)
    first = first or frame.f_lineno
    return f"{first}-{last}" if last and last > first else str(first)


def _own_parameter(module: torch.nn.Module) -> torch.Tensor | None:
    return next(module.parameters(recurse=False), None)


class Recorder:
    """The global hooks and what they record (see the module docstring)."""

    def __init__(self, steps: int, tree: Path, limits: dict | None = None) -> None:
        self.steps = steps
        self.places = Places(tree)
        self.limits = limits or {}
        self.step = 0
        self.events: list[dict] = []
        self.dropped = 0
        self.names: dict[int, str] = {}  # id(module) -> path within its root
        self.param_names: dict[int, str] = {}
        self.modules: dict[str, dict] = {}  # path -> class, defined, built
        self.roots: list[int] = []
        self.stack: list[torch.nn.Module] = []  # the modules being called, outermost first
        self.root_call: str | None = None  # where the outermost module was last called
        self.counts: dict[int, Counter] = defaultdict(Counter)  # step -> "backward", "kernel", "forward <path>"
        self.totals: Counter = Counter()  # "backward", "root calls"
        self.optimizers: list[dict] = []  # class, built, hyper-parameters, the object
        self.first_calls: dict[str, tuple] = {}  # path -> (module, args, kwargs) of probed modules
        self.low_precision = False
        self.before: dict[int, torch.Tensor] = {}
        self.handles: list = []
        self.in_backward = False
        self.restore: list[tuple] = []  # (owner, name, what it had before install)

    # -- events ---------------------------------------------------------------------------------

    def add(self, event: dict) -> None:
        if len(self.events) < MAX_EVENTS:
            self.events.append({"step": self.step, **event})
        else:
            self.dropped += 1

    def _index(self, name: str) -> int:
        counts = self.counts[self.step]
        counts[name] += 1
        return counts[name] - 1

    # -- modules --------------------------------------------------------------------------------

    def _register_root(self, module: torch.nn.Module) -> None:
        ordinal = len(self.roots)
        self.roots.append(id(module))
        prefix = "" if ordinal == 0 else f"<root {ordinal}>."
        for name, sub in module.named_modules():
            path = (prefix + name) if name else (prefix.rstrip(".") or "<root>")
            if self.names.setdefault(id(sub), path) == path:
                self.modules[path] = {
                    "class": type(sub).__name__,
                    "defined": self.places.definition(type(sub)),
                    "built": sub.__dict__.get("_cuda2npu_built"),
                }
                if PROBED_CLASS.search(type(sub).__name__):
                    self._keep_first_call(path, sub)
        for name, parameter in module.named_parameters():
            self.param_names.setdefault(id(parameter), prefix + name)

    def _keep_first_call(self, path: str, module: torch.nn.Module) -> None:
        """The arguments of the module's first call, for its probe (global hooks see no keywords)."""

        def keep(module, args, kwargs):
            handle.remove()
            self.first_calls.setdefault(path, (module, _detached(args), _detached(kwargs)))

        handle = module.register_forward_pre_hook(keep, with_kwargs=True)

    def pre_forward(self, module, args) -> None:
        if not self.stack:
            if id(module) not in self.names:
                self._register_root(module)
            self.totals["root calls"] += 1
            if self.totals["root calls"] > self.limits.get("root calls", float("inf")):
                raise TraceComplete("more calls of the model than the original made")
            self.root_call = self.places.caller()
        self.stack.append(module)

    def post_forward(self, module, args, output) -> None:
        self.stack.pop()
        path = self.names.get(id(module)) or f"<unnamed {type(module).__name__}>"
        index = self._index(f"forward {path}")
        tensors = output_tensors(output)
        if CONTROLS.fp8 or any(t.dtype in (torch.float16, torch.bfloat16) for t in tensors):
            self.low_precision = True
        if tensors:
            own = _own_parameter(module)
            self.add(
                {
                    "kind": "forward",
                    "module": path,
                    "call": index,
                    "device": device_type(own) if own is not None else None,
                    "parameters": str(own.dtype).removeprefix("torch.") if own is not None else None,
                    "fp8": bool(CONTROLS.fp8),
                    "tensors": [tensor_summary(t) for t in tensors],
                }
            )

    def module_built(self, module: torch.nn.Module) -> None:
        """Where the module was constructed: the innermost line of the tree outside its own ``__init__``."""
        module.__dict__["_cuda2npu_built"] = self.places.caller(skip_self=module)

    def device_place(self) -> str | None:
        """For an error where devices mix: where the model was built when all its parameters are on
        the CPU (a model left there), else where the module being called with parameters on the CPU
        was built, else where the model was called (an input left there)."""
        if self.stack and all(p.device.type == "cpu" for p in self.stack[0].parameters()):
            return self.stack[0].__dict__.get("_cuda2npu_built") or self.root_call
        for module in self.stack:
            own = _own_parameter(module)
            if own is not None and own.device.type == "cpu":
                return module.__dict__.get("_cuda2npu_built")
        return self.root_call

    # -- losses, kernels ------------------------------------------------------------------------

    def backward(self, tensor: torch.Tensor) -> None:
        self.totals["backward"] += 1
        if self.totals["backward"] > self.limits.get("backward", float("inf")):
            raise TraceComplete("more backward passes than the original made")
        self._index("backward")
        if tensor.numel() != 1:
            return
        site = self.places.caller()
        scale = loss_scale_of(tensor)
        index = self._index("loss")
        loss = tensor.detach().double() / scale if scale else tensor
        self.add({"kind": "loss", "module": "", "call": index, "site": site, "tensors": [tensor_summary(loss)]})
        if scale:
            self.add({"kind": "scale", "module": "", "call": index, "site": site, "value": scale})

    def autocast(self, device_type: str, dtype, enabled: bool) -> None:
        """Where the script enters autocast, and how (the place a precision divergence points to)."""
        self.add(
            {
                "kind": "autocast",
                "module": "",
                "call": self._index("autocast"),
                "dtype": str(dtype).removeprefix("torch.") if dtype is not None else None,
                "enabled": bool(enabled),
                "site": self.places.caller(),
            }
        )
        if enabled and (dtype is None or dtype in (torch.float16, torch.bfloat16)):
            self.low_precision = True

    def kernel(self, op: str, drop: float, scale: float) -> None:
        index = self._index("kernel")
        self.add(
            {
                "kind": "kernel",
                "module": "",
                "call": index,
                "op": op,
                "drop": drop,
                "scale": scale,
                "site": self.places.caller(),
            }
        )

    # -- optimizers -----------------------------------------------------------------------------

    def optimizer_built(self, optimizer) -> None:
        self.optimizers.append(optimizer_record(optimizer, self.places.caller()))

    def _named_parameters(self, optimizer) -> list[tuple[str, torch.Tensor]]:
        found = []
        for group_index, group in enumerate(optimizer.param_groups):
            for index, parameter in enumerate(group["params"]):
                found.append((self.param_names.get(id(parameter), f"<group {group_index} param {index}>"), parameter))
        return found

    def _optimizer_index(self, optimizer) -> int:
        return next((i for i, record in enumerate(self.optimizers) if record["object"] is optimizer), 0)

    def pre_step(self, optimizer, args, kwargs) -> None:
        self.before = {}
        number = self._optimizer_index(optimizer)
        for name, parameter in self._named_parameters(optimizer):
            self.before[id(parameter)] = parameter.detach().clone()
            if parameter.grad is not None:
                self.add(
                    {
                        "kind": "grad",
                        "module": name,
                        "call": 0,
                        "optimizer": number,
                        "tensors": [tensor_summary(parameter.grad)],
                    }
                )

    def post_step(self, optimizer, args, kwargs) -> None:
        self.add({"kind": "step", "module": "", "call": self._index("optimizer step"), "site": self.places.caller()})
        number = self._optimizer_index(optimizer)
        for name, parameter in self._named_parameters(optimizer):
            before = self.before.get(id(parameter))
            if before is not None:
                update = parameter.detach().double() - before.double()
                self.add(
                    {
                        "kind": "update",
                        "module": name,
                        "call": 0,
                        "optimizer": number,
                        "tensors": [tensor_summary(update)],
                    }
                )
            self.add(
                {
                    "kind": "param",
                    "module": name,
                    "call": 0,
                    "optimizer": number,
                    "tensors": [tensor_summary(parameter)],
                }
            )
        self.before = {}
        self.step += 1
        if self.step >= self.steps:
            raise TraceComplete("steps reached")

    # -- installation ---------------------------------------------------------------------------

    def install(self) -> None:
        """Register the hooks and wrap what has no hook (backward, the scalers, constructors, SDPA)."""
        from torch.nn.modules import module as modules
        from torch.optim import optimizer as optimizers

        self.handles = [
            modules.register_module_forward_pre_hook(self.pre_forward),
            modules.register_module_forward_hook(self.post_forward),
            optimizers.register_optimizer_step_pre_hook(self.pre_step),
            optimizers.register_optimizer_step_post_hook(self.post_step),
        ]
        CONTROLS.observer = self.kernel
        recorder = self

        original_backward = torch.Tensor.backward

        def backward(tensor, *args, **kwargs):
            if recorder.in_backward:  # a TorchFunctionMode (the CUDA emulation) calls it once more
                return original_backward(tensor, *args, **kwargs)
            recorder.backward(tensor)
            recorder.in_backward = True
            try:
                return original_backward(tensor, *args, **kwargs)
            finally:
                recorder.in_backward = False

        original_scale = torch.amp.grad_scaler.GradScaler.scale

        def scale(scaler, outputs):
            scaled = original_scale(scaler, outputs)
            if isinstance(scaled, torch.Tensor) and scaler.is_enabled():
                mark_loss_scale(scaled, scaler.get_scale())
            return scaled

        original_module_init = torch.nn.Module.__init__

        def module_init(module, *args, **kwargs):
            original_module_init(module, *args, **kwargs)
            recorder.module_built(module)

        original_autocast_init = torch.amp.autocast_mode.autocast.__init__

        def autocast_init(context, device_type, dtype=None, enabled=True, cache_enabled=None):
            recorder.autocast(device_type, dtype, enabled)
            original_autocast_init(context, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

        replacements = [
            (torch.Tensor, "backward", backward),
            (torch.amp.grad_scaler.GradScaler, "scale", scale),
            (torch.nn.Module, "__init__", module_init),
            (
                torch.nn.functional,
                "scaled_dot_product_attention",
                observed_sdpa(torch.nn.functional.scaled_dot_product_attention),
            ),
            (torch.amp.autocast_mode.autocast, "__init__", autocast_init),
        ]
        for owner, name, replacement in replacements:
            self.restore.append((owner, name, owner.__dict__.get(name)))
            setattr(owner, name, replacement)
        self.stop_capture = capture_optimizers(self.optimizer_built)

    def uninstall(self) -> None:
        """Stop recording: remove the hooks and put back what :meth:`install` wrapped."""
        self.stop_capture()
        for handle in self.handles:
            handle.remove()
        CONTROLS.observer = None
        for owner, name, original in reversed(self.restore):
            if original is None:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        self.handles, self.restore = [], []

    # -- the trace ------------------------------------------------------------------------------

    def trace(self) -> dict:
        return {
            "steps": self.step,
            "events": self.events,
            "dropped": self.dropped,
            "modules": self.modules,
            "counts": {step: dict(counts) for step, counts in self.counts.items()},
            "totals": dict(self.totals),
            "optimizers": [{k: v for k, v in o.items() if k in ("class", "built")} for o in self.optimizers],
            "low_precision": self.low_precision,
        }


def _detached(value):
    """Tensors (nested in tuples, lists, dicts) detached and cloned; other values as they are."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _detached(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_detached(v) for v in value)
    return value
