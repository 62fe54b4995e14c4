"""``flash_attn.ops.rms_norm`` stand-in: ``rms_norm(x, weight, epsilon)`` = ``x / sqrt(mean(x**2) + eps) * weight``
over the last dimension, in float32, returned in x's dtype (flash-attn's ``DropoutAddLayerNormFn``
with ``is_rms_norm=True`` and no residual, dropout or bias)."""

from __future__ import annotations

import torch


def rms_norm(x: torch.Tensor, weight: torch.Tensor, epsilon: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + epsilon) * weight.float()).to(x.dtype)
