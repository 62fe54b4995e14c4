"""Read-only traversals of libcst trees that do not rebuild nodes.

libcst's ``node.visit(visitor)`` reconstructs (and validates) every node even for a visitor that
only reads; on a large file that costs several times the parse. These walks make the same
``visit_X``/``leave_X`` calls, on the same nodes and in the same order as libcst, by reading the
child fields directly. Fields that hold only whitespace, comments, brackets or separators are not
entered: no rule visits those nodes.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Iterator

import libcst as cst

# Field-name prefixes of syntax-only fields (whitespace, comments, brackets, separators).
_SYNTAX_FIELDS = ("whitespace", "lpar", "rpar", "leading_lines", "lines_after_decorators", "header", "footer",
                  "semicolon", "comma", "colon", "first_colon", "second_colon", "dot", "equal", "operator", "lbrace", "rbrace",
                  "lbracket", "rbracket", "relative", "first_line", "trailing_whitespace", "newline", "default_comma")

# Node types whose children libcst visits in another order than their fields are declared (source
# order); tests/test_traversal.py checks this table against libcst's own visit order.
_SOURCE_ORDER: dict[str, tuple[str, ...]] = {
    "Arg": ("star", "keyword", "value"),
    "ClassDef": ("decorators", "name", "type_parameters", "bases", "keywords", "body"),
    "CompFor": ("asynchronous", "target", "iter", "ifs", "inner_for_in"),
    "ExceptHandler": ("type", "name", "body"),
    "ExceptStarHandler": ("type", "name", "body"),
    "For": ("asynchronous", "target", "iter", "body", "orelse"),
    "FormattedString": ("start", "parts", "end"),
    "FormattedStringExpression": ("expression", "conversion", "format_spec"),
    "FunctionDef": ("decorators", "asynchronous", "name", "type_parameters", "params", "returns", "body"),
    "IfExp": ("body", "test", "orelse"),
    "ImportFrom": ("relative", "module", "names"),
    "IndentedBlock": ("indent", "body"),
    "Index": ("star", "value"),
    "Match": ("subject", "indent", "cases"),
    "MatchCase": ("pattern", "guard", "body"),
    "Param": ("star", "name", "annotation", "default"),
    "Parameters": ("posonly_params", "posonly_ind", "params", "star_arg", "kwonly_params", "star_kwarg"),
    "SimpleStatementSuite": ("leading_whitespace", "body"),
    "Slice": ("lower", "upper", "step"),
    "TemplatedString": ("start", "parts", "end"),
    "TemplatedStringExpression": ("expression", "conversion", "format_spec"),
    "TypeAlias": ("name", "type_parameters", "value"),
    "With": ("asynchronous", "items", "body"),
}
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(node_type: type) -> tuple[str, ...]:
    """The fields of ``node_type`` that can hold child nodes worth visiting, in libcst's visit order."""
    fields = _CHILD_FIELDS.get(node_type)
    if fields is None:
        declared = [f.name for f in dataclasses.fields(node_type) if not f.name.startswith(_SYNTAX_FIELDS)]
        order = _SOURCE_ORDER.get(node_type.__name__, ())
        declared = [name for name in order if name in declared] + [name for name in declared if name not in order]
        fields = _CHILD_FIELDS[node_type] = tuple(declared)
    return fields


def children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The child nodes of ``node`` in visit order (syntax-only fields left out)."""
    for name in child_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            yield value
        elif isinstance(value, (tuple, list)):
            for item in value:
                if isinstance(item, cst.CSTNode):
                    yield item


def iter_nodes(node: cst.CSTNode, types: type | tuple[type, ...] = cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and its descendants of ``types``, in visit order (libcst's ``m.findall`` without matchers)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, types):
            yield current
        stack.extend(reversed(list(children(current))))


_HANDLERS: dict[tuple[type, type], tuple] = {}


def walk(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """``node.visit(visitor)`` for a visitor that only reads; ``visit_X`` (or an overridden
    ``on_visit``) returning False skips the children, as in libcst."""
    cls = type(visitor)
    if cls.on_visit is cst.CSTVisitor.on_visit and cls.on_leave is cst.CSTVisitor.on_leave:
        _walk_methods(node, visitor)
    else:
        _walk_hooks(node, visitor)


def _walk_methods(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    key = (type(node), type(visitor))
    handlers = _HANDLERS.get(key)
    if handlers is None:
        name = type(node).__name__
        handlers = _HANDLERS[key] = (  # functions, not bound methods: the cache outlives the visitor
            getattr(type(visitor), f"visit_{name}", None),
            getattr(type(visitor), f"leave_{name}", None),
        )
    enter, leave = handlers
    if enter is None or enter(visitor, node) is not False:
        for child in children(node):
            _walk_methods(child, visitor)
    if leave is not None:
        leave(visitor, node)


def _walk_hooks(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """The walk for visitors that override libcst's generic ``on_visit``/``on_leave`` hooks."""
    if visitor.on_visit(node):
        for child in children(node):
            _walk_hooks(child, visitor)
    visitor.on_leave(node)


def walk_batched(node: cst.CSTNode, visitors: Iterable[cst.BatchableCSTVisitor]) -> None:
    """``libcst.visit_batched(node, visitors)`` for visitors that only read.

    Each node's ``visit_X`` methods run in the order of ``visitors``, then its children, then its
    ``leave_X`` methods; return values are ignored, as in libcst's batched traversal.
    """
    methods: dict[str, list] = {}
    for visitor in visitors:
        for name, method in visitor.get_visitors().items():
            methods.setdefault(name, []).append(method)
    per_type: dict[type, tuple[list, list]] = {}
    none: list = []

    def visit(current: cst.CSTNode) -> None:
        node_type = type(current)
        handlers = per_type.get(node_type)
        if handlers is None:
            name = node_type.__name__
            handlers = per_type[node_type] = (methods.get(f"visit_{name}", none), methods.get(f"leave_{name}", none))
        for method in handlers[0]:
            method(current)
        for child in children(current):
            visit(child)
        for method in handlers[1]:
            method(current)

    visit(node)
