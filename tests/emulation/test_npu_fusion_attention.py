"""npu_fusion_attention emulation vs an independent float64 reference (docs/reference/torch_npu.md §1).

The reference below is written from the documented formula only: per (batch, query head h)
it uses key/value head ``h // (Nq/Nkv)``, logits ``(q.k + pse) * scale``, a boolean mask where
True removes the position, and a softmax over the remaining positions. Masks for the sparse
modes are built with explicit loops from the §1.3 table. The math runs on CPU tensors in this
process; the device-facing ``torch_npu.npu_fusion_attention`` is exercised in the npu worker.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from npu_process import in_npu_process

from cuda2npu.emulation.npu_attention import npu_fusion_attention as fa

TOL = {torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}
COMPRESSED = torch.ones(2048, 2048, dtype=torch.bool).triu(1)


# --- independent reference -----------------------------------------------------------------


def ref_attention(q, k, v, scale, masked=None, pse=None, keep=None, keep_prob=1.0, sink=None):
    """q [B,Nq,Sq,D], k/v [B,Nkv,Skv,D]; masked True = removed. Returns out, row max, row lse."""
    q, k, v = q.double(), k.double(), v.double()
    batch, nq, sq, _ = q.shape
    nkv, skv = k.shape[1], k.shape[2]
    group = nq // nkv
    k = torch.stack([k[:, h // group] for h in range(nq)], dim=1)
    v = torch.stack([v[:, h // group] for h in range(nq)], dim=1)
    logits = q @ k.transpose(-1, -2)
    if pse is not None:
        logits = logits + pse.double()
    logits = logits * scale
    allowed = torch.ones(batch, nq, sq, skv, dtype=torch.bool)
    if masked is not None:
        allowed = allowed & ~masked
    neg_inf = torch.full_like(logits, -math.inf)
    kept_logits = torch.where(allowed, logits, neg_inf)
    if sink is not None:
        sink_col = sink.double().view(1, nq, 1, 1).expand(batch, nq, sq, 1)
        kept_logits = torch.cat([kept_logits, sink_col], dim=-1)
    lse = torch.logsumexp(kept_logits, dim=-1)
    row_max = kept_logits.max(dim=-1).values
    probs = torch.exp(kept_logits - lse.unsqueeze(-1))[..., :skv]
    if keep is not None:
        probs = probs * keep.double() / keep_prob
    return probs @ v, row_max, lse


def loop_mask(sq, skv, masked_if):
    """[Sq, Skv] bool mask built element by element from a predicate on (i, j)."""
    return torch.tensor([[bool(masked_if(i, j)) for j in range(skv)] for i in range(sq)])


def to_layout(x, layout):
    """BNSD -> the documented layout (§1.2)."""
    b, n, s, d = x.shape
    if layout == "BSH":
        return x.permute(0, 2, 1, 3).reshape(b, s, n * d)
    if layout == "SBH":
        return x.permute(2, 0, 1, 3).reshape(s, b, n * d)
    if layout == "BSND":
        return x.permute(0, 2, 1, 3)
    return x


def from_layout(x, layout, n):
    if layout == "BSH":
        b, s, h = x.shape
        return x.reshape(b, s, n, h // n).permute(0, 2, 1, 3)
    if layout == "SBH":
        s, b, h = x.shape
        return x.reshape(s, b, n, h // n).permute(1, 2, 0, 3)
    if layout == "BSND":
        return x.permute(0, 2, 1, 3)
    return x


def qkv(b, nq, nkv, sq, skv, d, dtype=torch.float32, dv=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, nq, sq, d, generator=g).to(dtype)
    k = torch.randn(b, nkv, skv, d, generator=g).to(dtype)
    v = torch.randn(b, nkv, skv, dv or d, generator=g).to(dtype)
    return q, k, v


def assert_close(actual, expected, dtype):
    tol = TOL[dtype]
    torch.testing.assert_close(actual.double(), expected.double(), atol=tol, rtol=tol)


# --- layouts, dtypes, GQA, scale ------------------------------------------------------------


@pytest.mark.parametrize("layout", ["BSH", "SBH", "BSND", "BNSD"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(2, 4, 4, 5, 7, 8), (1, 6, 2, 9, 9, 16), (3, 2, 1, 1, 4, 4)])
def test_layouts_dtypes_and_gqa_match_reference(layout, dtype, shape):
    b, nq, nkv, sq, skv, d = shape
    q, k, v = qkv(b, nq, nkv, sq, skv, d, dtype)
    scale = 1 / math.sqrt(d)
    out, smax, ssum, reserved, seed, offset, numels = fa(
        to_layout(q, layout), to_layout(k, layout), to_layout(v, layout), nq, layout, scale=scale
    )
    ref, _, _ = ref_attention(q, k, v, scale)
    assert out.dtype == dtype
    assert out.shape == to_layout(ref, layout).shape
    assert_close(from_layout(out, layout, nq), ref, dtype)
    assert smax.shape == ssum.shape == (b, nq, sq, 8) and smax.dtype == ssum.dtype == torch.float32
    assert reserved.numel() == 0
    assert (seed, offset, numels) == (0, 0, b * nq * sq * skv)


def test_layout_is_case_insensitive_and_value_head_dim_may_be_smaller():
    q, k, v = qkv(2, 4, 2, 5, 6, 8, dv=4)
    out = fa(q, k, v, 4, "bnsd", scale=0.3)[0]
    assert out.shape == (2, 4, 5, 4)
    assert_close(out, ref_attention(q, k, v, 0.3)[0], torch.float32)


def test_gqa_uses_contiguous_head_groups():
    """Query head h reads kv head h // (Nq/Nkv), not h % Nkv (§1.5)."""
    q, k, v = qkv(1, 4, 2, 3, 3, 4)
    out = fa(q, k, v, 4, "BNSD", scale=1.0)[0]
    for h in range(4):
        single = ref_attention(q[:, h : h + 1], k[:, h // 2 : h // 2 + 1], v[:, h // 2 : h // 2 + 1], 1.0)[0]
        assert_close(out[:, h : h + 1], single, torch.float32)
    wrong = ref_attention(q[:, 1:2], k[:, 1:2], v[:, 1:2], 1.0)[0]
    assert not torch.allclose(out[:, 1:2], wrong.float(), atol=1e-3)


def test_scale_defaults_to_one_not_inverse_sqrt_d():
    q, k, v = qkv(1, 2, 2, 4, 4, 16)
    out = fa(q, k, v, 2, "BNSD")[0]
    assert_close(out, ref_attention(q, k, v, 1.0)[0], torch.float32)
    assert not torch.allclose(out, ref_attention(q, k, v, 0.25)[0].float(), atol=1e-3)


# --- masks and sparse modes -----------------------------------------------------------------


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.uint8])
@pytest.mark.parametrize("mask_shape", ["BNSS", "B1SS", "11SS", "SS"])
def test_mask_true_means_masked_out(mask_dtype, mask_shape):
    b, n, sq, skv = 2, 3, 4, 6
    q, k, v = qkv(b, n, n, sq, skv, 8)
    g = torch.Generator().manual_seed(1)
    full = torch.rand(b, n, sq, skv, generator=g) < 0.4
    full[..., 0] = False  # keep one position per row
    dims = {"BNSS": (b, n), "B1SS": (b, 1), "11SS": (1, 1), "SS": ()}[mask_shape]
    mask = full[tuple(slice(0, size) for size in dims)] if dims else full[0, 0]
    out = fa(q, k, v, n, "BNSD", atten_mask=mask.to(mask_dtype), scale=0.5)[0]
    expected = ref_attention(q, k, v, 0.5, masked=mask.view(*(dims or (1, 1)), sq, skv))[0]
    assert_close(out, expected, torch.float32)
    inverted = ref_attention(q, k, v, 0.5, masked=~mask.view(*(dims or (1, 1)), sq, skv))[0]
    assert not torch.allclose(out, inverted.float(), atol=1e-3)


@pytest.mark.parametrize("sq,skv", [(3, 7), (5, 5), (6, 4)])
def test_sparse_mode_2_is_top_left_causal(sq, skv):
    q, k, v = qkv(1, 2, 2, sq, skv, 8)
    out = fa(q, k, v, 2, "BNSD", atten_mask=COMPRESSED, sparse_mode=2, scale=0.4)[0]
    masked = loop_mask(sq, skv, lambda i, j: j > i)
    assert_close(out, ref_attention(q, k, v, 0.4, masked=masked)[0], torch.float32)


@pytest.mark.parametrize("sq,skv", [(3, 7), (5, 5), (2, 9)])
def test_sparse_mode_3_is_bottom_right_causal(sq, skv):
    q, k, v = qkv(2, 2, 1, sq, skv, 8)
    out = fa(q, k, v, 2, "BNSD", atten_mask=COMPRESSED, sparse_mode=3, scale=0.4)[0]
    masked = loop_mask(sq, skv, lambda i, j: j > i + (skv - sq))
    assert_close(out, ref_attention(q, k, v, 0.4, masked=masked)[0], torch.float32)
    if sq != skv:
        top_left = ref_attention(q, k, v, 0.4, masked=loop_mask(sq, skv, lambda i, j: j > i))[0]
        assert not torch.allclose(out, top_left.float(), atol=1e-3)


@pytest.mark.parametrize("sq,skv,pre,nxt", [(4, 9, 2, 1), (6, 6, 3, 0), (5, 8, 1, 2)])
def test_sparse_mode_4_band_from_bottom_right(sq, skv, pre, nxt):
    q, k, v = qkv(1, 2, 2, sq, skv, 8)
    out = fa(q, k, v, 2, "BNSD", atten_mask=COMPRESSED, sparse_mode=4, pre_tockens=pre, next_tockens=nxt, scale=0.4)[0]
    masked = loop_mask(sq, skv, lambda i, j: not (-pre <= j - i - (skv - sq) <= nxt))
    assert_close(out, ref_attention(q, k, v, 0.4, masked=masked)[0], torch.float32)


def test_sparse_mode_0_applies_band_from_top_left_together_with_mask():
    sq, skv, pre, nxt = 6, 8, 2, 1
    q, k, v = qkv(1, 2, 2, sq, skv, 8)
    user = torch.zeros(sq, skv, dtype=torch.bool)
    user[:, 0] = True
    out = fa(q, k, v, 2, "BNSD", atten_mask=user, pre_tockens=pre, next_tockens=nxt, scale=0.4)[0]
    masked = loop_mask(sq, skv, lambda i, j: j == 0 or not (-pre <= j - i <= nxt))
    assert_close(out, ref_attention(q, k, v, 0.4, masked=masked)[0], torch.float32)


def test_sparse_mode_1_ignores_pre_and_next():
    q, k, v = qkv(1, 2, 2, 4, 4, 8)
    mask = loop_mask(4, 4, lambda i, j: j > i)
    out = fa(q, k, v, 2, "BNSD", atten_mask=mask, sparse_mode=1, pre_tockens=0, next_tockens=0, scale=0.4)[0]
    assert_close(out, ref_attention(q, k, v, 0.4, masked=mask)[0], torch.float32)


def test_no_mask_means_full_attention_and_warns_for_causal_modes():
    q, k, v = qkv(1, 2, 2, 5, 5, 8)
    full = ref_attention(q, k, v, 0.5)[0]
    for mode in (2, 3, 4):
        with pytest.warns(UserWarning, match="FULL"):
            out = fa(q, k, v, 2, "BNSD", sparse_mode=mode, scale=0.5)[0]
        assert_close(out, full, torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_close(fa(q, k, v, 2, "BNSD", pre_tockens=0, next_tockens=0, scale=0.5)[0], full, torch.float32)


def test_compressed_modes_require_the_2048_triu_mask():
    q, k, v = qkv(1, 1, 1, 4, 4, 8)
    with pytest.raises(RuntimeError, match="2048"):
        fa(q, k, v, 1, "BNSD", atten_mask=loop_mask(4, 4, lambda i, j: j > i), sparse_mode=2)
    with pytest.raises(RuntimeError, match="triu"):
        fa(q, k, v, 1, "BNSD", atten_mask=~COMPRESSED, sparse_mode=3)


def test_fully_masked_rows_are_flagged():
    q, k, v = qkv(1, 1, 1, 6, 3, 8)  # mode 3 with Sq > Skv: first 3 rows see nothing
    with pytest.warns(RuntimeWarning, match="every key masked"):
        fa(q, k, v, 1, "BNSD", atten_mask=COMPRESSED, sparse_mode=3)


# --- pse, sink, softmax statistics ----------------------------------------------------------


@pytest.mark.parametrize("pse_shape", ["BNSS", "BN1S", "1NSS"])
def test_pse_is_added_before_scaling(pse_shape):
    b, n, sq, skv = 2, 3, 4, 5
    q, k, v = qkv(b, n, n, sq, skv, 8)
    shape = {"BNSS": (b, n, sq, skv), "BN1S": (b, n, 1, skv), "1NSS": (1, n, sq, skv)}[pse_shape]
    pse = torch.randn(shape, generator=torch.Generator().manual_seed(3)) * 2
    out = fa(q, k, v, n, "BNSD", pse=pse, scale=0.25)[0]
    assert_close(out, ref_attention(q, k, v, 0.25, pse=pse)[0], torch.float32)
    added_after = ref_attention(q, k, v, 0.25, pse=pse / 0.25)[0]  # (QK + pse/s) * s = QK*s + pse
    assert not torch.allclose(out, added_after.float(), atol=1e-3)


def test_softmax_max_and_sum_agree_with_logsumexp():
    b, n, sq, skv = 2, 2, 5, 7
    q, k, v = qkv(b, n, n, sq, skv, 8)
    mask = loop_mask(sq, skv, lambda i, j: j > i + 2)
    _, smax, ssum, *_ = fa(q, k, v, n, "BNSD", atten_mask=mask, scale=0.3)
    _, ref_max, ref_lse = ref_attention(q, k, v, 0.3, masked=mask)
    assert torch.equal(smax, smax[..., :1].expand_as(smax)) and torch.equal(ssum, ssum[..., :1].expand_as(ssum))
    torch.testing.assert_close(smax[..., 0].double(), ref_max, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close((smax[..., 0] + ssum[..., 0].log()).double(), ref_lse, atol=1e-5, rtol=1e-5)


def test_sink_joins_the_softmax_denominator():
    q, k, v = qkv(1, 3, 3, 4, 5, 8)
    sink = torch.tensor([0.5, -1.0, 2.0])
    out, smax, ssum, *_ = fa(q, k, v, 3, "BNSD", scale=0.3, sink=sink)
    ref, _, lse = ref_attention(q, k, v, 0.3, sink=sink)
    assert_close(out, ref, torch.float32)
    torch.testing.assert_close((smax[..., 0] + ssum[..., 0].log()).double(), lse, atol=1e-5, rtol=1e-5)


# --- dropout --------------------------------------------------------------------------------


def test_dropout_keeps_expected_fraction_and_rescales():
    """Uniform probabilities and V = I expose the mask: out = keep / (keep_prob * Skv)."""
    sq = skv = 64
    keep_prob = 0.75
    q = torch.zeros(4, 4, sq, skv)
    v = torch.eye(skv).expand(4, 4, skv, skv).contiguous()
    out, *_, seed, offset, numels = fa(q, q, v, 4, "BNSD", keep_prob=keep_prob)
    nonzero = out != 0
    fraction_dropped = 1 - nonzero.double().mean().item()
    assert abs(fraction_dropped - (1 - keep_prob)) < 0.02
    kept_values = out[nonzero]
    torch.testing.assert_close(kept_values, torch.full_like(kept_values, 1 / (keep_prob * skv)))
    assert abs(out.sum(-1).mean().item() - 1.0) < 0.02  # expectation preserved
    assert numels == 4 * 4 * sq * skv


def test_explicit_dropout_mask_is_applied_bit_exactly():
    b, n, sq, skv = 1, 2, 3, 5
    q, k, v = qkv(b, n, n, sq, skv, 8)
    keep = torch.rand(b, n, sq, skv, generator=torch.Generator().manual_seed(5)) < 0.6
    bits = torch.zeros(-(-keep.numel() // 8) * 8, dtype=torch.uint8)
    bits[: keep.numel()] = keep.flatten().to(torch.uint8)
    packed = (bits.view(-1, 8) << torch.arange(8, dtype=torch.uint8)).sum(-1).to(torch.uint8)  # little-endian
    out, *_, seed, offset, _ = fa(q, k, v, n, "BNSD", keep_prob=0.6, scale=0.3, dropout_mask=packed, seed=7, offset=11)
    assert_close(out, ref_attention(q, k, v, 0.3, keep=keep, keep_prob=0.6)[0], torch.float32)
    assert (seed, offset) == (7, 11)


@pytest.mark.parametrize("keep_prob", [0.0, -0.1, 1.5])
def test_keep_prob_outside_zero_one_is_rejected(keep_prob):
    q, k, v = qkv(1, 1, 1, 2, 2, 4)
    with pytest.raises(RuntimeError, match="keep_prob"):
        fa(q, k, v, 1, "BNSD", keep_prob=keep_prob)


# --- TND (varlen) ---------------------------------------------------------------------------


def tnd_reference(q, k, v, qlens, kvlens, scale, masked_if=None):
    """Independent per-sequence loop: sequence b only sees its own keys (§1.2, §1.3)."""
    outs, lses = [], []
    q_start = kv_start = 0
    for q_end, kv_end in zip(qlens, kvlens):
        sq, skv = q_end - q_start, kv_end - kv_start
        qb = q[q_start:q_end].permute(1, 0, 2).unsqueeze(0)
        kb = k[kv_start:kv_end].permute(1, 0, 2).unsqueeze(0)
        vb = v[kv_start:kv_end].permute(1, 0, 2).unsqueeze(0)
        masked = None if masked_if is None else loop_mask(sq, skv, lambda i, j: masked_if(i, j, sq, skv))
        out, _, lse = ref_attention(qb, kb, vb, scale, masked=masked)
        outs.append(out[0].permute(1, 0, 2))
        lses.append(lse[0])
        q_start, kv_start = q_end, kv_end
    return torch.cat(outs), lses


@pytest.mark.parametrize("mode", [None, 2, 3])
def test_tnd_sequences_do_not_attend_across_boundaries(mode):
    qlens, kvlens = [3, 7, 8, 12], [4, 6, 11, 14]  # cumulative; Sq_b != Skv_b
    n, nkv, d = 4, 2, 8
    g = torch.Generator().manual_seed(2)
    q = torch.randn(12, n, d, generator=g)
    k = torch.randn(14, nkv, d, generator=g)
    v = torch.randn(14, nkv, d, generator=g)
    kwargs = {} if mode is None else {"atten_mask": COMPRESSED, "sparse_mode": mode}
    rule = {None: None, 2: lambda i, j, sq, skv: j > i, 3: lambda i, j, sq, skv: j > i + (skv - sq)}[mode]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # mode 3, Sq_b > Skv_b: fully masked rows
        out, smax, ssum, _, _, _, numels = fa(
            q, k, v, n, "TND", actual_seq_qlen=qlens, actual_seq_kvlen=kvlens, scale=0.3, **kwargs
        )
    expected, lses = tnd_reference(q, k, v, qlens, kvlens, 0.3, rule)
    finite = torch.isfinite(torch.cat([lse.T for lse in lses]))  # rows that see at least one key
    assert_close(out[finite.all(-1)], expected[finite.all(-1)], torch.float32)
    assert numels == n * sum(a * b for a, b in zip([3, 4, 1, 4], [4, 2, 5, 3]))
    assert smax.shape == (12, n, 8)


def test_tnd_softmax_layouts_and_trailing_zero_batches():
    qlens, kvlens = [2, 5, 0, 0], [3, 4, 0, 0]  # trailing zeros skip batches; T = 6 has a pad row
    n, d = 2, 4
    g = torch.Generator().manual_seed(4)
    q, k, v = torch.randn(6, n, d, generator=g), torch.randn(4, n, d, generator=g), torch.randn(4, n, d, generator=g)
    out, smax, ssum, *_ = fa(q, k, v, n, "TND", actual_seq_qlen=qlens, actual_seq_kvlen=kvlens, scale=0.5)
    _, smax_tnd, ssum_tnd, *_ = fa(
        q, k, v, n, "TND", actual_seq_qlen=qlens, actual_seq_kvlen=kvlens, scale=0.5, softmax_layout="TND"
    )
    expected, lses = tnd_reference(q, k, v, [2, 5], [3, 4], 0.5)
    assert_close(out[:5], expected, torch.float32)
    assert torch.equal(out[5], torch.zeros(n, d))
    lse_tnd = (smax_tnd[..., 0] + ssum_tnd[..., 0].log()).double()
    torch.testing.assert_close(lse_tnd[:5], torch.cat([lse.T for lse in lses]), atol=1e-5, rtol=1e-5)
    # default layout: each sequence stored N-major ([N, S_b, 8] blocks) inside the [T, N, 8] tensor
    flat = smax.flatten()
    first_block = flat[: n * 2 * 8].view(n, 2, 8)
    torch.testing.assert_close(first_block, smax_tnd[:2].permute(1, 0, 2))
    second_block = flat[n * 2 * 8 : n * 5 * 8].view(n, 3, 8)
    torch.testing.assert_close(second_block, smax_tnd[2:5].permute(1, 0, 2))


def test_tnd_requires_lengths():
    q = torch.randn(4, 2, 4)
    with pytest.raises(RuntimeError, match="actual_seq_qlen"):
        fa(q, q, q, 2, "TND")


# --- argument validation --------------------------------------------------------------------


def test_invalid_arguments_raise():
    q, k, v = qkv(1, 2, 2, 3, 3, 4)
    with pytest.raises(RuntimeError, match="input_layout"):
        fa(q, k, v, 2, "NSD")
    with pytest.raises(RuntimeError, match="sparse_mode"):
        fa(q, k, v, 2, "BNSD", sparse_mode=9)
    with pytest.raises(RuntimeError, match="padding_mask"):
        fa(q, k, v, 2, "BNSD", padding_mask=torch.zeros(1))
    with pytest.raises(RuntimeError, match="dtype"):
        fa(q.double(), k.double(), v.double(), 2, "BNSD")
    q3, k2, v2 = qkv(1, 3, 2, 3, 3, 4)
    with pytest.raises(RuntimeError, match="multiple"):
        fa(q3, k2, v2, 3, "BNSD")
    t = torch.randn(6, 2, 4)
    with pytest.raises(RuntimeError, match=r"\[0,5\) or \(5,8\]"):
        fa(t, t, t, 2, "TND", actual_seq_qlen=[6], actual_seq_kvlen=[6], sparse_mode=5)


@pytest.mark.parametrize("mode", [5, 6])
def test_prefix_modes_are_not_emulated(mode):
    q, k, v = qkv(1, 1, 1, 2, 2, 4)
    with pytest.raises(NotImplementedError, match=f"sparse_mode {mode}"):
        fa(q, k, v, 1, "BNSD", atten_mask=COMPRESSED, sparse_mode=mode)


# --- gradients ------------------------------------------------------------------------------


def test_gradients_match_float64_reference():
    b, nq, nkv, sq, skv, d = 2, 4, 2, 5, 6, 8
    q, k, v = qkv(b, nq, nkv, sq, skv, d)
    pse = torch.randn(b, nq, sq, skv)
    mask = loop_mask(sq, skv, lambda i, j: j > i + (skv - sq))
    inputs = [t.clone().requires_grad_() for t in (q, k, v, pse)]
    out, smax, ssum, *_ = fa(*inputs[:3], nq, "BNSD", pse=inputs[3], atten_mask=mask, scale=0.35)
    grad_out = torch.randn_like(out)
    (out * grad_out).sum().backward()
    ref_inputs = [t.double().requires_grad_() for t in (q, k, v, pse)]
    ref, _, _ = ref_attention(*ref_inputs[:3], 0.35, masked=mask, pse=ref_inputs[3])
    (ref * grad_out.double()).sum().backward()
    for got, want in zip(inputs, ref_inputs):
        torch.testing.assert_close(got.grad.double(), want.grad, atol=1e-4, rtol=1e-4)


def test_gradients_through_tnd_layout():
    qlens, kvlens = [2, 5], [3, 6]
    g = torch.Generator().manual_seed(8)
    q, k, v = (torch.randn(t, 2, 4, generator=g).requires_grad_() for t in (5, 6, 6))
    out = fa(q, k, v, 2, "TND", actual_seq_qlen=qlens, actual_seq_kvlen=kvlens, scale=0.5)[0]
    out.pow(2).sum().backward()
    rq, rk, rv = (t.detach().double().requires_grad_() for t in (q, k, v))
    tnd_reference(rq, rk, rv, qlens, kvlens, 0.5)[0].pow(2).sum().backward()
    for got, want in ((q, rq), (k, rk), (v, rv)):
        torch.testing.assert_close(got.grad.double(), want.grad, atol=1e-4, rtol=1e-4)


# --- the device-facing op (npu worker process) ----------------------------------------------


@in_npu_process
def test_torch_npu_entry_point_runs_on_npu_and_rejects_cpu():
    import torch_npu

    q, k, v = qkv(2, 4, 2, 5, 6, 8)
    qn, kn, vn = (t.npu().requires_grad_() for t in (q, k, v))
    out, smax, ssum, reserved, seed, offset, numels = torch_npu.npu_fusion_attention(
        qn, kn, vn, 4, input_layout="BNSD", atten_mask=COMPRESSED.npu(), sparse_mode=3, scale=0.3
    )
    assert out.device.type == smax.device.type == "npu"
    masked = loop_mask(5, 6, lambda i, j: j > i + 1)
    assert_close(out.cpu(), ref_attention(q, k, v, 0.3, masked=masked)[0], torch.float32)
    out.sum().backward()
    assert qn.grad.device.type == "npu" and kn.grad.shape == k.shape
    with pytest.raises(RuntimeError, match="only npu tensor"):
        torch_npu.npu_fusion_attention(q, k, v, 4, "BNSD")


@in_npu_process
def test_fused_ops_run_as_one_kernel_under_autocast():
    """Inside bf16 autocast the op runs in its inputs' dtype; the causal mask's fill value must not
    be cast to bf16 (it overflowed: "value cannot be converted to type c10::BFloat16")."""
    import torch_npu

    q, k, v = qkv(2, 4, 4, 5, 5, 8, dtype=torch.bfloat16)
    qn, kn, vn = (t.npu() for t in (q, k, v))
    with torch.autocast("npu", dtype=torch.bfloat16):
        out = torch_npu.npu_fusion_attention(
            qn, kn, vn, 4, "BNSD", atten_mask=COMPRESSED.npu(), sparse_mode=2, scale=0.3
        )[0]
        normed = torch_npu.npu_rms_norm(qn.float(), torch.ones(8, device="npu"))[0]
    assert out.dtype == torch.bfloat16 and normed.dtype == torch.float32
    masked = loop_mask(5, 5, lambda i, j: j > i)
    assert_close(out.cpu(), ref_attention(q, k, v, 0.3, masked=masked)[0], torch.bfloat16)
