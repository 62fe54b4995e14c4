"""The switches the validation sets on the emulated attention kernels (cuda2npu.emulation.controls):
dropout off, float32 accepted by half-only kernels, and an observer of each call's drop
probability and scale. The kernels' math is the documented one (their own tests); here only
what the switches change."""

from __future__ import annotations

import pytest
import torch

from cuda2npu.emulation.controls import CONTROLS
from cuda2npu.emulation.npu_attention import npu_fusion_attention
from cuda2npu.emulation.standins.flash_attn import flash_attn_func


@pytest.fixture
def controls():
    saved = (CONTROLS.dropout, CONTROLS.half_only, CONTROLS.observer)
    calls = []
    CONTROLS.observer = lambda kernel, drop, scale: calls.append((kernel, drop, scale))
    yield calls
    CONTROLS.dropout, CONTROLS.half_only, CONTROLS.observer = saved


def _qkv(dtype=torch.float16):
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(2, 5, 2, 8, generator=generator).to(dtype) for _ in range(3)]


def test_flash_attn_reports_each_call_and_draws_no_dropout_when_switched_off(controls):
    q, k, v = _qkv()
    without = flash_attn_func(q, k, v, dropout_p=0.0, causal=True)
    torch.manual_seed(1)
    dropped = flash_attn_func(q, k, v, dropout_p=0.3, causal=True)
    assert not torch.equal(dropped, without)  # the switch is on by default
    CONTROLS.dropout = False
    assert torch.equal(
        flash_attn_func(q, k, v, dropout_p=0.3, causal=True, softmax_scale=0.5),
        flash_attn_func(q, k, v, softmax_scale=0.5, causal=True),
    )
    assert controls[0] == ("flash_attn", 0.0, pytest.approx(8**-0.5)) and controls[1][1] == pytest.approx(0.3)
    assert controls[2] == ("flash_attn", pytest.approx(0.3), 0.5)


def test_flash_attn_takes_float32_only_when_half_only_is_off(controls):
    q, k, v = _qkv(torch.float32)
    with pytest.raises(RuntimeError, match="only support fp16 and bf16"):
        flash_attn_func(q, k, v)
    CONTROLS.half_only = False
    reference = flash_attn_func(*(t.half() for t in (q, k, v))).float()
    assert torch.allclose(flash_attn_func(q, k, v), reference, atol=2e-3)


def test_npu_fusion_attention_reports_the_drop_probability_and_keeps_everything_when_switched_off(controls):
    q, k, v = _qkv(torch.float32)
    kwargs = dict(scale=0.25, keep_prob=0.8)
    CONTROLS.dropout = False
    out = npu_fusion_attention(q, k, v, 2, "BSND", **kwargs)[0]
    assert torch.equal(out, npu_fusion_attention(q, k, v, 2, "BSND", scale=0.25)[0])
    assert controls[0] == ("npu_fusion_attention", pytest.approx(0.2), 0.25)
    with pytest.raises(RuntimeError, match="keep_prob"):  # an invalid value still fails as on the device
        npu_fusion_attention(q, k, v, 2, "BSND", keep_prob=0.0)
