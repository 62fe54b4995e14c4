"""``apex.normalization`` layer/RMS norms with the semantics of apex's CUDA path.

Follows ``NVIDIA/apex`` ``apex/normalization/fused_layer_norm.py`` and
``csrc/layer_norm_cuda_kernel.cu``. The original program ran these on CUDA tensors, so the
stand-in reproduces the CUDA path, not apex's own CPU fallback (which returns
``F.layer_norm`` / ``manual_rms_norm`` results in the promoted dtype):

* Under autocast the functional entry points first cast their floating tensor arguments to
  the autocast dtype (apex ``_cast_if_autocast_enabled``), then run with autocast disabled.
* Statistics and the affine transform are computed in float32; the output has the input's
  dtype (``FusedLayerNorm``/``FusedRMSNorm`` and ``fused_*``), or the weight's dtype for the
  ``MixedFused*`` classes and ``mixed_dtype_*`` functions.
* Layer norm: ``y = (x - mean) / sqrt(var + eps) * weight + bias`` (biased variance).
  RMS norm: ``y = x / sqrt(mean(x**2) + eps) * weight``. Both over ``normalized_shape``.
* Functional ``eps`` defaults to 1e-6, module ``eps`` to 1e-5, as in apex.
  ``memory_efficient`` only changes what apex saves for the backward pass; autograd here
  always differentiates the forward formula.
"""

from __future__ import annotations

import numbers

import torch
import torch.nn.functional as F
from torch.nn import Parameter, init


def _cast_if_autocast_enabled(*args):
    """apex ``_cast_if_autocast_enabled``, for the autocast of the input's device."""
    device_type = args[0].device.type
    if not torch.is_autocast_enabled(device_type):
        return args
    dtype = torch.get_autocast_dtype(device_type)
    return tuple(a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)


def _layer_norm(input, weight, bias, normalized_shape, eps, out_dtype):
    with torch.autocast(input.device.type, enabled=False):
        weight = None if weight is None else weight.float()
        bias = None if bias is None else bias.float()
        return F.layer_norm(input.float(), tuple(normalized_shape), weight, bias, eps).to(out_dtype)


def _rms_norm(input, weight, normalized_shape, eps, out_dtype):
    with torch.autocast(input.device.type, enabled=False):
        dims = tuple(range(-len(normalized_shape), 0))
        x = input.float()
        y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
        if weight is not None:
            y = y * weight.float()
        return y.to(out_dtype)


def fused_layer_norm_affine(input, weight, bias, normalized_shape, eps=1e-6, memory_efficient=False):
    input, weight, bias = _cast_if_autocast_enabled(input, weight, bias)
    return _layer_norm(input, weight, bias, normalized_shape, eps, input.dtype)


def fused_layer_norm(input, normalized_shape, eps=1e-6, memory_efficient=False):
    (input,) = _cast_if_autocast_enabled(input)
    return _layer_norm(input, None, None, normalized_shape, eps, input.dtype)


def mixed_dtype_fused_layer_norm_affine(input, weight, bias, normalized_shape, eps=1e-6, memory_efficient=False):
    input, weight, bias = _cast_if_autocast_enabled(input, weight, bias)
    return _layer_norm(input, weight, bias, normalized_shape, eps, weight.dtype)


def fused_rms_norm_affine(input, weight, normalized_shape, eps=1e-6, memory_efficient=False):
    input, weight = _cast_if_autocast_enabled(input, weight)
    return _rms_norm(input, weight, normalized_shape, eps, input.dtype)


def fused_rms_norm(input, normalized_shape, eps=1e-6, memory_efficient=False):
    (input,) = _cast_if_autocast_enabled(input)
    return _rms_norm(input, None, normalized_shape, eps, input.dtype)


def mixed_dtype_fused_rms_norm_affine(input, weight, normalized_shape, eps=1e-6, memory_efficient=False):
    input, weight = _cast_if_autocast_enabled(input, weight)
    return _rms_norm(input, weight, normalized_shape, eps, weight.dtype)


def _as_shape(normalized_shape) -> torch.Size:
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (normalized_shape,)
    return torch.Size(normalized_shape)


class FusedLayerNorm(torch.nn.Module):
    """Layer norm with parameters ``weight`` (ones) and ``bias`` (zeros)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, memory_efficient=False):
        super().__init__()
        self.normalized_shape = _as_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.memory_efficient = memory_efficient
        if self.elementwise_affine:
            self.weight = Parameter(torch.empty(*self.normalized_shape))
            self.bias = Parameter(torch.empty(*self.normalized_shape))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, input):
        if self.elementwise_affine:
            return fused_layer_norm_affine(input, self.weight, self.bias, self.normalized_shape, self.eps)
        return fused_layer_norm(input, self.normalized_shape, self.eps)

    def extra_repr(self):
        return "{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}".format(**self.__dict__)


class FusedRMSNorm(torch.nn.Module):
    """RMS norm with parameter ``weight`` (ones)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, memory_efficient=False):
        super().__init__()
        self.normalized_shape = _as_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.memory_efficient = memory_efficient
        if self.elementwise_affine:
            self.weight = Parameter(torch.empty(*self.normalized_shape))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, input):
        if self.elementwise_affine:
            return fused_rms_norm_affine(input, self.weight, self.normalized_shape, self.eps)
        return fused_rms_norm(input, self.normalized_shape, self.eps)

    def extra_repr(self):
        return "{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}".format(**self.__dict__)


def _affine_only(cls_name: str, kwargs: dict) -> None:
    if "elementwise_affine" in kwargs and not kwargs.pop("elementwise_affine"):
        raise RuntimeError(f"{cls_name} does not support `elementwise_affine = False`")


class MixedFusedLayerNorm(FusedLayerNorm):
    """Layer norm whose output takes the parameters' dtype (Megatron's mixed-dtype variant)."""

    def __init__(self, normalized_shape, eps=1e-5, *, memory_efficient=False, **kwargs):
        _affine_only("MixedFusedLayerNorm", kwargs)
        super().__init__(
            normalized_shape=normalized_shape, eps=eps, elementwise_affine=True, memory_efficient=memory_efficient
        )

    def forward(self, input):
        return mixed_dtype_fused_layer_norm_affine(input, self.weight, self.bias, self.normalized_shape, self.eps)


class MixedFusedRMSNorm(FusedRMSNorm):
    """RMS norm whose output takes the parameter's dtype."""

    def __init__(self, normalized_shape, eps=1e-5, *, memory_efficient=False, **kwargs):
        _affine_only("MixedFusedRMSNorm", kwargs)
        super().__init__(
            normalized_shape=normalized_shape, eps=eps, elementwise_affine=True, memory_efficient=memory_efficient
        )

    def forward(self, input):
        return mixed_dtype_fused_rms_norm_affine(input, self.weight, self.normalized_shape, self.eps)
