"""One side of a validation run, executed in its own subprocess.

``python -m cuda2npu.validation.side SPEC.json`` imports ``ENTRY = module:function`` from the
given tree, calls it (seeded) to get ``(model, inputs[, optimizer_factory])`` and records, on the
CPU: the state dict, the inputs, the eval-mode outputs, the gradients of a fixed random projection
of the outputs, the parameters after one optimizer step, the optimizer's probe
(:func:`cuda2npu.validation.probes.probe_optimizer`) and (optionally) train-mode output variance
for the dropout check. The migrated side first loads the original's weights and inputs.

Each side runs on its strict host (:mod:`cuda2npu.validation.strict_host`): the original with
real CUDA or the CUDA emulation, the migrated with real torch_npu or the NPU emulation, where
CUDA-only packages cannot be imported. Failures are written as
:func:`cuda2npu.validation.failures.describe` says; exit status 2.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import sys
from pathlib import Path

import torch

from cuda2npu.emulation.controls import CONTROLS, device_type, observed_sdpa
from cuda2npu.validation.failures import NoExampleInputs, describe
from cuda2npu.validation.keys import map_state_dict
from cuda2npu.validation.probes import capture_optimizers, optimizer_record, probe_optimizer
from cuda2npu.validation.recorder import Places
from cuda2npu.validation.strict_host import install_host
from cuda2npu.validation.summaries import output_tensors, tensor_summary

PROJECTION_SEED = 1000


def model_places(model: torch.nn.Module, places) -> dict:
    """Where to look for each compared tensor: the model's class for its outputs, for each parameter's
    gradient and each module's output the class of the innermost module of the tree's own holding it."""
    defined = {name: places.definition(type(module)) for name, module in model.named_modules()}
    output = defined.get("", "") or ""

    def innermost(path: str) -> str:
        while path and not defined.get(path):
            path = path.rpartition(".")[0]
        return defined.get(path) or output

    return {
        "output": output,
        "grad": {name: innermost(name.rpartition(".")[0]) for name, _ in model.named_parameters()},
        "module": {name or "<root>": innermost(name) for name, _ in model.named_modules()},
    }


class ModuleOutputs:
    """The floating outputs of every module call of one forward, in call order (module path, summaries):
    where the two sides first part, in the forward's order."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.names = {id(module): name or "<root>" for name, module in model.named_modules()}
        self.calls: list[tuple[str, list[dict]]] = []

    def __enter__(self) -> ModuleOutputs:
        self.handle = torch.nn.modules.module.register_module_forward_hook(self.record)
        return self

    def __exit__(self, *exc) -> None:
        self.handle.remove()

    def record(self, module, args, output) -> None:
        path = self.names.get(id(module))
        tensors = output_tensors(output)
        if path is not None and tensors:
            self.calls.append((path, [tensor_summary(t.float()) for t in tensors]))


def _unpack(built):
    if not isinstance(built, tuple) or len(built) not in (2, 3):
        raise TypeError("the entry must return (model, inputs) or (model, inputs, optimizer_factory)")
    model, inputs = built[0], built[1]
    factory = built[2] if len(built) == 3 else None
    if not isinstance(inputs, (tuple, list, dict)):
        inputs = (inputs,)
    return model, inputs, factory


def _build(target):
    """Call an entry function, or build an ``nn.Module`` class with no arguments.

    A class must provide its inputs through an ``example_inputs()`` method (or attribute).
    """
    if isinstance(target, type) and issubclass(target, torch.nn.Module):
        model = target()
        example = getattr(model, "example_inputs", None)
        if example is None:
            raise NoExampleInputs(f"{target.__name__} has no example_inputs(); add a validate entry for it")
        return model, example() if callable(example) else example
    return target()


def _call(model, inputs):
    return model(**inputs) if isinstance(inputs, dict) else model(*inputs)


def _tensors(value) -> list[torch.Tensor]:
    """Tensors of a (nested) output, in a stable order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for key in sorted(value) for t in _tensors(value[key])]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    return []


def _projection(outputs: list[torch.Tensor]) -> torch.Tensor:
    """A scalar that depends on every output element, with weights identical on both sides."""
    total = None
    for index, out in enumerate(t for t in outputs if t.is_floating_point()):
        generator = torch.Generator().manual_seed(PROJECTION_SEED + index)
        weight = torch.randn(out.shape, generator=generator, dtype=torch.float32).to(out.device)
        term = (out.float() * weight).sum()
        total = term if total is None else total + term
    if total is None:
        raise ValueError("the model returned no floating-point tensor to compare")
    return total


def _cpu(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    if isinstance(value, dict):
        return {k: _cpu(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_cpu(v) for v in value)
    return value


def _place_like(reference, target):
    """The original's inputs on the migrated side's device and dtype."""
    if isinstance(reference, torch.Tensor) and isinstance(target, torch.Tensor):
        return reference.to(device=target.device, dtype=target.dtype)
    if isinstance(reference, dict):
        return {k: _place_like(v, target[k]) for k, v in reference.items()}
    if isinstance(reference, (tuple, list)):
        return type(reference)(_place_like(r, t) for r, t in zip(reference, target))
    return target


def _dropout_variance(model, inputs, runs: int) -> float:
    """Mean per-element variance of the train-mode outputs over repeated runs."""
    model.train()
    with torch.no_grad():
        samples = torch.stack([_tensors(_call(model, inputs))[0].detach().float().cpu() for _ in range(runs)])
    model.eval()
    return float(samples.var(dim=0).mean())


def _autocast(precision: str | None):
    """The original at another precision (bound calibration): its forward under CUDA autocast,
    which the CUDA emulation maps to CPU autocast."""
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    return torch.autocast("cuda", dtype=dtype) if dtype is not None else contextlib.nullcontext()


def run_side(spec: dict) -> dict:
    role, exchange = spec["role"], Path(spec["exchange"])
    sys.path.insert(0, spec["tree"])
    backend = install_host(role, Path(spec["tree"]), spec.get("autoload", False))
    module_name, _, function_name = spec["entry"].partition(":")
    # one intra-op thread on every side: a process forked from the fork server may get another thread
    # count than its twin, and CPU reductions then round differently (a 1e-5 mismatch under load)
    torch.set_num_threads(1)
    torch.manual_seed(spec["seed"])
    module = importlib.import_module(module_name)
    if not hasattr(module, function_name):
        raise LookupError(f"{module_name} has no function {function_name!r}")
    model, inputs, factory = _unpack(_build(getattr(module, function_name)))
    mapping: dict = {}
    if role == "migrated":
        reference = torch.load(exchange / "original.pt", weights_only=False)
        state, mapping = map_state_dict(reference["state_dict"], model.state_dict())
        model.load_state_dict(state)
        inputs = _place_like(reference["inputs"], inputs)
    first = next(model.parameters(), None)
    record = {
        "backend": backend,
        "key_mapping": mapping,
        "state_dict": _cpu(model.state_dict()),
        "inputs": _cpu(inputs),
        "device": device_type(first) if first is not None else None,
    }
    model.eval()
    places = Places(Path(spec["tree"]))
    try:
        with _autocast(spec.get("autocast")), ModuleOutputs(model) as forward:
            outputs = _tensors(_call(model, inputs))
    except RuntimeError as exc:
        if "same device" in str(exc):  # the entry put the model or its inputs there: look at it first
            exc.cuda2npu_place = places.entry(getattr(module, function_name))
        raise
    record["outputs"] = [_cpu(o) for o in outputs]
    record["module_outputs"] = forward.calls
    _projection(outputs).backward()
    record["grads"] = {n: _cpu(p.grad) for n, p in model.named_parameters() if p.grad is not None}
    record["places"] = {**model_places(model, places), "device": places.entry(getattr(module, function_name))}
    if factory is not None:
        built: list = []
        stop = capture_optimizers(lambda optimizer: built.append(optimizer_record(optimizer, places.caller())))
        optimizer = factory(model)
        stop()
        optimizer.step()
        record["params_after_step"] = {n: _cpu(p) for n, p in model.named_parameters()}
        if built:  # one step from these weights hides betas, eps...: the probe's three steps show them
            record["optimizer_probe"] = probe_optimizer(0, built[-1])
            record["places"].update(
                {"after step": built[-1]["built"] or "", "optimizer probe": built[-1]["built"] or ""}
            )
    if spec.get("dropout_runs"):
        record["dropout_variance"] = _dropout_variance(model, inputs, spec["dropout_runs"])
    record["attention_calls"] = _attention_calls(model, inputs, places)
    return record


def _attention_calls(model, inputs, places) -> list[dict]:
    """The attention kernels a train-mode forward calls, with their drop probability and scale (the
    eval-mode comparison cannot see a ``keep_prob`` that is not ``1 - dropout_p``); no dropout is drawn."""
    calls: list[dict] = []
    functional = torch.nn.functional
    original = functional.scaled_dot_product_attention
    CONTROLS.observer = lambda op, drop, scale: calls.append(
        {"op": op, "drop": drop, "scale": scale, "site": places.caller() or ""}
    )
    CONTROLS.dropout = False
    functional.scaled_dot_product_attention = observed_sdpa(original)
    model.train()
    try:
        with torch.no_grad():
            _call(model, inputs)
    finally:
        functional.scaled_dot_product_attention = original
        CONTROLS.observer, CONTROLS.dropout = None, True
        model.eval()
    return calls


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[1]).read_text())
    exchange = Path(spec["exchange"])
    name = spec.get("record", spec["role"])
    try:
        record = run_side(spec)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, never raised
        error = describe(exc, spec["role"], Path(spec["tree"]))
        (exchange / f"{name}.error.json").write_text(json.dumps(error))
        return 2
    torch.save(record, exchange / f"{name}.pt")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
