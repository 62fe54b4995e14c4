"""``flash_attn.layers.rotary`` stand-in (``Dao-AILab/flash-attention`` ``flash_attn/layers/rotary.py``).

``apply_rotary_emb(x, cos, sin, interleaved=False, inplace=False, seqlen_offsets=0,
cu_seqlens=None, max_seqlen=None)``: x is (batch, seqlen, nheads, headdim); cos/sin are
(seqlen_rotary >= seqlen_offsets + seqlen, rotary_dim / 2) and row ``offset + i`` rotates
position ``i``. Only the first ``rotary_dim`` channels rotate, the rest pass through. The math
is flash-attn's own reference ``apply_rotary_emb_torch``: non-interleaved (GPT-NeoX) splits the
rotated channels into halves ``x1, x2`` → ``(x1 cos - x2 sin, x2 cos + x1 sin)``; interleaved
(GPT-J) rotates the pairs ``(x[2k], x[2k+1])``. Computed in float32, returned in x's dtype (the
Triton kernel's precision). ``inplace=True`` writes into x and returns it; ``cu_seqlens``
(packed sequences) and tensor ``seqlen_offsets`` raise NotImplementedError.
"""

from __future__ import annotations

import torch


def rotate_half(x: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    if not interleaved:
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rotary_emb(x, cos, sin, interleaved=False, inplace=False, seqlen_offsets=0, cu_seqlens=None, max_seqlen=None):
    if cu_seqlens is not None or not isinstance(seqlen_offsets, int):
        raise NotImplementedError("apply_rotary_emb stand-in: packed sequences and per-batch offsets")
    seqlen, rotary_dim = x.shape[1], cos.shape[-1] * 2
    assert rotary_dim <= x.shape[-1], "rotary_dim must be <= headdim"
    assert cos.shape[0] >= seqlen_offsets + seqlen, "cos/sin must cover seqlen_offsets + seqlen positions"
    cos = cos[seqlen_offsets : seqlen_offsets + seqlen].float()
    sin = sin[seqlen_offsets : seqlen_offsets + seqlen].float()
    widen = (lambda t: t.repeat_interleave(2, dim=-1)) if interleaved else (lambda t: torch.cat([t, t], dim=-1))
    cos, sin = widen(cos)[:, None], widen(sin)[:, None]  # (seqlen, 1, rotary_dim) broadcasts over heads
    rotated = x[..., :rotary_dim].float()
    out = torch.cat([rotated * cos + rotate_half(rotated, interleaved) * sin, x[..., rotary_dim:].float()], dim=-1)
    out = out.to(x.dtype)
    if inplace:
        x.copy_(out)
        return x
    return out


apply_rotary_emb_func = apply_rotary_emb
