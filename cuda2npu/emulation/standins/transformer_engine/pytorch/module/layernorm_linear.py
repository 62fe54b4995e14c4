"""``transformer_engine.pytorch.LayerNormLinear`` stand-in (``NVIDIA/TransformerEngine``
``transformer_engine/pytorch/module/layernorm_linear.py``).

``ln_out = norm(x)`` (``normalization="LayerNorm"|"RMSNorm"``, over the last dimension, in the
activation dtype), then ``y = ln_out W^T + b``. Parameters: ``layer_norm_weight``,
``layer_norm_bias`` (LayerNorm only; ``None`` for RMSNorm), then ``weight``/``bias`` or the
``parameters_split`` names (see :mod:`.linear`). Returns ``out``, then ``bias`` if
``return_bias`` (bias not added), then ``ln_out`` if ``return_layernorm_output``.
Arguments after ``eps`` are keyword-only in the stand-in.
"""

from __future__ import annotations

import torch

from ._common import check_normalization, gemm, normalize
from .base import (
    StandinModule,
    check_options,
    default_init_method,
    high_precision,
    init_parameter,
    standin_device,
)
from .linear import add_linear_parameters, joined


class LayerNormLinear(StandinModule):
    """TE ``LayerNormLinear`` (see module docstring)."""

    def __init__(
        self,
        in_features,
        out_features,
        eps=1e-5,
        *,
        init_method=None,
        bias=True,
        normalization="LayerNorm",
        return_bias=False,
        params_dtype=None,
        return_layernorm_output=False,
        parameters_split=None,
        zero_centered_gamma=False,
        device="cuda",
        **options,
    ):
        super().__init__()
        check_options("LayerNormLinear", options)
        check_normalization(normalization)
        self.in_features = in_features
        self.out_features = out_features
        self.eps = eps
        self.normalization = normalization
        self.use_bias = bias
        self.return_bias = return_bias
        self.apply_bias = bias and not return_bias
        self.return_layernorm_output = return_layernorm_output
        self.zero_centered_gamma = zero_centered_gamma
        device = standin_device(device)
        dtype = torch.get_default_dtype() if params_dtype is None else params_dtype
        gamma_init = torch.nn.init.zeros_ if zero_centered_gamma else torch.nn.init.ones_
        self.layer_norm_weight = init_parameter(torch.empty(in_features, device=device, dtype=dtype), gamma_init)
        if normalization == "LayerNorm":
            beta = torch.empty(in_features, device=device, dtype=dtype)
            self.layer_norm_bias = init_parameter(beta, torch.nn.init.zeros_)
        else:
            self.layer_norm_bias = None
        self.weight_names, self.bias_names = add_linear_parameters(
            self, in_features, out_features, bias, parameters_split, init_method or default_init_method(), device, dtype
        )

    def forward(self, inp, is_first_microbatch=None, fp8_output=False, fp8_grad=False):
        dtype = self.activation_dtype(inp)
        weight, bias = joined(self, self.weight_names), joined(self, self.bias_names)
        with high_precision(inp):
            ln_beta = None if self.layer_norm_bias is None else self.layer_norm_bias.to(dtype)
            ln_out = normalize(
                inp.to(dtype),
                self.layer_norm_weight.to(dtype),
                ln_beta,
                self.eps,
                self.normalization,
                self.zero_centered_gamma,
            ).to(dtype)
            out = gemm(ln_out, weight, bias if self.apply_bias else None, dtype)
        outputs = (out,)
        if self.return_bias:
            outputs += (bias.to(dtype),)
        if self.return_layernorm_output:
            outputs += (ln_out,)
        return outputs[0] if len(outputs) == 1 else outputs
