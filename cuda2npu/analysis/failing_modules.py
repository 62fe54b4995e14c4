"""The project's modules that fail at import on an NPU host, also through other modules: a project fact.

VideoMamba's vendored ``mamba_ssm/ops/selective_scan_interface.py`` imports its compiled CUDA
extension ``selective_scan_cuda`` at module level; ``mamba_ssm/__init__.py`` imports that module,
and five model files import ``mamba_ssm``: all of them fail at import on an NPU host, while NPU606
marks only the first import. :func:`failing_modules` finds, with :mod:`ast`, the modules whose
module-level imports (not inside ``try``, ``if`` or a function) name a module that cannot be
imported there and that the migration does not port away (a compiled extension of the project's
setup.py or named ``*_cuda``, a package of rules/tables/cuda_only_packages.toml whose import fails
and that cuda2npu ports none of, ``unported``; a flash-attn name ported at its import alone,
``flash_attn.bert_padding``, whose import stays, or one it does not port at all, flash-attn 1.x's
``flash_attn_unpadded_qkvpacked_func``), then the modules importing those (or a package
whose ``__init__.py`` does), to a fixed point. flash-attn, xFormers, apex and TransformerEngine do
not count: their imports go once their calls are migrated.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from cuda2npu.analysis.cuda_only_modules import (
    cuda_module,
    cuda_module_roots,
    flash_unported,
    import_port,
    is_cuda_extension,
    unported_module,
)
from cuda2npu.analysis.project_imports import absolute_module
from cuda2npu.analysis.python_files import PythonFiles, parse


def failing_modules(files: PythonFiles, extensions: tuple[str, ...] = ()) -> tuple[tuple[str, str], ...]:
    """``(module, what fails)`` for each module of the project that fails at import on an NPU host
    (see the module docstring), sorted; ``what fails``: the import at the end of the chain that does."""
    words = sorted({re.escape(name.rsplit(".", 1)[-1]) for name in extensions} | {*_unported_roots(), "flash_attn"})
    names = "|".join(words) or "(?!)"
    candidate = re.compile(rf"^[ \t]*(?:import|from)[ \t][^\n]*(?:\w_cuda\b|\b(?:{names})\b)".encode(), re.M)
    modules = files.modules
    imports: dict[Path, list[str]] = {}  # each file's module-level imports, parsed when first needed

    def imports_of(path: Path) -> list[str]:
        if path not in imports:
            imports[path] = _module_level_imports(files[path], modules[path], path.name == "__init__.py")
        return imports[path]

    failing: dict[str, str] = {}
    for path, text in files.items():
        if path in modules and candidate.search(text):  # an import line naming what fails at import
            bad = next((name for name in imports_of(path) if _cannot_import(name, extensions)), None)
            if bad is not None:
                failing.update(dict.fromkeys(_names(files, path), bad))
    new = set(failing)
    while new:  # the modules importing a failing one, keyed to what fails at the end of the chain
        words = {module.rpartition(".")[2].encode() for module in new}
        more = {}
        for path, module in modules.items():
            if module in failing or not files.may_import(path, words):
                continue
            source = next((found for name in imports_of(path) if (found := failing_part(name, failing))), None)
            if source is not None:
                more.update(dict.fromkeys(_names(files, path), failing[source]))
        failing.update(more)
        new = set(more)
    return tuple(sorted(failing.items()))


def _names(files: PythonFiles, path: Path) -> list[str]:
    """The names ``path`` is imported by: its module name, and its package-qualified name when it
    lies in a directory without ``__init__.py`` below a package (``pkg.sub.mod`` beside ``mod``)."""
    return [files.modules[path], *([files.namespace_names[path]] if path in files.namespace_names else [])]


def _module_level_imports(text: bytes, module: str, is_package: bool) -> list[str]:
    """The absolute modules the statements at the top of the module import (not guarded)."""
    tree = parse(text)  # not kept: a fact reading many files keeps no tree
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
    """A compiled CUDA extension, a module of an unported package whose import fails, or a flash-attn
    name ported at its import alone (``flash_attn.bert_padding``: NPU606 says what to copy, and the
    import stays until a person does) or not ported at all (flash-attn 1.x's
    ``flash_attn_unpadded_qkvpacked_func``: NPU403 at its calls, and the import stays)."""
    if is_cuda_extension(name, extensions) or import_port(name) is not None or flash_unported(name):
        return True
    found = cuda_module(name, extensions)
    return found is not None and found[0] == "imports" and unported_module(name)


def failing_part(name: str, failing: dict[str, str]) -> str | None:
    """The failing project module ``name`` is, or a package above it (whose ``__init__`` runs first)."""
    parts = name.split(".")
    return next((".".join(parts[:n]) for n in range(1, len(parts) + 1) if ".".join(parts[:n]) in failing), None)
