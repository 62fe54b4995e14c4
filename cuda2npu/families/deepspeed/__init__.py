"""DeepSpeed and accelerate, the Python side (NPU911–NPU915).

DeepSpeed runs on Ascend through its own ``NPU_Accelerator``: code written against
``deepspeed.accelerator.get_accelerator()`` is device-neutral and left alone. These rules look at
what that accelerator does not cover: ops without an NPU build (NPU911), the partial NPU inference
kernels (NPU912), and the float16 settings of DeepSpeed configs (NPU913) and accelerate (NPU914)
under the BF16 precision policy, and comparisons of accelerate's ``distributed_type`` with
``MULTI_GPU`` alone (NPU915). ``"nccl"`` passed to ``deepspeed.init_distributed`` is NPU201's
(cuda2npu/families/distributed.py). Upstream facts: docs/reference/deepspeed.md.
"""
