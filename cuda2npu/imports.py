"""Adding ``import torch_npu`` right after the file's first torch import, exactly once."""

from __future__ import annotations

import re

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


def has_plain_torch_npu_import(module: cst.Module) -> bool:
    """``import torch_npu`` (unaliased) at module level."""
    for statement in module.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Import) and any(
                    dotted_name(a.name) == "torch_npu" and a.asname is None for a in small.names
                ):
                    return True
    return False


TORCH_IMPORT = re.compile(r"^[ \t]*(import|from)[ \t]+torch\b", re.MULTILINE)


def ensure_torch_npu_import(module: cst.Module) -> cst.Module:
    """Insert ``import torch_npu`` after the first module-level torch import (or with the imports).

    Files that never import torch need nothing: a device string they hold is used elsewhere.
    """
    if has_plain_torch_npu_import(module) or not TORCH_IMPORT.search(module.code):
        return module
    for index, statement in enumerate(module.body):
        if _imports_module(statement, "torch"):
            new_line = cst.SimpleStatementLine(body=[cst.Import(names=[cst.ImportAlias(cst.Name("torch_npu"))])])
            body = [*module.body[: index + 1], new_line, *module.body[index + 1 :]]
            return module.with_changes(body=body)
    from libcst.codemod import CodemodContext  # ~1 s to import: only for this rare fallback
    from libcst.codemod.visitors import AddImportsVisitor

    context = CodemodContext()
    AddImportsVisitor.add_needed_import(context, "torch_npu")
    return AddImportsVisitor(context).transform_module(module)
