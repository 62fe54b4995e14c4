"""``transformer_engine.pytorch.LayerNormMLP`` stand-in (``NVIDIA/TransformerEngine``
``transformer_engine/pytorch/module/layernorm_mlp.py``).

``ln_out = norm(x)``; ``h = act(ln_out fc1_weight^T + fc1_bias)``; ``y = h fc2_weight^T + fc2_bias``,
each step rounded to the activation dtype. Activations (see :mod:`._common`): ``gelu``
(tanh approximation, TE's default), ``relu``, ``qgelu``, ``srelu``, ``silu`` and the gated
``geglu``, ``reglu``, ``swiglu``, ``qgeglu``, ``sreglu``, ``glu``, for which ``fc1`` has
``2 * ffn_hidden_size`` outputs and the activation applies to the first half.
``clamped_swiglu`` raises NotImplementedError.

Parameters, in TE's order: ``layer_norm_weight``, ``layer_norm_bias`` (LayerNorm only),
``fc1_weight``, ``fc1_bias``, ``fc2_weight``, ``fc2_bias`` (the biases are empty, unregistered
tensors when ``bias=False``). Returns ``out``, then ``fc2_bias`` if ``return_bias`` (not added),
then ``ln_out`` if ``return_layernorm_output``. Arguments after ``eps`` are keyword-only.
"""

from __future__ import annotations

import torch

from ._common import (
    GATED_ACTIVATIONS,
    apply_activation,
    check_activation,
    check_normalization,
    gemm,
    normalize,
)
from .base import (
    StandinModule,
    check_options,
    default_init_method,
    high_precision,
    init_parameter,
    standin_device,
)


class LayerNormMLP(StandinModule):
    """TE ``LayerNormMLP`` (see module docstring)."""

    def __init__(
        self,
        hidden_size,
        ffn_hidden_size,
        eps=1e-5,
        *,
        return_bias=False,
        init_method=None,
        bias=True,
        normalization="LayerNorm",
        activation="gelu",
        output_layer_init_method=None,
        params_dtype=None,
        return_layernorm_output=False,
        zero_centered_gamma=False,
        device="cuda",
        **options,
    ):
        super().__init__()
        check_options("LayerNormMLP", options)
        check_normalization(normalization)
        check_activation(activation)
        self.eps = eps
        self.normalization = normalization
        self.activation = activation
        self.use_bias = bias
        self.return_bias = return_bias
        self.apply_bias = bias and not return_bias
        self.return_layernorm_output = return_layernorm_output
        self.zero_centered_gamma = zero_centered_gamma
        device = standin_device(device)
        dtype = torch.get_default_dtype() if params_dtype is None else params_dtype
        fc1_out = 2 * ffn_hidden_size if activation in GATED_ACTIVATIONS else ffn_hidden_size

        def new(*shape):
            return torch.empty(*shape, device=device, dtype=dtype)

        gamma_init = torch.nn.init.zeros_ if zero_centered_gamma else torch.nn.init.ones_
        self.layer_norm_weight = init_parameter(new(hidden_size), gamma_init)
        self.layer_norm_bias = (
            init_parameter(new(hidden_size), torch.nn.init.zeros_) if normalization == "LayerNorm" else None
        )
        self.fc1_weight = init_parameter(new(fc1_out, hidden_size), init_method or default_init_method())
        self.fc1_bias = init_parameter(new(fc1_out), torch.nn.init.zeros_) if bias else new(0)
        self.fc2_weight = init_parameter(
            new(hidden_size, ffn_hidden_size), output_layer_init_method or default_init_method()
        )
        self.fc2_bias = init_parameter(new(hidden_size), torch.nn.init.zeros_) if bias else new(0)

    def forward(self, inp, is_first_microbatch=None):
        dtype = self.activation_dtype(inp)
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
            fc1_out = gemm(ln_out, self.fc1_weight, self.fc1_bias if self.use_bias else None, dtype)
            act_out = apply_activation(self.activation, fc1_out).to(dtype)
            out = gemm(act_out, self.fc2_weight, self.fc2_bias if self.apply_bias else None, dtype)
        outputs = (out,)
        if self.return_bias:
            outputs += (self.fc2_bias.to(dtype),)
        if self.return_layernorm_output:
            outputs += (ln_out,)
        return outputs[0] if len(outputs) == 1 else outputs
