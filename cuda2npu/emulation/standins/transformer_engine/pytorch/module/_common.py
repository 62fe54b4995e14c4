"""Math shared by the TE module stand-ins, computed in float32 and rounded to the activation
dtype where TE materialises a tensor (normalisation output, GEMM output, activation output).

Sources (``NVIDIA/TransformerEngine``):

* normalisation: ``transformer_engine/common/normalization`` and the module docstrings —
  LayerNorm ``(x - mean) / sqrt(var + eps) * gamma + beta`` (biased variance), RMSNorm
  ``x / sqrt(mean(x**2) + eps) * gamma``, over the last dimension; with
  ``zero_centered_gamma`` the scale is ``1 + gamma``.
* GEMM: ``y = x W^T + b`` with operands in the activation dtype and float32 accumulation
  (cuBLAS); the bias is added before the single rounding of the output.
* activations: ``transformer_engine/common/util/math.h``. ``gelu`` is the tanh approximation
  ``x * (0.5 + 0.5 * tanh(x * (0.79788456 + 0.03567741 * x**2)))``; ``qgelu`` is
  ``x * sigmoid(1.702 x)``; ``srelu`` is ``relu(x)**2``; ``silu`` is ``x * sigmoid(x)``. Gated
  variants split the input in two halves ``a, b`` along the last dimension and return
  ``act(a) * b`` — the activation is applied to the FIRST half (``ops/basic/swiglu.py``:
  "Transformer Engine applies the gating function to the first half of the input tensor,
  while PyTorch applies it to the second half"): ``geglu`` (gelu), ``reglu`` (relu),
  ``swiglu`` (silu), ``qgeglu`` (qgelu), ``sreglu`` (srelu), ``glu`` (sigmoid).

TE fuses some steps into one kernel (e.g. bias + GELU in the GEMM epilogue), which rounds
once fewer than this module does for bf16/fp16; in float32 the results coincide up to
summation order.
"""

from __future__ import annotations

from typing import Callable, Optional

import torch
import torch.nn.functional as F

NORMALIZATIONS = ("LayerNorm", "RMSNorm")


def _qgelu(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(1.702 * x)


def _srelu(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x).square()


_PLAIN: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": lambda x: F.gelu(x, approximate="tanh"),
    "relu": torch.relu,
    "qgelu": _qgelu,
    "srelu": _srelu,
    "silu": F.silu,
}
_GATED: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "geglu": _PLAIN["gelu"],
    "reglu": torch.relu,
    "swiglu": F.silu,
    "qgeglu": _qgelu,
    "sreglu": _srelu,
    "glu": torch.sigmoid,
}
GATED_ACTIVATIONS = frozenset(_GATED)


def check_activation(activation: str) -> None:
    if activation not in _PLAIN and activation not in _GATED:
        raise NotImplementedError("Activation type " + activation + " is not supported!")


def apply_activation(activation: str, x: torch.Tensor) -> torch.Tensor:
    """Activation in float32 (gated ones halve the last dimension)."""
    xf = x.float()
    if activation in _GATED:
        a, b = xf.chunk(2, dim=-1)
        return _GATED[activation](a) * b
    return _PLAIN[activation](xf)


def check_normalization(normalization: str) -> None:
    if normalization not in NORMALIZATIONS:
        raise AssertionError("Unsupported normalization type!")


def normalize(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: Optional[torch.Tensor],
    eps: float,
    normalization: str,
    zero_centered_gamma: bool,
) -> torch.Tensor:
    """LayerNorm/RMSNorm over the last dimension, float32 result."""
    xf = x.float()
    gamma = weight.float() + 1 if zero_centered_gamma else weight.float()
    if normalization == "LayerNorm":
        return F.layer_norm(xf, (xf.shape[-1],), gamma, bias.float(), eps)
    return xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps) * gamma


def gemm(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    """``x W^T + b`` with operands rounded to ``dtype``, float32 accumulation, output in ``dtype``."""
    b = None if bias is None else bias.to(dtype).float()
    return F.linear(x.to(dtype).float(), weight.to(dtype).float(), b).to(dtype)
