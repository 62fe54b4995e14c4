"""CPU stand-in for ``xformers.ops.fmha.memory_efficient_attention`` (``facebookresearch/xformers``
``xformers/ops/fmha/__init__.py`` and ``common.py`` ``Inputs``, v0.0.35; docs/reference/xformers.md):

* ``query`` ``[B, Mq, H, K]``, ``key`` ``[B, Mkv, H, K]``, ``value`` ``[B, Mkv, H, Kv]``; 3-D
  ``[B, M, K]`` is H = 1 (its tensor bias ``[B, Mq, Mkv]``), 5-D ``[B, M, G, H, K]`` is G·H heads;
  all three must have the same rank, and no broadcasting over heads (xFormers raises too).
* ``scale`` defaults to ``K ** -0.5``; scores are ``q kᵀ · scale + bias``; ``p`` is the dropout
  probability on the attention probabilities (``1 / (1 - p)`` scaling), applied whenever p > 0.
* ``attn_bias``: None, a tensor (added; xFormers wants ``[B, H, Mq, Mkv]`` for 4-D inputs, any
  broadcastable shape is accepted here), ``LowerTriangularMask`` (top-left causal),
  ``LowerTriangularFromBottomRightMask`` (bottom-right), ``LowerTriangularMaskWithTensorBias``.
  Other bias classes are not emulated.
* ``op`` only selects xFormers' kernel and is ignored; ``output_dtype`` casts the output.

Computation is float32 (:func:`masked_attention`, shared with the flash-attn stand-in) with
autocast off; the output has the query's dtype. A query row that sees no key (bottom-right causal
with Mq > Mkv) gives 0 here; what xFormers' kernels give there is UNVERIFIED.
"""

from __future__ import annotations

from typing import Optional, Union

import torch

from cuda2npu.emulation.controls import attention_called, drop_probability
from cuda2npu.emulation.standins.flash_attn._masked_attention import masked_attention

from . import attn_bias
from .attn_bias import (
    AttentionBias,
    LowerTriangularFromBottomRightMask,
    LowerTriangularMask,
    LowerTriangularMaskWithTensorBias,
)

__all__ = ["AttentionBias", "LowerTriangularMask", "attn_bias", "memory_efficient_attention"]


def _to_bmhk(x: torch.Tensor) -> torch.Tensor:
    if x.dim() == 3:
        return x.unsqueeze(2)
    if x.dim() == 5:
        return x.flatten(2, 3)
    return x


def _keep(bias, seqlen_q: int, seqlen_k: int, device) -> Optional[torch.Tensor]:
    """True where a query may see a key, for the causal bias classes (None: no mask)."""
    if isinstance(bias, LowerTriangularFromBottomRightMask):
        shift = seqlen_k - seqlen_q
    elif isinstance(bias, LowerTriangularMask):
        shift = 0
    else:
        return None
    rows = torch.arange(seqlen_q, device=device).unsqueeze(1)
    cols = torch.arange(seqlen_k, device=device).unsqueeze(0)
    return cols <= rows + shift


def _additive(bias, query: torch.Tensor) -> Optional[torch.Tensor]:
    """The additive tensor of a bias, broadcastable to [B, heads, Mq, Mkv]."""
    tensor = bias._bias if isinstance(bias, LowerTriangularMaskWithTensorBias) else bias
    if not isinstance(tensor, torch.Tensor):
        return None
    if query.dim() == 3:
        return tensor.unsqueeze(1)
    if query.dim() == 5:
        return tensor.flatten(1, 2) if tensor.dim() == 5 else tensor
    return tensor


def memory_efficient_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_bias: Optional[Union[torch.Tensor, AttentionBias]] = None,
    p: float = 0.0,
    scale: Optional[float] = None,
    *,
    op=None,
    output_dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    if query.dim() not in (3, 4, 5) or key.dim() != query.dim() or value.dim() != query.dim():
        raise ValueError("Query/Key/Value should all have BMGHK, BMHK or BMK shape.")
    if query.dim() > 3 and query.shape[2:-1] != key.shape[2:-1]:
        raise ValueError("Incompatible shapes for attention inputs (xFormers does not broadcast heads)")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"Invalid dropout probability: p={p}")
    known = (type(None), torch.Tensor, LowerTriangularMask, LowerTriangularFromBottomRightMask)
    if not isinstance(attn_bias, known):
        raise NotImplementedError(f"the xformers stand-in does not emulate attn_bias={type(attn_bias).__name__}")
    if query.dim() == 3 and isinstance(
        attn_bias, (LowerTriangularFromBottomRightMask, LowerTriangularMaskWithTensorBias)
    ):
        raise ValueError("Please provide inputs in BMHK format rather than BMK when using this bias type")
    softmax_scale = query.shape[-1] ** -0.5 if scale is None else scale
    attention_called("xformers", p, softmax_scale)
    q, k, v = _to_bmhk(query), _to_bmhk(key), _to_bmhk(value)
    with torch.autocast(q.device.type, enabled=False):
        result = masked_attention(
            q,
            k,
            v,
            _keep(attn_bias, q.shape[1], k.shape[1], q.device),
            softmax_scale=softmax_scale,
            bias=_additive(attn_bias, query),
            dropout_p=drop_probability(p),
        )
    out = result.out.reshape(*query.shape[:-1], value.shape[-1])
    return out if output_dtype is None else out.to(output_dtype)
