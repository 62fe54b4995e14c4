"""accelerate's ``Accelerator(mixed_precision="fp16")`` under the BF16 policy (NPU914).

accelerate picks the NPU itself (``accelerator.device``, ``is_npu_available()`` branches are
device-neutral and left alone); only the float16 choice changes: ``"bf16"`` runs a BF16 autocast
without a GradScaler (accelerate v1.14.0 src/accelerate/accelerator.py). docs/reference/deepspeed.md §5.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import string_value
from cuda2npu.core.rulebase import Rule, register

ACCELERATORS = {"accelerate.Accelerator", "accelerate.accelerator.Accelerator"}


def _fp16_literals(expr: cst.BaseExpression) -> list[cst.SimpleString]:
    """The ``"fp16"`` strings an argument can evaluate to (also both sides of ``a if c else b``)."""
    if isinstance(expr, cst.IfExp):
        return _fp16_literals(expr.body) + _fp16_literals(expr.orelse)
    return [expr] if isinstance(expr, cst.SimpleString) and string_value(expr) == "fp16" else []


@register
class AccelerateMixedPrecision(Rule):
    """NPU914: ``Accelerator(mixed_precision="fp16")`` → ``"bf16"`` (``--precision bf16``)."""

    codes = ("NPU914",)
    triggers = (r"mixed_precision",)

    def visit_Call(self, node: cst.Call) -> None:
        if self.options.precision != "bf16" or is_cuda_alternative(self.ctx, node):
            return
        if self.resolver.qualified_name(node.func) not in ACCELERATORS:
            return
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "mixed_precision":
                for literal in _fp16_literals(arg.value):
                    self.report(
                        "NPU914",
                        literal,
                        'Accelerator(mixed_precision="fp16") → "bf16": BF16 is the native mixed-precision type of '
                        "Atlas A2 NPUs and needs no loss scaling (--precision bf16)",
                        lambda updated: updated.with_changes(value=updated.value.replace("fp16", "bf16")),
                        tier=Tier.NUMERIC,
                        needs_torch_npu=False,
                    )
