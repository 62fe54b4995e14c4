"""``transformer_engine.pytorch.Linear`` stand-in (``NVIDIA/TransformerEngine``
``transformer_engine/pytorch/module/linear.py``).

``y = x W^T + b`` in the activation dtype (see :mod:`.base`), float32 accumulation.
Parameters are ``weight`` (out_features, in_features) and ``bias``; with ``parameters_split``
(a dict name -> rows, or names for an even split) they are ``<name>_weight``/``<name>_bias``
and the layer uses their concatenation, as TE does. ``bias=False`` leaves empty, unregistered
bias tensors (not in the state dict). ``return_bias=True`` skips the bias add and returns
``(out, bias)``. Arguments after ``out_features`` are keyword-only in the stand-in.
"""

from __future__ import annotations

import torch

from ._common import gemm
from .base import (
    StandinModule,
    check_options,
    default_init_method,
    high_precision,
    init_parameter,
    standin_device,
)


def add_linear_parameters(module, in_features, out_features, use_bias, parameters_split, init_method, device, dtype):
    """Register TE's (possibly split) weight/bias parameters; return their names."""
    if parameters_split is None:
        names, sizes = [None], [out_features]
    elif isinstance(parameters_split, dict):
        names, sizes = list(parameters_split), list(parameters_split.values())
    elif parameters_split and all(isinstance(name, str) for name in parameters_split):
        names, sizes = list(parameters_split), [out_features // len(parameters_split)] * len(parameters_split)
    else:
        raise TypeError("Invalid configuration for parameters split")
    if sum(sizes) != out_features:
        raise ValueError(f"Trying to split weight buffer ({out_features=}) with split sizes {sizes}")
    weight_names, bias_names = [], []
    for name, size in zip(names, sizes):
        weight_name = "weight" if name is None else f"{name.rstrip('_')}_weight"
        bias_name = "bias" if name is None else f"{name.rstrip('_')}_bias"
        weight = torch.empty(size, in_features, device=device, dtype=dtype)
        module.register_parameter(weight_name, init_parameter(weight, init_method))
        if use_bias:
            bias = torch.empty(size, device=device, dtype=dtype)
            module.register_parameter(bias_name, init_parameter(bias, torch.nn.init.zeros_))
        else:
            setattr(module, bias_name, torch.Tensor().to(dtype=dtype, device=device))
        weight_names.append(weight_name)
        bias_names.append(bias_name)
    return weight_names, bias_names


def joined(module, names) -> torch.Tensor:
    tensors = [getattr(module, name) for name in names]
    return tensors[0] if len(tensors) == 1 else torch.cat(tensors, dim=0)


class Linear(StandinModule):
    """TE ``Linear`` (see module docstring)."""

    def __init__(
        self,
        in_features,
        out_features,
        *,
        init_method=None,
        bias=True,
        return_bias=False,
        params_dtype=None,
        parameters_split=None,
        device="cuda",
        **options,
    ):
        super().__init__()
        check_options("Linear", options)
        self.in_features = in_features
        self.out_features = out_features
        self.use_bias = bias
        self.return_bias = return_bias
        self.apply_bias = bias and not return_bias
        dtype = torch.get_default_dtype() if params_dtype is None else params_dtype
        self.weight_names, self.bias_names = add_linear_parameters(
            self,
            in_features,
            out_features,
            bias,
            parameters_split,
            init_method or default_init_method(),
            standin_device(device),
            dtype,
        )

    def forward(self, inp, is_first_microbatch=None, fp8_output=False, fp8_grad=False):
        dtype = self.activation_dtype(inp)
        weight, bias = joined(self, self.weight_names), joined(self, self.bias_names)
        with high_precision(inp):
            out = gemm(inp, weight, bias if self.apply_bias else None, dtype)
        if self.return_bias:
            return out, bias.to(dtype)
        return out
