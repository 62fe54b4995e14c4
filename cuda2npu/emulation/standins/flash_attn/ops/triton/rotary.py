"""``flash_attn.ops.triton.rotary`` stand-in: ``apply_rotary`` with flash-attn's argument order.

``conjugate=True`` rotates by the opposite angle (the backward pass): ``sin`` negated. The math
is :func:`flash_attn.layers.rotary.apply_rotary_emb`'s (see that stand-in).
"""

from __future__ import annotations

from ...layers.rotary import apply_rotary_emb


def apply_rotary(
    x, cos, sin, seqlen_offsets=0, cu_seqlens=None, max_seqlen=None, interleaved=False, inplace=False, conjugate=False
):
    return apply_rotary_emb(
        x,
        cos,
        -sin if conjugate else sin,
        interleaved=interleaved,
        inplace=inplace,
        seqlen_offsets=seqlen_offsets,
        cu_seqlens=cu_seqlens,
        max_seqlen=max_seqlen,
    )
