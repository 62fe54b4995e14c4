"""Where things sit in a module: one index per file, shared by the rules that need a pre-pass.

:class:`TreeIndex` is built by one read-only walk (``core.traversal.walk``) the first time a rule
asks for it (``TreeIndex.of(ctx)``), and knows every node's parent, every statement's block,
position and enclosing function, each block's owner, and the file's functions and calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from cuda2npu.core.traversal import walk

CLAUSES = (cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally)


@dataclass
class Placement:
    block: cst.CSTNode  # cst.Module or cst.IndentedBlock
    index: int


class TreeIndex(cst.CSTVisitor):
    """Parents, statement placements, block owners, functions and calls of one module."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__()
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self.placement: dict[cst.CSTNode, Placement] = {}
        self.owner: dict[cst.CSTNode, tuple[cst.CSTNode, str]] = {}  # block -> (statement, role)
        self.function: dict[cst.CSTNode, cst.FunctionDef | None] = {}  # statement -> enclosing function
        self.depth: dict[cst.CSTNode, int] = {}  # block -> how many compound statements enclose it
        self.functions: list[cst.FunctionDef] = []
        self.calls: list[cst.Call] = []
        self._stack: list[cst.CSTNode] = []
        self._containers: list[cst.CSTNode] = []
        self._open_functions: list[cst.FunctionDef] = []
        walk(module, self)

    @classmethod
    def of(cls, ctx) -> "TreeIndex":
        """The index of the file a rule context traverses (built once per file)."""
        return ctx.file_state(_build)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self._stack:
            self.parents[node] = self._stack[-1]
        self._stack.append(node)
        if isinstance(node, cst.Call):
            self.calls.append(node)
        elif isinstance(node, cst.Module):
            self._enter_block(node)
        elif isinstance(node, cst.IndentedBlock):
            self._enter_indented_block(node)
        if isinstance(node, (cst.BaseCompoundStatement, *CLAUSES)):
            self._containers.append(node)
        if isinstance(node, cst.FunctionDef):
            self.functions.append(node)
            self._open_functions.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self._stack.pop()
        if isinstance(original_node, (cst.BaseCompoundStatement, *CLAUSES)):
            self._containers.pop()
        if isinstance(original_node, cst.FunctionDef):
            self._open_functions.pop()

    def _enter_block(self, block: cst.CSTNode) -> None:
        self.depth[block] = len(self._containers)
        for index, child in enumerate(block.body):
            self.placement[child] = Placement(block, index)
            self.function[child] = self._open_functions[-1] if self._open_functions else None

    def _enter_indented_block(self, node: cst.IndentedBlock) -> None:
        container = self._containers[-1]
        if isinstance(container, (cst.ExceptHandler, cst.ExceptStarHandler)):
            self.owner[node] = (self._containers[-2], "handler")
        elif isinstance(container, cst.Else):
            self.owner[node] = (self._containers[-2], "orelse")
        elif isinstance(container, cst.Finally):
            self.owner[node] = (self._containers[-2], "finally")
        else:
            self.owner[node] = (container, "body")
        self._enter_block(node)

    def ancestors(self, statement: cst.CSTNode) -> list[cst.CSTNode]:
        """Compound statements containing ``statement``, innermost first."""
        found = []
        block = self.placement[statement].block if statement in self.placement else None
        while block is not None and block in self.owner:
            owner = self.owner[block][0]
            found.append(owner)
            block = self.placement[owner].block if owner in self.placement else None
        return found

    def calls_to(self, name: str) -> list[cst.Call]:
        """Calls of the plain name ``name`` (``name(...)``)."""
        return [c for c in self.calls if isinstance(c.func, cst.Name) and c.func.value == name]


def _build(ctx) -> TreeIndex:
    return TreeIndex(ctx.module)
