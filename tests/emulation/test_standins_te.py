"""The Transformer Engine stand-in against float64 formulas written out here (layer norm,
RMS norm, tanh-GELU, gated activations on the first half, masked softmax attention with
explicit masks), and TE's parameter names and state-dict keys."""

from __future__ import annotations

import math
import pickle

import pytest
import torch
import torch.nn.functional as F

from cuda2npu.emulation.standins.transformer_engine import pytorch as te
from cuda2npu.emulation.standins.transformer_engine.common import recipe


def _ln(x, w, b, eps=1e-5):
    x = x.double()
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * w.double() + b.double()


def _rms(x, w, eps=1e-5):
    x = x.double()
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w.double()


def _gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _randomize(module, seed=0):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    return module


def test_linear_math_names_and_extra_state():
    layer = _randomize(te.Linear(6, 4))
    x = torch.randn(3, 2, 6)
    expected = x.double() @ layer.weight.double().T + layer.bias.double()
    torch.testing.assert_close(layer(x).double(), expected, atol=1e-5, rtol=1e-5)
    state = layer.state_dict()
    assert list(state) == ["weight", "bias", "_extra_state"]
    assert state["_extra_state"].dtype == torch.uint8 and state["_extra_state"].numel() == 0
    out, bias = te.Linear(6, 4, return_bias=True)(x)
    assert bias.shape == (4,)
    assert list(te.Linear(6, 4, bias=False).state_dict()) == ["weight", "_extra_state"]


def test_linear_parameters_split_and_autocast():
    layer = _randomize(te.Linear(4, 6, parameters_split={"query": 2, "key": 2, "value": 2}))
    assert [n for n, _ in layer.named_parameters()] == [
        "query_weight",
        "query_bias",
        "key_weight",
        "key_bias",
        "value_weight",
        "value_bias",
    ]
    x = torch.randn(5, 4)
    weight = torch.cat([layer.query_weight, layer.key_weight, layer.value_weight])
    bias = torch.cat([layer.query_bias, layer.key_bias, layer.value_bias])
    torch.testing.assert_close(layer(x).double(), x.double() @ weight.double().T + bias.double(), atol=1e-5, rtol=1e-5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = layer(x)
    assert out.dtype == torch.bfloat16
    with pytest.raises(AssertionError, match="Data types for parameters must match"):
        layer(x.bfloat16())


def test_norms():
    x = torch.randn(4, 3, 8) * 2 + 0.5
    ln, rms = _randomize(te.LayerNorm(8, eps=1e-5)), _randomize(te.RMSNorm(8, eps=1e-6), seed=1)
    torch.testing.assert_close(ln(x).double(), _ln(x, ln.weight, ln.bias), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rms(x).double(), _rms(x, rms.weight, 1e-6), atol=1e-5, rtol=1e-5)
    zc = _randomize(te.LayerNorm(8, zero_centered_gamma=True), seed=2)
    torch.testing.assert_close(zc(x).double(), _ln(x, 1 + zc.weight.double(), zc.bias), atol=1e-5, rtol=1e-5)
    assert list(ln.state_dict()) == ["weight", "bias", "_extra_state"]
    assert pickle.loads(bytes(ln.state_dict()["_extra_state"].tolist())) == {}
    assert torch.equal(te.LayerNorm(8).weight, torch.ones(8)) and torch.equal(
        te.LayerNorm(8, zero_centered_gamma=True).weight, torch.zeros(8)
    )


@pytest.mark.parametrize("normalization", ["LayerNorm", "RMSNorm"])
def test_layernorm_linear(normalization):
    layer = _randomize(te.LayerNormLinear(8, 5, eps=1e-5, normalization=normalization, return_layernorm_output=True))
    x = torch.randn(2, 3, 8)
    out, ln_out = layer(x)
    if normalization == "LayerNorm":
        expected_ln = _ln(x, layer.layer_norm_weight, layer.layer_norm_bias)
        names = ["layer_norm_weight", "layer_norm_bias", "weight", "bias", "_extra_state"]
    else:
        expected_ln = _rms(x, layer.layer_norm_weight)
        names = ["layer_norm_weight", "weight", "bias", "_extra_state"]
    torch.testing.assert_close(ln_out.double(), expected_ln, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        out.double(), expected_ln @ layer.weight.double().T + layer.bias.double(), atol=1e-4, rtol=1e-4
    )
    assert list(layer.state_dict()) == names


@pytest.mark.parametrize(
    "activation,gate",
    [
        ("gelu", None),
        ("relu", None),
        ("qgelu", None),
        ("srelu", None),
        ("swiglu", F.silu),
        ("geglu", _gelu_tanh),
        ("reglu", torch.relu),
    ],
)
def test_layernorm_mlp_activations(activation, gate):
    mlp = _randomize(te.LayerNormMLP(8, 6, activation=activation))
    x = torch.randn(4, 8) * 2
    h = _ln(x, mlp.layer_norm_weight, mlp.layer_norm_bias) @ mlp.fc1_weight.double().T + mlp.fc1_bias.double()
    if gate is None:
        plain = {
            "gelu": _gelu_tanh,
            "relu": torch.relu,
            "qgelu": lambda t: t * torch.sigmoid(1.702 * t),
            "srelu": lambda t: torch.relu(t) ** 2,
        }[activation]
        act = plain(h)
    else:
        first, second = h.chunk(2, dim=-1)
        act = gate(first) * second
        assert mlp.fc1_weight.shape == (12, 8)
        assert not torch.allclose(act, gate(second) * first, atol=1e-3)
    expected = act @ mlp.fc2_weight.double().T + mlp.fc2_bias.double()
    torch.testing.assert_close(mlp(x).double(), expected, atol=1e-4, rtol=1e-4)
    assert list(mlp.state_dict()) == [
        "layer_norm_weight",
        "layer_norm_bias",
        "fc1_weight",
        "fc1_bias",
        "fc2_weight",
        "fc2_bias",
        "_extra_state",
    ]


def test_gelu_is_the_tanh_approximation():
    mlp = te.LayerNormMLP(4, 4, activation="gelu")
    with torch.no_grad():
        mlp.fc1_weight.copy_(torch.eye(4) * 3)
        mlp.fc2_weight.copy_(torch.eye(4))
    x = torch.tensor([[1.0, -1.0, 0.5, -0.5]])
    ln = _ln(x, torch.ones(4), torch.zeros(4)) * 3
    torch.testing.assert_close(mlp(x).double(), _gelu_tanh(ln), atol=1e-6, rtol=1e-6)
    assert not torch.allclose(mlp(x).double(), F.gelu(ln), atol=1e-4)


def reference_attention(q, k, v, allowed, scale, bias=None):
    """float64; q [b, sq, h, d], k/v [b, sk, g, d]; allowed(b, h, i, j) -> bool."""
    b, sq, h, _ = q.shape
    sk, g = k.shape[1], k.shape[2]
    out = torch.zeros(b, sq, h, v.shape[-1], dtype=torch.float64)
    for bi in range(b):
        for hi in range(h):
            kv = hi // (h // g)
            for i in range(sq):
                keys = [j for j in range(sk) if allowed(bi, hi, i, j)]
                if not keys:
                    continue
                scores = torch.stack(
                    [
                        scale * q[bi, i, hi].double() @ k[bi, j, kv].double()
                        + (0.0 if bias is None else float(bias[bi, hi, i, j]))
                        for j in keys
                    ]
                )
                probs = torch.softmax(scores, 0)
                out[bi, i, hi] = sum(p * v[bi, j, kv].double() for p, j in zip(probs, keys))
    return out


def _qkv(b, sq, sk, h, g, d, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (
        torch.randn(b, sq, h, d, generator=gen),
        torch.randn(b, sk, g, d, generator=gen),
        torch.randn(b, sk, g, d, generator=gen),
    )


@pytest.mark.parametrize(
    "mask_type,rule",
    [
        ("no_mask", lambda i, j, sq, sk: True),
        ("causal", lambda i, j, sq, sk: j <= i),
        ("causal_bottom_right", lambda i, j, sq, sk: j <= i + sk - sq),
    ],
)
def test_dpa_masks_bshd_and_sbhd(mask_type, rule):
    q, k, v = _qkv(2, 4, 6, 4, 2, 8)
    dpa = te.DotProductAttention(4, 8, num_gqa_groups=2, qkv_format="bshd", attn_mask_type=mask_type)
    expected = reference_attention(q, k, v, lambda b, h, i, j: rule(i, j, 4, 6), 8**-0.5)
    out = dpa(q, k, v)
    assert out.shape == (2, 4, 32)
    torch.testing.assert_close(out.double(), expected.reshape(2, 4, 32), atol=1e-5, rtol=1e-5)
    sbhd = te.DotProductAttention(4, 8, num_gqa_groups=2, attn_mask_type=mask_type)
    out_sbhd = sbhd(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1))
    assert out_sbhd.shape == (4, 2, 32)
    torch.testing.assert_close(out_sbhd.transpose(0, 1), out)
    assert list(dpa.state_dict()) == ["_extra_state"]


def test_dpa_padding_mask_true_means_masked_out():
    q, k, v = _qkv(2, 5, 5, 2, 2, 8, seed=1)
    lengths = [5, 3]
    mask = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    for b, n in enumerate(lengths):
        mask[b, ..., :n] = False
    dpa = te.DotProductAttention(2, 8, qkv_format="bshd", attn_mask_type="padding_causal")
    out = dpa(q, k, v, attention_mask=mask).reshape(2, 5, 2, 8)
    expected = reference_attention(q, k, v, lambda b, h, i, j: i < lengths[b] and j < lengths[b] and j <= i, 8**-0.5)
    torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=1e-5)
    assert torch.count_nonzero(out[1, 3:]) == 0
    cu = torch.tensor([0, 5, 8], dtype=torch.int32)
    torch.testing.assert_close(dpa(q, k, v, cu_seqlens_q=cu, cu_seqlens_kv=cu).reshape(2, 5, 2, 8), out)


def test_dpa_thd_window_alibi_and_bias():
    cu_q = torch.tensor([0, 3, 7], dtype=torch.int32)
    cu_k = torch.tensor([0, 4, 9], dtype=torch.int32)
    gen = torch.Generator().manual_seed(2)
    q, k, v = (
        torch.randn(7, 2, 8, generator=gen),
        torch.randn(9, 2, 8, generator=gen),
        torch.randn(9, 2, 8, generator=gen),
    )
    dpa = te.DotProductAttention(
        2, 8, qkv_format="thd", attn_mask_type="padding_causal_bottom_right", window_size=(1, 0)
    )
    slopes = torch.tensor([0.5, 0.25])
    out = dpa(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_kv=cu_k, core_attention_bias_type="alibi", alibi_slopes=slopes)
    assert out.shape == (7, 16)
    for b in range(2):
        qs, ks = slice(int(cu_q[b]), int(cu_q[b + 1])), slice(int(cu_k[b]), int(cu_k[b + 1]))
        sq, sk = qs.stop - qs.start, ks.stop - ks.start
        bias = torch.tensor(
            [[[-float(slopes[h]) * abs(i + sk - sq - j) for j in range(sk)] for i in range(sq)] for h in range(2)]
        )[None]
        expected = reference_attention(
            q[qs][None], k[ks][None], v[ks][None], lambda _, h, i, j: i + sk - sq - 1 <= j <= i + sk - sq, 8**-0.5, bias
        )
        torch.testing.assert_close(out[qs].double(), expected[0].reshape(sq, 16), atol=1e-5, rtol=1e-5)
    q, k, v = _qkv(1, 3, 3, 2, 2, 4, seed=3)
    extra = torch.randn(1, 2, 3, 3)
    dpa = te.DotProductAttention(2, 4, qkv_format="bshd", attn_mask_type="no_mask", softmax_scale=0.7)
    post = reference_attention(q, k, v, lambda *a: True, 0.7, extra)
    pre = reference_attention(q, k, v, lambda *a: True, 0.7, extra * 0.7)
    torch.testing.assert_close(
        dpa(q, k, v, core_attention_bias_type="post_scale_bias", core_attention_bias=extra).double(),
        post.reshape(1, 3, 8),
        atol=1e-5,
        rtol=1e-5,
    )
    torch.testing.assert_close(
        dpa(q, k, v, core_attention_bias_type="pre_scale_bias", core_attention_bias=extra).double(),
        pre.reshape(1, 3, 8),
        atol=1e-5,
        rtol=1e-5,
    )


def _manual_transformer_layer(layer, x, heads):
    """Pre-LN encoder layer from the state dict, causal top-left attention, eval mode."""
    sd = {k: v.double() for k, v in layer.state_dict().items() if not k.endswith("_extra_state")}
    s, b, hidden = x.shape
    d = hidden // heads
    ln1 = _ln(
        x, sd["self_attention.layernorm_qkv.layer_norm_weight"], sd["self_attention.layernorm_qkv.layer_norm_bias"]
    )
    proj = {
        n: ln1 @ sd[f"self_attention.layernorm_qkv.{n}_weight"].T + sd[f"self_attention.layernorm_qkv.{n}_bias"]
        for n in ("query", "key", "value")
    }
    q, k, v = (proj[n].reshape(s, b, heads, d).transpose(0, 1) for n in ("query", "key", "value"))
    ctx = reference_attention(q, k, v, lambda bi, h, i, j: j <= i, d**-0.5).transpose(0, 1).reshape(s, b, hidden)
    h1 = x.double() + ctx @ sd["self_attention.proj.weight"].T + sd["self_attention.proj.bias"]
    ln2 = _ln(h1, sd["layernorm_mlp.layer_norm_weight"], sd["layernorm_mlp.layer_norm_bias"])
    fc1 = _gelu_tanh(ln2 @ sd["layernorm_mlp.fc1_weight"].T + sd["layernorm_mlp.fc1_bias"])
    return h1 + fc1 @ sd["layernorm_mlp.fc2_weight"].T + sd["layernorm_mlp.fc2_bias"]


def test_transformer_layer_matches_manual_composition_and_reloads():
    layer = _randomize(te.TransformerLayer(16, 24, 4, hidden_dropout=0.0, attention_dropout=0.0), seed=5)
    layer.eval()
    x = torch.randn(5, 2, 16)
    out = layer(x)
    torch.testing.assert_close(out.double(), _manual_transformer_layer(layer, x, 4), atol=1e-4, rtol=1e-4)
    with te.fp8_autocast(enabled=True, fp8_recipe=recipe.DelayedScaling(fp8_format=recipe.Format.HYBRID)):
        torch.testing.assert_close(layer(x), out)
    copy = te.TransformerLayer(16, 24, 4, hidden_dropout=0.0, attention_dropout=0.0).eval()
    copy.load_state_dict(layer.state_dict(), strict=True)
    torch.testing.assert_close(copy(x), out)
    torch.testing.assert_close(te.checkpoint(layer, x.clone().requires_grad_()), out)


def test_fused_qkv_interleaved_layout():
    mha = _randomize(
        te.MultiheadAttention(
            8,
            4,
            num_gqa_groups=2,
            attention_dropout=0.0,
            input_layernorm=True,
            fuse_qkv_params=True,
            attn_mask_type="no_mask",
        ),
        seed=6,
    )
    assert [n for n, _ in mha.named_parameters()][:4] == [
        "layernorm_qkv.layer_norm_weight",
        "layernorm_qkv.layer_norm_bias",
        "layernorm_qkv.weight",
        "layernorm_qkv.bias",
    ]
    x = torch.randn(3, 1, 8)
    mixed = (
        _ln(x, mha.layernorm_qkv.layer_norm_weight, mha.layernorm_qkv.layer_norm_bias)
        @ mha.layernorm_qkv.weight.double().T
        + mha.layernorm_qkv.bias.double()
    )
    groups = mixed.reshape(3, 1, 2, 4, 2)  # per group: 2 query heads, key, value; head dim 2
    q = groups[:, :, :, :2].reshape(3, 1, 4, 2).transpose(0, 1)
    k, v = groups[:, :, :, 2].transpose(0, 1), groups[:, :, :, 3].transpose(0, 1)
    ctx = reference_attention(q, k, v, lambda *a: True, 2**-0.5).transpose(0, 1).reshape(3, 1, 8)
    expected = ctx @ mha.proj.weight.double().T + mha.proj.bias.double()
    torch.testing.assert_close(mha(x).double(), expected, atol=1e-5, rtol=1e-5)


def test_unemulated_features_raise():
    with pytest.raises(NotImplementedError, match="tp_size"):
        te.Linear(4, 4, tp_size=2)
    with pytest.raises(NotImplementedError, match="fp8_model_init"):
        with te.fp8_model_init(enabled=True):
            pass
    with pytest.raises(NotImplementedError, match="decoder"):
        te.TransformerLayer(8, 8, 2, layer_type="decoder")
    with pytest.raises(NotImplementedError, match="clamped_swiglu"):
        te.LayerNormMLP(4, 4, activation="clamped_swiglu")
    with pytest.raises(TypeError, match="unexpected keyword"):
        te.Linear(4, 4, no_such_option=True)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_is_a_complex_rotation_of_channel_pairs(interleaved):
    """RotaryPositionEmbedding + apply_rotary_pos_emb: position i turns pair k (channels k and k + d/2, or
    2k and 2k + 1 when interleaved) by i * base ** (-2k / d); channels after the rotated width pass."""
    from cuda2npu.emulation.standins.transformer_engine.pytorch.attention.rope import (
        RotaryPositionEmbedding,
        apply_rotary_pos_emb,
    )

    torch.manual_seed(0)
    t = torch.randn(5, 2, 3, 10, dtype=torch.float64)  # [s, b, h, d]; 6 of 10 channels rotate
    freqs = RotaryPositionEmbedding(6, rotary_base=100.0, interleaved=interleaved)(7)
    out = apply_rotary_pos_emb(t, freqs, "sbhd", interleaved=interleaved)
    angles = torch.arange(5, dtype=torch.float64)[:, None] * 100.0 ** (-torch.arange(0, 6, 2, dtype=torch.float64) / 6)
    first, second = (t[..., 0:6:2], t[..., 1:6:2]) if interleaved else (t[..., :3], t[..., 3:6])
    turned = torch.complex(first, second) * torch.polar(torch.ones_like(angles), angles)[:, None, None]
    got_first, got_second = (out[..., 0:6:2], out[..., 1:6:2]) if interleaved else (out[..., :3], out[..., 3:6])
    torch.testing.assert_close(got_first, turned.real, atol=1e-6, rtol=1e-5)  # angles are float32, as in TE
    torch.testing.assert_close(got_second, turned.imag, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(out[..., 6:], t[..., 6:])
    bshd = apply_rotary_pos_emb(t.transpose(0, 1), freqs, "bshd", interleaved=interleaved)
    torch.testing.assert_close(bshd.transpose(0, 1), out)
