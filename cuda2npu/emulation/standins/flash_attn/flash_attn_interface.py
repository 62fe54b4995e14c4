"""CPU stand-in for ``flash_attn.flash_attn_interface`` (FlashAttention 2).

Semantics follow ``Dao-AILab/flash-attention`` ``flash_attn/flash_attn_interface.py``
(docstrings) and ``csrc/flash_attn/flash_api.cpp`` (argument normalisation):

* layouts: ``q`` (batch, seqlen_q, nheads, headdim), ``k``/``v`` (batch, seqlen_k, nheads_k,
  headdim); varlen: ``q`` (total_q, nheads, headdim) cut by ``cu_seqlens_q`` (int32,
  batch + 1 entries), same for ``k``/``v`` with ``cu_seqlens_k``.
* GQA/MQA: ``nheads % nheads_k == 0``; query head ``i`` uses kv head ``i // (nheads // nheads_k)``.
* ``softmax_scale`` defaults to ``headdim ** -0.5``.
* ``causal`` is aligned to the BOTTOM-RIGHT corner (flash-attn >= 2.1): query ``i`` may see
  key ``j`` iff ``j <= i + seqlen_k - seqlen_q``; a query row with no visible key outputs 0.
* ``window_size=(left, right)``: query ``i`` sees keys in
  ``[i + seqlen_k - seqlen_q - left, i + seqlen_k - seqlen_q + right]``. As in flash_api.cpp,
  a side ``>= seqlen_k`` becomes -1; ``causal`` sets ``right = 0``; when exactly one side is
  -1 it is replaced by ``seqlen_k`` (``max_seqlen_k`` for varlen), and ``(-1, -1)`` means no
  window. Varlen masks use each sequence's own lengths.
* ``softcap > 0``: scores become ``softcap * tanh(scores / softcap)``; not allowed with dropout.
* ``alibi_slopes`` (nheads,) or (batch, nheads), float32: adds
  ``-slope * |i + seqlen_k - seqlen_q - j|`` after scaling and soft-capping.
* ``dropout_p``: dropout on the attention probabilities with ``1 / (1 - p)`` scaling. The
  random mask comes from torch's generator, so it never matches the CUDA kernel's Philox
  stream bit for bit; pass 0.0 (as flash-attn asks for evaluation) to compare outputs.
* ``return_attn_probs=True`` returns ``(out, softmax_lse, S_dmask)``: ``softmax_lse`` is the
  exact float32 log-sum-exp of the scaled scores ((batch, nheads, seqlen_q), or
  (nheads, total_q) for varlen; +inf for fully masked rows, as the kernel writes).
  ``S_dmask`` is, like the kernel's, an empty tensor unless ``dropout_p > 0``; then it holds
  the softmax probabilities (before dropout scaling), negated where dropped, zero-padded to
  (batch, nheads, round128(seqlen_q), round128(seqlen_k)). flash-attn marks this output as
  "for testing only"; so is this one.
* ``deterministic`` only selects a CUDA backward kernel; the CPU computation is always
  deterministic.

Inputs must be fp16 or bf16 (the CUDA kernels reject fp32 too); computation runs in float32
with autocast disabled (the kernel is not an autocast op) and the output has the input dtype.
Paged KV (``block_table``) and :func:`flash_attn_with_kvcache` raise NotImplementedError.
"""

from __future__ import annotations

from typing import Optional

import torch

from cuda2npu.emulation.controls import CONTROLS, attention_called, drop_probability

from ._masked_attention import AttentionResult, masked_attention

__all__ = [
    "flash_attn_func",
    "flash_attn_kvpacked_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_kvpacked_func",
    "flash_attn_varlen_qkvpacked_func",
    "flash_attn_with_kvcache",
]


def _check_inputs(q, k, v, softcap, dropout_p, alibi_slopes) -> None:
    if CONTROLS.half_only and q.dtype not in (torch.float16, torch.bfloat16):
        raise RuntimeError("FlashAttention only support fp16 and bf16 data type")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise RuntimeError("query, key and value must have the same dtype")
    if q.shape[-1] > 256:
        raise RuntimeError("FlashAttention forward only supports head dimension at most 256")
    if q.shape[-2] % k.shape[-2] != 0:
        raise RuntimeError("Number of heads in key/value must divide number of heads in query")
    if softcap > 0.0 and dropout_p > 0.0:
        raise RuntimeError("Softcapping does not support dropout for now")
    if alibi_slopes is not None and alibi_slopes.dtype != torch.float32:
        raise RuntimeError("ALiBi slopes must have dtype fp32")


def _normalized_window(window_size, causal, seqlen_q, seqlen_k, has_alibi) -> Optional[tuple[int, int]]:
    """flash_api.cpp ``mha_fwd`` + ``set_params_fprop``: (left, right) or None for no mask."""
    left, right = window_size
    if left >= seqlen_k:
        left = -1
    if right >= seqlen_k:
        right = -1
    if seqlen_q == 1 and not has_alibi:
        causal = False  # "causal=true is the same as causal=false in this case"
    if causal:
        right = 0
    if left < 0 and right < 0:
        return None
    return (seqlen_k if left < 0 else left, seqlen_k if right < 0 else right)


def _keep_mask(seqlen_q: int, seqlen_k: int, window, device) -> Optional[torch.Tensor]:
    if window is None:
        return None
    left, right = window
    rows = torch.arange(seqlen_q, device=device).unsqueeze(1)
    cols = torch.arange(seqlen_k, device=device).unsqueeze(0)
    diagonal = rows + seqlen_k - seqlen_q
    return (cols >= diagonal - left) & (cols <= diagonal + right)


def _alibi_bias(slopes: torch.Tensor, seqlen_q: int, seqlen_k: int) -> torch.Tensor:
    """``-slope * |i + seqlen_k - seqlen_q - j|`` for slopes of shape (b, nheads)."""
    rows = torch.arange(seqlen_q, device=slopes.device).unsqueeze(1)
    cols = torch.arange(seqlen_k, device=slopes.device).unsqueeze(0)
    distance = (rows + seqlen_k - seqlen_q - cols).abs().float()
    return -slopes.float()[:, :, None, None] * distance


def _round128(n: int) -> int:
    return (n + 127) // 128 * 128


def _dmask(result: AttentionResult, seqlen_q: int, seqlen_k: int) -> torch.Tensor:
    probs = result.probs.masked_fill(result.dropped, 0.0) - result.probs.masked_fill(~result.dropped, 0.0)
    return torch.nn.functional.pad(probs, (0, _round128(seqlen_k) - seqlen_k, 0, _round128(seqlen_q) - seqlen_q))


def _batched(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, return_attn_probs):
    _check_inputs(q, k, v, softcap, dropout_p, alibi_slopes)
    batch, seqlen_q, nheads, headdim = q.shape
    seqlen_k = k.shape[1]
    scale = headdim**-0.5 if softmax_scale is None else softmax_scale
    attention_called("flash_attn", dropout_p, scale)
    dropout_p = drop_probability(dropout_p)
    window = _normalized_window(window_size, causal, seqlen_q, seqlen_k, alibi_slopes is not None)
    bias = None
    if alibi_slopes is not None:
        bias = _alibi_bias(alibi_slopes.reshape(-1, nheads), seqlen_q, seqlen_k)
    with torch.autocast(q.device.type, enabled=False):
        result = masked_attention(
            q,
            k,
            v,
            _keep_mask(seqlen_q, seqlen_k, window, q.device),
            softmax_scale=scale,
            bias=bias,
            softcap=softcap,
            dropout_p=dropout_p,
        )
    if not return_attn_probs:
        return result.out
    if dropout_p > 0.0:
        s_dmask = _dmask(result, seqlen_q, seqlen_k).to(q.dtype)
    else:
        s_dmask = torch.empty((0,), dtype=q.dtype, device=q.device)
    return result.out, result.lse, s_dmask


def _varlen(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p,
    softmax_scale,
    causal,
    window_size,
    softcap,
    alibi_slopes,
    return_attn_probs,
    block_table,
):
    if block_table is not None:
        raise NotImplementedError("flash_attn_varlen_func(block_table=...) (paged KV cache) has no CPU stand-in")
    _check_inputs(q, k, v, softcap, dropout_p, alibi_slopes)
    nheads, headdim = q.shape[1], q.shape[2]
    scale = headdim**-0.5 if softmax_scale is None else softmax_scale
    attention_called("flash_attn_varlen", dropout_p, scale)
    dropout_p = drop_probability(dropout_p)
    starts_q, starts_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    batch = len(starts_q) - 1
    window = _normalized_window(window_size, causal, max_seqlen_q, max_seqlen_k, alibi_slopes is not None)
    slopes = None if alibi_slopes is None else alibi_slopes.reshape(-1, nheads).expand(batch, nheads)
    outs, lses, dmasks = [], [], []
    for b in range(batch):
        q_b = q[starts_q[b] : starts_q[b + 1]].unsqueeze(0)
        k_b = k[starts_k[b] : starts_k[b + 1]].unsqueeze(0)
        v_b = v[starts_k[b] : starts_k[b + 1]].unsqueeze(0)
        seqlen_q, seqlen_k = q_b.shape[1], k_b.shape[1]
        bias = None if slopes is None else _alibi_bias(slopes[b : b + 1], seqlen_q, seqlen_k)
        with torch.autocast(q.device.type, enabled=False):
            result = masked_attention(
                q_b,
                k_b,
                v_b,
                _keep_mask(seqlen_q, seqlen_k, window, q.device),
                softmax_scale=scale,
                bias=bias,
                softcap=softcap,
                dropout_p=dropout_p,
            )
        outs.append(result.out[0])
        lses.append(result.lse[0])
        if return_attn_probs and dropout_p > 0.0:
            probs = _dmask(result, seqlen_q, seqlen_k)
            pad = (0, _round128(max_seqlen_k) - probs.shape[-1], 0, _round128(max_seqlen_q) - probs.shape[-2])
            dmasks.append(torch.nn.functional.pad(probs, pad))
    # Rows past cu_seqlens_q[-1] belong to no sequence; the kernel leaves them untouched in
    # an uninitialised buffer, the stand-in returns zeros there.
    tail = q.shape[0] - starts_q[-1]
    out = torch.cat(outs + [q.new_zeros(tail, nheads, v.shape[-1])], dim=0)
    if not return_attn_probs:
        return out
    lse = torch.cat(lses + [q.new_full((nheads, tail), float("inf"), dtype=torch.float32)], dim=1)
    if dropout_p > 0.0:
        s_dmask = torch.cat(dmasks, dim=0).to(q.dtype)
    else:
        s_dmask = torch.empty((0,), dtype=q.dtype, device=q.device)
    return out, lse, s_dmask


def flash_attn_func(
    q,
    k,
    v,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """Attention over (batch, seqlen, nheads, headdim) tensors; see the module docstring."""
    return _batched(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, return_attn_probs)


def flash_attn_qkvpacked_func(
    qkv,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """``qkv`` is (batch, seqlen, 3, nheads, headdim)."""
    q, k, v = qkv.unbind(dim=2)
    return _batched(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, return_attn_probs)


def flash_attn_kvpacked_func(
    q,
    kv,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """``kv`` is (batch, seqlen_k, 2, nheads_k, headdim)."""
    k, v = kv.unbind(dim=2)
    return _batched(q, k, v, dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, return_attn_probs)


def flash_attn_varlen_func(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
    block_table=None,
):
    """Attention over packed (total, nheads, headdim) sequences cut by ``cu_seqlens_*``."""
    return _varlen(
        q,
        k,
        v,
        cu_seqlens_q,
        cu_seqlens_k,
        max_seqlen_q,
        max_seqlen_k,
        dropout_p,
        softmax_scale,
        causal,
        window_size,
        softcap,
        alibi_slopes,
        return_attn_probs,
        block_table,
    )


def flash_attn_varlen_qkvpacked_func(
    qkv,
    cu_seqlens,
    max_seqlen,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """``qkv`` is (total, 3, nheads, headdim)."""
    q, k, v = qkv.unbind(dim=1)
    return _varlen(
        q,
        k,
        v,
        cu_seqlens,
        cu_seqlens,
        max_seqlen,
        max_seqlen,
        dropout_p,
        softmax_scale,
        causal,
        window_size,
        softcap,
        alibi_slopes,
        return_attn_probs,
        None,
    )


def flash_attn_varlen_kvpacked_func(
    q,
    kv,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """``kv`` is (total_k, 2, nheads_k, headdim)."""
    k, v = kv.unbind(dim=1)
    return _varlen(
        q,
        k,
        v,
        cu_seqlens_q,
        cu_seqlens_k,
        max_seqlen_q,
        max_seqlen_k,
        dropout_p,
        softmax_scale,
        causal,
        window_size,
        softcap,
        alibi_slopes,
        return_attn_probs,
        None,
    )


def flash_attn_with_kvcache(*args, **kwargs):
    """In-place KV-cache update + rotary + paged attention: not emulated."""
    raise NotImplementedError("flash_attn_with_kvcache has no CPU stand-in in cuda2npu")
