"""NPU110: ``ProfilerActivity.CUDA`` asks torch's profiler for CUDA kernels, which an NPU host has none of.

torch_npu profiles through its own ``torch_npu.profiler`` (``profile``, ``schedule``,
``tensorboard_trace_handler``, ``ProfilerActivity.CPU``/``NPU``): a profile that asked for CUDA
activity would show the host side only. The profiler block is rewritten by hand (its schedule and
trace handler move too), so this is a finding with a marker, no fix.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.rulebase import Rule, register

CUDA_ACTIVITY = {
    "torch.profiler.ProfilerActivity.CUDA",
    "torch.autograd.ProfilerActivity.CUDA",
    "torch._C._profiler.ProfilerActivity.CUDA",
}


@register
class CudaProfilerActivity(Rule):
    codes = ("NPU110",)
    triggers = (r"ProfilerActivity",)  # the enum is named wherever its CUDA member is read
    requires = (r"\bCUDA\b",)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "CUDA" or is_cuda_alternative(self.ctx, node):
            return
        if self.resolver.qualified_name(node) in CUDA_ACTIVITY:
            self.report(
                "NPU110",
                node,
                "`ProfilerActivity.CUDA` records no device activity on an NPU: profile with "
                "`torch_npu.profiler.profile(activities=[torch_npu.profiler.ProfilerActivity.CPU, "
                "torch_npu.profiler.ProfilerActivity.NPU], ...)` (schedule and tensorboard_trace_handler "
                "from torch_npu.profiler too)",
            )
