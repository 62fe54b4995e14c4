"""What flash-attn offers and how the rewrite reads it: each attention entry point's signature and how
its tensors map to ``npu_fusion_attention`` (:data:`SPECS`), the rotary and RMSNorm entry points, and the names
flash-attn's modules give them (flash-attn ``flash_attn/flash_attn_interface.py`` 2.x). The APIs
without an exact NPU counterpart are analysis/cuda_only_modules.py's (``FLASH_UNPORTED``): the project
facts need them too.
"""

from __future__ import annotations

from dataclasses import dataclass

OP = "npu_fusion_attention"

QKV = ("q", "k", "v")

TAIL = (
    "dropout_p",
    "softmax_scale",
    "causal",
    "window_size",
    "softcap",
    "alibi_slopes",
    "deterministic",
    "return_attn_probs",
)


@dataclass(frozen=True)
class FlashSpec:
    """One flash-attn entry point: its signature and how its tensors map to the NPU call."""

    code: str
    params: tuple[str, ...]
    q: str
    k: str
    v: str
    head_num: str  # templates over the parameter names
    layout: str
    multi_use: tuple[str, ...]  # parameters the rewrite evaluates more than once; the first holds q
    cu_seqlens: tuple[str, str] | None = None

    @property
    def window_index(self) -> int:
        return self.params.index("window_size")

    @property
    def base(self) -> str:
        """The parameter whose tensor gives the head dim and the device (``q`` or ``qkv``)."""
        return self.multi_use[0]


SPECS: dict[str, FlashSpec] = {
    "flash_attn_func": FlashSpec("NPU401", ("q", "k", "v", *TAIL), "{q}", "{k}", "{v}", "{q}.shape[2]", "BSND", ("q",)),
    "flash_attn_qkvpacked_func": FlashSpec(
        "NPU401",
        ("qkv", *TAIL),
        "{qkv}[:, :, 0]",
        "{qkv}[:, :, 1]",
        "{qkv}[:, :, 2]",
        "{qkv}.shape[3]",
        "BSND",
        ("qkv",),
    ),
    "flash_attn_kvpacked_func": FlashSpec(
        "NPU401", ("q", "kv", *TAIL), "{q}", "{kv}[:, :, 0]", "{kv}[:, :, 1]", "{q}.shape[2]", "BSND", ("q", "kv")
    ),
    "flash_attn_varlen_func": FlashSpec(
        "NPU402",
        ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", *TAIL, "block_table"),
        "{q}",
        "{k}",
        "{v}",
        "{q}.shape[1]",
        "TND",
        ("q",),
        ("cu_seqlens_q", "cu_seqlens_k"),
    ),
    "flash_attn_varlen_qkvpacked_func": FlashSpec(
        "NPU402",
        ("qkv", "cu_seqlens", "max_seqlen", *TAIL),
        "{qkv}[:, 0]",
        "{qkv}[:, 1]",
        "{qkv}[:, 2]",
        "{qkv}.shape[2]",
        "TND",
        ("qkv", "cu_seqlens"),
        ("cu_seqlens", "cu_seqlens"),
    ),
    "flash_attn_varlen_kvpacked_func": FlashSpec(
        "NPU402",
        ("q", "kv", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", *TAIL),
        "{q}",
        "{kv}[:, 0]",
        "{kv}[:, 1]",
        "{q}.shape[1]",
        "TND",
        ("q", "kv"),
        ("cu_seqlens_q", "cu_seqlens_k"),
    ),
}

FLASH_MODULES = ("flash_attn", "flash_attn.flash_attn_interface")

FLASH_PACKAGES = ("flash_attn", "flash_attn_interface")

NPU_KERNELS = (
    "torch_npu.npu_fusion_attention",
    "torch_npu.npu_rms_norm",
    "torch_npu.npu_rotary_mul",
)  # rewritten calls

# what this rule's rewrites leave in a file (a guarded flash-attn import made unused by them may go)
MIGRATED_MARKS = ("npu_fusion_attention", "_npu_apply_rotary_emb", "npu_rms_norm")

# rotary entry points: parameters, and how many may be positional (`seqlen_offsets` came after `inplace` in 2.3)
ROTARY = {
    **{
        f"flash_attn.layers.rotary.{name}": (
            ("x", "cos", "sin", "interleaved", "inplace", "seqlen_offsets", "cu_seqlens", "max_seqlen"),
            5,
        )
        for name in ("apply_rotary_emb", "apply_rotary_emb_func")
    },
    "flash_attn.ops.triton.rotary.apply_rotary": (
        ("x", "cos", "sin", "seqlen_offsets", "cu_seqlens", "max_seqlen", "interleaved", "inplace", "conjugate"),
        3,
    ),
}

RMS_NORM = {
    "flash_attn.ops.rms_norm.rms_norm": (("x", "weight", "epsilon"), 3, {}),
    "flash_attn.ops.triton.layer_norm.rms_norm_fn": (
        (
            "x",
            "weight",
            "bias",
            "residual",
            "x1",
            "weight1",
            "bias1",
            "eps",
            "dropout_p",
            "rowscale",
            "prenorm",
            "residual_in_fp32",
            "return_dropout_mask",
        ),
        3,
        {
            "bias": None,
            "residual": None,
            "x1": None,
            "weight1": None,
            "bias1": None,
            "dropout_p": 0.0,
            "rowscale": None,
            "prenorm": False,
            "residual_in_fp32": None,
            "return_dropout_mask": False,
        },
    ),
}

PATCHED_CODES = {**dict.fromkeys(RMS_NORM, "NPU404"), **dict.fromkeys(ROTARY, "NPU407")}  # else NPU403 (_patched)


def successor_of(qualified: str) -> str:
    """flash-attn 2.x's name of a 1.x function (``flash_attn_unpadded_func`` → ``flash_attn_varlen_func``)."""
    module, _, name = qualified.rpartition(".")
    if module in FLASH_MODULES and name.startswith("flash_attn_unpadded_"):
        return f"{module}.flash_attn_varlen_{name.removeprefix('flash_attn_unpadded_')}"
    return qualified


def flash_function(qualified: str | None) -> str | None:
    """``flash_attn_func`` for ``flash_attn.flash_attn_func`` / ``flash_attn.flash_attn_interface.flash_attn_func``."""
    if not qualified:
        return None
    module, _, name = qualified.rpartition(".")
    return name if module in FLASH_MODULES else None


def use_name(qualified: str | None) -> str | None:
    """``flash_attn_func`` for flash-attn's attention functions, else the qualified name itself."""
    function = flash_function(qualified)
    return function if function in SPECS else qualified
