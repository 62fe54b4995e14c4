"""Reference implementations of the fused torch_npu ops of docs/reference/torch_npu.md §2.

Each function has the documented signature, defaults, return tuple and documented input
checks (violations raise ``RuntimeError``, as the ops' TORCH_CHECKs do); it computes in
float32 and casts results to the documented dtype. All are written in differentiable torch
ops and run on any device; the fake ``torch_npu`` module wraps them with the real ops'
npu-only device check.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F

__all__ = [
    "fast_gelu",
    "npu_add_rms_norm",
    "npu_confusion_transpose",
    "npu_fast_gelu",
    "npu_gelu",
    "npu_geglu",
    "npu_linear",
    "npu_rms_norm",
    "npu_rotary_mul",
    "npu_scaled_masked_softmax",
    "npu_swiglu",
]

_RMS_NORM_DTYPES = {
    (torch.float16, torch.float32),
    (torch.bfloat16, torch.float32),
    (torch.float16, torch.float16),
    (torch.bfloat16, torch.bfloat16),
    (torch.float32, torch.float32),
}


def _check(condition: bool, op: str, message: str) -> None:
    if not condition:
        raise RuntimeError(f"{op}: {message}")


def _rms(x: torch.Tensor, gamma: torch.Tensor, epsilon: float, op: str):
    """(y in float32, rstd in float32) over the trailing ``gamma.dim()`` dims."""
    _check(2 <= x.dim() <= 8, op, f"input must be 2-D to 8-D, got {x.dim()}-D")
    _check(
        tuple(x.shape[x.dim() - gamma.dim() :]) == tuple(gamma.shape),
        op,
        f"gamma shape {tuple(gamma.shape)} does not match the trailing dims of input {tuple(x.shape)}",
    )
    dims = tuple(range(x.dim() - gamma.dim(), x.dim()))
    rstd = torch.rsqrt(x.pow(2).mean(dim=dims, keepdim=True) + epsilon)
    return x * rstd * gamma.float(), rstd


def npu_rms_norm(self, gamma, epsilon=1e-06):
    """§2.1: ``(y, rstd)``; ``rstd = 1/sqrt(mean(x^2) + eps)`` fp32 keepdim-shaped, y in x's dtype.

    Internal precision: fp32 throughout (INFERRED in the reference).
    """
    _check(
        (self.dtype, gamma.dtype) in _RMS_NORM_DTYPES,
        "npu_rms_norm",
        f"unsupported (x, gamma) dtypes ({self.dtype}, {gamma.dtype})",
    )
    y, rstd = _rms(self.float(), gamma, epsilon, "npu_rms_norm")
    return y.to(self.dtype), rstd


def npu_add_rms_norm(x1, x2, gamma, epsilon=1e-06):
    """§2.2: ``(y, rstd, x)`` with ``x = x1 + x2`` and ``y = RMSNorm(x) * gamma`` (order matters).

    The sum is normalised in fp32 and returned in x1's dtype (INFERRED). op-plugin registers no
    backward for this op; the emulator is differentiable and warns when gradients are required,
    because hardware behaviour in that case is UNVERIFIED (§2.2).
    """
    _check(gamma.dtype == x1.dtype, "npu_add_rms_norm", "gamma dtype must equal x1's dtype")
    _check(
        x1.dtype == x2.dtype and x1.dtype in (torch.float16, torch.bfloat16, torch.float32),
        "npu_add_rms_norm",
        f"x1/x2 must share a float16/bfloat16/float32 dtype, got {x1.dtype}, {x2.dtype}",
    )
    if torch.is_grad_enabled() and any(t.requires_grad for t in (x1, x2, gamma)):
        warnings.warn(
            "npu_add_rms_norm has no registered backward in op-plugin (docs/reference/torch_npu.md §2.2); "
            "training through it may fail on hardware.",
            UserWarning,
            stacklevel=2,
        )
    total = x1.float() + x2.float()
    y, rstd = _rms(total, gamma, epsilon, "npu_add_rms_norm")
    return y.to(x1.dtype), rstd, total.to(x1.dtype)


def npu_rotary_mul(self, r1, r2, rotary_mode="half", rotate=None):
    """§2.3: ``x*cos + rotate(x)*sin`` with r1 = cos, r2 = sin, broadcast over x.

    ``'half'``: rotate(x) = cat(-x2, x1) (NeoX); ``'interleave'``: pairs (x0, x1) -> (-x1, x0);
    a ``rotate`` matrix gives rotate(x) = x @ rotate.
    """
    _check(self.dim() in (3, 4), "npu_rotary_mul", f"input must be 3-D or 4-D, got {self.dim()}-D")
    _check(self.shape[-1] % 2 == 0, "npu_rotary_mul", f"last dim must be even, got {self.shape[-1]}")
    _check(
        rotary_mode in ("half", "interleave"),
        "npu_rotary_mul",
        f"rotary_mode must be 'half' or 'interleave', got {rotary_mode!r}",
    )
    x = self.float()
    if rotate is not None:
        rotated = x @ rotate.detach().float()
    elif rotary_mode == "half":
        first, second = x.chunk(2, dim=-1)
        rotated = torch.cat((-second, first), dim=-1)
    else:
        even, odd = x[..., 0::2], x[..., 1::2]
        rotated = torch.stack((-odd, even), dim=-1).flatten(-2)
    return (x * r1.float() + rotated * r2.float()).to(self.dtype)


def npu_swiglu(self, dim=-1):
    """§2.4: halves A (first), B (second) along ``dim``; ``silu(A) * B``."""
    _check(self.shape[dim] % 2 == 0, "npu_swiglu", f"size of dim {dim} must be even, got {self.shape[dim]}")
    first, second = self.float().chunk(2, dim=dim)
    return (F.silu(first) * second).to(self.dtype)


def npu_geglu(self, dim=-1, approximate=1, activate_left=False):
    """§2.5: ``(out, gelu)``; by default the RIGHT half is activated: ``A * GELU(B)``.

    ``approximate``: 0 = erf GELU, 1 = tanh GELU (default). ``activate_left=True``:
    ``GELU(A) * B``. The second output (the GELU of the activated half) is INFERRED.
    """
    _check(approximate in (0, 1), "npu_geglu", f"approximate must be 0 or 1, got {approximate}")
    _check(self.shape[dim] % 2 == 0, "npu_geglu", f"size of dim {dim} must be even, got {self.shape[dim]}")
    left, right = self.float().chunk(2, dim=dim)
    gate, other = (left, right) if activate_left else (right, left)
    activated = F.gelu(gate, approximate="tanh" if approximate == 1 else "none")
    return (other * activated).to(self.dtype), activated.to(self.dtype)


def npu_gelu(self, *, approximate="none"):
    """§2.6: same as ``torch.nn.functional.gelu`` (``'none'`` = erf, ``'tanh'``)."""
    _check(approximate in ("none", "tanh"), "npu_gelu", f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return F.gelu(self.float(), approximate=approximate).to(self.dtype)


def npu_fast_gelu(self):
    """§2.6: ``x * sigmoid(1.702 x)``; golden x=1,2,3,4 -> 0.8458, 1.9357, 2.9819, 3.9956."""
    x = self.float()
    return (x * torch.sigmoid(1.702 * x)).to(self.dtype)


fast_gelu = npu_fast_gelu


def npu_linear(input, weight, bias=None):
    """§2.7: ``input @ weight.T + bias`` with weight ``[out, in]``; 2-D input only."""
    _check(
        input.dim() == 2,
        "npu_linear",
        f"input must be 2-D (the op's output shape is [input.size(0), weight.size(0)]), got {input.dim()}-D",
    )
    out = input.float() @ weight.float().t()
    if bias is not None:
        out = out + bias.float()
    return out.to(input.dtype)


def npu_scaled_masked_softmax(x, mask, scale=1, fixed_triu_mask=False):
    """§2.10: ``softmax((x*scale).masked_fill(mask, -10000), -1)``; mask True = masked.

    Checks the documented limits: x viewed as NCHW with H and W in [32, 4096] and divisible by 32.
    """
    _check(not fixed_triu_mask, "npu_scaled_masked_softmax", "fixed_triu_mask is reserved and must be False")
    _check(x.dim() == 4, "npu_scaled_masked_softmax", f"x must be 4-D (NCHW), got {x.dim()}-D")
    for size in x.shape[-2:]:
        _check(
            32 <= size <= 4096 and size % 32 == 0,
            "npu_scaled_masked_softmax",
            f"H and W must be in [32, 4096] and divisible by 32, got {tuple(x.shape)}",
        )
    _check(mask.dtype == torch.bool, "npu_scaled_masked_softmax", f"mask must be bool, got {mask.dtype}")
    scores = (x.float() * scale).masked_fill(mask, -10000.0)
    return torch.softmax(scores, dim=-1).to(x.dtype)


def npu_confusion_transpose(self, perm, shape, transpose_first):
    """§2.12: ``permute(perm).reshape(shape)`` if ``transpose_first`` else ``reshape(shape).permute(perm)``."""
    if transpose_first:
        return self.permute(*perm).reshape(*shape)
    return self.reshape(*shape).permute(*perm)
