"""``validate --entry MODULE:FUNCTION`` read before anything runs: a typo is a usage error naming
what the original tree has, not an ERROR or SKIPPED verdict minutes later."""

from __future__ import annotations

import ast
import difflib
import importlib.util
from pathlib import Path

from cuda2npu.validation.missing import local_file


def entry_problem(original: Path, entry: str) -> str | None:
    """Why ``entry`` names nothing in the original tree (with the closest names), else None."""
    module, _, function = entry.partition(":")
    if not module or not function:
        return f"--entry {entry!r}: expected MODULE:FUNCTION (such as model_entry:build)"
    file = local_file(original, module)
    if file is None:
        if _installed(module):
            return None  # an entry of an installed package: imported as it is
        near = difflib.get_close_matches(module, _tree_modules(original), n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        return f"--entry {entry!r}: no module {module!r} in {original}{hint}"
    try:
        tree = ast.parse(file.read_bytes())
    except (SyntaxError, ValueError):
        return None  # the run reports the file's own error
    names = _module_names(tree)
    if names is None or function in names:
        return None
    near = difflib.get_close_matches(function, sorted(names), n=3)
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    return f"--entry {entry!r}: {file.relative_to(original)} defines no {function!r}{hint}"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _tree_modules(root: Path) -> list[str]:
    """Module names of the tree's Python files (``pkg.model`` for ``pkg/model.py``), at most 3 deep."""
    found = []
    for depth in ("*.py", "*/*.py", "*/*/*.py"):
        for path in root.glob(depth):
            parts = path.relative_to(root).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def _module_names(tree: ast.Module) -> set[str] | None:
    """The names a module binds at its top level; None when it cannot be told (``import *``,
    a module ``__getattr__``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
            return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        else:
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return None if "__getattr__" in names else names
