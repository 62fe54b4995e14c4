"""The project's functions that say which torch build runs: a project fact (no libcst here).

xDiT's ``def _is_cuda(): return torch.version.cuda is not None`` and ``def _is_hip(): has_rocm =
torch.version.hip is not None; return has_rocm`` answer for torch's CUDA and ROCm builds. On an NPU
host torch is the CPU build torch_npu runs on, where ``torch.version.cuda`` and ``torch.version.hip``
are None (docs/reference/torch_npu.md §4.2): both answer False, so the code an ``if _is_cuda():``
guards never runs there and is left as written (analysis/never_run.py), in whichever file calls it.
So does a module constant set to a value only on such a build: text-generation-inference's ``SYSTEM =
"cuda"`` under ``elif torch.version.cuda is not None and torch.cuda.is_available():`` is never
``"cuda"`` there, and the code of its 128 ``if SYSTEM == "cuda":`` tests never runs
(:func:`build_constants`).
"""

from __future__ import annotations

import ast
import re

from cuda2npu.analysis.python_files import PythonFiles

BUILD_TEXT = re.compile(rb"torch\.version\.(?:cuda|hip)\b")
BUILD_FACTS = ("cuda", "hip")  # the attributes of torch.version a CUDA or ROCm build sets


def build_probes(files: PythonFiles) -> tuple[str, ...]:
    """``module.function`` of each module-level function of the project whose every ``return`` answers
    whether ``torch.version.cuda`` or ``torch.version.hip`` is set (directly or through a local name
    assigned that answer), sorted. A file outside a package counts under its own name."""
    found = []
    for path, text in files.items():
        if not BUILD_TEXT.search(text) or (tree := files.tree(path)) is None:
            continue
        probes = [f.name for f in tree.body if isinstance(f, ast.FunctionDef) and _answers_build(f)]
        found += [f"{files.modules.get(path, path.stem)}.{name}" for name in probes]
    return tuple(sorted(found))


def build_constants(files: PythonFiles) -> tuple[str, ...]:
    """``module.NAME=value`` for each string a module-level name of the project is assigned only in
    branches of module-level ``if`` chains that run on a CUDA or ROCm build alone (a test that is, or
    ``and``-joins, a read of ``torch.version.cuda`` / ``.hip``), sorted."""
    found = []
    for path, text in files.items():
        if not BUILD_TEXT.search(text) or (tree := files.tree(path)) is None:
            continue
        on_build: set[tuple[str, str]] = set()
        elsewhere: set[tuple[str, str]] = set()
        for statement in tree.body:
            for body, build in _branches(statement, False):
                for node in body:
                    assigned = _string_assignment(node)
                    if assigned is not None:
                        (on_build if build else elsewhere).add(assigned)
        module = files.modules.get(path, path.stem)
        found += [f"{module}.{name}={value}" for name, value in sorted(on_build - elsewhere)]
    return tuple(sorted(found))


def _branches(statement: ast.stmt, build: bool):
    """(statements, runs on a CUDA/ROCm build alone) of each branch of a module-level ``if`` chain;
    another statement is a branch of its own."""
    if not isinstance(statement, ast.If):
        yield [statement], build
        return
    yield statement.body, build or _build_test(statement.test)
    if len(statement.orelse) == 1 and isinstance(statement.orelse[0], ast.If):
        yield from _branches(statement.orelse[0], build)
    else:
        yield statement.orelse, build


def _build_test(test: ast.expr) -> bool:
    """``torch.version.cuda is not None``, or an ``and`` of it with anything."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_build_test(value) for value in test.values)
    return _reads_build(test)


def _string_assignment(node: ast.stmt) -> tuple[str, str] | None:
    """``(NAME, value)`` of ``NAME = "value"``."""
    if (
        isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ):
        return node.targets[0].id, node.value.value
    return None


def _answers_build(function: ast.FunctionDef) -> bool:
    answers = {
        target.id
        for node in ast.walk(function)
        if isinstance(node, ast.Assign) and _reads_build(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    returns = [node.value for node in ast.walk(function) if isinstance(node, ast.Return)]
    return bool(returns) and all(
        value is not None and (_reads_build(value) or (isinstance(value, ast.Name) and value.id in answers))
        for value in returns
    )


def _reads_build(expr: ast.expr) -> bool:
    """``torch.version.cuda is not None``, ``bool(torch.version.hip)``, ``torch.version.hip``."""
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1 and isinstance(expr.ops[0], ast.IsNot):
        expr = expr.left
    elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "bool" and expr.args:
        expr = expr.args[0]
    return (
        isinstance(expr, ast.Attribute)
        and expr.attr in BUILD_FACTS
        and isinstance(expr.value, ast.Attribute)
        and expr.value.attr == "version"
        and isinstance(expr.value.value, ast.Name)
        and expr.value.value.id == "torch"
    )
