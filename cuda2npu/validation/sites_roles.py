"""What each argument of a fused API is, for the per-site checks: tensor shapes and representative values.

A tensor argument is a tuple of dimension names (or sizes) resolved against a variant's ``dims``;
a scalar argument is a role whose representative values are in :data:`WHOLE` (the argument is the
free name, ``softmax_scale=scale``) and :data:`PART` (the free name is part of a larger
expression, ``softmax_scale=self.head_dim ** -0.5``). A free name used as a condition
(``x if self.training else 0.0``, ``not flag``) takes True and False. ``size`` arguments set the
trailing dimension ``D`` when they evaluate without a tensor (``FusedLayerNorm(768)``); a free name
there is ``D`` (``shape``: ``(D,)``, as apex's functional norms need a tuple).

Variants are the argument configurations each site is run at: for attention self-attention in
bfloat16 and cross-attention in float16 (fewer queries than keys, fewer key/value heads than query
heads, where causal alignment and head grouping mistakes show); rotary at the full and a partial
rotary width; norms in float32 and bfloat16; modules and optimizers in float32.
"""

from __future__ import annotations

import torch

_BSND = {"q": ("B", "Sq", "N", "D"), "k": ("B", "Sk", "Nkv", "D"), "v": ("B", "Sk", "Nkv", "D")}
_TND = {"q": ("Tq", "N", "D"), "k": ("Tk", "Nkv", "D"), "v": ("Tk", "Nkv", "D")}
_FLASH_TAIL = {
    "dropout_p": "dropout",
    "softmax_scale": "scale",
    "causal": "flag",
    "window_size": "window",
    "deterministic": "flag",
}
_VARLEN = {"cu_seqlens_q": "cu_q", "cu_seqlens_k": "cu_k", "max_seqlen_q": "max_q", "max_seqlen_k": "max_k"}

ARGUMENTS: dict[str, dict[str, object]] = {
    "flash_attn_func": {**_BSND, **_FLASH_TAIL},
    "flash_attn_qkvpacked_func": {"qkv": ("B", "Sq", 3, "N", "D"), **_FLASH_TAIL},
    "flash_attn_kvpacked_func": {"q": _BSND["q"], "kv": ("B", "Sk", 2, "Nkv", "D"), **_FLASH_TAIL},
    "flash_attn_varlen_func": {**_TND, **_VARLEN, **_FLASH_TAIL},
    "flash_attn_varlen_qkvpacked_func": {
        "qkv": ("Tq", 3, "N", "D"),
        "cu_seqlens": "cu_q",
        "max_seqlen": "max_q",
        **_FLASH_TAIL,
    },
    "flash_attn_varlen_kvpacked_func": {"q": _TND["q"], "kv": ("Tk", 2, "Nkv", "D"), **_VARLEN, **_FLASH_TAIL},
    "scaled_dot_product_attention": {
        "query": ("B", "N", "Sq", "D"),
        "key": ("B", "Nkv", "Sk", "D"),
        "value": ("B", "Nkv", "Sk", "D"),
        "attn_mask": "mask",
        "dropout_p": "dropout",
        "is_causal": "flag",
        "scale": "scale",
        "enable_gqa": "flag",
    },
    # xFormers' BMHK layout (docs/reference/xformers.md): same heads for query, key and value; the
    # rewritten sites pass their attn_bias as an expression (LowerTriangularMask()), never a free name
    "memory_efficient_attention": {
        "query": ("B", "Sq", "N", "D"),
        "key": ("B", "Sk", "N", "D"),
        "value": ("B", "Sk", "N", "D"),
        "p": "dropout",
        "scale": "scale",
    },
    "rms_norm": {"x": ("B", "S", "D"), "weight": ("D",), "epsilon": "eps"},
    "rms_norm_fn": {"x": ("B", "S", "D"), "weight": ("D",), "eps": "eps"},
    "apply_rotary_emb": {"x": ("B", "S", "N", "D"), "cos": ("Sr", "R"), "sin": ("Sr", "R"), "interleaved": "flag"},
    "apply_rotary": {"x": ("B", "S", "N", "D"), "cos": ("Sr", "R"), "sin": ("Sr", "R"), "interleaved": "flag"},
    "fused_layer_norm_affine": {
        "input": ("B", "S", "D"),
        "weight": ("D",),
        "bias": ("D",),
        "normalized_shape": "shape",
        "eps": "eps",
        "memory_efficient": "flag",
    },
    "fused_layer_norm": {
        "input": ("B", "S", "D"),
        "normalized_shape": "shape",
        "eps": "eps",
        "memory_efficient": "flag",
    },
    "fused_rms_norm_affine": {
        "input": ("B", "S", "D"),
        "weight": ("D",),
        "normalized_shape": "shape",
        "eps": "eps",
        "memory_efficient": "flag",
    },
    "fused_rms_norm": {"input": ("B", "S", "D"), "normalized_shape": "shape", "eps": "eps", "memory_efficient": "flag"},
    "FusedLayerNorm": {
        "normalized_shape": "shape",
        "eps": "eps",
        "elementwise_affine": "flag",
        "memory_efficient": "flag",
    },
    "FusedRMSNorm": {
        "normalized_shape": "shape",
        "eps": "eps",
        "elementwise_affine": "flag",
        "memory_efficient": "flag",
    },
    "FusedAdam": {
        "params": "params",
        "lr": "lr",
        "bias_correction": "flag",
        "betas": "betas",
        "eps": "eps",
        "adam_w_mode": "flag",
        "weight_decay": "decay",
        "amsgrad": "flag",
        "set_grad_none": "flag",
        "capturable": "flag",
        "master_weights": "flag",
    },
    "FusedSGD": {
        "params": "params",
        "lr": "lr",
        "momentum": "momentum",
        "dampening": "momentum",
        "weight_decay": "decay",
        "nesterov": "flag",
        "wd_after_momentum": "flag",
        "materialize_master_grads": "flag",
        "set_grad_none": "flag",
    },
    "FusedAdagrad": {
        "params": "params",
        "lr": "lr",
        "eps": "eps",
        "weight_decay": "decay",
        "set_grad_none": "flag",
        "adagrad_w_mode": "flag",
    },
    "Linear": {"in_features": "size", "out_features": "width", "bias": "flag"},
    "LayerNorm": {"hidden_size": "size", "normalized_shape": "shape", "eps": "eps", "zero_centered_gamma": "flag"},
    "RMSNorm": {"hidden_size": "size", "normalized_shape": "shape", "eps": "eps", "zero_centered_gamma": "flag"},
    "LayerNormLinear": {
        "in_features": "size",
        "out_features": "width",
        "eps": "eps",
        "bias": "flag",
        "zero_centered_gamma": "flag",
        "return_layernorm_output": "flag",
    },
    "LayerNormMLP": {
        "hidden_size": "size",
        "ffn_hidden_size": "hidden",
        "eps": "eps",
        "bias": "flag",
        "zero_centered_gamma": "flag",
        "return_layernorm_output": "flag",
    },
}
ARGUMENTS["apply_rotary_emb_func"] = ARGUMENTS["apply_rotary_emb"]
# builtins without an introspectable signature: positional-or-keyword parameters, then keyword-only ones
SIGNATURES = {
    "scaled_dot_product_attention": (
        ("query", "key", "value", "attn_mask", "dropout_p", "is_causal"),
        ("scale", "enable_gqa"),
    ),
}
MODULE_INPUT = ("B", "S", "D")  # the forward input of the module sites
DROPOUT = "dropout_p"  # the attention APIs' dropout argument; npu_fusion_attention's is keep_prob
DROPOUT_PARAMS = {"memory_efficient_attention": "p"}  # the APIs that name it otherwise


def dropout_param(api: str) -> str:
    """The name of ``api``'s dropout probability argument."""
    return DROPOUT_PARAMS.get(api, DROPOUT)


WHOLE = {
    "dropout": [0.1],
    "scale": [None, 0.3],
    "window": [(-1, -1), (3, 1)],
    "eps": [1e-5],
    "lr": [1e-2],
    "betas": [(0.9, 0.99)],
    "decay": [0.1],
    "momentum": [0.9],
    "width": [12],
    "hidden": [16],
}
PART = {
    "operand": [2],  # a scalar of an elementwise method of a tensor argument (``v.pow(self.gamma)``)
    "dropout": [0.1],
    "scale": [8],
    "window": [-1, 2],
    "eps": [1e-5],
    "lr": [1e-2],
    "decay": [0.1],
    "momentum": [0.9],
    "width": [12],
    "hidden": [16],
}
# the values of a second, third... free name of the same role inside one expression
PART_ALTERNATIVES = {"scale": [2, 32], "operand": [3, 5], "width": [20], "hidden": [24], "dropout": [0.2]}
FLAGS = [True, False]


def distinct_part(role: str, ordinal: int, values: list) -> list:
    """The values of the ``ordinal``-th free name of ``role`` in an expression (0: ``values``)."""
    alternatives = PART_ALTERNATIVES.get(role)
    if ordinal == 0 or not alternatives:
        return values
    return [alternatives[(ordinal - 1) % len(alternatives)]]


OPERAND = "operand"
ELEMENTWISE = {"pow", "mul", "div", "add", "sub", "true_divide", "clamp", "clamp_min", "clamp_max"}
ANY_SIZE = {"width", "hidden"}  # any size works: a name also used as D takes D

_SELF = {"B": 2, "Sq": 7, "Sk": 7, "N": 6, "Nkv": 6, "D": 8, "lengths_q": (2, 4, 5), "lengths_k": (2, 4, 5)}
_CROSS_GQA = {"B": 2, "Sq": 5, "Sk": 7, "N": 6, "Nkv": 3, "D": 8, "lengths_q": (2, 3, 5), "lengths_k": (3, 4, 6)}
_CROSS = {**_CROSS_GQA, "Nkv": 6}


def variants(api: str, bound: dict[str, str]) -> list[tuple[str, dict, torch.dtype]]:
    """(label, dims, dtype) the site of ``api`` runs at; ``bound``: parameter → argument source."""
    if api.startswith("flash_attn"):
        shapes = [("self-attention", _SELF, torch.bfloat16)]
        if "qkvpacked" not in api:
            shapes.append(("Sq<Sk, GQA", _CROSS_GQA, torch.float16))
        return shapes
    if api == "memory_efficient_attention":
        return [("self-attention", _SELF, torch.bfloat16), ("Sq<Sk", _CROSS, torch.float16)]
    if api == "scaled_dot_product_attention":
        gqa = bound.get("enable_gqa", "False") != "False"
        return [
            ("self-attention", _SELF, torch.bfloat16),
            ("Sq<Sk, GQA", _CROSS_GQA, torch.float16) if gqa else ("Sq<Sk", _CROSS, torch.float16),
        ]
    if api.startswith("apply_rotary"):
        full = {"B": 2, "S": 7, "N": 6, "D": 8, "Sr": 7, "R": 4}
        return [
            ("full rotary", full, torch.float32),
            ("partial rotary, longer table", {**full, "Sr": 9, "R": 2}, torch.bfloat16),
        ]
    dims = {"B": 2, "S": 5, "D": 8}
    dtypes = (torch.float32, torch.bfloat16) if api.startswith(("rms_norm", "fused_")) else (torch.float32,)
    return [("", dims, dtype) for dtype in dtypes]


def cu_seqlens(lengths) -> torch.Tensor:
    offsets = [0]
    for length in lengths:
        offsets.append(offsets[-1] + length)
    return torch.tensor(offsets, dtype=torch.int32)


def dims_of(dims: dict) -> dict:
    """``dims`` with the packed totals ``Tq``/``Tk`` of the varlen lengths."""
    full = dict(dims)
    if "lengths_q" in dims:
        full["Tq"], full["Tk"] = sum(dims["lengths_q"]), sum(dims["lengths_k"])
    return full


def shape_of(spec: tuple, dims: dict) -> tuple[int, ...]:
    return tuple(d if isinstance(d, int) else dims[d] for d in spec)


def role_value(role: str, dims: dict, device, dtype):
    """The value of a free name that is a whole tensor-like argument (mask, cu_seqlens, max_seqlen)."""
    if role == "mask":
        generator = torch.Generator().manual_seed(7)
        keep = torch.rand(dims["B"], 1, dims["Sq"], dims["Sk"], generator=generator) > 0.3
        keep[..., 0] = True  # every query sees a key
        return keep.to(device)
    if role in ("cu_q", "cu_k"):
        return cu_seqlens(dims["lengths_q" if role == "cu_q" else "lengths_k"]).to(device)
    if role in ("max_q", "max_k"):
        return max(dims["lengths_q" if role == "max_q" else "lengths_k"])
    if role == "size":
        return dims["D"]
    if role == "shape":
        return (dims["D"],)
    return None
