"""Files the rules skip unparsed, and the engine's own findings (NPU001–NPU004) about a file.

A file without any rule's trigger is not parsed by libcst, but its decoding and syntax are still
checked (``ast``, about ten times faster): errors are reported whatever rules are selected, as ruff
reports them. No libcst here: the runner calls this on every file the prefilter skips.
"""

from __future__ import annotations

from cuda2npu.core.catalogue import rule as rule_doc
from cuda2npu.core.decoding import syntax_error
from cuda2npu.core.diagnostics import FileResult, Finding


def engine_finding(path: str, code: str, message: str, line: int = 1, column: int = 1, end=None) -> Finding:
    """A finding of the engine itself (not of a rule) at ``line``:``column``."""
    doc = rule_doc(code)
    end_line, end_column = end or (None, None)
    return Finding(
        path, line, column, code, doc.name, message, doc.tier, False, end_line=end_line, end_column=end_column
    )


def skipped(source: bytes, path: str, reason: str) -> FileResult:
    """The result of a Python file no rule needs to parse: skipped for ``reason``, or failed (NPU001)
    where CPython cannot decode or parse it."""
    error = syntax_error(source)
    if error is None:
        return FileResult(path, "skipped", reason)
    finding = engine_finding(path, "NPU001", str(error), error.line, error.column, error.end)
    return FileResult(path, "failed", str(error), [finding])
