"""CPU stand-in for apex's ``amp_C`` CUDA extension: the multi-tensor kernels scripts call directly.

Follows NVIDIA/apex ``csrc/amp_C_frontend.cpp`` and the kernels it binds:

* ``multi_tensor_scale(chunk_size, noop_flag, [inputs, outputs], scale)``
  (``csrc/multi_tensor_scale_kernel.cu``): ``out = float(in) * scale`` written in the output's
  dtype; ``noop_flag`` is set to 1 when an input is not finite, tested before writing (inputs
  may be their own outputs; the kernel still writes, so infs/nans propagate).
* ``multi_tensor_axpby(chunk_size, noop_flag, [x, y, out], a, b, arg_to_check)``
  (``csrc/multi_tensor_axpby_kernel.cu``): ``out = a*x + b*y`` in float; the finiteness check
  covers x (0), y (1) or both (-1).
* ``multi_tensor_l2norm(chunk_size, noop_flag, [tensors], per_tensor)``
  (``csrc/multi_tensor_l2norm_kernel.cu``): ``(total, per_tensor_norms)``, float32; the second
  is an empty tensor unless ``per_tensor``. ``noop_flag`` is set to 1 when a sum of squares is not
  finite (the kernel tests each chunk's; per tensor here, the same unless a norm exceeds ~1.8e19).

``chunk_size`` only splits work on the GPU and has no effect on the values. The optimizer kernels
(``multi_tensor_adam``, ``multi_tensor_lamb``, ...) are not provided: the apex optimizer stand-ins
implement their math directly.
"""

from __future__ import annotations

import torch

__all__ = ["multi_tensor_axpby", "multi_tensor_l2norm", "multi_tensor_scale"]


def _flag_if_not_finite(noop_flag: torch.Tensor, tensors) -> None:
    if any(not bool(torch.isfinite(t).all()) for t in tensors):
        noop_flag.fill_(1)


def multi_tensor_scale(chunk_size: int, noop_flag: torch.Tensor, tensor_lists, scale: float) -> None:
    inputs, outputs = tensor_lists
    _flag_if_not_finite(noop_flag, inputs)
    for source, target in zip(inputs, outputs):
        target.copy_(source.float() * scale)


def multi_tensor_axpby(
    chunk_size: int, noop_flag: torch.Tensor, tensor_lists, a: float, b: float, arg_to_check: int
) -> None:
    xs, ys, outs = tensor_lists
    checked = {0: xs, 1: ys}.get(arg_to_check, [*xs, *ys])
    _flag_if_not_finite(noop_flag, checked)  # before writing: an output may be an input
    for x, y, out in zip(xs, ys, outs):
        out.copy_(a * x.float() + b * y.float())


def multi_tensor_l2norm(chunk_size: int, noop_flag: torch.Tensor, tensor_lists, per_tensor: bool | None = False):
    tensors = tensor_lists[0]
    norms = torch.stack([t.detach().float().norm() for t in tensors])
    if not bool(torch.isfinite(norms).all()):
        noop_flag.fill_(1)
    total = norms.norm().reshape(1)
    return total, norms if per_tensor else torch.empty(0, dtype=torch.float32, device=total.device)


def __getattr__(name: str):
    raise AttributeError(f"amp_C.{name} is not provided by the cuda2npu CPU stand-in (see its docstring)")
