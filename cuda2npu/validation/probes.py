"""Probes: each optimizer, normalization and attention module a script built, run once more on
synthetic values where its settings show, whatever the script's schedule and initialisation.

Two steps from random initialisation hide much: a warm-up learning rate of 3e-7 leaves every
update below any tolerance, a softmax over near-zero scores is near-uniform whatever its scale,
and a LayerNorm's eps barely matters on unit-variance inputs. After the script stopped, each side
therefore builds, on its own device and in float32 (autocast off, dropout off):

* for each optimizer, in construction order: a new one of the same class with the same
  constructor arguments and the param groups' hyper-parameters as they were at construction, over
  synthetic parameters, stepped three times with gradients whose magnitudes span 1e-8 to 1 (so
  eps, betas, weight decay, the AdamW mode and the learning rate all move the updates);
* for each module whose class name says normalization or attention (``Norm``, ``Attention``,
  ``Attn``, ``MHA``), by module path: a copy with synthetic parameters (unit-variance projections,
  norms' weights near 1), called with its first recorded call's arguments, floating tensors
  replaced by synthetic ones (for norms at standard deviations 1e-2 and 1, where eps shows).

Synthetic values depend only on a parameter's name and shape, so both sides use the same ones
where the migration kept the names. A probe that cannot run (a class whose constructor needs
more than its recorded arguments, a module that cannot be copied) is reported as not run, with the
reason; it is never a divergence by itself.
"""

from __future__ import annotations

import copy
import zlib
from typing import Callable

import torch

from cuda2npu.validation.summaries import output_tensors, tensor_summary

PROBE_SEED = 20_251
OPTIMIZER_STEPS = 3
PROBE_SAMPLE = 256
MAX_PROBE_ELEMENTS = 1 << 16
# Optimizer probes: parameters this small keep float32 rounding (an ulp of the parameter) far below
# the updates, while weight decay (1e-3 of an update at wd 0.1) still shows.
PARAMETER_SCALE = 1e-2


ARGUMENTS = "_cuda2npu_arguments"


def capture_optimizers(built: Callable[[torch.optim.Optimizer], None]) -> Callable[[], None]:
    """From now on every optimizer keeps its constructor's arguments (its probe builds another like
    it) and is passed to ``built`` once constructed; returns what stops calling ``built``."""
    original_init = torch.optim.Optimizer.__init__

    def new(cls, *args, **kwargs):
        instance = object.__new__(cls)
        instance.__dict__[ARGUMENTS] = (args, kwargs)
        return instance

    def init(optimizer, *args, **kwargs):
        original_init(optimizer, *args, **kwargs)
        built(optimizer)

    # Never undone: once a class has had a __new__, deleting it leaves CPython calling
    # object.__new__ with the constructor's arguments, which it refuses.
    torch.optim.Optimizer.__new__ = new
    torch.optim.Optimizer.__init__ = init

    def stop() -> None:
        torch.optim.Optimizer.__init__ = original_init

    return stop


def optimizer_record(optimizer: torch.optim.Optimizer, built: str | None) -> dict:
    """What a probe needs of an optimizer, taken at construction (a schedule changes the groups later)."""
    return {
        "class": type(optimizer).__name__,
        "built": built,
        "groups": [
            {k: copy.deepcopy(v) for k, v in group.items() if k != "params"} for group in optimizer.param_groups
        ],
        "object": optimizer,
    }


def _generator(name: str) -> torch.Generator:
    return torch.Generator().manual_seed(PROBE_SEED + zlib.crc32(name.encode()))


def _synthetic(name: str, shape, scale: float = 1.0, offset: float = 0.0) -> torch.Tensor:
    return torch.randn(tuple(shape), generator=_generator(name), dtype=torch.float64) * scale + offset


def _device_of(optimizer_record: dict) -> torch.device:
    params = [p for group in optimizer_record["object"].param_groups for p in group["params"]]
    return params[0].device if params else torch.device("cpu")


def probe_optimizer(index: int, record: dict) -> list[dict]:
    """Three steps of a new optimizer like ``record``'s over synthetic parameters: each step's updates."""
    optimizer = record["object"]
    args, kwargs = optimizer.__dict__.get(ARGUMENTS, ((), {}))
    kwargs = {k: v for k, v in kwargs.items() if k != "params"}
    args = args[1:] if args else ()
    device = _device_of(record)
    magnitudes = torch.logspace(-8, 0, 64, dtype=torch.float64)
    groups, params = [], []
    for number, hyper in enumerate(record["groups"]):
        vector = _synthetic(f"opt{index}.g{number}.vector", (64,), PARAMETER_SCALE).float().to(device).requires_grad_()
        matrix = _synthetic(f"opt{index}.g{number}.matrix", (8, 8), PARAMETER_SCALE).float().to(device).requires_grad_()
        groups.append({**hyper, "params": [vector, matrix]})
        params += [vector, matrix]
    probe = type(optimizer)(groups, *args, **kwargs)
    updates = []
    for step in range(OPTIMIZER_STEPS):
        before = [p.detach().clone() for p in params]
        for number, p in enumerate(params):
            grad = _synthetic(f"opt{index}.grad{number}.{step}", p.shape) * magnitudes.repeat(p.numel() // 64 + 1)[
                : p.numel()
            ].reshape(p.shape)
            if p.grad is None:
                p.grad = grad.float().to(device)
            else:  # in place: fused optimizers keep views of the gradients they were given first
                p.grad.copy_(grad)
        probe.step()
        updates += [tensor_summary(p.detach().double() - b.double(), PROBE_SAMPLE) for p, b in zip(params, before)]
    return updates


def _synthetic_parameters(module: torch.nn.Module, prefix: str) -> None:
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            if not parameter.is_floating_point():
                continue
            key = f"{prefix}.{name}"
            if parameter.dim() <= 1:
                norm_weight = name.endswith("weight") and parameter.dim() == 1
                value = _synthetic(key, parameter.shape, 0.1, 1.0 if norm_weight else 0.0)
            else:
                fan_in = parameter[0].numel()
                value = _synthetic(key, parameter.shape, fan_in**-0.5)
            parameter.copy_(value.to(parameter.dtype))


def _replace_floats(value, name: str, scale: float):
    if isinstance(value, torch.Tensor):
        if not value.is_floating_point():
            return value
        return _synthetic(name, value.shape, scale).to(device=value.device, dtype=torch.float32)
    if isinstance(value, dict):
        return {k: _replace_floats(v, f"{name}.{k}", scale) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_replace_floats(v, f"{name}.{i}", scale) for i, v in enumerate(value))
    return value


def _elements(value) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel()
    if isinstance(value, dict):
        return sum(_elements(v) for v in value.values())
    if isinstance(value, (tuple, list)):
        return sum(_elements(v) for v in value)
    return 0


def probe_module(path: str, module: torch.nn.Module, args, kwargs) -> list[dict]:
    """The outputs of a synthetic copy of ``module`` on synthetic inputs shaped like its first call's."""
    if _elements((args, kwargs)) > MAX_PROBE_ELEMENTS:
        raise ValueError(f"its inputs have more than {MAX_PROBE_ELEMENTS} elements")
    clone = copy.deepcopy(module).float().eval()
    _synthetic_parameters(clone, path)
    scales = (1e-2, 1.0) if "Norm" in type(module).__name__ else (1.0,)
    outputs = []
    with torch.no_grad():
        for scale in scales:
            call_args = _replace_floats(args, f"{path}.args", scale)
            call_kwargs = _replace_floats(kwargs, f"{path}.kwargs", scale)
            outputs += [tensor_summary(t, PROBE_SAMPLE) for t in output_tensors(clone(*call_args, **call_kwargs))]
    return outputs


def _parameters_signature(module: torch.nn.Module) -> list:
    return sorted([name, list(p.shape)] for name, p in module.named_parameters())


def run_probes(recorder) -> list[dict]:
    """Every probe of what ``recorder`` saw, each ``{kind, name, where, tensors | error}``."""
    from cuda2npu.emulation.controls import CONTROLS

    CONTROLS.half_only = False
    probes = []
    for index, record in enumerate(recorder.optimizers):
        probe = {"kind": "optimizer", "name": f"optimizer {index}", "class": record["class"], "where": record["built"]}
        probes.append(_attempt(probe, probe_optimizer, index, record))
    for path, (module, args, kwargs) in recorder.first_calls.items():
        info = recorder.modules.get(path, {})
        probe = {
            "kind": "module",
            "name": path,
            "class": type(module).__name__,
            "where": info.get("defined") or info.get("built"),
            "parameters": _parameters_signature(module),
        }
        probes.append(_attempt(probe, probe_module, path, module, args, kwargs))
    return probes


def _attempt(probe: dict, function, *args) -> dict:
    try:
        probe["tensors"] = function(*args)
    except Exception as exc:  # noqa: BLE001 - a probe that cannot run is reported, not raised
        probe["error"] = f"{type(exc).__name__}: {exc}"
    return probe
