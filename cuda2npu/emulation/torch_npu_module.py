"""The importable fake ``torch_npu`` package (docs/reference/torch_npu.md §0, §2, §3, §4).

``build_modules()`` returns the ``sys.modules`` entries: ``torch_npu`` with the emulated fused
ops, ``torch_npu.npu`` (the same module object as ``torch.npu``), ``torch_npu.npu.amp``,
``torch_npu.optim`` and ``torch_npu.contrib``. Like the real op-plugin ops (which TORCH_CHECK
"only npu tensor is supported"), the ops accept only tensors on the npu device.
Anything else under ``torch_npu`` is reported as not emulated: attribute access raises
``AttributeError`` and importing a submodule raises ``ModuleNotFoundError``, each saying so.
"""

from __future__ import annotations

import functools
import importlib.abc
import types

import torch

from cuda2npu.emulation import npu_amp, npu_attention, npu_device, npu_ops, npu_optim

__all__ = ["EMULATED_OPS", "MARKER", "NotEmulatedFinder", "build_modules"]

MARKER = "__cuda2npu_emulated__"

EMULATED_OPS = {
    "npu_fusion_attention": npu_attention.npu_fusion_attention,
    "npu_rms_norm": npu_ops.npu_rms_norm,
    "npu_add_rms_norm": npu_ops.npu_add_rms_norm,
    "npu_rotary_mul": npu_ops.npu_rotary_mul,
    "npu_swiglu": npu_ops.npu_swiglu,
    "npu_geglu": npu_ops.npu_geglu,
    "npu_gelu": npu_ops.npu_gelu,
    "npu_fast_gelu": npu_ops.npu_fast_gelu,
    "fast_gelu": npu_ops.fast_gelu,
    "npu_linear": npu_ops.npu_linear,
    "npu_scaled_masked_softmax": npu_ops.npu_scaled_masked_softmax,
    "npu_confusion_transpose": npu_ops.npu_confusion_transpose,
}


def _npu_only(name: str, fn):
    """Wrap a reference op with the real op's device check on every tensor argument.

    A fused op is one kernel: autocast neither casts its inputs nor the aten ops the reference is
    written with, hence autocast is off inside. INFERRED: torch_npu's autocast lists
    (torch_npu/csrc/aten/AutoCastOps.cpp) name aten ops; whether any ``npu_*`` fused op is cast is
    UNVERIFIED, so the emulator runs them in their inputs' dtype.
    """

    @functools.wraps(fn)
    def op(*args, **kwargs):
        for value in (*args, *kwargs.values()):
            if isinstance(value, torch.Tensor) and value.device.type != "npu":
                raise RuntimeError(f"{name}: only npu tensor is supported, got a tensor on {value.device}")
        with torch.autocast("npu", enabled=False):
            return fn(*args, **kwargs)

    return op


def _not_emulated(module_name: str):
    def __getattr__(attr: str):
        raise AttributeError(f"{module_name}.{attr} is not provided by the cuda2npu npu emulator")

    return __getattr__


def _module(name: str, doc: str, attrs: dict) -> types.ModuleType:
    module = types.ModuleType(name, doc)
    module.__path__ = []  # a package: imports of submodules reach NotEmulatedFinder
    module.__dict__.update(attrs)
    module.__getattr__ = _not_emulated(name)
    setattr(module, MARKER, True)
    return module


def build_modules() -> dict[str, types.ModuleType]:
    """The ``sys.modules`` entries of the fake package (``torch_npu.npu`` is ``torch.npu``)."""
    optim = _module(
        "torch_npu.optim",
        "Emulated torch_npu.optim (cuda2npu).",
        {name: getattr(npu_optim, name) for name in npu_optim.__all__},
    )
    contrib = _module("torch_npu.contrib", "Emulated torch_npu.contrib: nothing in it is emulated.", {})
    ops = {name: _npu_only(name, fn) for name, fn in EMULATED_OPS.items()}
    package = _module(
        "torch_npu",
        "Fake torch_npu installed by cuda2npu.emulation.emulate_npu (CPU emulation).",
        {
            **ops,
            "npu": npu_device,
            "optim": optim,
            "contrib": contrib,
            "__version__": torch.__version__.split("+")[0] + "+cuda2npu.emulated",
            "__all__": sorted(ops),
        },
    )
    return {
        "torch_npu": package,
        "torch_npu.npu": npu_device,
        "torch_npu.npu.amp": npu_amp,
        "torch_npu.optim": optim,
        "torch_npu.contrib": contrib,
    }


class NotEmulatedFinder(importlib.abc.MetaPathFinder):
    """Turns ``import torch_npu.<anything not emulated>`` into a clear ModuleNotFoundError."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith("torch_npu."):
            raise ModuleNotFoundError(f"{fullname} is not provided by the cuda2npu npu emulator", name=fullname)
        return None
