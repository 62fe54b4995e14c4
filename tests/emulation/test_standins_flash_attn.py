"""The flash-attn stand-in against a float64 loop over (batch, head, query, key).

The reference implements the documented semantics directly (flash_attn_interface.py
docstrings): bottom-right causal alignment, the window [i + sk - sq - left, i + sk - sq + right],
GQA head grouping, ALiBi ``-slope * |i + sk - sq - j|``, softcap, zero output for rows that see
no key.
"""

from __future__ import annotations

import math

import pytest
import torch

from cuda2npu.emulation.standins.flash_attn import (
    flash_attn_func,
    flash_attn_kvpacked_func,
    flash_attn_qkvpacked_func,
    flash_attn_varlen_func,
    flash_attn_varlen_kvpacked_func,
    flash_attn_varlen_qkvpacked_func,
    flash_attn_with_kvcache,
)


def reference(q, k, v, *, causal=False, window=(-1, -1), scale=None, alibi=None, softcap=0.0):
    """(out, lse) in float64 for q (b, sq, h, d), k/v (b, sk, hk, d)."""
    q, k, v = q.double(), k.double(), v.double()
    batch, seqlen_q, nheads, headdim = q.shape
    seqlen_k, nheads_k = k.shape[1], k.shape[2]
    scale = headdim**-0.5 if scale is None else scale
    shift = seqlen_k - seqlen_q
    out = torch.zeros(batch, seqlen_q, nheads, v.shape[-1], dtype=torch.float64)
    lse = torch.full((batch, nheads, seqlen_q), math.inf, dtype=torch.float64)
    for b in range(batch):
        for h in range(nheads):
            kv_head = h // (nheads // nheads_k)
            for i in range(seqlen_q):
                keys = [
                    j
                    for j in range(seqlen_k)
                    if not (causal and j > i + shift)
                    and not (window[0] >= 0 and j < i + shift - window[0])
                    and not (window[1] >= 0 and j > i + shift + window[1])
                ]
                if not keys:
                    continue
                scores = []
                for j in keys:
                    s = scale * torch.dot(q[b, i, h], k[b, j, kv_head])
                    if softcap > 0:
                        s = softcap * torch.tanh(s / softcap)
                    if alibi is not None:
                        slope = alibi[h] if alibi.dim() == 1 else alibi[b, h]
                        s = s - float(slope) * abs(i + shift - j)
                    scores.append(s)
                scores = torch.stack(scores)
                lse[b, h, i] = torch.logsumexp(scores, 0)
                probs = torch.softmax(scores, 0)
                out[b, i, h] = sum(p * v[b, j, kv_head] for p, j in zip(probs, keys))
    return out, lse


def _inputs(batch, seqlen_q, seqlen_k, nheads, nheads_k, headdim, dtype=torch.float16, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, seqlen_q, nheads, headdim, generator=gen).to(dtype)
    k = torch.randn(batch, seqlen_k, nheads_k, headdim, generator=gen).to(dtype)
    v = torch.randn(batch, seqlen_k, nheads_k, headdim, generator=gen).to(dtype)
    return q, k, v


SHAPES = [(2, 6, 6, 4, 4, 16), (1, 3, 8, 6, 2, 8), (2, 8, 3, 4, 1, 32)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [(-1, -1), (2, 1), (3, 0)])
def test_matches_reference(shape, causal, window):
    q, k, v = _inputs(*shape)
    out = flash_attn_func(q, k, v, causal=causal, window_size=window)
    expected, _ = reference(q, k, v, causal=causal, window=window)
    assert out.dtype == torch.float16 and out.shape == q.shape[:3] + (v.shape[-1],)
    torch.testing.assert_close(out.double(), expected, atol=2e-3, rtol=2e-3)


def test_causal_is_bottom_right_aligned():
    """Docstring example: seqlen_q=5, seqlen_k=2 -> rows 0-2 see nothing, row 3 sees key 0 only."""
    q, k, v = _inputs(1, 5, 2, 2, 2, 8)
    out = flash_attn_func(q, k, v, causal=True)
    assert torch.count_nonzero(out[0, :3]) == 0
    torch.testing.assert_close(out[0, 3], v[0, 0])
    # seqlen_q=2, seqlen_k=5: row 0 sees keys 0-3 (top-left alignment would give key 0 only).
    q, k, v = _inputs(1, 2, 5, 1, 1, 8)
    out = flash_attn_func(q, k, v, causal=True)
    only_first_four = flash_attn_func(q[:, :1], k[:, :4], v[:, :4])
    torch.testing.assert_close(out[:, :1], only_first_four)


def test_gqa_head_grouping():
    q, k, v = _inputs(1, 4, 4, 6, 2, 8)
    out = flash_attn_func(q, k, v)
    for h in range(6):
        single = flash_attn_func(q[:, :, h : h + 1], k[:, :, h // 3 : h // 3 + 1], v[:, :, h // 3 : h // 3 + 1])
        torch.testing.assert_close(out[:, :, h : h + 1], single)


def test_softmax_scale_alibi_softcap():
    q, k, v = _inputs(2, 5, 7, 4, 2, 16)
    slopes = torch.rand(2, 4) * 0.5
    out = flash_attn_func(q, k, v, softmax_scale=0.3, causal=True, alibi_slopes=slopes, softcap=2.0)
    expected, _ = reference(q, k, v, causal=True, scale=0.3, alibi=slopes, softcap=2.0)
    torch.testing.assert_close(out.double(), expected, atol=2e-3, rtol=2e-3)


def test_return_attn_probs_gives_lse_and_empty_dmask_without_dropout():
    q, k, v = _inputs(2, 5, 3, 2, 2, 8)
    out, lse, s_dmask = flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    _, expected_lse = reference(q, k, v, causal=True)
    assert lse.dtype == torch.float32 and lse.shape == (2, 2, 5)
    torch.testing.assert_close(lse.double(), expected_lse, atol=1e-5, rtol=1e-5)
    assert s_dmask.numel() == 0


def test_dropout_mask_is_reported_and_applied():
    q, k, v = _inputs(1, 4, 6, 2, 2, 8)
    torch.manual_seed(0)
    out, _, s_dmask = flash_attn_func(q, k, v, dropout_p=0.5, return_attn_probs=True)
    assert s_dmask.shape == (1, 2, 128, 128)
    s = s_dmask[:, :, :4, :6].float()
    assert (s < 0).any() and (s > 0).any()
    weights = s.clamp(min=0) / 0.5
    expected = torch.einsum("bhij,bjhd->bihd", weights, v.float())
    torch.testing.assert_close(out.float(), expected, atol=2e-3, rtol=2e-3)


def test_backward_matches_reference_gradients():
    q, k, v = _inputs(1, 4, 6, 4, 2, 8)
    q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
    qh, kh, vh = (t.clone().requires_grad_() for t in (q, k, v))
    out = flash_attn_func(qh, kh, vh, causal=True, window_size=(2, 0))
    expected, _ = reference(q64, k64, v64, causal=True, window=(2, 0))
    grad = torch.randn_like(expected)
    out.double().backward(grad)
    expected.backward(grad)
    for mine, ref in ((qh, q64), (kh, k64), (vh, v64)):
        torch.testing.assert_close(mine.grad.double(), ref.grad, atol=1e-2, rtol=1e-2)


def test_rejects_fp32_and_bad_gqa():
    q, k, v = _inputs(1, 3, 3, 4, 4, 8, dtype=torch.float32)
    with pytest.raises(RuntimeError, match="fp16 and bf16"):
        flash_attn_func(q, k, v)
    q, k, v = _inputs(1, 3, 3, 4, 3, 8)
    with pytest.raises(RuntimeError, match="divide"):
        flash_attn_func(q, k, v)


def test_packed_variants_equal_unpacked():
    q, k, v = _inputs(2, 5, 5, 4, 4, 8, dtype=torch.bfloat16)
    expected = flash_attn_func(q, k, v, causal=True)
    torch.testing.assert_close(flash_attn_qkvpacked_func(torch.stack([q, k, v], dim=2), causal=True), expected)
    torch.testing.assert_close(flash_attn_kvpacked_func(q, torch.stack([k, v], dim=2), causal=True), expected)


@pytest.mark.parametrize("causal", [False, True])
def test_varlen_uses_each_sequence_lengths(causal):
    lens_q, lens_k = [3, 1, 5], [4, 6, 2]
    cu_q = torch.tensor([0, 3, 4, 9], dtype=torch.int32)
    cu_k = torch.tensor([0, 4, 10, 12], dtype=torch.int32)
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(9, 4, 8, generator=gen).half()
    k = torch.randn(12, 2, 8, generator=gen).half()
    v = torch.randn(12, 2, 8, generator=gen).half()
    out, lse, _ = flash_attn_varlen_func(
        q,
        k,
        v,
        cu_q,
        cu_k,
        max(lens_q),
        max(lens_k),
        causal=causal,
        window_size=(3, -1) if not causal else (-1, -1),
        return_attn_probs=True,
    )
    assert out.shape == (9, 4, 8) and lse.shape == (4, 9)
    for b in range(3):
        qs, ks = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_k[b]), int(cu_k[b + 1]))
        expected, expected_lse = reference(
            q[qs][None], k[ks][None], v[ks][None], causal=causal, window=(3, -1) if not causal else (-1, -1)
        )
        torch.testing.assert_close(out[qs].double(), expected[0], atol=2e-3, rtol=2e-3)
        torch.testing.assert_close(lse[:, qs].double(), expected_lse[0], atol=1e-5, rtol=1e-5)


def test_varlen_packed_variants():
    cu = torch.tensor([0, 2, 7], dtype=torch.int32)
    gen = torch.Generator().manual_seed(2)
    qkv = torch.randn(7, 3, 2, 8, generator=gen).half()
    q, k, v = qkv.unbind(1)
    expected = flash_attn_varlen_func(q, k, v, cu, cu, 5, 5, causal=True)
    torch.testing.assert_close(flash_attn_varlen_qkvpacked_func(qkv, cu, 5, causal=True), expected)
    torch.testing.assert_close(
        flash_attn_varlen_kvpacked_func(q, torch.stack([k, v], 1), cu, cu, 5, 5, causal=True), expected
    )


def test_unemulated_features_raise():
    q, k, v = _inputs(1, 2, 2, 2, 2, 8)
    with pytest.raises(NotImplementedError, match="flash_attn_with_kvcache"):
        flash_attn_with_kvcache(q, k, v)
    cu = torch.tensor([0, 2], dtype=torch.int32)
    with pytest.raises(NotImplementedError, match="block_table"):
        flash_attn_varlen_func(q[0], k[0], v[0], cu, cu, 2, 2, block_table=torch.zeros(1, 1, dtype=torch.int32))


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotary_is_a_complex_rotation_of_channel_pairs(interleaved):
    """apply_rotary_emb against a complex-number rotation: GPT-NeoX pairs channel k with k + rotary_dim/2,
    GPT-J pairs 2k with 2k + 1; position i (plus the offset) turns pair k by angle theta[i, k]."""
    from cuda2npu.emulation.standins.flash_attn.layers.rotary import apply_rotary_emb

    torch.manual_seed(0)
    x = torch.randn(2, 5, 3, 10, dtype=torch.float64)
    theta = torch.rand(9, 3, dtype=torch.float64) * 6  # rotary_dim 6 < headdim 10; 9 table rows, offset 2
    out = apply_rotary_emb(x, theta.cos(), theta.sin(), interleaved=interleaved, seqlen_offsets=2)
    rotated = x[..., :6]
    first, second = (rotated[..., 0::2], rotated[..., 1::2]) if interleaved else (rotated[..., :3], rotated[..., 3:])
    turned = torch.complex(first, second) * torch.polar(torch.ones_like(theta[2:7]), theta[2:7])[None, :, None]
    expected_first, expected_second = turned.real, turned.imag
    got_first, got_second = (out[..., 0:6:2], out[..., 1:6:2]) if interleaved else (out[..., :3], out[..., 3:6])
    # computed in float32, like flash-attn's kernel
    torch.testing.assert_close(got_first, expected_first, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(got_second, expected_second, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(out[..., 6:], x[..., 6:], atol=1e-6, rtol=1e-5)  # channels after rotary_dim pass through
