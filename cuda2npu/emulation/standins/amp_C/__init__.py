"""CPU stand-in for apex's ``amp_C`` CUDA extension: the multi-tensor kernels scripts call directly
(NVIDIA/apex ``csrc/amp_C_frontend.cpp``): ``multi_tensor_scale``, ``multi_tensor_axpby`` and
``multi_tensor_l2norm``, the generated companion's functions (cuda2npu/templates/
apex_npu_optimizers.py, where each says which kernel it follows), so both sides of a validation run
one implementation. ``chunk_size`` only splits work on the GPU and has no effect on the values. The
optimizer kernels (``multi_tensor_adam``, ``multi_tensor_lamb``, ...) are not provided: the apex
optimizer stand-ins implement their math directly.
"""

from cuda2npu.templates.apex_npu_optimizers import multi_tensor_axpby, multi_tensor_l2norm, multi_tensor_scale

__all__ = ["multi_tensor_axpby", "multi_tensor_l2norm", "multi_tensor_scale"]


def __getattr__(name: str):
    raise AttributeError(f"amp_C.{name} is not provided by the cuda2npu CPU stand-in (see its docstring)")
