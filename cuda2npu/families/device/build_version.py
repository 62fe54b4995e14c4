"""NPU115: ``torch.version.cuda`` read as a version string.

torch_npu runs on torch's CPU build, where ``torch.version.cuda`` is ``None``. Code that reads it as
the CUDA version then fails on an NPU host: distrifuser's ``check_env()``, run by every
``DistriConfig``, does ``version.parse(torch.version.cuda) < version.parse("11.3")`` (TypeError,
round 35); DejaVu's ``torch.version.cuda.split(".")`` (AttributeError, round 33). Reported: an
attribute or an item of it, an ordering comparison or an ``in`` test against it, and a version
parser or number conversion given it. Not where a test of it comes first (``if torch.version.cuda:``,
``torch.version.cuda is not None and ...``, ``x if torch.version.cuda else y``, an ``assert`` on it above),
nor in a ``torch.cuda.is_available()`` branch the migration keeps (a CUDA feature switch), nor printing or
storing it (``None`` prints), nor code that handles the NPU, nor a build script of CUDA extensions
(NPU602 asks for its port). Nothing is rewritten: what the version
decides (a kernel, a feature) is the person's to port.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import libcst as cst

from cuda2npu.analysis.cuda_gates import kept_cuda_blocks
from cuda2npu.analysis.never_run import in_never_run_code
from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes

BUILD_VERSION = "torch.version.cuda"
# callables that raise on None: version parsers and number conversions (by the last part of their name)
PARSERS = {"parse", "Version", "LooseVersion", "StrictVersion", "parse_version", "float", "int"}
CUDA_BUILD = re.compile(rb"\bCUDAExtension\b")  # setup.py of CUDA extensions (NPU602's)
ORDERING = (cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)
MESSAGE = (
    "`torch.version.cuda` is None on an NPU host (torch_npu runs on torch's CPU build): {use} raises {error} "
    "there; test `torch.version.cuda is not None` first, or decide by the NPU's own version (`torch_npu.__version__`)"
)


@register
class CudaBuildVersion(Rule):
    codes = ("NPU115",)
    triggers = (r"version\.cuda\b",)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self._is_version(node.value):
            self._report(node, f"`.{node.attr.value}`", "AttributeError")

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if self._is_version(node.value):
            self._report(node, "indexing it", "TypeError")

    def visit_Comparison(self, node: cst.Comparison) -> None:
        left = node.left
        for target in node.comparisons:
            ordering = isinstance(target.operator, ORDERING)
            if (ordering and (self._is_version(left) or self._is_version(target.comparator))) or (
                isinstance(target.operator, (cst.In, cst.NotIn)) and self._is_version(target.comparator)
            ):
                self._report(node, "comparing it" if ordering else "an `in` test of it", "TypeError")
                return
            left = target.comparator

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.resolver.qualified_name(node.func) or ""
        if qualified.rpartition(".")[2] in PARSERS and any(self._is_version(arg.value) for arg in node.args):
            self._report(node, f"`{qualified.rpartition('.')[2]}(...)` of it", "TypeError")

    def _is_version(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, cst.Attribute) and self.resolver.qualified_name(node) == BUILD_VERSION

    def _report(self, node: cst.CSTNode, use: str, error: str) -> None:
        if self._tested_first(node) or is_cuda_alternative(self.ctx, node):
            return
        if self.ctx.text is not None and CUDA_BUILD.search(self.ctx.text):
            return  # a build script of CUDA extensions: NPU602 asks for its port
        self.report("NPU115", node, MESSAGE.format(use=use, error=error), tier=Tier.MANUAL, needs_torch_npu=False)

    def _tested_first(self, node: cst.CSTNode) -> bool:
        """A test of ``torch.version.cuda`` runs before ``node`` (the left side of an ``and`` holding it,
        the test of a conditional expression or of an enclosing ``if``/``while``/``elif``, an ``assert``
        or ``if`` on it earlier in a block holding it), or ``node`` runs only on a CUDA host (a
        ``torch.cuda.is_available()`` branch the migration keeps, code an NPU host never runs)."""
        if in_never_run_code(self.ctx, node):
            return True
        index = TreeIndex.of(self.ctx)
        child, parent = node, index.parents.get(node)
        while parent is not None:
            if isinstance(parent, cst.BooleanOperation) and child is parent.right and self._names(parent.left):
                return True
            if isinstance(parent, cst.IfExp) and child is not parent.test and self._names(parent.test):
                return True
            if isinstance(parent, (cst.If, cst.While)) and child is not parent.test and self._names(parent.test):
                return True
            if isinstance(parent, cst.If) and child in kept_cuda_blocks(self.ctx, parent):
                return True
            if isinstance(parent, (cst.IndentedBlock, cst.Module)) and self._checked_above(parent.body, child):
                return True
            child, parent = parent, index.parents.get(parent)
        return False

    def _checked_above(self, statements: Sequence[cst.BaseStatement], statement: cst.CSTNode) -> bool:
        """An ``assert`` on ``torch.version.cuda``, or an ``if`` asking whether it is set, comes before
        ``statement`` in ``statements``."""
        for earlier in statements:
            if earlier is statement:
                return False
            if isinstance(earlier, cst.If) and self._tests_none(earlier.test):
                return True  # `if torch.version.cuda is None: return`
            small = earlier.body if isinstance(earlier, cst.SimpleStatementLine) else ()
            if any(isinstance(part, cst.Assert) and self._names(part.test) for part in small):
                return True
        return False

    def _tests_none(self, test: cst.BaseExpression) -> bool:
        """``test`` asks whether ``torch.version.cuda`` is set (``is None``, ``not ...``, itself)."""
        if self._is_version(test):
            return True
        for node in iter_nodes(test, (cst.Comparison, cst.UnaryOperation)):
            if isinstance(node, cst.UnaryOperation):
                if isinstance(node.operator, cst.Not) and self._is_version(node.expression):
                    return True
            elif any(isinstance(t.operator, (cst.Is, cst.IsNot)) for t in node.comparisons) and self._names(node):
                return True
        return False

    def _names(self, test: cst.BaseExpression) -> bool:
        """``test`` reads ``torch.version.cuda``."""
        return any(self._is_version(node) for node in iter_nodes(test, cst.Attribute))
