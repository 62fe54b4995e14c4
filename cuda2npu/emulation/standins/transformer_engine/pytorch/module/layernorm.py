"""``transformer_engine.pytorch.LayerNorm`` / ``RMSNorm`` stand-ins (``NVIDIA/TransformerEngine``
``transformer_engine/pytorch/module/layernorm.py``, ``rmsnorm.py`` and ``ops/basic/layer_norm.py``,
``ops/basic/rmsnorm.py``).

TE 2.x implements both as fusible operations: the compute dtype is the autocast dtype inside
autocast, else the parameters' dtype; the input is cast to it, statistics are float32.
LayerNorm has ``weight`` (1) and ``bias`` (0), RMSNorm has ``weight`` (1); with
``zero_centered_gamma`` the weight starts at 0 and the scale is ``1 + weight``.
Normalisation runs over the trailing ``normalized_shape`` dimensions.

Their ``_extra_state`` is what TE's ``BasicOperation.get_extra_state`` stores for an op without
FP8 quantizers: an empty pickled dict as a uint8 tensor (``pickle.dumps({})``).
"""

from __future__ import annotations

import numbers
import pickle

import torch
import torch.nn.functional as F

from .base import (
    StandinModule,
    autocast_dtype,
    check_options,
    high_precision,
    init_parameter,
    standin_device,
)


def _shape(normalized_shape) -> tuple:
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(normalized_shape)


class _NormOp(StandinModule):
    def __init__(self, normalized_shape, eps, zero_centered_gamma, device, dtype, params_dtype, owner, options):
        super().__init__()
        check_options(owner, options)
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.zero_centered_gamma = zero_centered_gamma
        self._device = standin_device("cuda" if device is None else device)
        self._dtype = dtype or params_dtype or torch.get_default_dtype()
        weight = torch.empty(self.normalized_shape, device=self._device, dtype=self._dtype)
        self.weight = init_parameter(weight, torch.nn.init.zeros_ if zero_centered_gamma else torch.nn.init.ones_)

    def get_extra_state(self) -> torch.Tensor:
        return torch.frombuffer(bytearray(pickle.dumps({})), dtype=torch.uint8)

    def _compute_dtype(self, inp: torch.Tensor) -> torch.dtype:
        return autocast_dtype(inp) or self.weight.dtype

    def _gamma(self, dtype: torch.dtype) -> torch.Tensor:
        gamma = self.weight.to(dtype).float()
        return gamma + 1 if self.zero_centered_gamma else gamma


class LayerNorm(_NormOp):
    """TE ``LayerNorm(normalized_shape, eps=1e-5, ...)``; parameters ``weight``, ``bias``."""

    def __init__(
        self,
        normalized_shape,
        eps=1e-5,
        device=None,
        dtype=None,
        *,
        zero_centered_gamma=False,
        params_dtype=None,
        **options,
    ):
        super().__init__(normalized_shape, eps, zero_centered_gamma, device, dtype, params_dtype, "LayerNorm", options)
        bias = torch.empty(self.normalized_shape, device=self._device, dtype=self._dtype)
        self.bias = init_parameter(bias, torch.nn.init.zeros_)

    def forward(self, inp):
        dtype = self._compute_dtype(inp)
        with high_precision(inp):
            out = F.layer_norm(
                inp.to(dtype).float(), self.normalized_shape, self._gamma(dtype), self.bias.to(dtype).float(), self.eps
            )
        return out.to(dtype)


class RMSNorm(_NormOp):
    """TE ``RMSNorm(normalized_shape, eps=1e-5, ...)``; parameter ``weight``."""

    def __init__(
        self,
        normalized_shape,
        eps=1e-5,
        device=None,
        dtype=None,
        *,
        zero_centered_gamma=False,
        params_dtype=None,
        **options,
    ):
        super().__init__(normalized_shape, eps, zero_centered_gamma, device, dtype, params_dtype, "RMSNorm", options)

    def forward(self, inp):
        dtype = self._compute_dtype(inp)
        dims = tuple(range(-len(self.normalized_shape), 0))
        with high_precision(inp):
            x = inp.to(dtype).float()
            out = x * torch.rsqrt(x.square().mean(dims, keepdim=True) + self.eps) * self._gamma(dtype)
        return out.to(dtype)
