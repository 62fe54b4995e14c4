"""``flash_attn.ops.triton.layer_norm`` stand-in: ``rms_norm_fn`` without its fused extras.

``rms_norm_fn(x, weight, bias, residual=None, ..., eps=1e-6, ...)`` is RMSNorm over the last
dimension plus ``bias``, in float32, returned in x's dtype; a residual, a second input, dropout,
row scaling or ``prenorm`` raise NotImplementedError.
"""

from __future__ import annotations

from ..rms_norm import rms_norm


def rms_norm_fn(
    x,
    weight,
    bias,
    residual=None,
    x1=None,
    weight1=None,
    bias1=None,
    eps=1e-6,
    dropout_p=0.0,
    rowscale=None,
    prenorm=False,
    residual_in_fp32=False,
    return_dropout_mask=False,
):
    if (
        any(v is not None for v in (residual, x1, weight1, bias1, rowscale))
        or dropout_p
        or prenorm
        or return_dropout_mask
    ):
        raise NotImplementedError("rms_norm_fn stand-in: fused residual, dropout, second input or prenorm")
    out = rms_norm(x, weight, eps)
    return out if bias is None else (out.float() + bias.float()).to(x.dtype)
