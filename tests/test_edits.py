"""The core edit transaction (cuda2npu/core/edits.py), through rules of the test's own that are run
by the engine's traversal and applied by its fix applier: several rules' edits of one statement make
one composed fix, a removed first statement does not leave its blank lines opening the block, a wrap
finds the statements its members' fixes produced, and ``--portable`` mutes a rule without a
portable rewrite."""

from __future__ import annotations

import libcst as cst
from helpers import dedent

from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.edits import StatementEdits
from cuda2npu.core.options import Options
from cuda2npu.core.rulebase import Rule
from cuda2npu.core.transform import FixApplier
from cuda2npu.filekinds.python import run_rules

CODE = "NPU330"  # any catalogued code: the test's rules report under it


def _line(text: str) -> cst.SimpleStatementLine:
    return cst.parse_statement(text)


def _statement_named(node: cst.SimpleStatementLine, target: str) -> bool:
    small = node.body[0]
    return isinstance(small, cst.Assign) and cst.Module([]).code_for_node(small.targets[0].target) == target


class _InsertsBefore(Rule):
    """``y = ...`` gets ``prepared = True`` above it."""

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if _statement_named(node, "y"):
            edits = StatementEdits.for_rule(self)
            edits.insert_before(node, [_line("prepared = True\n")], CODE, Tier.EXACT)
            edits.report(self, CODE, node, "inserted before")


class _Replaces(Rule):
    """``y = ...`` becomes ``y = 2`` and ``z = y``."""

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if _statement_named(node, "y"):
            edits = StatementEdits.for_rule(self)
            edits.replace(node, lambda updated: [_line("y = 2\n"), _line("z = y\n")], CODE, Tier.EXACT)
            edits.report(self, CODE, node, "replaced")


class _RemovesFirst(Rule):
    """``drop = ...`` is removed."""

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if _statement_named(node, "drop"):
            edits = StatementEdits.for_rule(self)
            edits.remove(node, CODE, Tier.EXACT)
            edits.report(self, CODE, node, "removed")


class _WrapsFunctionBody(Rule):
    """The body of ``def f`` goes into ``with guard():`` (a fix on the block)."""

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        edits = StatementEdits.for_rule(self)
        block = node.body
        edits.wrap(block, 0, len(block.body) - 1, _with_guard)
        self.report(CODE, block, "wrapped", edits.wrap_fix(block))


def _with_guard(statements: list) -> cst.With:
    return cst.With(items=[cst.WithItem(cst.parse_expression("guard()"))], body=cst.IndentedBlock(body=statements))


def _migrated(source: str, rules: list[type[Rule]], options: Options | None = None) -> tuple[str, list]:
    module = cst.parse_module(source)
    reports = run_rules(module, options or Options(), rules)
    fixes: dict = {}
    for index, report in enumerate(reports):
        if report.fix is not None:
            fixes.setdefault(report.node, []).append((index, report.fix))
    applier = FixApplier(fixes)
    return module.visit(applier).code, reports


def test_two_rules_editing_one_statement_make_one_composed_fix():
    new, reports = _migrated("x = 1\ny = 1\n", [_InsertsBefore, _Replaces])
    assert new == "x = 1\nprepared = True\ny = 2\nz = y\n"
    assert [r.message for r in reports] == ["inserted before", "replaced"]
    # the first report carries the composed fix; the second reports the same statement without changing it
    assert reports[1].fix(reports[1].node) is reports[1].node


def test_a_removed_first_statement_leaves_no_blank_lines_opening_its_block():
    source = dedent(
        """
        def f():
            drop = 1

            keep = 2
        """
    )
    new, _ = _migrated(source, [_RemovesFirst])
    assert new == "def f():\n    keep = 2\n"


def test_a_wrap_finds_the_statements_its_members_fixes_produced():
    source = dedent(
        """
        def f():
            x = 1
            y = 1
            return y
        """
    )
    new, _ = _migrated(source, [_Replaces, _WrapsFunctionBody])
    assert new == dedent(
        """
        def f():
            with guard():
                x = 1
                y = 2
                z = y
                return y
        """
    )


def test_portable_output_mutes_a_rule_without_a_portable_rewrite():
    new, reports = _migrated("y = 1\n", [_Replaces], Options(portable=True))
    assert new == "y = 1\n"
    assert reports[0].tier == Tier.MANUAL and reports[0].message.startswith("not portable yet")
