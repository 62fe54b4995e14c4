"""Adding ``import torch_npu`` right after the file's first torch import, exactly once."""

from __future__ import annotations

import re
from typing import Sequence

import libcst as cst

from cuda2npu.names import dotted_name


def _imports_module(statement: cst.CSTNode, prefix: str) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, cst.Import):
            if any((dotted_name(a.name) or "").split(".")[0] == prefix for a in small.names):
                return True
        elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
            if (dotted_name(small.module) or "").split(".")[0] == prefix:
                return True
    return False


def is_import_line(statement: cst.CSTNode) -> bool:
    """A line holding only ``import``/``from ... import`` statements."""
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body
    )


def is_docstring(statement: cst.CSTNode) -> bool:
    """A line holding only a string literal (a module, class or function docstring when first)."""
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def has_plain_torch_npu_import(module: cst.Module) -> bool:
    """``import torch_npu`` (unaliased) at module level or in a module-level ``try:``."""
    statements = list(module.body)
    for statement in module.body:
        if isinstance(statement, cst.Try) and isinstance(statement.body, cst.IndentedBlock):
            statements += statement.body.body
    for statement in statements:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Import) and any(
                    dotted_name(a.name) == "torch_npu" and a.asname is None for a in small.names
                ):
                    return True
    return False


TORCH_IMPORT = re.compile(r"^[ \t]*(import|from)[ \t]+torch\b", re.MULTILINE)


def _after_torch_import(body: Sequence[cst.CSTNode]) -> list[cst.CSTNode] | None:
    """``body`` with ``import torch_npu`` after its first torch import line; None without one."""
    for index, statement in enumerate(body):
        if _imports_module(statement, "torch"):
            new_line = cst.SimpleStatementLine(body=[cst.Import(names=[cst.ImportAlias(cst.Name("torch_npu"))])])
            return [*body[: index + 1], new_line, *body[index + 1 :]]
    return None


def ensure_torch_npu_import(module: cst.Module) -> cst.Module:
    """Insert ``import torch_npu`` after the first module-level torch import, else after a torch import
    in a module-level ``try:`` (keeping an optional import optional), else with the imports.

    Files that never import torch need nothing: a device string they hold is used elsewhere.
    """
    if has_plain_torch_npu_import(module) or not TORCH_IMPORT.search(module.code):
        return module
    body = _after_torch_import(module.body)
    if body is not None:
        return module.with_changes(body=body)
    for index, statement in enumerate(module.body):
        if isinstance(statement, cst.Try) and isinstance(statement.body, cst.IndentedBlock):
            guarded = _after_torch_import(statement.body.body)
            if guarded is not None:
                new_try = statement.with_changes(body=statement.body.with_changes(body=guarded))
                return module.with_changes(body=[*module.body[:index], new_try, *module.body[index + 1 :]])
    from libcst.codemod import CodemodContext  # ~1 s to import: only for this rare fallback
    from libcst.codemod.visitors import AddImportsVisitor

    context = CodemodContext()
    AddImportsVisitor.add_needed_import(context, "torch_npu")
    return AddImportsVisitor(context).transform_module(module)
