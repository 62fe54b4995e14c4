"""Reference softmax attention over an explicit keep-mask, in float32.

Shared by the flash-attn stand-in and the Transformer Engine ``DotProductAttention``
stand-in: each builds its own mask (bottom-right causal, top-left causal, windows, padding)
and calls :func:`masked_attention`. The math is the textbook one that flash-attn's kernels
compute (``Dao-AILab/flash-attention`` ``csrc/flash_attn/src/softmax.h`` / ``mask.h``):

    S = softmax_scale * Q K^T            (per head; GQA maps query head i to kv head
                                          i // (nheads_q // nheads_kv))
    S = softcap * tanh(S / softcap)      (only when softcap > 0)
    S = S + bias                         (ALiBi or an additive bias, after scaling)
    P = softmax(S over the kept keys);   a row with no kept key gives P = 0, so output 0
    O = dropout(P) V                     (inverted dropout, 1 / (1 - p) scaling)

Everything is computed in float32 and the output is cast back to the query dtype; the
function is built from differentiable torch ops, so autograd gives the backward pass.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import torch


class AttentionResult(NamedTuple):
    """Output and the statistics flash-attn can return with ``return_attn_probs=True``."""

    out: torch.Tensor  # (batch, seqlen_q, nheads, headdim_v), query dtype
    lse: torch.Tensor  # (batch, nheads, seqlen_q) float32; +inf for rows with no kept key
    probs: torch.Tensor  # (batch, nheads, seqlen_q, seqlen_k) float32 softmax, before dropout
    dropped: Optional[torch.Tensor]  # bool, same shape as probs, True where dropout zeroed P


def masked_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    keep: Optional[torch.Tensor],
    *,
    softmax_scale: float,
    bias: Optional[torch.Tensor] = None,
    softcap: float = 0.0,
    dropout_p: float = 0.0,
) -> AttentionResult:
    """Attention for ``q`` (b, sq, hq, d), ``k`` (b, sk, hk, d), ``v`` (b, sk, hk, dv).

    ``keep`` is a bool tensor broadcastable to (b, hq, sq, sk), True where query i may attend
    to key j (None keeps everything). ``bias`` is a float tensor broadcastable to the same
    shape, added to the scaled (and soft-capped) scores.
    """
    nheads, nheads_kv = q.shape[2], k.shape[2]
    if nheads % nheads_kv != 0:
        raise RuntimeError("Number of heads in key/value must divide number of heads in query")
    group = nheads // nheads_kv
    qf = q.float().transpose(1, 2)
    kf = k.float().transpose(1, 2).repeat_interleave(group, dim=1)
    vf = v.float().transpose(1, 2).repeat_interleave(group, dim=1)
    scores = torch.matmul(qf, kf.transpose(-1, -2)) * softmax_scale
    if softcap > 0.0:
        scores = softcap * torch.tanh(scores / softcap)
    if bias is not None:
        scores = scores + bias.float()
    if keep is None:
        lse = torch.logsumexp(scores, dim=-1)
        probs = torch.softmax(scores, dim=-1)
    else:
        keep = keep.expand(scores.shape)
        row_has_key = keep.any(dim=-1, keepdim=True)
        masked = scores.masked_fill(~keep, float("-inf"))
        lse = torch.logsumexp(masked, dim=-1).masked_fill(~row_has_key.squeeze(-1), float("inf"))
        # Fully masked rows would give softmax(-inf, ..., -inf) = NaN (also in the backward
        # pass); give them finite scores and zero their probabilities instead.
        probs = torch.softmax(torch.where(row_has_key, masked, torch.zeros_like(masked)), dim=-1)
        probs = probs * row_has_key
    dropped = None
    weights = probs
    if dropout_p > 0.0:
        dropped = torch.rand_like(probs) < dropout_p
        weights = probs.masked_fill(dropped, 0.0) / (1.0 - dropout_p)
    out = torch.matmul(weights, vf).transpose(1, 2).to(q.dtype)
    return AttentionResult(out, lse, probs, dropped)
