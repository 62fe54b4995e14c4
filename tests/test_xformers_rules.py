"""NPU409/NPU410 decisions that the goldens do not show one by one."""

from __future__ import annotations

from helpers import dedent, migrate_text, options_of

from cuda2npu.core.options import Options


def _codes(source: str, **options) -> tuple[str, set[str]]:
    after, result = migrate_text(dedent(source), options_of(**options))
    return after, {f.code for f in result.findings}


def test_a_tensor_bias_assigned_once_is_followed_and_goes_to_sdpa():
    after, codes = _codes(
        """
        import torch
        from xformers.ops import memory_efficient_attention


        def f(q, k, v):
            bias = torch.zeros(2, 3, 4, 4)
            return memory_efficient_attention(q, k, v, bias)
        """
    )
    assert "NPU409" in codes and "NPU410" not in codes
    assert "scaled_dot_product_attention(" in after and "attn_mask=bias" in after and "xformers" not in after


def test_a_parameter_bias_is_marked_not_guessed():
    after, codes = _codes(
        """
        import xformers.ops as xops


        def f(q, k, v, bias=None):
            return xops.memory_efficient_attention(q, k, v, attn_bias=bias)
        """
    )
    assert "NPU410" in codes and "NPU409" not in codes
    assert "memory_efficient_attention(q, k, v, attn_bias=bias)" in after


def test_negated_condition_and_rerun_change_nothing():
    after, codes = _codes(
        """
        import torch
        import xformers.ops as xops


        def f(q, k, v, bidirectional):
            return xops.memory_efficient_attention(q, k, v, None if bidirectional else xops.LowerTriangularMask())
        """
    )
    assert "sparse_mode=0 if bidirectional else 2" in after
    assert "atten_mask=None if bidirectional else _npu_causal_mask(q.device)" in after
    again, _ = migrate_text(after, Options())
    assert again == after


def test_portable_output_keeps_the_call_as_a_manual_item():
    after, codes = _codes(
        """
        import torch
        import xformers.ops as xops


        def f(q, k, v):
            return xops.memory_efficient_attention(q, k, v)
        """,
        portable=True,
    )
    assert "NPU409" in codes and "xops.memory_efficient_attention(q, k, v)" in after


def test_the_oldest_torch_npu_target_still_rewrites():  # the keywords used exist since TorchNPU 6.0.0
    _, codes = _codes(
        """
        import torch
        import xformers.ops as xops


        def f(q, k, v):
            return xops.memory_efficient_attention(q, k, v)
        """,
        target_torch_npu="2.1.0.post10",
    )
    assert "NPU409" in codes
