"""Helpers for literals: their Python value, and rewriting a word inside a string literal."""

from __future__ import annotations

import ast
import re

import libcst as cst

DEVICE_STRING = re.compile(r"cuda(:\d+)?")
DEVICE_PREFIX = re.compile(r"cuda(:.*)?", re.DOTALL)


def string_value(node: cst.CSTNode) -> str | None:
    """The value of a plain (non-bytes) string literal, else None."""
    if type(node) is cst.SimpleString:
        return simple_string_value(node.value)
    if isinstance(node, cst.ConcatenatedString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def simple_string_value(source: str) -> str | None:
    """The value of a string literal's source text (``'a'``, ``r"\\d"``, triple quotes); None for bytes.

    libcst's ``evaluated_value`` runs ``ast.literal_eval`` (a compile) for every literal; most
    literals have no escape and no carriage return, so their value is the text between the quotes.
    """
    start = 0
    while source[start] not in "'\"":
        start += 1
    prefix = source[:start].lower()
    if "b" in prefix:
        return None
    quote = source[start : start + 3] if source[start : start + 3] in ('"""', "'''") else source[start]
    inner = source[start + len(quote) : len(source) - len(quote)]
    if "\r" in inner or ("\\" in inner and "r" not in prefix):
        value = ast.literal_eval(source)  # escapes, or newlines Python normalises
        return value if isinstance(value, str) else None
    return inner


def replace_word(node: cst.SimpleString | cst.FormattedStringText, old: str, new: str):
    """The literal with the first ``old`` after its prefix and quote replaced by ``new``."""
    return node.with_changes(value=node.value.replace(old, new, 1))


def rename_fix(old: str, new: str):
    """A fix that replaces ``old`` by ``new`` once in a string literal node."""
    return lambda node: replace_word(node, old, new)


def device_literals(expr: cst.BaseExpression, prefix_ok: bool = False) -> list[cst.CSTNode]:
    """Literal nodes spelling a CUDA device inside an expression known to be a device.

    Handles ``"cuda"``, ``"cuda:0"``, ``f"cuda:{rank}"``, ``"cuda:" + str(i)``, ``"cuda:%d" % i``,
    ``"cuda:{}".format(i)``, conditional expressions, defaults (``device or "cuda"``), lists/tuples/sets of devices (also concatenated:
    ``["cpu"] + ["cuda"]``) and the values
    of ``map_location`` dicts (their keys name where a checkpoint was saved and stay as they are).
    """
    if isinstance(expr, cst.SimpleString):
        value = string_value(expr)
        pattern = DEVICE_PREFIX if prefix_ok else DEVICE_STRING
        return [expr] if value is not None and pattern.fullmatch(value) else []
    if isinstance(expr, cst.FormattedString):
        first = expr.parts[0] if expr.parts else None
        if isinstance(first, cst.FormattedStringText) and DEVICE_PREFIX.fullmatch(first.value):
            return [first]
        return []
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.left, (cst.List, cst.Tuple)):
        return device_literals(expr.left) + device_literals(expr.right)  # `["cpu"] + ["cuda"]`: a list of devices
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Modulo)):
        return device_literals(expr.left, prefix_ok=True)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value == "format":
            return device_literals(expr.func.value, prefix_ok=True)
        return []
    if isinstance(expr, cst.IfExp):
        return device_literals(expr.body) + device_literals(expr.orelse)
    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.Or):
        return device_literals(expr.left) + device_literals(expr.right)  # `device or "cuda"`: either is the device
    if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
        return [lit for element in expr.elements for lit in device_literals(element.value)]
    if isinstance(expr, cst.Dict):
        # map_location={"cuda:1": "cuda:0"}: keys name where the checkpoint was saved (stay CUDA)
        found: list[cst.CSTNode] = []
        for element in expr.elements:
            if isinstance(element, cst.DictElement):
                found += device_literals(element.value)
        return found
    return []


FIELD_CALLS = {"field", "Field", "HfArg"}  # dataclasses.field(default=...), pydantic.Field(default), transformers.HfArg


def field_default(value: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """The default of a class field ``field(default="cuda")`` / ``Field("cuda")``, else the value itself."""
    func = value.func if isinstance(value, cst.Call) else None
    name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
    if name in FIELD_CALLS:
        for index, arg in enumerate(value.args):
            if (arg.keyword is not None and arg.keyword.value == "default") or (index == 0 and arg.keyword is None):
                return arg.value
        return None
    return value


class _NotLiteral:
    def __repr__(self) -> str:
        return "NOT_LITERAL"


NOT_LITERAL = _NotLiteral()
"""What :func:`literal` returns for anything that is not a literal (``None`` is a literal)."""


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def literal(expr: cst.BaseExpression | None):
    """The Python value of a literal, else NOT_LITERAL.

    Literals: numbers (also ``-x`` and ``a ** b`` of numbers), strings (not bytes),
    True/False/None, and tuples or lists of literals.
    """
    if expr is None:
        return NOT_LITERAL
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[expr.value]
    if isinstance(expr, (cst.Integer, cst.Float)):
        return expr.evaluated_value
    if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString)):
        return string_value(expr) if string_value(expr) is not None else NOT_LITERAL
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = literal(expr.expression)
        return -inner if _number(inner) else NOT_LITERAL
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Power):
        left, right = literal(expr.left), literal(expr.right)
        return left**right if _number(left) and _number(right) else NOT_LITERAL
    if isinstance(expr, (cst.Tuple, cst.List)):
        values = tuple(literal(e.value) if isinstance(e, cst.Element) else NOT_LITERAL for e in expr.elements)
        return NOT_LITERAL if any(v is NOT_LITERAL for v in values) else values
    return NOT_LITERAL
