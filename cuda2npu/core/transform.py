"""Applying rule fixes and inline ``TODO(cuda2npu)`` markers to a module."""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.markers import MARKER_PREFIX, marker_text
from cuda2npu.core.rulebase import Fix


class FixApplier(cst.CSTTransformer):
    """Replaces nodes by their fixes, bottom-up, so nested fixes compose in one pass.

    A fix that fails on the already-updated node (two rules rewrote the same construct in
    incompatible ways) is skipped and recorded in ``failed``; the first fix wins.

    A removed statement's blank lines stay: the statement after it gets at least as many (two
    blank lines before a top-level statement do not vanish with the statement they preceded);
    a statement that becomes the first of its block loses the blank lines above it.
    """

    def __init__(
        self, fixes: dict[cst.CSTNode, list[tuple[int, Fix]]], markers: dict | None = None, above: dict | None = None
    ) -> None:
        super().__init__()
        self._fixes = fixes
        self._markers = markers or {}  # statement -> [(code, reason)]: marker lines, after its fixes
        self._above = above or {}  # statement -> comment lines outside it that count as its own
        self.failed: set[int] = set()
        self._statements: dict[cst.CSTNode, object] = {}  # original statement → what it became
        self._removed: set[cst.CSTNode] = set()

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):
        result = updated_node
        if isinstance(result, (cst.Module, cst.IndentedBlock)) and any(s in self._removed for s in original_node.body):
            result = self._keep_blank_lines(original_node, result)
        for report_id, fix in self._fixes.get(original_node, ()):
            if not isinstance(result, cst.CSTNode):
                self.failed.add(report_id)
                continue
            try:
                result = fix(result)
            except Exception:  # noqa: BLE001 - a conflicting fix must not sink the file
                self.failed.add(report_id)
        if original_node in self._markers:
            result = _marked(result, self._markers[original_node], self._above.get(original_node, ()))
        if isinstance(original_node, cst.BaseStatement):
            self._statements[original_node] = result
            # a line whose every small statement was removed is dropped by libcst itself
            if isinstance(result, cst.RemovalSentinel) or (
                isinstance(result, cst.SimpleStatementLine) and not result.body
            ):
                self._removed.add(original_node)
        return result

    def _keep_blank_lines(self, original, updated):
        """``updated`` (a body whose statements were rewritten) with removed statements' blank lines kept."""
        body, pending, position, removed_above = [], 0, 0, False
        for statement in original.body:
            result = self._statements.get(statement)
            if statement in self._removed:
                pending = max(pending, _blank_lines(statement.leading_lines))
                removed_above = True
                continue
            count = len(result.nodes) if isinstance(result, cst.FlattenSentinel) else 1
            for node in updated.body[position : position + count]:
                blank = _blank_lines(node.leading_lines)
                if not body and removed_above:  # now first in its block: no blank lines above it
                    node = node.with_changes(leading_lines=list(node.leading_lines)[blank:])
                elif pending > blank:
                    node = node.with_changes(
                        leading_lines=[cst.EmptyLine(indent=False)] * (pending - blank) + list(node.leading_lines)
                    )
                body.append(node)
                pending = 0
            position += count
        if position != len(updated.body):  # not the shape expected: leave the spacing as it is
            return updated
        return updated.with_changes(body=body)


def _blank_lines(lines) -> int:
    """How many blank lines (without a comment) start ``lines``."""
    count = 0
    for line in lines:
        if line.comment is not None:
            break
        count += 1
    return count


def _marked(result, markers: list[tuple[str, str]], above):
    """A fixed statement with its markers: on the first statement a fix produced; none if removed."""
    if isinstance(result, cst.FlattenSentinel) and result.nodes:
        return cst.FlattenSentinel([with_markers(result.nodes[0], markers, above), *result.nodes[1:]])
    return with_markers(result, markers, above) if isinstance(result, cst.CSTNode) else result


def _has_marker(lines, code: str) -> bool:
    return any(line.comment is not None and line.comment.value.startswith(f"{MARKER_PREFIX}{code}") for line in lines)


def with_markers(statement: cst.CSTNode, markers: list[tuple[str, str]], above=()) -> cst.CSTNode:
    """The statement with one comment line above it per (code, reason) not already present.

    ``above`` are comment lines libcst keeps outside the statement (the module header, for the
    first statement of a file), which count as already present too.
    """
    existing = [*getattr(statement, "leading_lines", ()), *above]
    new_lines = [
        cst.EmptyLine(comment=cst.Comment(marker_text(code, reason)))
        for code, reason in dict.fromkeys(markers)  # one line per (code, reason)
        if not _has_marker(existing, code)
    ]
    if not new_lines or not hasattr(statement, "leading_lines"):
        return statement
    return statement.with_changes(leading_lines=[*statement.leading_lines, *new_lines])
