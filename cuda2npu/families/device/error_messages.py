"""NPU112: a test of an error's text for the CUDA runtime's words (``"CUDA out of memory" in str(e)``).

torch_npu's caching allocator raises ``NPU out of memory. Tried to allocate ...``
(docs/reference/torch_npu.md, "Out of memory"), so a test for ``"CUDA out of memory"`` is False on
an NPU host and the retry, the smaller batch or the CPU fallback it guards never happens. The
literal loses its ``CUDA `` (``"out of memory"`` is in both runtimes' messages): exact, and right
on both hosts; so does one in a list of error texts the code looks for (accelerate's
``should_reduce_batch_size``). A bare ``"CUDA"``/``"cuda"`` (or ``"CUDA error"``) looked for in an error's text
(``str(e)``, ``repr(e)``, ``e.args[0]``, ``traceback.format_exc()``, a name assigned one of them,
lower-cased or not) is reported for review: what the test is after (an OOM, a device error) is
the author's. Left alone: tests that only choose a message to print or log (also inside the message, an
``'cuda' if 'CUDA' in str(e) else ...`` in a logged f-string), tests next to an
``or`` that already catches ``"out of memory"`` or the NPU's name, and code that handles the NPU.
"""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import string_value
from cuda2npu.core.names import dotted_name
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes
from cuda2npu.families.device.tensor_types import MESSAGE_CALLS

OOM = re.compile(r"cuda (out of memory)", re.IGNORECASE)
RUNTIME_NAME = re.compile(r"cuda( error)?:?", re.IGNORECASE)  # the bare name: what it tests for is unknown
NEUTRAL = re.compile(r"out of memory|npu", re.IGNORECASE)  # an `or` arm that already matches an NPU's error
TEXT_CALLS = {"str", "repr", "traceback.format_exc", "format_exc"}
CASE_METHODS = {"lower", "upper", "casefold", "strip"}


def without_runtime_name(node: cst.SimpleString) -> cst.SimpleString:
    """``"CUDA out of memory"`` → ``"out of memory"`` inside the literal (its quotes and prefix kept)."""
    return node.with_changes(value=OOM.sub(lambda match: match.group(1), node.value, count=1))


@register
class CudaErrorMessageTests(Rule):
    codes = ("NPU112",)
    triggers = (r"(?i:cuda out of memory)", r"""["'](?:CUDA|cuda)(?: error)?:?["']\s+(?:not\s+)?in\b""")
    portable_support = True

    def visit_Module(self, node: cst.Module) -> None:
        self._handler_names = {
            handler.name.name.value
            for handler in iter_nodes(node, cst.ExceptHandler)
            if handler.name is not None and isinstance(handler.name.name, cst.Name)
        }
        self._text_names: set[str] = set()
        for assign in iter_nodes(node, cst.Assign):
            targets = [t.target for t in assign.targets]
            if len(targets) == 1 and isinstance(targets[0], cst.Name) and self._error_text(assign.value):
                self._text_names.add(targets[0].value)

    def _error_text(self, expr: cst.BaseExpression) -> bool:
        """``str(e)``, ``repr(e).lower()``, ``e.args[0]``, ``traceback.format_exc()``, ``msg`` (one of them)."""
        if isinstance(expr, cst.Name):
            return expr.value in self._text_names
        if isinstance(expr, cst.Call):
            if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in CASE_METHODS:
                return self._error_text(expr.func.value)
            name = dotted_name(expr.func) or ""
            if name in ("traceback.format_exc", "format_exc"):
                return True
            if name in TEXT_CALLS and len(expr.args) == 1 and isinstance(expr.args[0].value, cst.Name):
                return expr.args[0].value.value in self._handler_names
        if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute):
            owner = expr.value.value
            return (
                expr.value.attr.value == "args" and isinstance(owner, cst.Name) and owner.value in self._handler_names
            )
        return False

    def visit_Element(self, node: cst.Element) -> None:
        """``["CUDA out of memory.", "HIP out of memory", ...]``: a table of error texts the code looks for
        (lighteval's and accelerate's ``should_reduce_batch_size``, round 43), rewritten as a tested literal is."""
        value = string_value(node.value) if isinstance(node.value, cst.SimpleString) else None
        if value is not None and OOM.search(value) and not is_cuda_alternative(self.ctx, node.value):
            self._out_of_memory(node.value, value)

    def _out_of_memory(self, literal: cst.SimpleString, value: str) -> None:
        self.report(
            "NPU112",
            literal,
            f"{value!r} tests for the CUDA runtime's out-of-memory error: an NPU's reads "
            "'NPU out of memory. Tried to allocate ...', so the test keeps 'out of memory', which both say",
            without_runtime_name,
            needs_torch_npu=False,
        )

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if len(node.comparisons) != 1 or not isinstance(node.comparisons[0].operator, (cst.In, cst.NotIn)):
            return
        literal, text = node.left, node.comparisons[0].comparator
        value = string_value(literal) if isinstance(literal, cst.SimpleString) else None
        if value is None or is_cuda_alternative(self.ctx, literal):
            return
        if OOM.search(value):
            self._out_of_memory(literal, value)
        elif RUNTIME_NAME.fullmatch(value) and self._error_text(text) and not self._settled(node):
            self.report(
                "NPU112",
                literal,
                f"{value!r} looked for in an error's text: an NPU's errors name the NPU ('NPU out of memory. "
                "Tried to allocate ...'), so this is False on an NPU host; test for what is meant "
                "(`torch.OutOfMemoryError`, 'out of memory')",
                tier=Tier.REVIEW,
            )

    def _settled(self, comparison: cst.Comparison) -> bool:
        """The test only picks a message to print, or an ``or`` beside it already matches an NPU's error."""
        parents = TreeIndex.of(self.ctx).parents
        node, parent = comparison, parents.get(comparison)
        while isinstance(parent, (cst.BooleanOperation, cst.UnaryOperation)):
            if isinstance(parent, cst.BooleanOperation) and isinstance(parent.operator, cst.Or):
                other = parent.right if parent.left is node else parent.left
                if any(NEUTRAL.search(string_value(s) or "") for s in iter_nodes(other, cst.SimpleString)):
                    return True
            node, parent = parent, parents.get(parent)
        if isinstance(parent, cst.If) and parent.test is node:
            return all(_is_message(statement) for statement in parent.body.body)
        while parent is not None and not isinstance(parent, cst.BaseSmallStatement):  # kokoro, round 42:
            if isinstance(parent, cst.Call) and _message_call(
                parent
            ):  # `logger.error(f"{'cuda' if 'CUDA' in str(e) ...")`
                return True
            parent = parents.get(parent)
        return False


def _is_message(statement: cst.BaseStatement) -> bool:
    """A line that prints or logs (``print(...)``, ``logger.warning(...)``) and does nothing else."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        call = small.value if isinstance(small, cst.Expr) else None
        if not isinstance(call, cst.Call) or not _message_call(call):
            return False
    return True


def _message_call(call: cst.Call) -> bool:
    """``print(...)``, ``logger.warning(...)``: a call that prints or logs."""
    return (dotted_name(call.func) or "").rpartition(".")[2] in MESSAGE_CALLS
