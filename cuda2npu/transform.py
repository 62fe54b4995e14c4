"""Applying rule fixes and inline ``TODO(cuda2npu)`` markers to a module."""

from __future__ import annotations

import libcst as cst

from cuda2npu.rulebase import Fix

MARKER_PREFIX = "# TODO(cuda2npu): "


class FixApplier(cst.CSTTransformer):
    """Replaces nodes by their fixes, bottom-up, so nested fixes compose in one pass.

    A fix that fails on the already-updated node (two rules rewrote the same construct in
    incompatible ways) is skipped and recorded in ``failed``; the first fix wins.
    """

    def __init__(self, fixes: dict[cst.CSTNode, list[tuple[int, Fix]]]) -> None:
        super().__init__()
        self._fixes = fixes
        self.failed: set[int] = set()

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):
        result = updated_node
        for report_id, fix in self._fixes.get(original_node, ()):
            if not isinstance(result, cst.CSTNode):
                self.failed.add(report_id)
                continue
            try:
                result = fix(result)
            except Exception:  # noqa: BLE001 - a conflicting fix must not sink the file
                self.failed.add(report_id)
        return result


def marker_text(code: str, reason: str) -> str:
    return f"{MARKER_PREFIX}{code} {reason}"


def _has_marker(lines, code: str) -> bool:
    return any(
        line.comment is not None and line.comment.value.startswith(f"{MARKER_PREFIX}{code}")
        for line in lines
    )


def with_markers(statement: cst.CSTNode, markers: list[tuple[str, str]], above=()) -> cst.CSTNode:
    """The statement with one comment line above it per (code, reason) not already present.

    ``above`` are comment lines libcst keeps outside the statement (the module header, for the
    first statement of a file), which count as already present too.
    """
    existing = [*getattr(statement, "leading_lines", ()), *above]
    new_lines = [
        cst.EmptyLine(comment=cst.Comment(marker_text(code, reason)))
        for code, reason in markers
        if not _has_marker(existing, code)
    ]
    if not new_lines or not hasattr(statement, "leading_lines"):
        return statement
    return statement.with_changes(leading_lines=[*statement.leading_lines, *new_lines])
