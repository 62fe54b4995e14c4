"""``transformer_engine.pytorch.TransformerLayer`` stand-in, encoder layers
(``NVIDIA/TransformerEngine`` ``transformer_engine/pytorch/transformer.py``).

Structure and parameter names are TE's: ``self_attention`` (:class:`MultiheadAttention`,
with ``layernorm_qkv`` unless ``output_layernorm``), ``layernorm_mlp`` (:class:`LayerNormMLP`)
and, with ``output_layernorm``, ``layernorm``. The forward pass is TE's::

    attn_out, attn_bias = self_attention(x)          # pre-LN by default
    h = residual + dropout(attn_out + attn_bias)      # residual = x, or the LN output with
    mlp_out, mlp_bias = layernorm_mlp(h)              #   apply_residual_connection_post_layernorm
    y = residual + dropout(mlp_out + mlp_bias)        # residual = h (or LN output)
    y = layernorm(y) if output_layernorm

``parallel_attention_mlp`` computes ``x + dropout(attention(x) + mlp(x))``. Dropout
(``hidden_dropout``, ``attention_dropout``) is active in training mode only and draws from
torch's generator. Inside autocast the input is first cast to the autocast dtype, as TE does.
``layer_type="decoder"``, ``drop_path_rate > 0`` and the forward options rejected by
:class:`MultiheadAttention` raise NotImplementedError. Arguments after ``window_size`` are
keyword-only in the stand-in.
"""

from __future__ import annotations

import torch

from .attention.dot_product_attention import normalize_mask_type
from .attention.multi_head_attention import MultiheadAttention
from .module.base import autocast_dtype, check_options
from .module.layernorm import LayerNorm, RMSNorm
from .module.layernorm_mlp import LayerNormMLP


class TransformerLayer(torch.nn.Module):
    """TE ``TransformerLayer`` (see module docstring)."""

    def __init__(
        self,
        hidden_size,
        ffn_hidden_size,
        num_attention_heads,
        num_gqa_groups=None,
        layernorm_epsilon=1e-5,
        hidden_dropout=0.1,
        attention_dropout=0.1,
        init_method=None,
        output_layer_init_method=None,
        layer_number=None,
        kv_channels=None,
        self_attn_mask_type="causal",
        window_size=None,
        *,
        params_dtype=None,
        apply_residual_connection_post_layernorm=False,
        output_layernorm=False,
        parallel_attention_mlp=False,
        layer_type="encoder",
        drop_path_rate=0.0,
        fuse_qkv_params=False,
        zero_centered_gamma=False,
        qkv_weight_interleaved=True,
        bias=True,
        activation="gelu",
        normalization="LayerNorm",
        device="cuda",
        attn_input_format="sbhd",
        enc_dec_attn_mask_type="no_mask",
        enc_dec_window_size=None,
        rotary_pos_interleaved=False,
        **options,
    ):
        super().__init__()
        check_options("TransformerLayer", options)
        if layer_type != "encoder":
            raise NotImplementedError(f"TransformerLayer(layer_type={layer_type!r}) has no CPU stand-in")
        if drop_path_rate > 0.0:
            raise NotImplementedError("TransformerLayer(drop_path_rate > 0) has no CPU stand-in")
        if parallel_attention_mlp and (apply_residual_connection_post_layernorm or output_layernorm):
            raise AssertionError(
                "parallel_attention_mlp is not supported with apply_residual_connection_post_"
                "layernorm or output_layernorm"
            )
        self.self_attn_mask_type = self_attn_mask_type
        self.window_size = window_size
        self.hidden_dropout = hidden_dropout
        self.apply_residual_connection_post_layernorm = apply_residual_connection_post_layernorm
        self.output_layernorm = output_layernorm
        self.parallel_attention_mlp = parallel_attention_mlp
        self.self_attention = MultiheadAttention(
            hidden_size,
            num_attention_heads,
            kv_channels,
            attention_dropout,
            layernorm_epsilon,
            init_method,
            output_layer_init_method,
            layer_number,
            num_gqa_groups=num_gqa_groups,
            params_dtype=params_dtype,
            return_layernorm_output=apply_residual_connection_post_layernorm,
            fuse_qkv_params=fuse_qkv_params,
            zero_centered_gamma=zero_centered_gamma,
            qkv_weight_interleaved=qkv_weight_interleaved,
            rotary_pos_interleaved=rotary_pos_interleaved,
            qkv_format=attn_input_format,
            input_layernorm=not output_layernorm,
            bias=bias,
            return_bias=not parallel_attention_mlp,
            normalization=normalization,
            device=device,
        )
        self.layernorm_mlp = LayerNormMLP(
            hidden_size,
            ffn_hidden_size,
            eps=layernorm_epsilon,
            init_method=init_method,
            output_layer_init_method=output_layer_init_method,
            bias=bias,
            return_bias=not parallel_attention_mlp,
            params_dtype=params_dtype,
            return_layernorm_output=apply_residual_connection_post_layernorm,
            zero_centered_gamma=zero_centered_gamma,
            activation=activation,
            normalization=normalization,
            device=device,
        )
        if output_layernorm:
            norm = {"LayerNorm": LayerNorm, "RMSNorm": RMSNorm}[normalization]
            self.layernorm = norm(
                hidden_size,
                eps=layernorm_epsilon,
                params_dtype=params_dtype,
                zero_centered_gamma=zero_centered_gamma,
                device=device,
            )

    def _bias_dropout_add(self, hidden_state, bias, residual):
        if bias is not None and bias.numel() != 0:
            hidden_state = hidden_state + bias
        return residual + torch.nn.functional.dropout(hidden_state, p=self.hidden_dropout, training=self.training)

    def forward(
        self,
        hidden_states,
        attention_mask=None,
        self_attn_mask_type=None,
        window_size=None,
        encoder_output=None,
        enc_dec_attn_mask=None,
        enc_dec_attn_mask_type=None,
        enc_dec_window_size=None,
        is_first_microbatch=None,
        checkpoint_core_attention=False,
        inference_params=None,
        rotary_pos_emb=None,
        core_attention_bias_type="no_bias",
        core_attention_bias=None,
        alibi_slopes=None,
        cu_seqlens_q=None,
        cu_seqlens_kv=None,
        max_seqlen_q=None,
        max_seqlen_kv=None,
        fast_zero_fill=True,
        pad_between_seqs=None,
    ):
        mask_type = normalize_mask_type(self_attn_mask_type or self.self_attn_mask_type)
        if ("padding" in mask_type or mask_type == "arbitrary") and attention_mask is not None:
            if attention_mask.dtype != torch.bool:
                raise AssertionError("Attention mask must be a boolean tensor")
        dtype = autocast_dtype(hidden_states)
        if dtype is not None:
            hidden_states = hidden_states.to(dtype)
        attention_outputs = self.self_attention(
            hidden_states,
            attention_mask=attention_mask,
            attn_mask_type=mask_type,
            window_size=self.window_size if window_size is None else window_size,
            inference_params=inference_params,
            rotary_pos_emb=rotary_pos_emb,
            core_attention_bias_type=core_attention_bias_type,
            core_attention_bias=core_attention_bias,
            alibi_slopes=alibi_slopes,
            cu_seqlens_q=cu_seqlens_q,
            cu_seqlens_kv=cu_seqlens_kv,
            max_seqlen_q=max_seqlen_q,
            max_seqlen_kv=max_seqlen_kv,
            pad_between_seqs=pad_between_seqs,
        )
        if self.apply_residual_connection_post_layernorm and not self.output_layernorm:
            attention_output, attention_bias, residual = attention_outputs
            hidden_states = self._bias_dropout_add(attention_output, attention_bias, residual)
        elif not self.parallel_attention_mlp:
            attention_output, attention_bias = attention_outputs
            hidden_states = self._bias_dropout_add(attention_output, attention_bias, hidden_states)
        mlp_outputs = self.layernorm_mlp(hidden_states)
        if self.apply_residual_connection_post_layernorm:
            mlp_output, mlp_bias, residual = mlp_outputs
            output = self._bias_dropout_add(mlp_output, mlp_bias, residual)
        elif self.parallel_attention_mlp:
            output = self._bias_dropout_add(attention_outputs, mlp_outputs, hidden_states)
        else:
            mlp_output, mlp_bias = mlp_outputs
            output = self._bias_dropout_add(mlp_output, mlp_bias, hidden_states)
        if self.output_layernorm:
            output = self.layernorm(output)
        return output
