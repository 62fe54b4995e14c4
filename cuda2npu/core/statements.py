"""Where things sit in a module: one index per file, shared by the rules that need a pre-pass.

:class:`TreeIndex` is built by one pass over the module's flat tree (``core.traversal.flat_tree``)
the first time a rule asks for it (``TreeIndex.of(ctx)``), and knows every node's parent, every
statement's block, position and enclosing function, each block's owner, and the file's functions
and calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from cuda2npu.core.traversal import flat_tree

CLAUSES = (cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally)
_ROLES = {cst.Else: "orelse", cst.ExceptHandler: "handler", cst.ExceptStarHandler: "handler", cst.Finally: "finally"}


@dataclass
class Placement:
    block: cst.CSTNode  # cst.Module or cst.IndentedBlock
    index: int


_CALL, _MODULE, _INDENTED_BLOCK, _CONTAINER, _FUNCTION = 1, 2, 4, 8, 16
_KINDS: dict[type, int] = {}


def _kind(node_type: type) -> int:
    """What the index records about nodes of ``node_type`` (bit flags), cached: ABC checks are slow."""
    kind = _KINDS.get(node_type)
    if kind is None:
        kind = (
            _CALL * issubclass(node_type, cst.Call)
            | _MODULE * issubclass(node_type, cst.Module)
            | _INDENTED_BLOCK * issubclass(node_type, cst.IndentedBlock)
            | _CONTAINER * issubclass(node_type, (cst.BaseCompoundStatement, *CLAUSES))
            | _FUNCTION * issubclass(node_type, cst.FunctionDef)
        )
        _KINDS[node_type] = kind
    return kind


class TreeIndex:
    """Parents, statement placements, block owners, functions and calls of one module."""

    def __init__(self, module: cst.Module) -> None:
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self.placement: dict[cst.CSTNode, Placement] = {}
        self.owner: dict[cst.CSTNode, tuple[cst.CSTNode, str]] = {}  # block -> (statement, role)
        self.function: dict[cst.CSTNode, cst.FunctionDef | None] = {}  # statement -> enclosing function
        self.depth: dict[cst.CSTNode, int] = {}  # block -> how many compound statements enclose it
        self.functions: list[cst.FunctionDef] = []
        self.calls: list[cst.Call] = []
        self._containers: list[cst.CSTNode] = []
        self._open_functions: list[cst.FunctionDef] = []
        self._index(module)

    @classmethod
    def of(cls, ctx) -> "TreeIndex":
        """The index of the file a rule context traverses (built once per file)."""
        return ctx.file_state(_build)

    def _index(self, module: cst.Module) -> None:
        """One pass over the module's nodes in visit order (the flat tree: every node is read)."""
        tree, start, stop = flat_tree(module)
        nodes, ends = tree.nodes, tree.ends
        parents = self.parents
        open_nodes: list[tuple[int, cst.CSTNode, int]] = []  # (end of subtree, node, its kind)
        for index in range(start, stop):
            while open_nodes and open_nodes[-1][0] <= index:
                _, done, kind = open_nodes.pop()
                self._leave(kind)
            node = nodes[index]
            if open_nodes:
                parents[node] = open_nodes[-1][1]
            kind = _kind(type(node))
            if kind:
                self._enter(node, kind)
            open_nodes.append((ends[index], node, kind))
        while open_nodes:
            self._leave(open_nodes.pop()[2])

    def _enter(self, node: cst.CSTNode, kind: int) -> None:
        if kind & _CALL:
            self.calls.append(node)
        elif kind & _MODULE:
            self._enter_block(node)
        elif kind & _INDENTED_BLOCK:
            self._enter_indented_block(node)
        if kind & _CONTAINER:
            self._containers.append(node)
        if kind & _FUNCTION:
            self.functions.append(node)
            self._open_functions.append(node)

    def _leave(self, kind: int) -> None:
        if kind & _CONTAINER:
            self._containers.pop()
        if kind & _FUNCTION:
            self._open_functions.pop()

    def _enter_block(self, block: cst.CSTNode) -> None:
        self.depth[block] = len(self._containers)
        for index, child in enumerate(block.body):
            self.placement[child] = Placement(block, index)
            self.function[child] = self._open_functions[-1] if self._open_functions else None

    def _enter_indented_block(self, node: cst.IndentedBlock) -> None:
        container = self._containers[-1]
        role = _ROLES.get(type(container))
        self.owner[node] = (self._containers[-2], role) if role else (container, "body")
        self._enter_block(node)

    def ancestors(self, statement: cst.CSTNode) -> list[cst.CSTNode]:
        """Compound statements containing ``statement`` (or a one-line suite), innermost first."""
        return [owner for owner, _ in self.enclosing(statement)]

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The innermost function whose code holds ``node`` (any node, not only a statement)."""
        parent = self.parents.get(node)
        while parent is not None and not isinstance(parent, cst.FunctionDef):
            parent = self.parents.get(parent)
        return parent

    def enclosing_class(self, statement: cst.CSTNode | None) -> cst.ClassDef | None:
        """The innermost class whose body holds ``statement`` (None: none, or no statement)."""
        if statement is None:
            return None
        return next((owner for owner in self.ancestors(statement) if isinstance(owner, cst.ClassDef)), None)

    def enclosing(self, statement: cst.CSTNode) -> list[tuple[cst.CSTNode, str]]:
        """``ancestors`` with the role of the block holding ``statement`` in each (``body``, ``orelse``,
        ``handler``, ``finally``)."""
        found = []
        if isinstance(statement, cst.SimpleStatementSuite):  # `if x: y`: first the `if`
            owner = self.parents[statement]
            if isinstance(owner, CLAUSES):
                found.append((self.parents[owner], _ROLES[type(owner)]))
                statement = self.parents[owner]
            else:
                found.append((owner, "body"))
                statement = owner
        block = self.placement[statement].block if statement in self.placement else None
        while block is not None and block in self.owner:
            owner, role = self.owner[block]
            found.append((owner, role))
            block = self.placement[owner].block if owner in self.placement else None
        return found

    def statement_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The statement holding ``node`` (a block's statement; the compound one for ``if x: y``)."""
        while node is not None and node not in self.placement:
            node = self.parents.get(node)
        return node

    def within(self, node: cst.CSTNode, ancestor: cst.CSTNode) -> bool:
        """``node`` is ``ancestor`` or inside it."""
        while node is not None and node is not ancestor:
            node = self.parents.get(node)
        return node is ancestor

    def following(self, statement: cst.CSTNode) -> list[cst.CSTNode]:
        """The statements after ``statement`` in its block (what runs once an early-exit ``if`` is passed)."""
        placement = self.placement.get(statement)
        return list(placement.block.body[placement.index + 1 :]) if placement is not None else []

    def call_of(self, node: cst.CSTNode) -> cst.Call | None:
        """The call ``node`` is the callee or an argument of (None: neither)."""
        parent = self.parents.get(node)
        if isinstance(parent, cst.Arg):
            parent = self.parents.get(parent)
        return parent if isinstance(parent, cst.Call) else None

    def calls_to(self, name: str) -> list[cst.Call]:
        """Calls of the plain name ``name`` (``name(...)``)."""
        return [c for c in self.calls if isinstance(c.func, cst.Name) and c.func.value == name]


def _build(ctx) -> TreeIndex:
    return TreeIndex(ctx.module)


def is_expression_statement(statement: cst.CSTNode | None, node: cst.BaseExpression) -> bool:
    """``statement`` is a line holding ``node`` alone, as an expression statement (``f(x)`` on its own line)."""
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and statement.body[0].value is node
    )


def leaves(block: cst.BaseSuite, exits: tuple[type, ...] = (cst.Return, cst.Raise)) -> bool:
    """The block ends in ``return`` or ``raise`` (an early exit; ``exits``: only those statements)."""
    last = block.body[-1] if block.body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1]
    return isinstance(last, exits)
