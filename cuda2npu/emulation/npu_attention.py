"""Reference implementation of ``torch_npu.npu_fusion_attention`` (docs/reference/torch_npu.md §1).

Written in differentiable torch ops, computed in float32 and cast back to the input dtype, so
autograd works through it and it runs on any device (the fake ``torch_npu`` module wraps it
with the npu-only device check of the real op).

Exact rules implemented (section numbers of the reference):

* signature, defaults and the 7-tuple ``(out, softmax_max, softmax_sum, softmax_out, seed,
  offset, numels)`` (§1.1, §1.4); **scale defaults to 1.0**;
* layouts BSH, SBH, BSND, BNSD, TND (case-insensitive) with cumulative ``actual_seq_qlen`` /
  ``actual_seq_kvlen`` for TND, trailing zeros skipping batches, repeated values giving empty
  sequences (§1.2);
* ``atten_mask``: True/1 = masked out (§1.2); ``atten_mask=None`` means full attention whatever
  ``sparse_mode``, ``pre_tockens`` and ``next_tockens`` say (§1.3 first row). Because that
  silently drops causality, a ``UserWarning`` is raised for sparse modes 2, 3, 4 without a mask;
* ``sparse_mode`` geometry (§1.3): 0 = the given mask plus the band ``-pre <= j-i <= next``
  from the top-left corner; 1 = the given mask; 2 = ``j > i`` masked (top-left causal);
  3 = ``j > i + (Skv-Sq)`` masked (bottom-right causal); 4 = band
  ``-pre <= j-i-(Skv-Sq) <= next`` from the bottom-right corner (the Sq != Skv offset is
  INFERRED in the reference). Modes 2-4 require the compressed 2048x2048 ``triu(.., 1)`` mask.
  Modes 5-8 raise ``NotImplementedError``. In TND every sequence uses local indices;
* ``pse`` is added **before** scaling, ``s = (QK^T + pse) * scale`` (§1.7; the reference marks
  this UNVERIFIED on hardware because one doc example contradicts the formula);
* ``keep_prob``: dropout keep probability in (0, 1]; kept probabilities are scaled by
  ``1/keep_prob`` after the softmax (§1.6). The mask comes from the npu generator, so it is not
  bit-identical to hardware (Philox); an explicit ``dropout_mask`` (bit-packed, little-endian,
  1 = keep) is applied exactly;
* GQA: query head h uses key/value head ``h // (Nq/Nkv)`` (§1.5);
* ``softmax_max`` / ``softmax_sum``: per-row max of the scaled, biased, masked logits and
  ``sum(exp(s - max))``, fp32, replicated over a trailing dimension of 8 (§1.4; exact
  definition INFERRED in the reference). TND with ``softmax_layout=""`` stores them
  sequence by sequence in N-major order ("NTD"), with ``"TND"`` as true ``[T, N, 8]``;
* ``sink`` joins the softmax denominator as one extra logit per head (§1.7 step 3). Its
  contribution to softmax_max/softmax_sum is UNVERIFIED; here both include it, so that
  ``out`` stays consistent with ``max + log(sum)``.

Rows whose every position is masked: the kernel's output is UNVERIFIED (§1.7). Masked logits
are filled with the most negative float32 (a "very negative number", as CANN says), which gives
such rows a uniform average of V; a ``RuntimeWarning`` flags them. ``seed``/``offset`` returned
are the npu generator's initial seed and 0 (0, 0 without dropout, as the real op); they cannot
regenerate a Philox mask.
"""

from __future__ import annotations

import warnings

import torch

from cuda2npu.emulation import npu_device
from cuda2npu.emulation.controls import attention_called, drop_probability

__all__ = ["npu_fusion_attention"]

_LAYOUTS = ("BSH", "SBH", "BSND", "BNSD", "TND")
_COMPRESSED_MODES = (2, 3, 4)
_UNEMULATED_MODES = {
    5: "prefix",
    6: "prefix, compressed mask",
    7: "varlen split of a right-down causal problem",
    8: "varlen split of a left-up causal problem",
}
_COMPRESSED_SIZE = 2048
_NO_LIMIT = 2147483647


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise RuntimeError(f"npu_fusion_attention: {message}")


def _to_bnsd(x: torch.Tensor, layout: str, heads: int | None, head_dim: int | None) -> torch.Tensor:
    """Reshape one of q/k/v to [B, N, S, D]. ``heads``/``head_dim``: whichever is known."""
    if layout in ("BSH", "SBH"):
        hidden = x.shape[-1]
        if heads is None:
            _check(hidden % head_dim == 0, f"hidden size {hidden} is not a multiple of head dim {head_dim}")
            heads = hidden // head_dim
        _check(hidden % heads == 0, f"hidden size {hidden} is not divisible by head_num {heads}")
        x = x.reshape(*x.shape[:2], heads, hidden // heads)
        return x.permute(0, 2, 1, 3) if layout == "BSH" else x.permute(1, 2, 0, 3)
    if layout == "BSND":
        return x.permute(0, 2, 1, 3)
    return x  # BNSD


def _from_bnsd(out: torch.Tensor, layout: str) -> torch.Tensor:
    batch, heads, seq, dim = out.shape
    if layout == "BSH":
        return out.permute(0, 2, 1, 3).reshape(batch, seq, heads * dim)
    if layout == "SBH":
        return out.permute(2, 0, 1, 3).reshape(seq, batch, heads * dim)
    if layout == "BSND":
        return out.permute(0, 2, 1, 3)
    return out


def _geometry(mode: int, sq: int, skv: int, pre: int, nxt: int, device) -> torch.Tensor | None:
    """Boolean [Sq, Skv] mask (True = masked) that a sparse mode generates (§1.3)."""
    i = torch.arange(sq, device=device).unsqueeze(1)
    j = torch.arange(skv, device=device).unsqueeze(0)
    if mode == 2:
        return j > i
    if mode == 3:
        return j > i + (skv - sq)
    if mode == 4:
        d = j - i - (skv - sq)
        return (d < -pre) | (d > nxt)
    if pre >= sq + skv and nxt >= sq + skv:
        return None  # mode 0 with a band wider than the matrix: no extra masking
    d = j - i
    return (d < -pre) | (d > nxt)


def _check_compressed(mask: torch.Tensor, mode: int) -> None:
    _check(
        tuple(mask.shape) == (_COMPRESSED_SIZE, _COMPRESSED_SIZE),
        f"sparse_mode {mode} expects the compressed 2048x2048 mask triu(ones(2048, 2048), diagonal=1), "
        f"got shape {tuple(mask.shape)}",
    )
    # equal to triu(ones, 1) <=> nothing on or below the diagonal and every entry above it set
    mask = mask.bool()
    _check(
        not bool(mask.tril().any()) and int(mask.sum()) == _COMPRESSED_SIZE * (_COMPRESSED_SIZE - 1) // 2,
        f"sparse_mode {mode} expects the compressed mask triu(ones(2048, 2048, dtype=bool), diagonal=1)",
    )


def _full_mask(mask: torch.Tensor, batch: int, heads: int, sq: int, skv: int) -> torch.Tensor:
    """Broadcast a user mask to [B or 1, N or 1, Sq, Skv] after checking its shape (§1.2)."""
    shape = tuple(mask.shape)
    allowed = {(batch, heads, sq, skv), (batch, 1, sq, skv), (1, 1, sq, skv), (sq, skv)}
    _check(shape in allowed, f"atten_mask shape {shape} is not one of {sorted(allowed)}")
    return mask.bool() if mask.dim() == 4 else mask.bool().view(1, 1, sq, skv)


def _pse_block(pse: torch.Tensor, batch: int, heads: int, sq: int, skv: int) -> torch.Tensor:
    shape = tuple(pse.shape)
    if pse.dim() == 4 and shape[2] == 1024 and sq > 1024:
        raise NotImplementedError(
            "npu_fusion_attention emulator: the compressed ALiBi pse form [.., 1024, Skv] is not emulated"
        )
    allowed = {(batch, heads, sq, skv), (batch, heads, 1, skv), (1, heads, sq, skv)}
    _check(shape in allowed, f"pse shape {shape} is not one of {sorted(allowed)}")
    return pse


def _unpack_dropout_mask(dropout_mask: torch.Tensor, numels: int) -> torch.Tensor:
    """Bit-packed uint8, little-endian bit order, 1 = keep (§1.6) -> bool vector of ``numels``."""
    _check(dropout_mask.dtype == torch.uint8, "dropout_mask must be a uint8 bit-packed tensor")
    shifts = torch.arange(8, device=dropout_mask.device, dtype=torch.uint8)
    bits = (dropout_mask.reshape(-1, 1) >> shifts) & 1
    bits = bits.reshape(-1)
    _check(bits.numel() >= numels, f"dropout_mask holds {bits.numel()} bits, need {numels}")
    return bits[:numels].bool()


def _attention_core(q, k, v, masked, pse, scale, keep_prob, sink, keep_mask):
    """q [.., N, Sq, D], k/v [.., N, Skv, D]; masked broadcastable bool; returns (out, max, sum)."""
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2))
    if pse is not None:
        scores = scores + pse.float()  # pse before scale (§1.7, UNVERIFIED on hardware)
    scores = scores * scale
    if masked is not None:
        fully_masked = masked.all(dim=-1)
        if bool(fully_masked.any()):
            warnings.warn(
                "npu_fusion_attention: some query rows have every key masked; the hardware result for "
                "such rows is UNVERIFIED (docs/reference/torch_npu.md §1.7). The emulator returns the "
                "mean of V for them.",
                RuntimeWarning,
                stacklevel=4,
            )
        scores = scores.masked_fill(masked, torch.finfo(torch.float32).min)
    row_max = scores.amax(dim=-1, keepdim=True)
    if sink is not None:
        sink_logit = sink.float().view(-1, 1, 1).expand(*scores.shape[:-1], 1)
        row_max = torch.maximum(row_max, sink_logit)
    weights = torch.exp(scores - row_max)
    row_sum = weights.sum(dim=-1, keepdim=True)
    if sink is not None:
        row_sum = row_sum + torch.exp(sink_logit - row_max)
    probs = weights / row_sum
    if keep_mask is not None:
        probs = probs * keep_mask.to(probs.dtype) / keep_prob
    out = torch.matmul(probs, v.float()).to(q.dtype)
    return out, row_max.squeeze(-1), row_sum.squeeze(-1)


def _keep_mask(shape, keep_prob, device, packed_bits, bit_offset):
    """Dropout keep-mask for one block: from the user's packed mask or from the npu generator."""
    if keep_prob >= 1.0:
        return None
    count = 1
    for size in shape:
        count *= size
    if packed_bits is not None:
        return packed_bits[bit_offset : bit_offset + count].reshape(shape)
    uniform = torch.rand(shape, generator=npu_device.default_generators[0]).to(device)
    return uniform < keep_prob


def _replicate8(x: torch.Tensor) -> torch.Tensor:
    return x.unsqueeze(-1).expand(*x.shape, 8).contiguous()


def npu_fusion_attention(
    query,
    key,
    value,
    head_num,
    input_layout,
    pse=None,
    padding_mask=None,
    atten_mask=None,
    scale=1.0,
    keep_prob=1.0,
    pre_tockens=2147483647,
    next_tockens=2147483647,
    inner_precise=0,
    prefix=None,
    actual_seq_qlen=None,
    actual_seq_kvlen=None,
    sparse_mode=0,
    gen_mask_parallel=True,
    sync=False,
    softmax_layout="",
    sink=None,
    dropout_mask=None,
    seed=0,
    offset=0,
):
    """Emulate ``torch_npu.npu_fusion_attention`` (§1); see the module docstring for the rules.

    ``inner_precise``, ``gen_mask_parallel`` and ``sync`` are accepted and have no effect on
    CPU; ``prefix`` only matters for sparse modes 5/6, which are not emulated.
    """
    layout = str(input_layout).upper()
    _check(layout in _LAYOUTS, f"The input_layout should be BSH/SBH/BNSD/BSND/TND, but got {input_layout}")
    _check(head_num > 0, f"head_num must be > 0, got {head_num}")
    _check(0 < keep_prob <= 1, f"The keep_prob value must be in range of (0, 1], but got {keep_prob}")
    attention_called("npu_fusion_attention", 1.0 - keep_prob, scale)
    keep_prob = 1.0 - drop_probability(1.0 - keep_prob)
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        _check(
            tensor.dim() == (3 if layout in ("BSH", "SBH", "TND") else 4),
            f"{name} must be {3 if layout in ('BSH', 'SBH', 'TND') else 4}-D for layout {layout}, got {tensor.dim()}-D",
        )
    _check(
        query.dtype in (torch.float16, torch.bfloat16, torch.float32),
        f"query dtype must be float16, bfloat16 or float32, got {query.dtype}",
    )
    _check(key.dtype == query.dtype and value.dtype == query.dtype, "query, key and value must share one dtype")
    _check(padding_mask is None, "padding_mask is not supported and must be None")
    if layout == "TND":
        _check(
            0 <= sparse_mode < 5 or 5 < sparse_mode <= 8,
            f"The sparse_mode value must be in range of [0,5) or (5,8], but got {sparse_mode}",
        )
    else:
        _check(0 <= sparse_mode <= 6, f"The sparse_mode value must be in range of [0,6], but got {sparse_mode}")
    if sparse_mode >= 5:
        raise NotImplementedError(
            f"npu_fusion_attention emulator: sparse_mode {sparse_mode} ({_UNEMULATED_MODES[sparse_mode]}) "
            "is not emulated"
        )
    _check(softmax_layout in ("", "TND"), f"softmax_layout must be '' or 'TND', got {softmax_layout!r}")
    _check(softmax_layout == "" or layout == "TND", "softmax_layout='TND' is only valid with input_layout='TND'")
    if pse is not None:
        _check(pse.dtype == query.dtype, "pse must have the dtype of query")
    if sink is not None:
        _check(
            tuple(sink.shape) == (head_num,) and sink.dtype == torch.float32,
            f"sink must be a float32 tensor of shape [{head_num}]",
        )
    if atten_mask is None:
        if sparse_mode in _COMPRESSED_MODES:
            warnings.warn(
                f"npu_fusion_attention: atten_mask is None, so sparse_mode={sparse_mode} is ignored and "
                "attention is FULL (not causal/banded), as documented (docs/reference/torch_npu.md "
                "§1.3). Pass atten_mask=torch.ones(2048, 2048, dtype=torch.bool).triu(1) to get the sparse mode.",
                UserWarning,
                stacklevel=2,
            )
    else:
        _check(
            atten_mask.dtype in (torch.bool, torch.uint8), f"atten_mask must be bool or uint8, got {atten_mask.dtype}"
        )
        if sparse_mode in _COMPRESSED_MODES:
            _check_compressed(atten_mask, sparse_mode)

    if layout == "TND":
        return _tnd_attention(
            query,
            key,
            value,
            head_num,
            pse,
            atten_mask,
            scale,
            keep_prob,
            pre_tockens,
            next_tockens,
            actual_seq_qlen,
            actual_seq_kvlen,
            sparse_mode,
            softmax_layout,
            sink,
            dropout_mask,
            seed,
            offset,
        )
    _check(
        actual_seq_qlen is None and actual_seq_kvlen is None,
        "actual_seq_qlen/actual_seq_kvlen are only used with input_layout='TND'",
    )

    q = _to_bnsd(query, layout, head_num, None)
    _check(q.shape[1] == head_num, f"query has {q.shape[1]} heads but head_num is {head_num}")
    head_dim = q.shape[-1]
    k = _to_bnsd(key, layout, None, head_dim)
    v_heads = k.shape[1]
    if layout in ("BSH", "SBH"):
        _check(value.shape[-1] % v_heads == 0, "value hidden size is not a multiple of the key/value head count")
    v = _to_bnsd(value, layout, v_heads, None)
    batch, heads, sq, _ = q.shape
    skv = k.shape[2]
    _check(k.shape[-1] == head_dim, f"key head dim {k.shape[-1]} differs from query head dim {head_dim}")
    _check(v.shape[:3] == k.shape[:3] and v.shape[-1] <= head_dim, "value must match key except a head dim <= Dk")
    k, v = _expand_kv(k, v, heads)

    masked = None
    if atten_mask is not None:
        if sparse_mode in _COMPRESSED_MODES:
            masked = _geometry(sparse_mode, sq, skv, pre_tockens, next_tockens, q.device)
        else:
            masked = _full_mask(atten_mask, batch, heads, sq, skv)
            if sparse_mode == 0:
                band = _geometry(0, sq, skv, pre_tockens, next_tockens, q.device)
                masked = masked if band is None else masked | band
    bias = None if pse is None else _pse_block(pse, batch, heads, sq, skv)
    numels = batch * heads * sq * skv
    packed = None if dropout_mask is None else _unpack_dropout_mask(dropout_mask, numels)
    keep = _keep_mask((batch, heads, sq, skv), keep_prob, q.device, packed, 0)
    out, row_max, row_sum = _attention_core(q, k, v, masked, bias, scale, keep_prob, sink, keep)
    seed_out, offset_out = _seed_offset(keep_prob, dropout_mask, seed, offset)
    return (
        _from_bnsd(out, layout),
        _replicate8(row_max),
        _replicate8(row_sum),
        torch.empty(0, dtype=query.dtype, device=query.device),
        seed_out,
        offset_out,
        numels,
    )


def _expand_kv(k, v, q_heads):
    kv_heads = k.shape[-3]
    _check(
        kv_heads > 0 and q_heads % kv_heads == 0,
        f"head_num {q_heads} must be a positive multiple of the key/value head count {kv_heads}",
    )
    group = q_heads // kv_heads
    if group == 1:
        return k, v
    return k.repeat_interleave(group, dim=-3), v.repeat_interleave(group, dim=-3)


def _seed_offset(keep_prob, dropout_mask, seed, offset):
    if keep_prob >= 1.0:
        return 0, 0
    if dropout_mask is not None:
        return seed, offset
    return npu_device.default_generators[0].initial_seed(), 0


def _cumulative_bounds(lengths, name: str) -> list[tuple[int, int]]:
    lengths = [int(x) for x in lengths]
    while lengths and lengths[-1] == 0:
        lengths.pop()  # trailing zeros skip batches (§1.2)
    bounds, start = [], 0
    for end in lengths:
        _check(end >= start, f"{name} must be cumulative (non-decreasing), got {lengths}")
        bounds.append((start, end))
        start = end
    return bounds


def _tnd_attention(
    query,
    key,
    value,
    head_num,
    pse,
    atten_mask,
    scale,
    keep_prob,
    pre,
    nxt,
    actual_seq_qlen,
    actual_seq_kvlen,
    sparse_mode,
    softmax_layout,
    sink,
    dropout_mask,
    seed,
    offset,
):
    """Varlen attention: every sequence is its own Sq_b x Skv_b problem with local indices."""
    _check(
        actual_seq_qlen is not None and actual_seq_kvlen is not None,
        "input_layout='TND' requires actual_seq_qlen and actual_seq_kvlen",
    )
    _check(
        len(actual_seq_qlen) == len(actual_seq_kvlen) and len(actual_seq_qlen) > 0,
        "actual_seq_qlen and actual_seq_kvlen must have the same, non-zero length",
    )
    if pse is not None:
        raise NotImplementedError("npu_fusion_attention emulator: pse with input_layout='TND' is not emulated")
    q_bounds = _cumulative_bounds(actual_seq_qlen, "actual_seq_qlen")
    kv_bounds = _cumulative_bounds(actual_seq_kvlen, "actual_seq_kvlen")
    _check(len(q_bounds) == len(kv_bounds), "actual_seq_qlen and actual_seq_kvlen describe different batch counts")
    total_q, heads, head_dim = query.shape
    _check(heads == head_num, f"query has {heads} heads but head_num is {head_num}")
    _check(q_bounds[-1][1] <= total_q and kv_bounds[-1][1] <= key.shape[0], "actual_seq lengths exceed T")
    _check(
        key.shape[-1] == head_dim and value.shape[:2] == key.shape[:2] and value.shape[-1] <= head_dim,
        "key/value shapes do not match query",
    )
    if atten_mask is not None and sparse_mode not in _COMPRESSED_MODES:
        max_sq = max(e - s for s, e in q_bounds)
        max_skv = max(e - s for s, e in kv_bounds)
        _check(
            tuple(atten_mask.shape) == (max_sq, max_skv),
            f"TND atten_mask must be [maxSq, maxSkv] = [{max_sq}, {max_skv}], got {tuple(atten_mask.shape)}",
        )

    numels = sum(heads * (qe - qs) * (ke - ks) for (qs, qe), (ks, ke) in zip(q_bounds, kv_bounds))
    packed = None if dropout_mask is None else _unpack_dropout_mask(dropout_mask, numels)
    outs, maxes, sums, bit_offset = [], [], [], 0
    for (qs, qe), (ks, ke) in zip(q_bounds, kv_bounds):
        sq, skv = qe - qs, ke - ks
        if sq == 0:
            continue
        q = query[qs:qe].transpose(0, 1)  # [N, Sq_b, D]
        k, v = _expand_kv(key[ks:ke].transpose(0, 1), value[ks:ke].transpose(0, 1), heads)
        masked = None
        if atten_mask is not None:
            if sparse_mode in _COMPRESSED_MODES:
                masked = _geometry(sparse_mode, sq, skv, pre, nxt, query.device)
            else:
                masked = atten_mask[:sq, :skv].bool()
                if sparse_mode == 0:
                    band = _geometry(0, sq, skv, pre, nxt, query.device)
                    masked = masked if band is None else masked | band
        keep = _keep_mask((heads, sq, skv), keep_prob, query.device, packed, bit_offset)
        bit_offset += heads * sq * skv
        out, row_max, row_sum = _attention_core(q, k, v, masked, None, scale, keep_prob, sink, keep)
        outs.append(out.transpose(0, 1))
        maxes.append(row_max)
        sums.append(row_sum)

    used = q_bounds[-1][1]
    pad_rows = total_q - used  # rows after the last sequence (trailing-zero batches): zero output
    out = torch.cat(outs + [query.new_zeros(pad_rows, heads, value.shape[-1])], dim=0)
    seed_out, offset_out = _seed_offset(keep_prob, dropout_mask, seed, offset)
    return (
        out,
        _tnd_softmax_stat(maxes, softmax_layout, pad_rows, heads, query.device),
        _tnd_softmax_stat(sums, softmax_layout, pad_rows, heads, query.device),
        torch.empty(0, dtype=query.dtype, device=query.device),
        seed_out,
        offset_out,
        numels,
    )


def _tnd_softmax_stat(blocks, softmax_layout, pad_rows, heads, device):
    """Blocks [N, S_b] -> [T, N, 8]; "" stores each sequence N-major ("NTD"), "TND" is true TND."""
    if softmax_layout == "TND":
        rows = [_replicate8(b.transpose(0, 1)) for b in blocks]
    else:
        rows = [_replicate8(b).reshape(b.shape[1], heads, 8) for b in blocks]
    pad = torch.zeros(pad_rows, heads, 8, dtype=torch.float32, device=device)
    return torch.cat(rows + [pad], dim=0)
