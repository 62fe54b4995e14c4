"""``transformer_engine.pytorch.MultiheadAttention`` stand-in, self-attention only
(``NVIDIA/TransformerEngine`` ``transformer_engine/pytorch/attention/multi_head_attention.py``).

Submodules and parameter names are TE's: ``layernorm_qkv`` (:class:`LayerNormLinear`, when
``input_layernorm``) or ``qkv`` (:class:`Linear`), ``core_attention``
(:class:`DotProductAttention`) and ``proj`` (:class:`Linear`). With ``fuse_qkv_params=False``
(the default) the QKV projection has split parameters ``query_*``, ``key_*``, ``value_*``
and its output is ``[q | k | v]``; with ``fuse_qkv_params=True`` and
``qkv_weight_interleaved=True`` one ``weight`` holds, per GQA group, the group's query heads
followed by its key and value heads (TE's interleaved layout). ``kv_channels`` defaults to
``hidden_size // num_attention_heads``.

``rotary_pos_emb`` (a ``[s, 1, 1, d]`` angle tensor or a (query, key) pair) rotates q and k after
the split, as TE does (:mod:`.rope`); ``qk_norm_type`` ``RMSNorm``/``LayerNorm`` normalises each
head of q and k (``q_norm``/``k_norm``, TE norm modules) after RoPE, or before it with
``qk_norm_before_rope``. ``forward`` returns the projection output, then its bias
if ``return_bias``, then the layernorm output if ``input_layernorm and return_layernorm_output``. Cross attention
(``attention_type="cross"``/``encoder_output``), ``inference_params`` and ``qk_norm_type``
``L2Normalization`` raise NotImplementedError. Arguments after ``window_size`` are keyword-only.
"""

from __future__ import annotations

from collections import OrderedDict

import torch

from ..module.base import check_options
from ..module.layernorm import LayerNorm, RMSNorm
from ..module.layernorm_linear import LayerNormLinear
from ..module.linear import Linear
from .dot_product_attention import DotProductAttention
from .rope import apply_rotary_pos_emb

_QK_NORMS = {"RMSNorm": RMSNorm, "LayerNorm": LayerNorm}


class MultiheadAttention(torch.nn.Module):
    """TE ``MultiheadAttention`` (see module docstring)."""

    def __init__(
        self,
        hidden_size,
        num_attention_heads,
        kv_channels=None,
        attention_dropout=0.1,
        layernorm_epsilon=1e-5,
        init_method=None,
        output_layer_init_method=None,
        layer_number=None,
        attn_mask_type="causal",
        window_size=None,
        *,
        num_gqa_groups=None,
        params_dtype=None,
        return_bias=False,
        return_layernorm_output=False,
        input_layernorm=False,
        attention_type="self",
        fuse_qkv_params=False,
        zero_centered_gamma=False,
        qkv_weight_interleaved=True,
        rotary_pos_interleaved=False,
        bias=True,
        normalization="LayerNorm",
        device="cuda",
        qkv_format="sbhd",
        qk_norm_type=None,
        qk_norm_eps=1e-6,
        qk_norm_before_rope=False,
        softmax_type="vanilla",
        **options,
    ):
        super().__init__()
        check_options("MultiheadAttention", options)
        if attention_type != "self":
            raise NotImplementedError("MultiheadAttention(attention_type='cross') has no CPU stand-in")
        if qk_norm_type not in (None, "RMSNorm", "LayerNorm"):
            raise NotImplementedError(f"MultiheadAttention(qk_norm_type={qk_norm_type!r}) has no CPU stand-in")
        self.qkv_format = qkv_format
        self.rotary_pos_interleaved = rotary_pos_interleaved
        self.qk_norm_before_rope = qk_norm_before_rope
        head_dim = kv_channels if kv_channels else hidden_size // num_attention_heads
        # TE `_create_qk_norm_modules`: TE norms over the head dimension, created before the QKV projection
        self.q_norm, self.k_norm = (
            (None, None)
            if qk_norm_type is None
            else (_QK_NORMS[qk_norm_type](normalized_shape=head_dim, eps=qk_norm_eps, device=device) for _ in range(2))
        )
        self.attn_mask_type = attn_mask_type
        self.window_size = window_size
        self.input_layernorm = input_layernorm
        self.return_layernorm_output = return_layernorm_output
        self.return_bias = return_bias
        self.num_attention_heads = num_attention_heads
        self.num_gqa_groups = num_attention_heads if num_gqa_groups is None else num_gqa_groups
        if num_attention_heads % self.num_gqa_groups != 0:
            raise AssertionError("The number of attention heads must be divisible by the number of GQA groups!")
        self.hidden_size_per_attention_head = kv_channels if kv_channels else hidden_size // num_attention_heads
        self.qkv_weight_interleaved = qkv_weight_interleaved and fuse_qkv_params
        hidden_q = self.hidden_size_per_attention_head * num_attention_heads
        hidden_kv = self.hidden_size_per_attention_head * self.num_gqa_groups
        common = dict(init_method=init_method, bias=bias, params_dtype=params_dtype, device=device)
        split = (
            None if fuse_qkv_params else OrderedDict([("query", hidden_q), ("key", hidden_kv), ("value", hidden_kv)])
        )
        if input_layernorm:
            self.layernorm_qkv = LayerNormLinear(
                hidden_size,
                hidden_q + 2 * hidden_kv,
                eps=layernorm_epsilon,
                return_bias=False,
                return_layernorm_output=return_layernorm_output,
                parameters_split=split,
                zero_centered_gamma=zero_centered_gamma,
                normalization=normalization,
                **common,
            )
        else:
            self.qkv = Linear(
                hidden_size, hidden_q + 2 * hidden_kv, return_bias=False, parameters_split=split, **common
            )
        self.core_attention = DotProductAttention(
            num_attention_heads,
            self.hidden_size_per_attention_head,
            num_gqa_groups=self.num_gqa_groups,
            attention_dropout=attention_dropout,
            qkv_format=qkv_format,
            layer_number=layer_number,
            softmax_type=softmax_type,
        )
        self.proj = Linear(
            hidden_q,
            hidden_size,
            init_method=output_layer_init_method,
            bias=bias,
            return_bias=return_bias,
            params_dtype=params_dtype,
            device=device,
        )

    def _split_qkv(self, mixed):
        groups, head_dim = self.num_gqa_groups, self.hidden_size_per_attention_head
        per_group = self.num_attention_heads // groups
        if self.qkv_weight_interleaved:
            mixed = mixed.view(*mixed.shape[:-1], groups, per_group + 2, head_dim)
            query, key, value = torch.split(mixed, (per_group, 1, 1), dim=-2)
        else:
            mixed = mixed.view(*mixed.shape[:-1], per_group + 2, groups, head_dim)
            query, key, value = torch.split(mixed, (per_group, 1, 1), dim=-3)
        lead = mixed.shape[:-3]
        return (
            query.reshape(*lead, self.num_attention_heads, head_dim),
            key.reshape(*lead, groups, head_dim),
            value.reshape(*lead, groups, head_dim),
        )

    def forward(
        self,
        hidden_states,
        attention_mask=None,
        encoder_output=None,
        attn_mask_type=None,
        window_size=None,
        is_first_microbatch=None,
        checkpoint_core_attention=False,
        inference_params=None,
        rotary_pos_emb=None,
        core_attention_bias_type="no_bias",
        core_attention_bias=None,
        alibi_slopes=None,
        cu_seqlens_q=None,
        cu_seqlens_kv=None,
        cu_seqlens_q_padded=None,
        cu_seqlens_kv_padded=None,
        max_seqlen_q=None,
        max_seqlen_kv=None,
        fast_zero_fill=True,
        pad_between_seqs=None,
    ):
        if encoder_output is not None:
            raise NotImplementedError("MultiheadAttention cross attention (encoder_output) has no CPU stand-in")
        layernorm_output = None
        if self.input_layernorm:
            mixed = self.layernorm_qkv(hidden_states)
            if self.return_layernorm_output:
                mixed, layernorm_output = mixed
        else:
            mixed = self.qkv(hidden_states)
        query, key, value = self._split_qkv(mixed)
        if self.q_norm is not None and self.qk_norm_before_rope:
            query, key = self.q_norm(query), self.k_norm(key)
        if rotary_pos_emb is not None:  # TE applies RoPE to q and k after the split
            q_emb, k_emb = rotary_pos_emb if isinstance(rotary_pos_emb, tuple) else (rotary_pos_emb,) * 2
            query = apply_rotary_pos_emb(
                query, q_emb, self.qkv_format, interleaved=self.rotary_pos_interleaved, cu_seqlens=cu_seqlens_q
            )
            key = apply_rotary_pos_emb(
                key, k_emb, self.qkv_format, interleaved=self.rotary_pos_interleaved, cu_seqlens=cu_seqlens_kv
            )
        if self.q_norm is not None and not self.qk_norm_before_rope:
            query, key = self.q_norm(query), self.k_norm(key)
        context = self.core_attention(
            query,
            key,
            value,
            attention_mask=attention_mask,
            qkv_format=self.qkv_format,
            cu_seqlens_q=cu_seqlens_q,
            cu_seqlens_kv=cu_seqlens_kv,
            cu_seqlens_q_padded=cu_seqlens_q_padded,
            cu_seqlens_kv_padded=cu_seqlens_kv_padded,
            max_seqlen_q=max_seqlen_q,
            max_seqlen_kv=max_seqlen_kv,
            attn_mask_type=attn_mask_type or self.attn_mask_type,
            window_size=self.window_size if window_size is None else window_size,
            core_attention_bias_type=core_attention_bias_type,
            core_attention_bias=core_attention_bias,
            alibi_slopes=alibi_slopes,
            inference_params=inference_params,
            pad_between_seqs=pad_between_seqs,
        )
        projected = self.proj(context)
        outputs = projected if self.return_bias else (projected,)
        if layernorm_output is not None:
            outputs += (layernorm_output,)
        return outputs if len(outputs) > 1 else outputs[0]
