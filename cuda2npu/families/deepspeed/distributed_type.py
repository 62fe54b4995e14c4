"""accelerate's ``distributed_type`` compared with ``MULTI_GPU`` alone (NPU915).

On an NPU host with more than one process accelerate sets ``DistributedType.MULTI_NPU`` (0.21.0 and
later, docs/reference/run_configs.md §3), so ``accelerator.distributed_type ==
DistributedType.MULTI_GPU`` is False there and the code takes its single-process branch (Otter loads
with ``device_map="auto"`` under DDP, and ``accelerator.prepare`` raises). The comparison accepts
``MULTI_NPU`` too: ``==`` / ``is`` becomes ``in (MULTI_GPU, MULTI_NPU)``, ``!=`` / ``is not`` becomes
``not in``, and a tuple, list or set that holds ``MULTI_GPU`` gets ``MULTI_NPU`` next to it. The enum
member is spelled as the comparison spells ``MULTI_GPU`` (``DistributedType.MULTI_NPU``, or the string
``"MULTI_NPU"``: ``DistributedType`` is a ``str`` enum). Under an accelerate pin older than 0.21.0
the enum has no ``MULTI_NPU`` (and accelerate does not know the NPU: NPU705): marked, not rewritten.
The string form is read in any file (Otter's data loader tests ``args.distributed_type == "MULTI_GPU"``,
the value its training script copied from the Accelerator); the enum form is accelerate's by its import.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.npu_aware import in_npu_branch
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import string_value
from cuda2npu.core.nodes import code_of
from cuda2npu.core.pins import pin_predates
from cuda2npu.core.rulebase import Rule, register

FIRST_MULTI_NPU = "0.21.0"  # accelerate's DistributedType.MULTI_NPU
SWAPPED = {"Equal": cst.In, "Is": cst.In, "NotEqual": cst.NotIn, "IsNot": cst.NotIn}


@register
class AccelerateMultiGpu(Rule):
    """NPU915: ``distributed_type == DistributedType.MULTI_GPU`` also accepts ``MULTI_NPU``."""

    codes = ("NPU915",)
    triggers = (r"MULTI_GPU",)  # also in a file that never names accelerate: `args.distributed_type == "MULTI_GPU"`

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if len(node.comparisons) != 1 or in_npu_branch(self.ctx, node) or self._handles_npu():
            return
        target = node.comparisons[0]
        if self._member(target.comparator) is not None and self._reads_type(node.left):
            if type(target.operator).__name__ in SWAPPED:
                self._report(node, target.comparator, self._widened_test)
        elif isinstance(target.operator, (cst.In, cst.NotIn)) and isinstance(
            target.comparator, (cst.Tuple, cst.List, cst.Set)
        ):
            elements = [e.value for e in target.comparator.elements]
            gpu = next((e for e in elements if self._member(e) is not None), None)
            if gpu is not None and not any(self._member(e, "MULTI_NPU") is not None for e in elements):
                self._report(node, gpu, self._widened_collection)

    def _handles_npu(self) -> bool:
        """The statement names ``MULTI_NPU`` already (``t == MULTI_GPU or t == MULTI_NPU``)."""
        statement = self.ctx.statement
        if isinstance(statement, (cst.If, cst.While)):
            statement = statement.test
        return statement is not None and "MULTI_NPU" in code_of(statement)

    def _report(self, node: cst.Comparison, gpu: cst.BaseExpression, fix) -> None:
        message = "accelerate's `distributed_type` is `MULTI_NPU` on an NPU host with several processes"
        if isinstance(gpu, cst.Attribute) and pin_predates(self.options.project.pins, "accelerate", FIRST_MULTI_NPU):
            self.report(
                "NPU915",
                node,
                f"{message} (accelerate {FIRST_MULTI_NPU} and later; the pinned release has no `MULTI_NPU`): "
                "raise the accelerate pin, then accept `MULTI_NPU` here",
                tier=Tier.MANUAL,
                needs_torch_npu=False,
            )
            return
        self.report("NPU915", node, f"{message}: accept it next to `MULTI_GPU`", fix, needs_torch_npu=False)

    def _member(self, expr: cst.BaseExpression, name: str = "MULTI_GPU") -> cst.BaseExpression | None:
        """``expr`` when it is accelerate's ``DistributedType.<name>`` or the string ``"<name>"``."""
        if isinstance(expr, cst.SimpleString):
            return expr if string_value(expr) == name else None
        qualified = self.resolver.qualified_name(expr) or ""
        return expr if qualified.startswith("accelerate.") and qualified.endswith(f"DistributedType.{name}") else None

    def _reads_type(self, expr: cst.BaseExpression) -> bool:
        """``accelerator.distributed_type``, ``state.distributed_type``, ``self.distributed_type``."""
        return isinstance(expr, cst.Attribute) and expr.attr.value == "distributed_type"

    def _widened_test(self, node: cst.Comparison) -> cst.Comparison:
        target = node.comparisons[0]
        pair = cst.Tuple([cst.Element(target.comparator), cst.Element(_npu_twin(target.comparator))])
        operator = SWAPPED[type(target.operator).__name__](
            whitespace_before=target.operator.whitespace_before, whitespace_after=target.operator.whitespace_after
        )
        return node.with_changes(comparisons=[target.with_changes(operator=operator, comparator=pair)])

    def _widened_collection(self, node: cst.Comparison) -> cst.Comparison:
        target = node.comparisons[0]
        collection = target.comparator
        elements = list(collection.elements)
        at = next(i for i, e in enumerate(elements) if _spells(e.value, "MULTI_GPU"))
        twin = cst.Element(_npu_twin(elements[at].value))
        if at == len(elements) - 1:
            elements[at] = elements[at].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            elements.append(twin)
        else:
            elements.insert(at + 1, twin.with_changes(comma=elements[at].comma))
        return node.with_changes(
            comparisons=[target.with_changes(comparator=collection.with_changes(elements=elements))]
        )


def _spells(expr: cst.BaseExpression, name: str) -> bool:
    """``expr`` is ``<...>.name`` or the string ``"name"`` (the fix's check: its nodes are new, unresolved)."""
    if isinstance(expr, cst.Attribute):
        return expr.attr.value == name
    return isinstance(expr, cst.SimpleString) and string_value(expr) == name


def _npu_twin(gpu: cst.BaseExpression) -> cst.BaseExpression:
    """``DistributedType.MULTI_NPU`` for ``DistributedType.MULTI_GPU``, ``"MULTI_NPU"`` for ``"MULTI_GPU"``."""
    if isinstance(gpu, cst.Attribute):
        return gpu.with_changes(attr=cst.Name("MULTI_NPU"))
    return gpu.with_changes(value=gpu.value.replace("MULTI_GPU", "MULTI_NPU"))
