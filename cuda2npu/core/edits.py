"""The edit transaction of one file: statement edits that several rules register during the
traversal and the engine applies as one composed fix per statement.

A rule removes a statement, inserts statements before or after it, replaces it by what a builder
makes of its updated node, or wraps a run of statements of a block into a new compound statement
(a fix on the block, which finds the statements' own results again by how many statements each
produced). The first report on an edited statement carries the composed fix (:meth:`claim`); later
ones report without a fix. Each fix is evaluated lazily when the engine applies fixes, so the edits
of different rules on one block stay consistent. A family shares one transaction per file through
``RuleContext.file_state`` (apex's :class:`~cuda2npu.families.apex.common.FileEdits` extends it with
what apex's rules record besides).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import libcst as cst

from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.statements import TreeIndex

BuildStatements = Callable[[cst.CSTNode], list]


@dataclass
class Region:
    """Statements ``start..end`` (original positions) of one block moved into ``build(statements)``."""

    start: int
    end: int
    build: Callable[[list], cst.BaseStatement]


@dataclass
class StatementEdit:
    code: str
    tier: Tier
    remove: bool = False
    before: list = field(default_factory=list)
    after: list = field(default_factory=list)
    replace: BuildStatements | None = None


class StatementEdits:
    """The statement edits of one file (see the module docstring)."""

    REGISTERING = ("remove", "insert_before", "insert_after", "replace", "wrap")  # what :meth:`for_rule` mutes

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.edits: dict[cst.CSTNode, StatementEdit] = {}
        self.collapsed: dict[cst.CSTNode, list] = {}  # try statements replaced by else/finally bodies
        self.regions: dict[cst.CSTNode, list[Region]] = {}  # block -> regions to wrap
        self._produced: dict[cst.CSTNode, int] = {}  # statement -> how many statements its fix produced
        self._block_fixes: set[cst.CSTNode] = set()  # blocks whose fix removes their first statement
        self._claimed: set[cst.CSTNode] = set()

    @classmethod
    def of(cls, ctx):
        """The file's transaction, shared by every rule of the traversal that asks for this class."""
        return ctx.file_state(cls)

    @classmethod
    def for_rule(cls, rule):
        """The transaction as ``rule`` writes to it: under ``--portable`` a rule without a portable
        rewrite makes no fix (rulebase ``Rule.report``), so it registers no edit either."""
        edits = cls.of(rule.ctx)
        return _Unapplied(edits) if rule.options.portable and not rule.portable_support else edits

    @property
    def index(self) -> TreeIndex:
        return TreeIndex.of(self.ctx)

    def applies(self, tier: Tier) -> bool:
        """Whether a fix of this tier is applied by ``migrate`` with these options."""
        return tier <= self.ctx.options.max_tier

    # registering ---------------------------------------------------------------------------

    def _edit(self, stmt: cst.CSTNode, code: str, tier: Tier) -> StatementEdit:
        edit = self.edits.get(stmt)
        if edit is None:
            edit = self.edits[stmt] = StatementEdit(code, tier)
        else:
            edit.tier = max(edit.tier, tier)
        return edit

    def remove(self, stmt: cst.CSTNode, code: str, tier: Tier) -> None:
        self._edit(stmt, code, tier).remove = True

    def insert_before(self, stmt: cst.CSTNode, nodes: list, code: str, tier: Tier) -> None:
        self._edit(stmt, code, tier).before.extend(nodes)

    def insert_after(self, stmt: cst.CSTNode, nodes: list, code: str, tier: Tier) -> None:
        self._edit(stmt, code, tier).after.extend(nodes)

    def replace(self, stmt: cst.CSTNode, build: BuildStatements, code: str, tier: Tier) -> None:
        """``build(updated statement)`` returns the statements that take its place."""
        self._edit(stmt, code, tier).replace = build

    def wrap(self, block: cst.CSTNode, start: int, end: int, build: Callable[[list], cst.BaseStatement]) -> None:
        """Move statements ``start..end`` of ``block`` into ``build(updated statements)``.

        The wrap is a fix on the block (report it with :meth:`wrap_fix`): it runs after the
        statements' own fixes and finds them again by the number of statements each produced.
        """
        self.regions.setdefault(block, []).append(Region(start, end, build))

    def claim(self, stmt: cst.CSTNode) -> bool:
        """True for the first report on an edited statement: that report carries :meth:`fix`."""
        if stmt in self._claimed:
            return False
        self._claimed.add(stmt)
        return True

    def report(self, rule, code: str, stmt: cst.CSTNode, message: str, inner: cst.CSTNode | None = None, **kw) -> None:
        """Report a finding whose fix is ``stmt``'s composed edit (``inner`` if already claimed)."""
        if not self.claim(stmt):
            rule.report(code, inner if inner is not None else stmt, message, lambda node: node, **kw)
        elif self._opens_block(stmt):
            block = self.index.placement[stmt].block
            self._block_fixes.add(block)
            rule.report(code, block, message, lambda updated: _without_first(updated, stmt not in self._produced), **kw)
        else:
            rule.report(code, stmt, message, self.fix(stmt), **kw)

    def _opens_block(self, stmt: cst.CSTNode) -> bool:
        """A removed first statement of an indented block: its block's fix removes it, so that the
        blank lines that separated it from the next statement do not open the block. (The block's
        position is the statement's, so the finding stays where it was.)"""
        edit = self.edits.get(stmt)
        place = self.index.placement.get(stmt)
        return (
            edit is not None
            and edit.remove
            and not edit.before
            and not edit.after
            and stmt not in self.collapsed
            and place is not None
            and place.index == 0
            and isinstance(place.block, cst.IndentedBlock)
            and place.block not in self.regions
            and place.block not in self._block_fixes
        )

    # applying -----------------------------------------------------------------------------

    def gone(self, stmt: cst.CSTNode) -> bool:
        """The statement disappears and nothing takes its place (when its fix applies)."""
        edit = self.edits.get(stmt)
        if edit is None or edit.before or edit.after or not self.applies(edit.tier):
            return False
        if stmt in self.collapsed:
            return not self.collapsed[stmt]
        return edit.remove

    def fix(self, stmt: cst.CSTNode):
        return lambda updated: self._apply(stmt, updated)

    def _apply(self, stmt: cst.CSTNode, updated: cst.CSTNode):
        edit = self.edits[stmt]
        nodes: list = [] if edit.remove else [updated]
        if stmt in self.collapsed:
            nodes = _collapsed_statements(updated)
        elif edit.replace is not None and nodes:
            nodes = list(edit.replace(updated))
        nodes = [*edit.before, *nodes, *edit.after]
        if (
            nodes
            and nodes[0] is not updated
            and hasattr(updated, "leading_lines")
            and hasattr(nodes[0], "leading_lines")
        ):
            nodes[0] = nodes[0].with_changes(leading_lines=updated.leading_lines)
        self._produced[stmt] = len(nodes)
        if not nodes:
            return cst.RemoveFromParent()
        return nodes[0] if len(nodes) == 1 else cst.FlattenSentinel(nodes)

    def wrap_fix(self, block: cst.CSTNode):
        return lambda updated: self._wrap(block, updated)

    def _wrap(self, block: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:
        spans = []
        position = 0
        for stmt in block.body:
            count = self._produced.get(stmt, 1)
            spans.append((position, position + count))
            position += count
        if position != len(updated.body):
            raise ValueError("another fix changed the statements of this block")  # the engine drops this fix
        body = list(updated.body)
        for region in sorted(self.regions[block], key=lambda r: r.start, reverse=True):
            first, last = spans[region.start][0], spans[region.end][1]
            if first < last:
                body[first:last] = [_wrapped(region.build, body[first:last])]
        return updated.with_changes(body=body)


class _Unapplied:
    """A transaction whose registering methods (``REGISTERING``) do nothing (:meth:`StatementEdits.for_rule`)."""

    def __init__(self, edits: StatementEdits) -> None:
        self._edits = edits

    def __getattr__(self, name: str):
        if name in self._edits.REGISTERING:
            return self._ignored
        return getattr(self._edits, name)

    @staticmethod
    def _ignored(*args, **kwargs) -> None:
        return None


def _wrapped(build: Callable[[list], cst.BaseStatement], members: list) -> cst.BaseStatement:
    """``build`` applied to the members, the first member's comments moved above the result."""
    first = members[0]
    leading = getattr(first, "leading_lines", ())
    members = [first.with_changes(leading_lines=()) if leading else first, *members[1:]]
    return build(members).with_changes(leading_lines=leading)


def _without_first(block: cst.IndentedBlock, still_there: bool) -> cst.IndentedBlock:
    """``block`` without its first statement (unless another fix removed it already) and without
    the blank lines that now open it."""
    body = list(block.body[1:] if still_there else block.body)
    if body and hasattr(body[0], "leading_lines"):
        lines = list(body[0].leading_lines)
        while lines and lines[0].comment is None:
            lines.pop(0)
        body[0] = body[0].with_changes(leading_lines=lines)
    return block.with_changes(body=body)


def _collapsed_statements(updated: cst.Try) -> list:
    """What remains of a ``try`` whose body the migration emptied: its else and finally bodies."""
    return [*clause_statements(updated.orelse), *clause_statements(updated.finalbody)]


def clause_statements(clause: cst.CSTNode | None) -> list:
    """The statements of a clause's or compound statement's body (a one-line suite's as one line)."""
    if clause is None:
        return []
    if isinstance(clause.body, cst.SimpleStatementSuite):
        return [cst.SimpleStatementLine(body=clause.body.body)]
    return list(clause.body.body)
