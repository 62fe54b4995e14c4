"""NPU111: legacy tensor type strings (``'torch.cuda.FloatTensor'``) compared with or passed to ``.type()``.

On an NPU, ``Tensor.type()`` answers ``'torch.npu.FloatTensor'`` and ``Tensor.type(name)`` takes
``'torch.npu.<X>Tensor'`` (docs/reference/torch_npu_api.md, "Legacy tensor types"). A string that is
exactly a CUDA tensor type is rewritten where it is compared with ``x.type()`` (``==``, ``!=``,
``in`` a tuple/list/set of them, either side; also through ``a if c else b``) or passed to
``x.type(...)``; elsewhere (assigned, returned, a dict key, an argument of another call) it is
reported for review with a marker: it may be compared with a ``.type()`` later, or be only text.
Text is left alone: docstrings, arguments of ``print``/logging/``warn``/exception calls, ``assert``
messages, operands of ``+``/``%`` (a message being built). ``torch.cuda.FloatTensor`` as a name is
NPU103's.

Portable output (``--portable``): ``f"torch.{portable_device.device_type()}.FloatTensor"``, which
is the CUDA type on CUDA hosts and the NPU type on Ascend hosts.
"""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.analysis import portable
from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import rename_fix, string_value
from cuda2npu.core.names import dotted_name
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes
from cuda2npu.families.device.default_tensor_type import default_type_argument

# torch's legacy dense types (torch/csrc/utils/tensor_types.cpp), all registered by torch_npu as torch.npu.<X>Tensor
SCALARS = ("Float", "Half", "BFloat16", "Double", "Int", "Long", "Short", "Char", "Byte", "Bool")
CUDA_TENSOR_TYPE = re.compile(rf"torch\.cuda\.(?:{'|'.join(SCALARS)})Tensor")
# text, not a type test: where a string that names a type is a message
MESSAGE_CALLS = {"print", "debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log"}
MESSAGE_CALLEE = re.compile(r"(?:Error|Exception|Warning)$")
CONTAINERS = (cst.Element, cst.List, cst.Tuple, cst.Set, cst.IfExp, cst.Arg, cst.DictElement, cst.Dict)


def _is_type_query(expr: cst.BaseExpression) -> bool:
    """``x.type()``: a tensor's type name."""
    return (
        isinstance(expr, cst.Call)
        and not expr.args
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value == "type"
    )


def _type_literals(expr: cst.BaseExpression | None) -> list[cst.SimpleString]:
    """The CUDA tensor type literals ``expr`` is or chooses among (tuple/list/set elements, ``a if c else b``)."""
    if isinstance(expr, cst.SimpleString):
        value = string_value(expr)
        return [expr] if value is not None and CUDA_TENSOR_TYPE.fullmatch(value) else []
    if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
        return [literal for element in expr.elements for literal in _type_literals(element.value)]
    if isinstance(expr, cst.IfExp):
        return _type_literals(expr.body) + _type_literals(expr.orelse)
    return []


def portable_fix(node: cst.SimpleString) -> cst.BaseExpression:
    """``'torch.cuda.FloatTensor'`` → ``f'torch.{portable_device.device_type()}.FloatTensor'``."""
    prefix = node.prefix.replace("u", "").replace("U", "")
    quote = node.quote
    raw = node.value[len(node.prefix) + len(quote) : -len(quote)]
    if not raw.startswith("torch.cuda."):  # spelled with escapes: the fix fails, the finding stays
        raise ValueError(f"unexpected tensor type literal {node.value}")
    rest = raw[len("torch.cuda") :]
    return cst.parse_expression(f"{prefix}f{quote}torch.{{{portable.device_type()}}}{rest}{quote}")


@register
class CudaTensorTypeStrings(Rule):
    codes = ("NPU111",)
    triggers = (r"""torch\.cuda\.\w+Tensor["']""",)  # the end of a string literal: not the attribute (NPU103)
    portable_support = True

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._seen: set[cst.CSTNode] = set()  # literals reported or left
        self._containers: set[cst.CSTNode] = set()  # what a review finding was reported for

    def _rewrite(self, literals: list[cst.SimpleString], where: str) -> None:
        for literal in literals:
            if literal in self._seen:
                continue
            self._seen.add(literal)
            if is_cuda_alternative(self.ctx, literal):
                continue
            value = string_value(literal) or ""
            npu = value.replace("torch.cuda.", "torch.npu.", 1)
            if self.options.portable:
                portable.need(self, Tier.EXACT, portable.device_type())
                self.report(
                    "NPU111",
                    literal,
                    f"`{value}` {where}; portable: the type on this host's accelerator "
                    f"(`{portable.device_type()}` in it: {npu!r} on Ascend hosts)",
                    portable_fix,
                )
            else:
                self.report(
                    "NPU111",
                    literal,
                    f"`{value}` {where}: an NPU tensor's type is {npu!r}",
                    rename_fix("torch.cuda.", "torch.npu."),
                )

    def visit_Comparison(self, node: cst.Comparison) -> None:
        operands = [node.left, *(target.comparator for target in node.comparisons)]
        for first, second in zip(operands, operands[1:]):
            if _is_type_query(first):
                self._rewrite(_type_literals(second), "compared with `.type()`")
            if _is_type_query(second):
                self._rewrite(_type_literals(first), "compared with `.type()`")

    def visit_Call(self, node: cst.Call) -> None:
        default_type = default_type_argument(self.ctx, node)
        if default_type is not None:  # `torch.set_default_tensor_type('torch.cuda.FloatTensor')`: NPU113's
            self._seen.add(default_type)
            return
        if not (isinstance(node.func, cst.Attribute) and node.func.attr.value == "type") or not node.args:
            return
        first = node.args[0]
        if (first.keyword is None and not first.star) or (first.keyword is not None and first.keyword.value == "dtype"):
            self._rewrite(_type_literals(first.value), "passed to `.type()`")

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        """Any other use of a CUDA tensor type string: for review (once per tuple, list, set or dict
        of them), unless it is text."""
        if node in self._seen:
            return
        value = string_value(node)
        if value is None or not CUDA_TENSOR_TYPE.fullmatch(value) or is_cuda_alternative(self.ctx, node):
            return
        self._seen.add(node)
        top, child, parent = self._context(node)
        if top in self._containers or _is_text(child, parent):
            return
        self._containers.add(top)
        values = [
            v
            for v in (string_value(s) for s in iter_nodes(top, cst.SimpleString))
            if v and CUDA_TENSOR_TYPE.fullmatch(v)
        ]
        names = ", ".join(dict.fromkeys(repr(v) for v in values))
        npu = ", ".join(dict.fromkeys(repr(v.replace("torch.cuda.", "torch.npu.", 1)) for v in values))
        self.report(
            "NPU111",
            node,
            f"{names} outside a `.type()` test: where a tensor's `.type()` is compared with it later, on an "
            f"NPU that is {npu}; not rewritten, check it by hand",
            tier=Tier.REVIEW,
        )

    def _context(self, node: cst.SimpleString) -> tuple[cst.CSTNode, cst.CSTNode, cst.CSTNode | None]:
        """(the outermost tuple, list, set, dict, ``a if c else b`` or argument holding ``node``, the
        child of the first node above them, that node)."""
        parents = TreeIndex.of(self.ctx).parents
        top, child, parent = node, node, parents.get(node)
        while isinstance(parent, CONTAINERS):
            if not isinstance(parent, cst.Element | cst.DictElement):
                top = parent
            child, parent = parent, parents.get(parent)
        return top, child, parent


def _is_text(child: cst.CSTNode, parent: cst.CSTNode | None) -> bool:
    """``child`` of ``parent`` is text: a docstring or bare string, a message (print/logging/warn/
    exception argument, ``assert`` message), or a piece of one (``+``, ``%``, ``.format``, a
    concatenation)."""
    if isinstance(parent, (cst.Expr, cst.ConcatenatedString, cst.BinaryOperation, cst.Attribute)):
        return True
    if isinstance(parent, cst.Assert):
        return child is parent.msg
    if isinstance(parent, cst.Call) and child is not parent.func:
        callee = (dotted_name(parent.func) or "").rpartition(".")[2]
        return callee in MESSAGE_CALLS or MESSAGE_CALLEE.search(callee) is not None
    return False
