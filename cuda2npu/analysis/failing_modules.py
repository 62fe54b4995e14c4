"""The project's modules that fail at import on an NPU host, also through other modules: a project fact.

VideoMamba's vendored ``mamba_ssm/ops/selective_scan_interface.py`` imports its compiled CUDA
extension ``selective_scan_cuda`` at module level; ``mamba_ssm/__init__.py`` imports that module,
and five model files import ``mamba_ssm``: all of them fail at import on an NPU host, while NPU606
marks only the first import. :func:`failing_modules` finds, with :mod:`ast`, the modules whose
module-level imports (not inside ``try``, ``if`` or a function) name a module that cannot be
imported there and that the migration does not port away (a compiled extension of the project's
setup.py or named ``*_cuda``, a package of rules/tables/cuda_only_packages.toml whose import fails
and that cuda2npu ports none of, ``unported``), then the modules importing those (or a package
whose ``__init__.py`` does), to a fixed point. flash-attn, xFormers, apex and TransformerEngine do
not count: their imports go once their calls are migrated.
"""

from __future__ import annotations

import ast
import re

from cuda2npu.analysis.cuda_only_modules import cuda_module, cuda_module_roots, is_cuda_extension, unported_module
from cuda2npu.analysis.project_imports import absolute_module
from cuda2npu.analysis.python_files import PythonFiles, parse


def failing_modules(files: PythonFiles, extensions: tuple[str, ...] = ()) -> tuple[tuple[str, str], ...]:
    """``(module, what fails)`` for each module of the project that fails at import on an NPU host
    (see the module docstring), sorted; ``what fails``: the import at the end of the chain that does."""
    words = sorted({re.escape(name.rsplit(".", 1)[-1]) for name in extensions} | set(_unported_roots()))
    names = "|".join(words) or "(?!)"
    candidate = re.compile(rf"^[ \t]*(?:import|from)[ \t][^\n]*(?:\w_cuda\b|\b(?:{names})\b)".encode(), re.M)
    if not any(candidate.search(text) for text in files.values()):
        return ()  # no import line names anything that fails at import: the import graph is not needed
    modules = files.modules
    imports = {
        modules[path]: _module_level_imports(text, modules[path], path.name == "__init__.py")
        for path, text in files.items()
        if path in modules
    }
    failing: dict[str, str] = {}
    for module, names in imports.items():
        bad = next((name for name in names if _cannot_import(name, extensions)), None)
        if bad is not None:
            failing[module] = bad
    if not failing:
        return ()
    while True:  # the modules importing a failing one, keyed to what fails at the end of the chain
        more = {}
        for module, names in imports.items():
            source = next((found for name in names if (found := failing_part(name, failing))), None)
            if module not in failing and source is not None:
                more[module] = failing[source]
        if not more:
            return tuple(sorted(failing.items()))
        failing.update(more)


def _module_level_imports(text: bytes, module: str, is_package: bool) -> list[str]:
    """The absolute modules the statements at the top of the module import (not guarded)."""
    tree = parse(text)  # not kept: every file of the project is read here
    if tree is None:
        return []
    found = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = absolute_module(module, is_package, node.level, node.module or "")
            found += [base, *(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")]
    return found


def _unported_roots() -> tuple[str, ...]:
    """The top-level modules of the unported packages of rules/tables/cuda_only_packages.toml."""
    return tuple(re.escape(root) for root in cuda_module_roots() if unported_module(root))


def _cannot_import(name: str, extensions: tuple[str, ...]) -> bool:
    """A compiled CUDA extension, or a module of an unported package whose import fails."""
    if is_cuda_extension(name, extensions):
        return True
    found = cuda_module(name, extensions)
    return found is not None and found[0] == "imports" and unported_module(name)


def failing_part(name: str, failing: dict[str, str]) -> str | None:
    """The failing project module ``name`` is, or a package above it (whose ``__init__`` runs first)."""
    parts = name.split(".")
    return next((".".join(parts[:n]) for n in range(1, len(parts) + 1) if ".".join(parts[:n]) in failing), None)
