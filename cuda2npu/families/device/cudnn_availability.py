"""NPU103: ``torch.cuda.is_available() and torch.backends.cudnn.is_available()`` (CodeFormer's
``basicsr/utils/misc.py``, round 50). torch_npu runs on torch's CPU build, whose
``torch.backends.cudnn.is_available()`` is False (no cuDNN is built in), so with the first part renamed
by NPU103 the test is False on every NPU host and the code runs on the CPU. The cuDNN part goes: the
test is the availability call alone."""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.rulebase import Rule, register

CUDA_AVAILABLE = "torch.cuda.is_available"
CUDNN_AVAILABLE = "torch.backends.cudnn.is_available"


@register
class CudnnAvailability(Rule):
    codes = ("NPU103",)
    triggers = (r"\bcudnn\.is_available\b",)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        if not isinstance(node.operator, cst.And) or is_cuda_alternative(self.ctx, node):
            return
        if self._calls(node.left, CUDA_AVAILABLE) and self._calls(node.right, CUDNN_AVAILABLE):
            kept = "left"
        elif self._calls(node.right, CUDA_AVAILABLE) and self._calls(node.left, CUDNN_AVAILABLE):
            kept = "right"
        else:
            return
        self.report(
            "NPU103",
            node,
            "`torch.backends.cudnn.is_available()` is False on an NPU host (torch_npu runs on torch's CPU build, "
            "without cuDNN): with `torch.cuda.is_available()` renamed, the test would never be true there; the "
            "availability call alone",
            lambda updated: getattr(updated, kept).with_changes(lpar=updated.lpar, rpar=updated.rpar),
        )

    def _calls(self, expr: cst.BaseExpression, qualified: str) -> bool:
        return isinstance(expr, cst.Call) and self.resolver.qualified_name(expr.func) == qualified
