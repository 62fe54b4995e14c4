"""The TE modules (and RoPE helpers) that NPU418 rewrites to the generated ``te_npu_modules.py``.

``Linear``, ``LayerNorm`` and ``RMSNorm`` go there only when ``torch.nn`` cannot do what the call
asks (NPU412 covers the rest): ``return_bias``/``parameters_split``, ``zero_centered_gamma``, or
an RMSNorm for a torch without ``torch.nn.RMSNorm``.

The generated file (``cuda2npu/templates/te_npu_modules.py``) is written next to the migrated
file by ``migrate``; its classes take TE's constructor arguments under TE's names and in TE's
positional order for the first ``positional`` parameters, so a call keeps its arguments and only
loses the TE-only ones (NPU413 entries, same table as the basic modules).
"""

from __future__ import annotations

from dataclasses import dataclass

COMPANION = "te_npu_modules.py"
MODULE = "te_npu_modules"
ACTIVATIONS = ("gelu", "qgelu", "relu", "srelu", "silu", "geglu", "reglu", "swiglu", "qgeglu", "sreglu", "glu")


@dataclass(frozen=True)
class FusedSpec:
    """A TE class: its parameters (TE's order), how many may be positional, what the generated class takes."""

    params: tuple[str, ...]
    positional: int
    accepted: frozenset[str]
    # accepted parameter → (the literal values the generated class supports, what other values need)
    limited: tuple[tuple[str, tuple, str], ...] = ()


_UB = ("ub_overlap_ag", "ub_overlap_rs", "ub_overlap_rs_dgrad", "ub_bulk_wgrad", "ub_bulk_dgrad", "ub_name",
       "ub_tp_comm_overlap", "ub_split_rs", "ub_split_ag", "ub_atomic_gemm_rs", "ub_atomic_gemm_ag")
_CONTEXT_PARALLEL = ("cp_group", "cp_global_ranks", "cp_stream", "cp_comm_type", "attention_dropout_ctx")
_NORM = FusedSpec(  # te.LayerNorm / te.RMSNorm: `hidden_size` (TE 1.x) or `normalized_shape` (2.x) first
    params=("hidden_size", "eps", "sequence_parallel", "params_dtype", "zero_centered_gamma", "device",
            "normalized_shape", "dtype", "sm_margin", "fwd_sm_margin", "bwd_sm_margin", "name"),
    positional=2,
    accepted=frozenset({"hidden_size", "eps", "normalized_shape", "zero_centered_gamma", "params_dtype", "dtype",
                        "device"}),
)
_ROPE_PARAMS = ("dim", "rotary_percent", "seq_len_interpolation_factor", "pretrained_max_position_embeddings",
                "rotary_base", "interleaved")
_APPLY_ROPE_PARAMS = ("t", "freqs", "tensor_format", "start_positions", "interleaved", "fused", "cu_seqlens", "cp_size",
                      "cp_rank")
_ACTIVATION = ("activation", ACTIVATIONS, "an activation the generated LayerNormMLP does not implement")

FUSED = {
    "LayerNorm": _NORM,
    "RMSNorm": _NORM,
    "Linear": FusedSpec(
        params=("in_features", "out_features", "sequence_parallel", "fuse_wgrad_accumulation", "tp_group", "tp_size",
                "get_rng_state_tracker", "rng_tracker_name", "init_method", "bias", "return_bias", "params_dtype",
                "parallel_mode", "skip_weight_param_allocation", "parameters_split", "device", *_UB,
                "delay_wgrad_compute", "symmetric_ar_type", "save_original_input", "name"),
        positional=2,
        accepted=frozenset({"in_features", "out_features", "bias", "return_bias", "params_dtype", "parameters_split",
                            "init_method", "device"}),
    ),
    "LayerNormLinear": FusedSpec(
        params=("in_features", "out_features", "eps", "sequence_parallel", "fuse_wgrad_accumulation", "tp_group",
                "tp_size", "get_rng_state_tracker", "init_method", "bias", "normalization", "return_bias",
                "params_dtype", "parallel_mode", "return_layernorm_output", "return_layernorm_output_gathered",
                "parameters_split", "zero_centered_gamma", "device", *_UB, "delay_wgrad_compute",
                "symmetric_ar_type", "name"),
        positional=3,
        accepted=frozenset({"in_features", "out_features", "eps", "bias", "normalization", "return_bias",
                            "return_layernorm_output", "parameters_split", "zero_centered_gamma", "params_dtype",
                            "init_method", "device"}),
    ),
    "LayerNormMLP": FusedSpec(
        params=("hidden_size", "ffn_hidden_size", "eps", "sequence_parallel", "return_bias", "get_rng_state_tracker",
                "tp_group", "tp_size", "init_method", "bias", "normalization", "activation",
                "output_layer_init_method", "fuse_wgrad_accumulation", "params_dtype", "return_layernorm_output",
                "return_layernorm_output_gathered", "seq_length", "micro_batch_size", "set_parallel_mode",
                "zero_centered_gamma", "device", *_UB, "delay_wgrad_compute", "symmetric_ar_type", "name"),
        positional=3,
        accepted=frozenset({"hidden_size", "ffn_hidden_size", "eps", "bias", "normalization", "activation",
                            "return_bias", "return_layernorm_output", "zero_centered_gamma", "params_dtype",
                            "init_method", "output_layer_init_method", "device"}),
        limited=(_ACTIVATION,),
    ),
    "DotProductAttention": FusedSpec(
        params=("num_attention_heads", "kv_channels", "num_gqa_groups", "attention_dropout", "qkv_format",
                "attn_mask_type", "window_size", "bottom_right_diagonal", "sequence_parallel", "tp_size",
                "get_rng_state_tracker", "tp_group", "layer_number", "attention_type", *_CONTEXT_PARALLEL,
                "softmax_scale", "softmax_type", "return_max_logit", "rng_tracker_name", "name"),
        positional=7,
        accepted=frozenset({"num_attention_heads", "kv_channels", "num_gqa_groups", "attention_dropout",
                            "qkv_format", "attn_mask_type", "window_size", "softmax_scale", "bottom_right_diagonal",
                            "layer_number", "attention_type"}),
    ),
    "MultiheadAttention": FusedSpec(
        params=("hidden_size", "num_attention_heads", "kv_channels", "attention_dropout", "layernorm_epsilon",
                "init_method", "output_layer_init_method", "layer_number", "attn_mask_type", "window_size",
                "tp_group", "tp_size", "num_gqa_groups", "fuse_wgrad_accumulation", "get_rng_state_tracker",
                "sequence_parallel", "params_dtype", "return_bias", "return_layernorm_output", "input_layernorm",
                "attention_type", "set_parallel_mode", "fuse_qkv_params", "zero_centered_gamma",
                "qkv_weight_interleaved", *_UB, "bias", "normalization", "device", "qkv_format", "name",
                "qk_norm_type", "qk_norm_eps", "qk_norm_before_rope", "seq_length", "micro_batch_size", "softmax_type",
                "rotary_pos_interleaved"),
        positional=10,
        accepted=frozenset({"hidden_size", "num_attention_heads", "kv_channels", "attention_dropout",
                            "layernorm_epsilon", "init_method", "output_layer_init_method", "layer_number",
                            "attn_mask_type", "window_size", "num_gqa_groups", "params_dtype", "return_bias",
                            "return_layernorm_output", "input_layernorm", "attention_type", "fuse_qkv_params",
                            "zero_centered_gamma", "qkv_weight_interleaved", "rotary_pos_interleaved", "bias",
                            "normalization", "device", "qkv_format", "qk_norm_type", "qk_norm_eps",
                            "qk_norm_before_rope"}),
        limited=(("attention_type", ("self",), "cross attention is not in the generated module"),
                 ("qk_norm_type", (None, "RMSNorm", "LayerNorm"), "L2 query/key normalisation is not in the generated "
                  "module")),
    ),
    "TransformerLayer": FusedSpec(
        params=("hidden_size", "ffn_hidden_size", "num_attention_heads", "num_gqa_groups", "layernorm_epsilon",
                "hidden_dropout", "attention_dropout", "init_method", "output_layer_init_method", "layer_number",
                "kv_channels", "self_attn_mask_type", "window_size", "enc_dec_attn_mask_type", "enc_dec_window_size",
                "tp_group", "tp_size", "params_dtype", "get_rng_state_tracker", "fuse_wgrad_accumulation",
                "seq_length", "micro_batch_size", "sequence_parallel", "apply_residual_connection_post_layernorm",
                "output_layernorm", "parallel_attention_mlp", "layer_type", "drop_path_rate", "set_parallel_mode",
                "fuse_qkv_params", "zero_centered_gamma", "qkv_weight_interleaved", *_UB, "bias", "activation",
                "normalization", "device", "attn_input_format", "name", "rotary_pos_interleaved"),
        positional=13,
        accepted=frozenset({"hidden_size", "ffn_hidden_size", "num_attention_heads", "num_gqa_groups",
                            "layernorm_epsilon", "hidden_dropout", "attention_dropout", "init_method",
                            "output_layer_init_method", "layer_number", "kv_channels", "self_attn_mask_type",
                            "window_size", "params_dtype", "apply_residual_connection_post_layernorm",
                            "output_layernorm", "parallel_attention_mlp", "layer_type", "drop_path_rate",
                            "fuse_qkv_params", "zero_centered_gamma", "qkv_weight_interleaved", "bias", "activation",
                            "normalization", "device", "attn_input_format", "rotary_pos_interleaved"}),
        limited=(("layer_type", ("encoder",), "decoder layers (cross attention) are not in the generated module"),
                 ("drop_path_rate", (0, 0.0), "stochastic depth is not in the generated module"),
                 _ACTIVATION),
    ),
    "RotaryPositionEmbedding": FusedSpec(
        params=_ROPE_PARAMS,
        positional=4,  # `rotary_base` and `interleaved` came later
        accepted=frozenset(_ROPE_PARAMS),
    ),
    "apply_rotary_pos_emb": FusedSpec(
        params=_APPLY_ROPE_PARAMS,
        positional=3,  # `fused` was the fourth parameter before `start_positions` and `interleaved`
        accepted=frozenset(_APPLY_ROPE_PARAMS),
        limited=(("start_positions", (None,), "per-sequence start positions (KV-cache inference) are not in the "
                  "generated module"),
                 ("cp_size", (1,), "context parallelism is not in the generated module")),
    ),
}

# TE-only arguments of the fused modules beyond the basic modules' table (transformer_engine.DROPPABLE),
# in its format: argument → (values that may be dropped or None for any, why it can go, why others cannot)
EXTRA_DROPPABLE = {
    "set_parallel_mode": (None, "without a tensor-parallel group TE performs no communication", ""),
    "return_layernorm_output_gathered": ((False,), "off", "gathers the norm output across the tensor-parallel group"),
    "seq_length": (None, "only sizes TE's JIT warm-up", ""),
    "micro_batch_size": (None, "only sizes TE's JIT warm-up", ""),
    "cp_group": ((None,), "no context parallelism", "context parallelism: the generated module attends over the "
                 "local sequence only"),
    "cp_global_ranks": (None, "a context-parallelism setting", ""),
    "cp_stream": (None, "a context-parallelism setting", ""),
    "cp_comm_type": (None, "a context-parallelism setting", ""),
    "attention_dropout_ctx": (None, "only selects the RNG state used for attention dropout", ""),
    "enc_dec_attn_mask_type": (None, "read by decoder layers only", ""),
    "enc_dec_window_size": (None, "read by decoder layers only", ""),
    "softmax_type": (("vanilla",), "the default softmax", "attention sinks are not in the generated module"),
    "return_max_logit": ((False,), "off", "the generated module does not return the max logit"),
}
