"""xFormers' memory_efficient_attention: the CPU stand-in against a reference written here, and the
NPU409 rewrites (on the emulated torch_npu) against the original calls (on the stand-in).

The reference is the textbook ``softmax(q kᵀ · scale + bias) v`` in float64 with the causal masks
built by hand (docs/reference/xformers.md §3: top-left ``j <= i``, bottom-right
``j <= i + Mkv - Mq``); every query row sees a key in these cases.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
from emulated_sides import run_both

from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.options import Options
from cuda2npu.emulation.standins.xformers.ops import fmha
from cuda2npu.filekinds.python import migrate_source


def reference(q, k, v, bias=None, scale=None, causal=None):
    """[B, M, H, K] (or [B, M, K]) attention in float64; ``causal``: "top-left" / "bottom-right"."""
    three = q.dim() == 3
    if three:
        q, k, v = q.unsqueeze(2), k.unsqueeze(2), v.unsqueeze(2)
        bias = None if bias is None else bias.unsqueeze(1)
    q, k, v = (t.double().transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-1, -2) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if bias is not None:
        scores = scores + bias.double()
    if causal is not None:
        sq, sk = scores.shape[-2:]
        shift = sk - sq if causal == "bottom-right" else 0
        hidden = torch.ones(sq, sk, dtype=torch.bool).triu(1 + shift)
        scores = scores.masked_fill(hidden, float("-inf"))
    out = (scores.softmax(-1) @ v).transpose(1, 2)
    return out.squeeze(2) if three else out


def _qkv(*shape_q, sk=None, seed=0):
    generator = torch.Generator().manual_seed(seed)
    shape_k = (shape_q[0], sk or shape_q[1], *shape_q[2:])
    return (
        torch.randn(shape_q, generator=generator),
        torch.randn(shape_k, generator=generator),
        torch.randn(shape_k, generator=generator),
    )


@pytest.mark.parametrize("mask", [None, "top-left", "bottom-right"])
@pytest.mark.parametrize("sizes", [(7, 7), (5, 9), (9, 5)])
def test_standin_masks_match_the_reference(mask, sizes):
    sq, sk = sizes
    if mask == "bottom-right" and sq > sk:
        pytest.skip("query rows with no key: xFormers' output there is UNVERIFIED")
    q, k, v = _qkv(2, sq, 3, 8, sk=sk)
    bias = {
        None: None,
        "top-left": fmha.LowerTriangularMask(),
        "bottom-right": fmha.attn_bias.LowerTriangularFromBottomRightMask(),
    }[mask]
    out = fmha.memory_efficient_attention(q, k, v, attn_bias=bias)
    torch.testing.assert_close(out.double(), reference(q, k, v, causal=mask), atol=1e-5, rtol=1e-5)


def test_standin_materialize_is_the_hand_built_mask():
    top_left = fmha.LowerTriangularMask().materialize((3, 5))
    bottom_right = fmha.attn_bias.LowerTriangularFromBottomRightMask().materialize((3, 5))
    assert torch.equal(top_left == 0, torch.ones(3, 5, dtype=torch.bool).tril())
    assert torch.equal(bottom_right == 0, torch.ones(3, 5, dtype=torch.bool).tril(2))


def test_standin_tensor_bias_scale_and_ranks():
    q, k, v = _qkv(2, 5, 3, 8, sk=6)
    bias = torch.randn(2, 3, 5, 6)
    out = fmha.memory_efficient_attention(q, k, v, bias, scale=0.3)
    torch.testing.assert_close(out.double(), reference(q, k, v, bias, scale=0.3), atol=1e-5, rtol=1e-5)
    q3, k3, v3 = _qkv(4, 5, 8, sk=6, seed=1)
    bias3 = torch.randn(4, 5, 6)
    out3 = fmha.memory_efficient_attention(q3, k3, v3, bias3)
    torch.testing.assert_close(out3.double(), reference(q3, k3, v3, bias3), atol=1e-5, rtol=1e-5)
    q5, k5, v5 = _qkv(2, 5, 2, 3, 8, seed=2)  # [B, M, G, H, K]: G·H heads
    out5 = fmha.memory_efficient_attention(q5, k5, v5, fmha.LowerTriangularMask())
    flat = reference(q5.flatten(2, 3), k5.flatten(2, 3), v5.flatten(2, 3), causal="top-left")
    torch.testing.assert_close(out5.double(), flat.unflatten(2, (2, 3)), atol=1e-5, rtol=1e-5)
    with_bias = fmha.LowerTriangularMask().add_bias(bias)
    expected = reference(q, k, v, bias, causal="top-left")
    torch.testing.assert_close(
        fmha.memory_efficient_attention(q, k, v, with_bias).double(), expected, atol=1e-5, rtol=1e-5
    )


def test_standin_dropout_keeps_the_expectation():
    torch.manual_seed(0)
    q, k, _ = _qkv(1, 64, 2, 8, seed=3)
    v = torch.ones_like(k)  # each output is the sum of the kept probabilities / (1 - p): 1 on average
    out = fmha.memory_efficient_attention(q, k, v, p=0.5)
    assert abs(out.mean().item() - 1.0) < 0.05
    assert out.std().item() > 0.05  # something was dropped


CASES = textwrap.dedent(
    """
    import torch
    import xformers.ops as xops
    from xformers.ops import fmha


    def plain(q, k, v):
        return xops.memory_efficient_attention(q, k, v, p=0.0 * 1)
    def top_left_shorter_query(q_short, k, v):
        return xops.memory_efficient_attention(q_short, k, v, attn_bias=xops.LowerTriangularMask())
    def bottom_right_shorter_query(q_short, k, v):
        return fmha.memory_efficient_attention(q_short, k, v, fmha.attn_bias.LowerTriangularFromBottomRightMask())
    def chosen(q, k, v, causal, scale):
        return xops.memory_efficient_attention(q, k, v, xops.LowerTriangularMask() if causal else None, scale=scale)
    def tensor_bias(q_short, k, v):
        bias = torch.arange(k.shape[1], dtype=q_short.dtype, device=k.device).expand(q_short.shape[0], q_short.shape[2], q_short.shape[1], -1)
        return xops.memory_efficient_attention(q_short, k, v, attn_bias=bias * -0.1, scale=0.2)
    def three_d_causal(q3, k3, v3):
        return xops.memory_efficient_attention(q3, k3, v3, attn_bias=xops.LowerTriangularMask())
    def three_d_bias(q3, k3, v3):
        bias = torch.zeros(q3.shape[0], q3.shape[1], k3.shape[1], device=k3.device) - torch.arange(k3.shape[1], device=k3.device) * 0.1
        return xops.memory_efficient_attention(q3, k3, v3, bias)
    def five_d(q5, k5, v5):
        return xops.memory_efficient_attention(q5, k5, v5, attn_bias=xops.LowerTriangularMask())
    def hoisted(q, k, v):
        return xops.memory_efficient_attention(q * 1.5, k, v, op=None)
    """
)


def _inputs() -> dict[str, list]:
    q, k, v = _qkv(2, 9, 3, 8, seed=4)
    q_short = q[:, :5]
    q3, k3, v3 = _qkv(6, 7, 8, seed=5)
    q5, k5, v5 = _qkv(2, 7, 2, 3, 8, seed=6)
    return {
        "plain": [q, k, v],
        "top_left_shorter_query": [q_short, k, v],
        "bottom_right_shorter_query": [q_short, k, v],
        "chosen": [q, k, v, True, None],
        "tensor_bias": [q_short, k, v],
        "three_d_causal": [q3, k3, v3],
        "three_d_bias": [q3, k3, v3],
        "five_d": [q5, k5, v5],
        "hoisted": [q, k, v],
    }


def test_rewrites_match_the_original_calls(tmp_path: Path):
    result = migrate_source(CASES.encode(), "cases.py", Options())
    migrated = result.new_source.decode()
    assert not [f for f in result.findings if f.tier is Tier.MANUAL], result.findings
    assert "xformers" not in migrated, migrated
    assert migrated.count("scaled_dot_product_attention") == 2 and migrated.count("npu_fusion_attention(") == 7

    inputs = tmp_path / "inputs.pt"
    torch.save(_inputs(), inputs)
    outputs = run_both({"cuda": CASES, "npu": migrated}, inputs, tmp_path, dtype="float64")
    assert outputs["cuda"].keys() == outputs["npu"].keys()
    for name, expected in outputs["cuda"].items():
        actual = outputs["npu"][name]
        assert expected.shape == actual.shape, name
        torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5, msg=lambda m: f"{name}: {m}")
    # the original against the reference too, so that a stand-in bug cannot hide behind an equal rewrite
    q, k, v = _inputs()["bottom_right_shorter_query"]
    expected = reference(q, k, v, causal="bottom-right")
    torch.testing.assert_close(outputs["cuda"]["bottom_right_shorter_query"], expected, atol=1e-5, rtol=1e-5)
