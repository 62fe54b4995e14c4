"""Fused torch_npu ops (docs/reference/torch_npu.md §2) vs independent float64 references.

Each reference is written here from the documented formula. The math runs on CPU tensors in
this process; the device-facing ``torch_npu.*`` wrappers run in the npu worker process.
"""

from __future__ import annotations

import math

import pytest
import torch
from npu_process import in_npu_process

from cuda2npu.emulation import npu_ops

TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SHAPES = [(2, 8), (3, 4, 16), (2, 3, 5, 12)]


def rand(shape, dtype=torch.float32, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def close(actual, expected, dtype):
    assert actual.dtype == dtype
    torch.testing.assert_close(actual.double(), expected.double(), atol=TOL[dtype], rtol=TOL[dtype])


def gelu_erf(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


# --- RMSNorm --------------------------------------------------------------------------------


def rms_ref(x, gamma, eps):
    x = x.double()
    dims = tuple(range(x.dim() - gamma.dim(), x.dim()))
    rstd = 1 / torch.sqrt((x * x).mean(dim=dims, keepdim=True) + eps)
    return x * rstd * gamma.double(), rstd


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "dtypes",
    [
        (torch.float32, torch.float32),
        (torch.float16, torch.float32),
        (torch.bfloat16, torch.bfloat16),
        (torch.float16, torch.float16),
    ],
)
def test_rms_norm(shape, dtypes):
    x_dtype, g_dtype = dtypes
    x, gamma = rand(shape, x_dtype), rand(shape[-1:], g_dtype, seed=1)
    y, rstd = npu_ops.npu_rms_norm(x, gamma)
    y_ref, rstd_ref = rms_ref(x, gamma, 1e-6)
    close(y, y_ref, x_dtype)
    assert rstd.dtype == torch.float32 and rstd.shape == (*shape[:-1], 1)
    torch.testing.assert_close(rstd.double(), rstd_ref, atol=1e-5, rtol=1e-5)


def test_rms_norm_over_several_trailing_dims_and_eps():
    x, gamma = rand((2, 3, 4, 8)), rand((4, 8), seed=1)
    y, rstd = npu_ops.npu_rms_norm(x, gamma, epsilon=0.5)
    y_ref, rstd_ref = rms_ref(x, gamma, 0.5)
    close(y, y_ref, torch.float32)
    assert rstd.shape == (2, 3, 1, 1)


def test_rms_norm_rejects_undocumented_dtype_pairs():
    with pytest.raises(RuntimeError, match="dtypes"):
        npu_ops.npu_rms_norm(rand((2, 4)), rand((4,), torch.float16))


def test_add_rms_norm_returns_y_rstd_and_the_sum():
    x1, x2, gamma = rand((3, 16)), rand((3, 16), seed=1), rand((16,), seed=2)
    y, rstd, total = npu_ops.npu_add_rms_norm(x1, x2, gamma, epsilon=1e-5)
    y_ref, rstd_ref = rms_ref(x1.double() + x2.double(), gamma, 1e-5)
    close(y, y_ref, torch.float32)
    close(total, x1.double() + x2.double(), torch.float32)
    torch.testing.assert_close(rstd.double(), rstd_ref, atol=1e-5, rtol=1e-5)


def test_add_rms_norm_warns_about_missing_backward():
    x1 = rand((2, 4)).requires_grad_()
    with pytest.warns(UserWarning, match="no registered backward"):
        npu_ops.npu_add_rms_norm(x1, rand((2, 4)), rand((4,)))


# --- RoPE -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_rotary_mul_half_mode(dtype):
    x, freqs = rand((2, 3, 5, 8), dtype), rand((1, 1, 5, 4), seed=1)
    cos, sin = torch.cat([freqs.cos()] * 2, -1).to(dtype), torch.cat([freqs.sin()] * 2, -1).to(dtype)
    out = npu_ops.npu_rotary_mul(x, cos, sin)
    xd = x.double()
    rotated = torch.cat([-xd[..., 4:], xd[..., :4]], dim=-1)
    close(out, xd * cos.double() + rotated * sin.double(), dtype)


def test_rotary_mul_interleave_mode_rotates_adjacent_pairs():
    x, freqs = rand((2, 5, 3, 6)), rand((1, 5, 1, 3), seed=1)
    cos, sin = freqs.cos().repeat_interleave(2, -1), freqs.sin().repeat_interleave(2, -1)
    out = npu_ops.npu_rotary_mul(x, cos, sin, rotary_mode="interleave")
    xd = x.double()
    expected = torch.empty_like(xd)
    for k in range(3):
        a, b = xd[..., 2 * k], xd[..., 2 * k + 1]
        expected[..., 2 * k] = a * cos[..., 2 * k].double() - b * sin[..., 2 * k].double()
        expected[..., 2 * k + 1] = b * cos[..., 2 * k + 1].double() + a * sin[..., 2 * k + 1].double()
    close(out, expected, torch.float32)


def test_rotary_mul_with_rotate_matrix():
    x, cos, sin, rotate = rand((2, 3, 4)), rand((2, 3, 4), seed=1), rand((2, 3, 4), seed=2), rand((4, 4), seed=3)
    out = npu_ops.npu_rotary_mul(x, cos, sin, rotate=rotate)
    close(out, x.double() * cos.double() + (x.double() @ rotate.double()) * sin.double(), torch.float32)


def test_rotary_mul_rejects_bad_mode():
    with pytest.raises(RuntimeError, match="rotary_mode"):
        npu_ops.npu_rotary_mul(rand((1, 2, 4)), rand((1, 2, 4)), rand((1, 2, 4)), rotary_mode="full")


# --- GLU family and GELU --------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_swiglu_activates_the_first_half(shape, dtype):
    x = rand(shape, dtype)
    h = shape[-1] // 2
    a, b = x.double()[..., :h], x.double()[..., h:]
    close(npu_ops.npu_swiglu(x), a * torch.sigmoid(a) * b, dtype)


def test_swiglu_along_other_dim():
    x = rand((6, 3))
    a, b = x.double()[:3], x.double()[3:]
    close(npu_ops.npu_swiglu(x, dim=0), a * torch.sigmoid(a) * b, torch.float32)


@pytest.mark.parametrize("dtype", DTYPES)
def test_geglu_default_activates_right_half_with_tanh_gelu(dtype):
    x = rand((3, 10), dtype)
    a, b = x.double()[..., :5], x.double()[..., 5:]
    out, gelu = npu_ops.npu_geglu(x)
    close(out, a * gelu_tanh(b), dtype)
    close(gelu, gelu_tanh(b), dtype)
    assert not torch.allclose(out.double(), gelu_tanh(a) * b, atol=1e-2)


def test_geglu_activate_left_and_erf():
    x = rand((4, 6))
    a, b = x.double()[..., :3], x.double()[..., 3:]
    close(npu_ops.npu_geglu(x, activate_left=True)[0], gelu_tanh(a) * b, torch.float32)
    close(npu_ops.npu_geglu(x, approximate=0)[0], a * gelu_erf(b), torch.float32)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_modes(dtype):
    x = rand((5, 7), dtype)
    close(npu_ops.npu_gelu(x), gelu_erf(x.double()), dtype)
    close(npu_ops.npu_gelu(x, approximate="tanh"), gelu_tanh(x.double()), dtype)


def test_fast_gelu_golden_values():
    """Op-plugin test golden (§2.6): x = 1, 2, 3, 4."""
    out = npu_ops.npu_fast_gelu(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    torch.testing.assert_close(out, torch.tensor([0.8458, 1.9357, 2.9819, 3.9956]), atol=1e-4, rtol=0)
    assert npu_ops.fast_gelu is npu_ops.npu_fast_gelu


@pytest.mark.parametrize("dtype", DTYPES)
def test_fast_gelu_formula(dtype):
    x = rand((4, 9), dtype) * 3
    close(npu_ops.npu_fast_gelu(x), x.double() / (1 + torch.exp(-1.702 * x.double())), dtype)


# --- linear, softmax, transpose -------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_linear_weight_is_out_by_in(dtype):
    x, w, b = rand((3, 16), dtype), rand((4, 16), dtype, 1), rand((4,), dtype, 2)
    close(npu_ops.npu_linear(x, w, b), x.double() @ w.double().T + b.double(), dtype)
    close(npu_ops.npu_linear(x, w), x.double() @ w.double().T, dtype)


def test_linear_is_2d_only():
    with pytest.raises(RuntimeError, match="2-D"):
        npu_ops.npu_linear(rand((2, 3, 16)), rand((4, 16)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_scaled_masked_softmax(dtype):
    x = rand((2, 2, 32, 64), dtype)
    mask = torch.rand(2, 1, 32, 64, generator=torch.Generator().manual_seed(1)) < 0.3
    out = npu_ops.npu_scaled_masked_softmax(x, mask, scale=0.5)
    logits = torch.where(mask, torch.tensor(-10000.0, dtype=torch.float64), x.double() * 0.5)
    close(out, torch.softmax(logits, dim=-1), dtype)
    assert (out.float()[mask.expand_as(out)] < 1e-3).all()  # True = masked


def test_scaled_masked_softmax_checks():
    with pytest.raises(RuntimeError, match="divisible by 32"):
        npu_ops.npu_scaled_masked_softmax(rand((1, 1, 30, 32)), torch.zeros(1, 1, 30, 32, dtype=torch.bool))
    with pytest.raises(RuntimeError, match="fixed_triu_mask"):
        npu_ops.npu_scaled_masked_softmax(
            rand((1, 1, 32, 32)), torch.zeros(1, 1, 32, 32, dtype=torch.bool), fixed_triu_mask=True
        )


def test_confusion_transpose_doc_examples():
    x = rand((2, 3, 4, 6))
    out = npu_ops.npu_confusion_transpose(x, (0, 2, 1, 3), (2, 4, 18), True)
    assert out.shape == (2, 4, 18) and torch.equal(out, x.permute(0, 2, 1, 3).reshape(2, 4, 18))
    out = npu_ops.npu_confusion_transpose(x, (0, 2, 1), (2, 12, 6), False)
    assert out.shape == (2, 6, 12) and torch.equal(out, x.reshape(2, 12, 6).permute(0, 2, 1))


# --- gradients ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op,ref,shapes",
    [
        (lambda x, g: npu_ops.npu_rms_norm(x, g)[0], lambda x, g: rms_ref(x, g, 1e-6)[0], [(3, 8), (8,)]),
        (lambda x: npu_ops.npu_swiglu(x), lambda x: torch.sigmoid(x[..., :4]) * x[..., :4] * x[..., 4:], [(3, 8)]),
        (lambda x: npu_ops.npu_geglu(x)[0], lambda x: x[..., :4] * gelu_tanh(x[..., 4:]), [(3, 8)]),
        (lambda x: npu_ops.npu_fast_gelu(x), lambda x: x * torch.sigmoid(1.702 * x), [(3, 8)]),
        (
            lambda x, c, s: npu_ops.npu_rotary_mul(x, c, s),
            lambda x, c, s: x * c + torch.cat([-x[..., 4:], x[..., :4]], -1) * s,
            [(2, 3, 8), (1, 3, 8), (1, 3, 8)],
        ),
    ],
)
def test_gradients_match_float64(op, ref, shapes):
    inputs = [rand(shape, seed=i).requires_grad_() for i, shape in enumerate(shapes)]
    out = op(*inputs)
    grad_out = rand(out.shape, seed=9)
    (out * grad_out).sum().backward()
    ref_inputs = [t.detach().double().requires_grad_() for t in inputs]
    (ref(*ref_inputs) * grad_out.double()).sum().backward()
    for got, want in zip(inputs, ref_inputs):
        torch.testing.assert_close(got.grad.double(), want.grad, atol=1e-5, rtol=1e-5)


# --- the device-facing ops (npu worker process) ---------------------------------------------


@in_npu_process
def test_torch_npu_ops_run_on_npu_and_reject_cpu_tensors():
    import torch_npu

    x = rand((3, 8))
    gamma = rand((8,), seed=1)
    y, rstd = torch_npu.npu_rms_norm(x.npu(), gamma.npu(), epsilon=1e-6)
    assert y.device.type == rstd.device.type == "npu"
    close(y.cpu(), rms_ref(x, gamma, 1e-6)[0], torch.float32)
    out = torch_npu.npu_swiglu(x.npu().requires_grad_())
    out.sum().backward()
    for name in (
        "npu_rms_norm",
        "npu_add_rms_norm",
        "npu_rotary_mul",
        "npu_swiglu",
        "npu_geglu",
        "npu_gelu",
        "npu_fast_gelu",
        "fast_gelu",
        "npu_linear",
        "npu_scaled_masked_softmax",
        "npu_confusion_transpose",
        "npu_fusion_attention",
    ):
        assert callable(getattr(torch_npu, name))
    with pytest.raises(RuntimeError, match="only npu tensor"):
        torch_npu.npu_swiglu(x)
    with pytest.raises(AttributeError, match="not provided"):
        torch_npu.npu_layer_norm  # does not exist in torch_npu (§2.8)
