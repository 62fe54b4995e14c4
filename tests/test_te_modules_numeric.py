"""NPU418: the generated ``te_npu_modules.py`` computes what TransformerEngine's modules compute,
and loads their checkpoints.

A small project using fused TE modules is migrated through the command line (which writes
``te_npu_modules.py`` next to it). The original runs under ``emulate_cuda()`` (the TE CPU
stand-ins, written from TE's sources), the migrated copy under ``emulate_npu()`` (the reference
``torch_npu`` ops), each in its own process. The original side saves every module's state dict
(TE's parameter names and ``_extra_state`` entries) and outputs; the migrated side loads the
state dicts with ``strict=True`` and must reproduce the outputs in float32.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from cli_helpers import REPO, cuda2npu

MODEL = textwrap.dedent(
    '''
    import torch
    import transformer_engine.pytorch as te
    from transformer_engine.pytorch.attention.rope import RotaryPositionEmbedding, apply_rotary_pos_emb


    class RopeOnly(torch.nn.Module):
        """TE's RoPE functions on their own: angles from RotaryPositionEmbedding, applied to [.., h, d]."""

        def __init__(self, dim, tensor_format, interleaved):
            super().__init__()
            self.rope = RotaryPositionEmbedding(dim, interleaved=interleaved, rotary_base=500.0)
            self.tensor_format, self.interleaved = tensor_format, interleaved

        def forward(self, x, cu_seqlens=None):
            length = x.shape[1] if self.tensor_format == "bshd" else x.shape[0] + 3  # a longer table is sliced
            return apply_rotary_pos_emb(x, self.rope(length), self.tensor_format, interleaved=self.interleaved,
                                        cu_seqlens=cu_seqlens)


    class LlamaDecoderLayer(te.TransformerLayer):
        """TE's Llama tutorial pattern: a subclass choosing its arguments and applying RoPE in forward."""

        def __init__(self):
            super().__init__(hidden_size=16, ffn_hidden_size=32, num_attention_heads=4, bias=False,
                             layernorm_epsilon=1e-6, hidden_dropout=0, attention_dropout=0, fuse_qkv_params=False,
                             normalization="RMSNorm", activation="swiglu", attn_input_format="bshd", num_gqa_groups=2)
            self.rope = RotaryPositionEmbedding(4)

        def forward(self, hidden_states):
            freqs = self.rope(max_seq_len=hidden_states.shape[1]).to(hidden_states.device)
            return (super().forward(hidden_states, rotary_pos_emb=freqs),)


    PACKED = dict(cu_seqlens_q=torch.tensor([0, 5, 12], dtype=torch.int32),
                  cu_seqlens_kv=torch.tensor([0, 5, 12], dtype=torch.int32), max_seqlen_q=7, max_seqlen_kv=7)


    def modules():
        """name -> (module, input shape[, forward keyword arguments from the input]); inputs are [s, b, h]
        unless the module says bshd or thd."""
        rope = RotaryPositionEmbedding(4)  # head dim 16 / 4
        partial_rope = RotaryPositionEmbedding(4, rotary_percent=0.5, interleaved=True)
        return {
            "layernorm_linear": (te.LayerNormLinear(16, 24, 1e-6, return_layernorm_output=True,
                                                    sequence_parallel=False), (5, 2, 16)),
            "layernorm_linear_rms": (te.LayerNormLinear(16, 24, normalization="RMSNorm", zero_centered_gamma=True,
                                                        bias=False, return_bias=False), (5, 2, 16)),
            "linear_split_return_bias": (te.Linear(16, 24, parameters_split=("query_", "key_", "value_"),
                                                   return_bias=True), (5, 2, 16)),
            "mlp_gelu": (te.LayerNormMLP(16, 32, seq_length=5, micro_batch_size=2), (5, 2, 16)),
            "mlp_swiglu_rms": (te.LayerNormMLP(16, 32, activation="swiglu", normalization="RMSNorm"), (5, 2, 16)),
            "mlp_geglu_return_bias": (te.LayerNormMLP(16, 32, activation="geglu", return_bias=True), (5, 2, 16)),
            "mlp_qgelu": (te.LayerNormMLP(16, 32, activation="qgelu", return_layernorm_output=True), (5, 2, 16)),
            "mlp_sreglu": (te.LayerNormMLP(16, 32, activation="sreglu", zero_centered_gamma=True), (5, 2, 16)),
            "mha_gqa_causal": (te.MultiheadAttention(16, 4, attention_dropout=0.0, input_layernorm=True,
                                                     num_gqa_groups=2, attn_mask_type="causal"), (5, 2, 16)),
            "mha_fused_bshd": (te.MultiheadAttention(16, 4, attention_dropout=0.0, fuse_qkv_params=True,
                                                     qkv_format="bshd", attn_mask_type="no_mask"), (2, 5, 16)),
            "layer": (te.TransformerLayer(16, 32, 4, hidden_dropout=0.0, attention_dropout=0.0, num_gqa_groups=2,
                                          tp_size=1), (5, 2, 16)),
            "layer_post_ln_bshd": (te.TransformerLayer(
                16, 32, 4, hidden_dropout=0.0, attention_dropout=0.0, apply_residual_connection_post_layernorm=True,
                output_layernorm=True, attn_input_format="bshd", normalization="RMSNorm", activation="swiglu",
            ), (2, 5, 16)),
            "layer_parallel_fused": (te.TransformerLayer(
                16, 32, 4, hidden_dropout=0.0, attention_dropout=0.0, parallel_attention_mlp=True,
                fuse_qkv_params=True, self_attn_mask_type="causal_bottom_right", window_size=(2, 0),
            ), (5, 2, 16)),
            "layernorm_zero_centered": (te.LayerNorm(16, zero_centered_gamma=True), (5, 2, 16)),
            "rmsnorm_zero_centered": (te.RMSNorm(16, eps=1e-6, zero_centered_gamma=True), (5, 2, 16)),
            "rope_sbhd_longer_table": (RopeOnly(8, "sbhd", False), (5, 2, 3, 8)),
            "rope_bshd_interleaved_partial": (RopeOnly(4, "bshd", True), (2, 5, 3, 8)),
            "rope_thd": (RopeOnly(8, "thd", False), (14, 3, 8),
                         lambda x: {"cu_seqlens": torch.tensor([0, 5, 12], dtype=torch.int32)}),
            "layer_rope_gqa": (te.TransformerLayer(16, 32, 4, hidden_dropout=0.0, attention_dropout=0.0,
                                                   num_gqa_groups=2), (5, 2, 16),
                               lambda x: {"rotary_pos_emb": rope(x.shape[0]).to(x.device)}),
            "mha_rope_interleaved_partial_bshd": (
                te.MultiheadAttention(16, 4, attention_dropout=0.0, input_layernorm=True, qkv_format="bshd",
                                      rotary_pos_interleaved=True), (2, 5, 16),
                lambda x: {"rotary_pos_emb": partial_rope(x.shape[1]).to(x.device)}),
            "mha_rms_qk_norm_before_rope_bshd": (
                te.MultiheadAttention(16, 4, attention_dropout=0.0, input_layernorm=True, qkv_format="bshd",
                                      qk_norm_type="RMSNorm", qk_norm_eps=1e-5, qk_norm_before_rope=True),
                (2, 5, 16), lambda x: {"rotary_pos_emb": rope(x.shape[1]).to(x.device)}),
            "mha_layernorm_qk_norm_after_rope_gqa": (
                te.MultiheadAttention(16, 4, attention_dropout=0.0, num_gqa_groups=2, qk_norm_type="LayerNorm"),
                (5, 2, 16), lambda x: {"rotary_pos_emb": rope(x.shape[0]).to(x.device)}),
            "llama_decoder_subclass": (LlamaDecoderLayer(), (2, 5, 16)),
            "layer_rope_thd_padding_causal": (
                te.TransformerLayer(16, 32, 4, hidden_dropout=0.0, attention_dropout=0.0, attn_input_format="thd",
                                    self_attn_mask_type="padding_causal", fuse_qkv_params=True),
                (12, 16), lambda x: {"rotary_pos_emb": rope(7).to(x.device), **PACKED}),
        }


    def attention(mask_type, qkv_format, window):
        return te.DotProductAttention(4, 8, num_gqa_groups=2, attention_dropout=0.0, qkv_format=qkv_format,
                                      attn_mask_type=mask_type, window_size=window, tp_group=None)
    '''
)

MASK_TYPES = (
    "no_mask",
    "causal",
    "causal_bottom_right",
    "padding",
    "padding_causal",
    "padding_causal_bottom_right",
    "arbitrary",
)
# (mask type, qkv_format, window, query length, bias type); keys are 9 long, so a query of 11 leaves
# bottom-right aligned rows without keys
ATTENTION_CASES = [(m, f, w, 7, "no_bias") for m in MASK_TYPES for f in ("sbhd", "bshd") for w in (None, (2, 1))]
ATTENTION_CASES += [
    (m, "thd", None, 0, "no_bias") for m in ("padding", "padding_causal", "padding_causal_bottom_right")
]
ATTENTION_CASES += [
    ("causal_bottom_right", "sbhd", None, 11, "no_bias"),
    ("causal_bottom_right", "bshd", (2, 1), 11, "no_bias"),
    ("no_mask", "bshd", (1, 1), 11, "no_bias"),
    ("padding_causal_bottom_right", "sbhd", None, 11, "no_bias"),
    ("causal", "bshd", (3, 0), 11, "no_bias"),
    ("causal", "bshd", None, 7, "post_scale_bias"),
    ("no_mask", "sbhd", None, 7, "pre_scale_bias"),
]

DRIVER = textwrap.dedent(
    """
    import sys

    import torch

    side, project, data = sys.argv[1:]
    if side == "cuda":
        from cuda2npu.emulation import emulate_cuda

        emulate_cuda()
    else:
        from cuda2npu.emulation import emulate_npu

        emulate_npu()
    sys.path.insert(0, project)
    import model

    ATTENTION_CASES = %r


    def attention_inputs(qkv_format, sq):
        g = torch.Generator().manual_seed(7)
        skv, b = 9, 2
        q, k, v = torch.randn(sq, b, 4, 8, generator=g), torch.randn(skv, b, 2, 8, generator=g), torch.randn(skv, b, 2, 8, generator=g)
        q_pad = torch.zeros(b, 1, 1, sq, dtype=torch.bool)
        kv_pad = torch.zeros(b, 1, 1, skv, dtype=torch.bool)
        q_pad[1, ..., sq - 2:] = True
        kv_pad[1, ..., 6:] = True
        arbitrary = torch.rand(b, 4, sq, skv, generator=g) > 0.6
        bias = torch.randn(1, 4, sq, skv, generator=g)
        if qkv_format == "bshd":
            q, k, v = (t.transpose(0, 1).contiguous() for t in (q, k, v))
        return q, k, v, (q_pad, kv_pad), arbitrary, bias


    def packed_inputs():
        g = torch.Generator().manual_seed(8)
        cu_q = torch.tensor([0, 3, 7, 12], dtype=torch.int32)
        cu_kv = torch.tensor([0, 4, 7, 13], dtype=torch.int32)
        return torch.randn(14, 4, 8, generator=g), torch.randn(13, 2, 8, generator=g), torch.randn(13, 2, 8, generator=g), cu_q, cu_kv


    def to_side(value):
        if isinstance(value, torch.Tensor):
            return value.to(side)
        if isinstance(value, tuple):
            return tuple(to_side(v) for v in value)
        return value


    def outputs(result):
        results = result if isinstance(result, tuple) else (result,)
        return [r.detach().to("cpu").float() for r in results]


    if side == "cuda":
        states, expected = {}, {}
        for index, (name, (module, shape, *keywords)) in enumerate(model.modules().items()):
            g = torch.Generator().manual_seed(index)
            with torch.no_grad():  # values away from the initialisation, so every parameter matters
                for parameter in module.parameters():
                    parameter.add_(0.2 * torch.randn(parameter.shape, generator=g))
            states[name] = module.state_dict()
            inputs = torch.randn(*shape, generator=torch.Generator().manual_seed(100 + index))
            expected[name] = outputs(module(inputs, **(keywords[0](inputs) if keywords else {})))
        for case in ATTENTION_CASES:
            mask_type, qkv_format, window, sq, bias_type = case
            module = model.attention(mask_type, qkv_format, window)
            if qkv_format == "thd":
                q, k, v, cu_q, cu_kv = packed_inputs()
                out = module(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_kv=cu_kv, max_seqlen_q=5, max_seqlen_kv=6)
            else:
                q, k, v, padding, arbitrary, bias = attention_inputs(qkv_format, sq)
                mask = padding if "padding" in mask_type else arbitrary if mask_type == "arbitrary" else None
                out = module(q, k, v, attention_mask=mask, core_attention_bias_type=bias_type, core_attention_bias=bias)
            states[case] = module.state_dict()
            expected[case] = outputs(out)
        torch.save((states, expected), data)
    else:
        states, expected = torch.load(data)
        errors = {}
        for index, (name, (module, shape, *keywords)) in enumerate(model.modules().items()):
            module.load_state_dict(states[name], strict=True)  # TE's names and _extra_state entries
            inputs = torch.randn(*shape, generator=torch.Generator().manual_seed(100 + index)).to(side)
            result = module(inputs, **(keywords[0](inputs) if keywords else {}))
            errors[name] = [(got - want).abs().max().item()
                            for got, want in zip(outputs(result), expected[name], strict=True)]
        for case in ATTENTION_CASES:
            mask_type, qkv_format, window, sq, bias_type = case
            module = model.attention(mask_type, qkv_format, window)
            module.load_state_dict(states[case], strict=True)
            if qkv_format == "thd":
                q, k, v, cu_q, cu_kv = packed_inputs()
                out = module(*to_side((q, k, v)), cu_seqlens_q=cu_q, cu_seqlens_kv=cu_kv, max_seqlen_q=5, max_seqlen_kv=6)
            else:
                q, k, v, padding, arbitrary, bias = attention_inputs(qkv_format, sq)
                mask = padding if "padding" in mask_type else arbitrary if mask_type == "arbitrary" else None
                out = module(*to_side((q, k, v)), attention_mask=to_side(mask), core_attention_bias_type=bias_type,
                             core_attention_bias=bias.to(side))
            errors[case] = [
                (got - want).abs().max().item() for got, want in zip(outputs(out), expected[case], strict=True)]
        torch.save(errors, data + ".errors")
    """
) % (ATTENTION_CASES,)


def _run(side: str, project: Path, data: Path, driver: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(driver), side, str(project), str(data)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"{side} side failed:\n{proc.stderr[-4000:]}"


@pytest.fixture(scope="module")
def errors(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("te_modules")
    original, migrated = tmp / "original", tmp / "migrated"
    original.mkdir()
    (original / "model.py").write_text(MODEL, encoding="utf-8")
    driver, data = tmp / "driver.py", tmp / "data.pt"
    driver.write_text(DRIVER, encoding="utf-8")
    done = cuda2npu("migrate", original, "--out", migrated)
    assert done.returncode == 0, done.stderr
    source = (migrated / "model.py").read_text(encoding="utf-8")
    assert "import te_npu_modules" in source and not re.search(r"\bte\.", source)
    assert (migrated / "te_npu_modules.py").is_file()
    _run("cuda", original, data, driver)
    _run("npu", migrated, data, driver)
    return torch.load(str(data) + ".errors")


def test_modules_load_te_checkpoints_and_match(errors):
    modules = {name: e for name, e in errors.items() if isinstance(name, str)}
    assert len(modules) == 24
    bad = {name: e for name, e in modules.items() if max(e) > 1e-5}
    assert not bad, bad


@pytest.mark.parametrize("case", ATTENTION_CASES, ids=["-".join(map(str, c)) for c in ATTENTION_CASES])
def test_dot_product_attention_matches(errors, case):
    """Every mask type and layout, GQA, Sq != Skv, windows, padded query rows (0 like TE), thd."""
    assert max(errors[case]) < 1e-5, errors[case]
