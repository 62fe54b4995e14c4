"""Process-wide switches that the validation sets on the emulated attention kernels.

``cuda2npu validate --run`` compares two runs of a training script. Its exact comparison
(docs/validation.md) needs both sides at float32 with no dropout, and its symbolic check of the
dropout and scale arguments needs to see each attention kernel call. The emulated kernels (the
flash-attn and TransformerEngine stand-ins of the original side, ``npu_fusion_attention`` of the
migrated side) read these switches; nothing else does, and their defaults leave the kernels as
documented.

* ``CONTROLS.dropout``: False draws no dropout mask (``dropout_p`` 0, ``keep_prob`` 1).
* ``CONTROLS.half_only``: False lets kernels documented as float16/bfloat16-only (flash-attn)
  compute in float32 too.
* ``CONTROLS.observer``: called once per kernel call as ``observer(kernel, drop, scale)`` with
  the drop probability and the softmax scale the call asked for (before the switches above).
* ``CONTROLS.fp8``: above 0 while the program is in a TransformerEngine FP8 region (the stand-in
  computes in high precision; the validation still needs to know what the program asked for).

The CUDA emulation marks every tensor the program moved to (or created on) a CUDA device with
:func:`mark_emulated_cuda`: its tensors live on the CPU, and the recorder still needs to know
which parameters the program put on the device (:func:`device_type`).

A loss scaler marks the tensor it returns with :func:`mark_loss_scale` (apex's ``scale_loss``
stand-in; the validation's recorder does it for ``GradScaler.scale``), so that the loss a script
calls ``backward()`` on can be recorded unscaled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = [
    "observed_sdpa",
    "CONTROLS",
    "KernelControls",
    "attention_called",
    "drop_probability",
    "device_type",
    "loss_scale_of",
    "mark_emulated_cuda",
    "mark_loss_scale",
]

LOSS_SCALE = "_cuda2npu_loss_scale"
EMULATED_CUDA = "_cuda2npu_emulated_cuda"


@dataclass
class KernelControls:
    dropout: bool = True
    half_only: bool = True
    observer: Callable[[str, float, float], None] | None = None
    fp8: int = 0  # how many FP8 regions (TransformerEngine's fp8_autocast) the program is in


CONTROLS = KernelControls()


def attention_called(kernel: str, drop: float, scale: float) -> None:
    """Tell the observer (if any) that ``kernel`` ran with this drop probability and scale."""
    if CONTROLS.observer is not None:
        CONTROLS.observer(kernel, float(drop), float(scale))


def drop_probability(p: float) -> float:
    """The drop probability a kernel applies: ``p``, or 0 while dropout is switched off."""
    return p if CONTROLS.dropout else 0.0


def mark_loss_scale(tensor, scale: float):
    """Mark ``tensor`` as a loss multiplied by ``scale``; return it."""
    setattr(tensor, LOSS_SCALE, float(scale))
    return tensor


def loss_scale_of(tensor) -> float | None:
    """The scale :func:`mark_loss_scale` put on ``tensor``, else None."""
    return getattr(tensor, LOSS_SCALE, None)


def mark_emulated_cuda(value):
    """Mark a tensor the program put on the emulated CUDA device; return it (other values as they are)."""
    if hasattr(value, "device"):
        setattr(value, EMULATED_CUDA, True)
    return value


def device_type(tensor) -> str:
    """The tensor's device type as the program sees it: "cuda" for one on the emulated CUDA device."""
    return "cuda" if getattr(tensor, EMULATED_CUDA, False) else tensor.device.type


def observed_sdpa(original):
    """``torch.nn.functional.scaled_dot_product_attention`` that reports each call to the observer
    (its drop probability, and its scale with the default ``1/sqrt(d)`` made explicit) and draws no
    dropout while dropout is switched off."""

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kwargs):
        attention_called("scaled_dot_product_attention", dropout_p, query.shape[-1] ** -0.5 if scale is None else scale)
        return original(
            query,
            key,
            value,
            attn_mask=attn_mask,
            dropout_p=drop_probability(dropout_p),
            is_causal=is_causal,
            scale=scale,
            **kwargs,
        )

    return sdpa
