"""Where a flash-attn name is read for its truth or behind a test that it is set: the guards the
flash-attn rules leave alone (``if flash_attn_func is not None:``, a flag assigned from such a test).
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.raising_fallbacks import signs
from cuda2npu.core.nodes import code_of
from cuda2npu.core.statements import TreeIndex


def tests_only(index: TreeIndex, expr: cst.BaseExpression) -> bool:
    """``expr`` is read for its truth only: compared with None, or an operand of ``and``/``or``/``not``
    or the test of an ``if`` (not an ``assert``, which raises where it is False)."""
    parent = index.parents.get(expr)
    if isinstance(parent, cst.Comparison):
        other = parent.comparisons[0].comparator if len(parent.comparisons) == 1 else None
        return isinstance(other, cst.Name) and other.value == "None"
    if isinstance(parent, (cst.If, cst.IfExp)):
        return parent.test is expr
    return isinstance(parent, cst.BooleanOperation) or (
        isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not)
    )


def top_statement(index: TreeIndex, statement: cst.CSTNode, function: cst.FunctionDef) -> cst.CSTNode | None:
    """The statement of ``function``'s own body that is or holds ``statement`` (None: another function's)."""
    for candidate in (statement, *index.ancestors(statement)):
        placement = index.placement.get(candidate)
        if placement is not None and placement.block is function.body:
            return candidate
    return None


def runs_only_with(index: TreeIndex, flags: list[str], statement: cst.CSTNode, seen: set) -> bool:
    """``statement`` runs only where one of ``flags`` is true: in an ``if`` branch taken then, or in a
    function (called in the file) every call of which does."""
    for owner, role in index.enclosing(statement):
        if isinstance(owner, cst.If) and role in ("body", "orelse"):
            if any((role == "body") in signs(owner.test, flag) for flag in flags):
                return True
    function = index.function.get(statement)
    if function is None or function in seen:
        return False
    seen.add(function)
    calls = index.calls_to(function.name.value)
    return bool(calls) and all(
        (caller := index.statement_of(call)) is not None and runs_only_with(index, flags, caller, seen)
        for call in calls
    )


def guarded_read(index: TreeIndex, read: cst.CSTNode, text: str) -> bool:
    """``read`` (of the target spelled ``text``) is in the test of an ``if`` that says it is set
    (``text``, ``text is not None``, as an ``and`` operand), or runs in the body of such an ``if``."""
    child, parent = read, index.parents.get(read)
    while parent is not None and not (isinstance(parent, cst.If) and child is parent.test):
        if parent in index.placement:
            break
        child, parent = parent, index.parents.get(parent)
    if isinstance(parent, cst.If) and child is parent.test:
        return tests_set(parent.test, text)
    statement = index.statement_of(read)
    return statement is not None and any(
        isinstance(owner, cst.If) and role == "body" and tests_set(owner.test, text)
        for owner, role in index.enclosing(statement)
    )


def tests_set(test: cst.BaseExpression, text: str) -> bool:
    """``test`` is true only when the target spelled ``text`` is set: ``text``, ``text is not None``,
    or an ``and`` of which one operand is."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return tests_set(test.left, text) or tests_set(test.right, text)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        is_none = isinstance(target.comparator, cst.Name) and target.comparator.value == "None"
        return is_none and isinstance(target.operator, (cst.IsNot, cst.NotEqual)) and code_of(test.left) == text
    return isinstance(test, (cst.Name, cst.Attribute)) and code_of(test) == text
