"""CPU stand-in for ``apex.multi_tensor_apply`` (NVIDIA/apex ``apex/multi_tensor_apply/multi_tensor_apply.py``):
``multi_tensor_applier(op, noop_flag_buffer, tensor_lists, *args)`` calls
``op(chunk_size, noop_flag_buffer, tensor_lists, *args)`` with apex's chunk size of 2048 * 32; the
generated companion's (cuda2npu/templates/apex_npu_optimizers.py)."""

from cuda2npu.templates.apex_npu_optimizers import MultiTensorApply, multi_tensor_applier

__all__ = ["MultiTensorApply", "multi_tensor_applier"]
