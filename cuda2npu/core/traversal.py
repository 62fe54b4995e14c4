"""Read-only traversals of libcst trees that do not rebuild nodes.

libcst's ``node.visit(visitor)`` reconstructs (and validates) every node even for a visitor that
only reads; on a large file that costs several times the parse. These walks make the same
``visit_X``/``leave_X`` calls, on the same nodes and in the same order as libcst, by reading the
child fields directly. Fields that hold only whitespace, comments, brackets or separators are not
entered: no rule visits those nodes.
"""

from __future__ import annotations

import dataclasses
import itertools
import weakref
from bisect import bisect_left
from typing import Callable, Hashable, Iterable, Iterator, Sequence

import libcst as cst

# Field-name prefixes of syntax-only fields (whitespace, comments, brackets, separators).
_SYNTAX_FIELDS = (
    "whitespace",
    "leading_whitespace",  # a one-line suite's (`if x: y`)
    "lpar",
    "rpar",
    "leading_lines",
    "lines_after_decorators",
    "header",
    "footer",
    "semicolon",
    "comma",
    "colon",
    "first_colon",
    "second_colon",
    "dot",
    "equal",
    "operator",
    "lbrace",
    "rbrace",
    "lbracket",
    "rbracket",
    "relative",
    "first_line",
    "trailing_whitespace",
    "newline",
    "default_comma",
)

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


_IS_NODE: dict[type, bool] = {}


def _is_node(value_type: type) -> bool:
    """``issubclass(value_type, cst.CSTNode)``, cached: an ABC check per field costs more than the walk.
    ``ImportStar`` (the ``*`` of ``from m import *``) is not one: libcst does not visit it either."""
    found = _IS_NODE.get(value_type)
    if found is None:
        found = _IS_NODE[value_type] = issubclass(value_type, cst.CSTNode) and value_type is not cst.ImportStar
    return found


def children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The child nodes of ``node`` in visit order (syntax-only fields left out)."""
    for name in child_fields(type(node)):
        value = getattr(node, name)
        value_type = type(value)
        if value_type is tuple or value_type is list:
            for item in value:
                if _is_node(type(item)):
                    yield item
        elif _is_node(value_type):
            yield value


class Flat:
    """A tree in visit order: ``nodes[i]``'s subtree is ``nodes[i:ends[i]]``; ``of_type[T]``: the
    indices of the nodes of type ``T``, ascending."""

    __slots__ = ("nodes", "ends", "of_type", "_index", "_selections")

    def __init__(self, root: cst.CSTNode) -> None:
        nodes: list[cst.CSTNode] = []
        ends: list[int] = []
        of_type: dict[type, list[int]] = {}

        def add(node: cst.CSTNode) -> None:  # children() inlined: this runs for every node of a file
            index = len(nodes)
            nodes.append(node)
            ends.append(0)
            node_type = type(node)
            indices = of_type.get(node_type)
            if indices is None:
                indices = of_type[node_type] = []
            indices.append(index)
            for name in child_fields(node_type):
                value = getattr(node, name)
                value_type = type(value)
                if value_type is tuple or value_type is list:
                    for item in value:
                        if _is_node(type(item)):
                            add(item)
                elif _is_node(value_type):
                    add(value)
            ends[index] = len(nodes)

        add(root)
        self.nodes, self.ends, self.of_type = nodes, ends, of_type
        self._index: dict[cst.CSTNode, int] | None = None
        self._selections: dict[Hashable, list[int]] = {}

    def span(self, node: cst.CSTNode) -> tuple[int, int] | None:
        """``(start, stop)`` of ``node``'s subtree in ``nodes``; None if ``node`` is not in the tree."""
        if self._index is None:
            self._index = {n: i for i, n in enumerate(self.nodes)}
        start = self._index.get(node)
        return None if start is None else (start, self.ends[start])

    def selection(self, start: int, stop: int, wanted: Callable[[type], bool], key: Hashable = None) -> Sequence[int]:
        """Indices (ascending) of ``nodes[start:stop]`` to read: those whose type is ``wanted``.

        The selection over the whole tree is computed once per ``key`` (one per visitor class or
        node types); a subtree without a kept selection is read whole (selecting costs a look at
        every node type of the tree, more than a small subtree).
        """
        found = self._selections.get(key) if key is not None else None
        if found is None:
            if stop - start < len(self.nodes):
                return range(start, stop)
            runs = [indices for node_type, indices in self.of_type.items() if wanted(node_type)]
            found = runs[0] if len(runs) == 1 else sorted(itertools.chain.from_iterable(runs))
            if key is not None:
                self._selections[key] = found
        return found


_last_flat: tuple[cst.CSTNode | None, Flat | None] = (None, None)


def flat_tree(root: cst.CSTNode) -> tuple[Flat, int, int]:
    """``root``'s subtree as (flat tree, start, stop).

    A module's flat tree is kept until another module is flattened, and the subtrees of its nodes
    are read from it (nodes are immutable: a node's subtree is the same wherever it is found), so
    every pre-pass of the rules over one file pays for the child lookups once.
    """
    global _last_flat
    module, tree = _last_flat
    if tree is not None:
        found = (0, len(tree.nodes)) if module is root else tree.span(root)
        if found is not None:
            return tree, *found
    tree = Flat(root)
    if isinstance(root, cst.Module):
        _last_flat = (root, tree)
    return tree, 0, len(tree.nodes)


def release() -> None:
    """Drop the kept flat tree, which holds every node of its module alive (and in the way of the
    garbage collector) until another module is flattened."""
    global _last_flat
    _last_flat = (None, None)


def iter_nodes(node: cst.CSTNode, types: type | tuple[type, ...] = cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and its descendants of ``types``, in visit order (libcst's ``m.findall`` without matchers)."""
    tree, start, stop = flat_tree(node)
    if types is cst.CSTNode:
        return iter(tree.nodes[start:stop])
    indices = tree.selection(0, len(tree.nodes), lambda node_type: issubclass(node_type, types), ("types", types))
    return (tree.nodes[i] for i in indices[bisect_left(indices, start) : bisect_left(indices, stop)])


# visitor class -> node type -> (visit_X, leave_X); weak: a visitor class defined in a function
# (one per call) goes with its last visitor, and with it whatever its class attributes hold
_HANDLERS: weakref.WeakKeyDictionary[type, dict[type, tuple]] = weakref.WeakKeyDictionary()


def walk(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """``node.visit(visitor)`` for a visitor that only reads; ``visit_X`` (or an overridden
    ``on_visit``) returning False skips the children, as in libcst."""
    cls = type(visitor)
    tree, start, stop = flat_tree(node)
    if cls.on_visit is cst.CSTVisitor.on_visit and cls.on_leave is cst.CSTVisitor.on_leave:
        handlers_of = _methods_of(cls)
        indices = tree.selection(start, stop, lambda node_type: handlers_of(node_type) != (None, None), ("walk", cls))
        _replay(tree, indices, start, stop, visitor, handlers_of)
    else:
        hooks = (lambda v, n: bool(cls.on_visit(v, n)), cls.on_leave)  # a falsy on_visit skips, as in libcst
        _replay(tree, range(len(tree.nodes)), start, stop, visitor, lambda node_type: hooks)


def _methods_of(cls: type):
    """node type -> (visit_X, leave_X) functions of a visitor class (None where absent)."""
    known = _HANDLERS.get(cls)
    if known is None:
        known = _HANDLERS[cls] = {}

    def handlers(node_type: type) -> tuple:
        found = known.get(node_type)
        if found is None:  # functions, not bound methods: the cache outlives the visitor
            name = node_type.__name__
            found = known[node_type] = (_defined(cls, f"visit_{name}"), _defined(cls, f"leave_{name}"))
        return found

    return handlers


def _defined(cls: type, name: str):
    """The visitor method ``name`` of ``cls``; None if absent or libcst's empty stub."""
    method = getattr(cls, name, None)
    return None if getattr(method, "_is_no_op", False) else method


def _replay(tree: Flat, indices: Sequence[int], start: int, stop: int, visitor, handlers_of) -> None:
    """Enter and leave the nodes ``tree.nodes[start:stop]`` in order, reading only those at ``indices``
    (the nodes whose types ``handlers_of`` gives an enter or a leave); an enter returning False
    skips the subtree."""
    nodes, ends = tree.nodes, tree.ends
    open_nodes: list[tuple[int, cst.CSTNode, object]] = []  # (end of subtree, node, its leave): nodes with a leave
    per_type: dict[type, tuple] = {}
    position, last = bisect_left(indices, start), bisect_left(indices, stop)
    while position < last:
        index = indices[position]
        while open_nodes and open_nodes[-1][0] <= index:
            _, done, leave = open_nodes.pop()
            leave(visitor, done)
        node = nodes[index]
        handlers = per_type.get(type(node))
        if handlers is None:
            handlers = per_type[type(node)] = handlers_of(type(node))
        enter, leave = handlers
        if leave is not None:
            open_nodes.append((ends[index], node, leave))
        if enter is not None and enter(visitor, node) is False:
            position = bisect_left(indices, ends[index], position + 1, last)
        else:
            position += 1
    while open_nodes:
        _, done, leave = open_nodes.pop()
        leave(visitor, done)


def walk_batched(node: cst.CSTNode, visitors: Iterable[cst.BatchableCSTVisitor]) -> None:
    """``libcst.visit_batched(node, visitors)`` for visitors that only read.

    Each node's ``visit_X`` methods run in the order of ``visitors``, then its children, then its
    ``leave_X`` methods; return values are ignored, as in libcst's batched traversal.
    """
    methods: dict[str, list] = {}
    for visitor in visitors:
        for name, method in visitor.get_visitors().items():
            methods.setdefault(name, []).append(method)

    def handlers_of(node_type: type) -> tuple:
        name = node_type.__name__
        return _calling_all(methods.get(f"visit_{name}")), _calling_all(methods.get(f"leave_{name}"))

    tree, start, stop = flat_tree(node)
    indices = tree.selection(start, stop, lambda node_type: handlers_of(node_type) != (None, None))
    _replay(tree, indices, start, stop, None, handlers_of)


def _calling_all(methods: list | None):
    """A handler calling each of ``methods`` (bound methods) with the node; None if there are none."""
    if not methods:
        return None
    if len(methods) == 1:
        (method,) = methods

        def call_one(_, current) -> None:
            method(current)

        return call_one

    def call(_, current) -> None:
        for method in methods:
            method(current)

    return call
