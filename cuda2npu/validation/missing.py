"""Every package a run needs and this host lacks, in one go (not one per run).

When a side stops on a missing module, the modules both trees reach from the command's script (or
the entry's module) are read with ``ast``: local imports are followed, and every other top-level
module imported outside a ``try`` that catches ImportError is checked against each side's host:
installed here (or a CPU stand-in, on the original's side), or not; and on the migrated side,
whether it is CUDA-only (then the migration left it in, and an NPU host cannot install it).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path

from cuda2npu.validation.failures import MISSING_DEPENDENCY
from cuda2npu.validation.strict_host import cuda_host_reason, npu_host_reason

GUARDS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
STANDIN_ROOTS = ("flash_attn", "apex", "transformer_engine", "amp_C")


@dataclass
class Missing:
    module: str
    places: dict[str, str] = field(default_factory=dict)  # side -> first "path:line" importing it
    cuda_only: str = ""  # the reason, when the migrated side imports a CUDA-only module

    def describe(self) -> str:
        sides = " and ".join(self.places)
        where = ", ".join(f"{side} {place}" for side, place in self.places.items())
        if self.cuda_only:
            return (
                f"{self.module}: imported by the migrated tree at {self.places['migrated']}, which an NPU host cannot "
                f"install ({self.cuda_only}): the migration left it in"
            )
        return f"{self.module}: needed by the {sides} ({where}); not installed here"


def _guarded(node: ast.AST, parents: dict) -> bool:
    while node in parents:
        parent = parents[node]
        if isinstance(parent, ast.Try) and node in parent.body:
            for handler in parent.handlers:
                names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
                if handler.type is None or any(getattr(n, "id", getattr(n, "attr", "")) in GUARDS for n in names):
                    return True
        node = parent
    return False


def local_file(tree: Path, module: str) -> Path | None:
    """The tree's own file of ``module`` (``pkg/mod.py`` or ``pkg/mod/__init__.py``), else None."""
    base = tree.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def reached_imports(tree: Path, start: Path) -> dict[str, str]:
    """Top-level modules outside the tree that the files reachable from ``start`` import unguarded:
    module -> first ``path:line``."""
    found: dict[str, str] = {}
    queue, seen = [start], set()
    while queue:
        path = queue.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        try:
            module = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            continue
        parents = {child: node for node in ast.walk(module) for child in ast.iter_child_nodes(node)}
        package = path.parent.relative_to(tree).parts
        for node in ast.walk(module):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ((node.module,) if node.module else ()))
                    names = [f"{base}.{alias.name}".strip(".") for alias in node.names] + [base]
                else:
                    names = [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in filter(None, names):
                local = local_file(tree, name)
                if local is not None:
                    queue.append(local)
                elif (
                    not getattr(node, "level", 0) and name.split(".")[0] != "__future__" and not _guarded(node, parents)
                ):
                    top = name.split(".")[0]
                    if local_file(tree, top) is None:
                        found.setdefault(top, f"{path.relative_to(tree)}:{node.lineno}")
    return found


def _installed(module: str) -> bool:
    if module in sys.builtin_module_names:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_packages(original: Path, migrated: Path, start: str) -> list[Missing]:
    """What each side's run needs and its host lacks, starting at ``start`` (a path in each tree)."""
    needs = {
        side: reached_imports(tree, tree / start) for side, tree in (("original", original), ("migrated", migrated))
    }
    npu_reason = npu_host_reason(migrated)
    found: dict[str, Missing] = {}
    for side, imports in needs.items():
        for module, place in imports.items():
            if side == "migrated" and (why := npu_reason(module)):
                found.setdefault(module, Missing(module)).places[side] = place
                found[module].cuda_only = why
            elif side == "original" and (
                cuda_host_reason(module) or not (module in STANDIN_ROOTS or _installed(module))
            ):
                found.setdefault(module, Missing(module)).places[side] = place
            elif side == "migrated" and module != "torch_npu" and not _installed(module):
                found.setdefault(module, Missing(module)).places[side] = place
    return sorted(found.values(), key=lambda m: (not m.cuda_only, m.module))


def start_file(tree: Path, script_or_module: str) -> str:
    """The file a command's script (``train.py``) or an entry's module (``pkg.model``) starts from."""
    if script_or_module.endswith(".py"):
        return script_or_module
    local = local_file(tree, script_or_module)
    return str(local.relative_to(tree)) if local else script_or_module


def missing_report(original: Path, migrated: Path, start: str, kind: str) -> tuple[list[str], bool]:
    """The lines naming every package the runs starting at ``start`` lack, and whether the run is
    SKIPPED (the original misses packages the migrated tree needs too, none of them CUDA-only: this
    machine lacks them, which proves nothing) rather than an ERROR of the migration."""
    found = missing_packages(original, migrated, start)
    lines = []
    if found:
        lines.append("what each side's run imports and its host lacks (read from the code the runs reach):")
        lines += [f"  {item.describe()}" for item in found]
    migration_made = any(item.cuda_only or "original" not in item.places for item in found)
    return lines, kind == MISSING_DEPENDENCY and not migration_made
