"""``torch.autocast("npu")`` for the emulated device: kernels on ``AutocastPrivateUse1``.

torch registers no autocast kernels for the private-use backend, so without these every op
under ``torch.autocast("npu")`` would fail. Architecture §6 pitfall: a fallthrough fallback on
``AutocastPrivateUse1`` plus per-op casting kernels.

Policy: torch's CUDA autocast op lists (PyTorch "Automatic Mixed Precision" docs, CUDA op
reference; ``aten/src/ATen/autocast_mode.cpp``), which is what the task asks the emulator to
follow. torch_npu registers its own lists (``torch_npu/csrc/aten/AutoCastOps.cpp``,
docs/reference/torch_npu.md §4.4); whether they match CUDA's exactly is UNVERIFIED. As in ATen,
a tensor is cast only if it is floating point, not float64, and on the npu device. The autocast weight
cache is not emulated (it changes speed, not values).
"""

from __future__ import annotations

import torch

__all__ = ["install_autocast_kernels"]

# Ops that run in the autocast dtype (CUDA "lower_precision_fp" list).
LOWER_PRECISION_OPS = (
    "_convolution",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_tbc",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "convolution",
    "prelu",
    "addmm",
    "addmv",
    "addr",
    "matmul",
    "einsum",
    "mm",
    "mv",
    "linalg_vecdot",
    "linear",
    "addbmm",
    "baddbmm",
    "bmm",
    "chain_matmul",
    "linalg_multi_dot",
    "_thnn_fused_lstm_cell",
    "_thnn_fused_gru_cell",
    "lstm_cell",
    "gru_cell",
    "rnn_tanh_cell",
    "rnn_relu_cell",
    "_scaled_dot_product_flash_attention",
    "scaled_dot_product_attention",
)

# Ops that run in float32 (CUDA "fp32", "fp32_set_opt_dtype" and "fp32_append_dtype" lists).
# For ops with a ``dtype`` argument, an explicit dtype given by the caller wins.
FP32_OPS = (
    "acos",
    "asin",
    "cosh",
    "erfinv",
    "exp",
    "expm1",
    "log",
    "log10",
    "log2",
    "log1p",
    "reciprocal",
    "rsqrt",
    "sinh",
    "tan",
    "pow",
    "softplus",
    "layer_norm",
    "native_layer_norm",
    "group_norm",
    "frobenius_norm",
    "nuclear_norm",
    "cosine_similarity",
    "poisson_nll_loss",
    "cosine_embedding_loss",
    "nll_loss",
    "nll_loss2d",
    "hinge_embedding_loss",
    "kl_div",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "mse_loss",
    "margin_ranking_loss",
    "multilabel_margin_loss",
    "soft_margin_loss",
    "triplet_margin_loss",
    "multi_margin_loss",
    "binary_cross_entropy_with_logits",
    "dist",
    "pdist",
    "cdist",
    "renorm",
    "logsumexp",
    "upsample_nearest1d",
    "upsample_nearest2d",
    "upsample_nearest3d",
    "_upsample_nearest_exact1d",
    "_upsample_nearest_exact2d",
    "_upsample_nearest_exact3d",
    "upsample_linear1d",
    "upsample_bilinear2d",
    "_upsample_bilinear2d_aa",
    "upsample_trilinear3d",
    "upsample_bicubic2d",
    "_upsample_bicubic2d_aa",
    "prod",
    "softmax",
    "log_softmax",
    "cumprod",
    "cumsum",
    "linalg_vector_norm",
    "linalg_matrix_norm",
    "sum",
    "norm",
)

# Ops that run in the widest floating dtype among their inputs (CUDA "promote" list).
PROMOTE_OPS = (
    "addcdiv",
    "addcmul",
    "atan2",
    "bilinear",
    "cross",
    "dot",
    "vdot",
    "grid_sampler",
    "index_put",
    "tensordot",
    "scatter_add",
)

# CUDA "banned" list: same message as ATen.
BANNED_OPS = ("binary_cross_entropy",)
_BANNED_MESSAGE = (
    "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
    "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
    "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
    "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
    "safe to autocast."
)

_AUTOCAST_KEY = torch._C.DispatchKey.AutocastPrivateUse1


def _eligible(x) -> bool:
    return (
        isinstance(x, torch.Tensor)
        and x.is_floating_point()
        and x.dtype is not torch.float64
        and x.device.type == "npu"
    )


def _cast_all(value, dtype):
    if _eligible(value):
        return value if value.dtype is dtype else value.to(dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_all(v, dtype) for v in value)
    return value


def _widest(args, kwargs):
    dtypes = [
        x.dtype
        for x in [*args, *kwargs.values()]
        for x in (x if isinstance(x, (list, tuple)) else (x,))
        if _eligible(x)
    ]
    widest = dtypes[0] if dtypes else None
    for dtype in dtypes[1:]:
        widest = torch.promote_types(widest, dtype)
    return widest


def _make_kernel(op, policy: str, has_dtype_arg: bool):
    exclude = torch._C.DispatchKeySet(_AUTOCAST_KEY)

    def kernel(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(exclude):
            if policy == "lower":
                dtype = torch.get_autocast_dtype("npu")
            elif policy == "fp32":
                explicit = kwargs.get("dtype") is not None or (
                    has_dtype_arg and any(isinstance(a, torch.dtype) for a in args)
                )
                dtype = None if explicit else torch.float32
            else:
                dtype = _widest(args, kwargs)
            if dtype is not None:
                args = _cast_all(args, dtype)
                kwargs = {k: _cast_all(v, dtype) for k, v in kwargs.items()}
            return op(*args, **kwargs)

    return kernel


def _banned_kernel(*args, **kwargs):
    raise RuntimeError(_BANNED_MESSAGE)


def install_autocast_kernels() -> list:
    """Register the fallthrough and the per-op kernels; returns the Library objects to keep alive."""
    fallthrough = torch.library.Library("_", "IMPL")
    fallthrough.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    kernels = torch.library.Library("aten", "IMPL")
    for policy, names in (("lower", LOWER_PRECISION_OPS), ("fp32", FP32_OPS), ("promote", PROMOTE_OPS)):
        for name in names:
            packet = getattr(torch.ops.aten, name)
            for overload_name in packet.overloads():
                op = getattr(packet, overload_name)
                if any(a.alias_info is not None and a.alias_info.is_write for a in op._schema.arguments):
                    continue  # out= and in-place variants are not autocast (as in ATen)
                has_dtype_arg = any(a.name == "dtype" for a in op._schema.arguments)
                qualified = name if overload_name == "default" else f"{name}.{overload_name}"
                kernels.impl(qualified, _make_kernel(op, policy, has_dtype_arg), "AutocastPrivateUse1")
    for name in BANNED_OPS:
        packet = getattr(torch.ops.aten, name)
        for overload_name in packet.overloads():
            qualified = name if overload_name == "default" else f"{name}.{overload_name}"
            kernels.impl(qualified, _banned_kernel, "AutocastPrivateUse1")
    return [fallthrough, kernels]
