"""CPU stand-in for ``apex.multi_tensor_apply`` (NVIDIA/apex ``apex/multi_tensor_apply/multi_tensor_apply.py``):
``multi_tensor_applier(op, noop_flag_buffer, tensor_lists, *args)`` calls
``op(chunk_size, noop_flag_buffer, tensor_lists, *args)`` with apex's chunk size of 2048 * 32."""

from __future__ import annotations


class MultiTensorApply:
    available = True
    warned = False

    def __init__(self, chunk_size: int) -> None:
        self.chunk_size = chunk_size

    def check_avail(self) -> None:
        """The stand-in's amp_C always imports."""

    def __call__(self, op, noop_flag_buffer, tensor_lists, *args):
        return op(self.chunk_size, noop_flag_buffer, tensor_lists, *args)


multi_tensor_applier = MultiTensorApply(2048 * 32)

__all__ = ["MultiTensorApply", "multi_tensor_applier"]
