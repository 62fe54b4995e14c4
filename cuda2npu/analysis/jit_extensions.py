"""The project's modules that compile CUDA when they are imported: a seed of ``failing_modules``.

SpQR's ``spqr_quant/inference_kernels/cuda_kernel.py`` runs, at module level,
``SPQR_CUDA = load(name="spqr_cuda", sources=[..., "spqr_cuda_kernel.cu"], extra_cuda_cflags=...)``
(``torch.utils.cpp_extension.load``): on an NPU host there is no nvcc, so the import of that module
raises, and so does every module importing it (the package's ``__init__``, its scripts, its tests). A
module is one when a statement of its own body (not in a function, a class, a ``try`` or an ``if``)
calls ``torch.utils.cpp_extension.load`` / ``load_inline`` with CUDA sources (:func:`builds_cuda`: a ``.cu``
file name, or a ``cuda_sources`` / ``with_cuda`` keyword, or ``extra_cuda_cflags`` where the file names no C++
sources only). NPU602 marks the call itself.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Iterable

from cuda2npu.analysis.python_files import PythonFiles

LOADERS = frozenset({"load", "load_inline"})  # of torch.utils.cpp_extension
CUDA_KEYWORDS = frozenset({"cuda_sources", "with_cuda"})
CU_SOURCE_TEXT = re.compile(rb"""\.cuh?['"]""")  # a CUDA source file name: "kernel.cu", "*.cu"
CPP_SOURCE_TEXT = re.compile(rb"""\.(?:cpp|cc|cxx)['"]""")


def builds_cuda(keywords: Iterable[str], names_cu_source: bool, text: bytes) -> bool:
    """Whether a ``load``/``load_inline`` call compiles CUDA: it passes ``cuda_sources`` or ``with_cuda``, names a
    ``.cu`` source, or passes ``extra_cuda_cflags`` in a file that names CUDA sources or no C++ ones. ``load``
    compiles CUDA only for ``.cu`` sources (``with_cuda=None``): YOLOX's ``FastCOCOEvalOp`` gives nvcc flags to a
    glob of ``*.cpp`` files (round 63), which build on an NPU host as they are."""
    keywords = set(keywords)
    if keywords & CUDA_KEYWORDS or names_cu_source:
        return True
    return "extra_cuda_cflags" in keywords and (CU_SOURCE_TEXT.search(text) or not CPP_SOURCE_TEXT.search(text))


def jit_cuda_modules(files: PythonFiles) -> list[Path]:
    """The files of ``files``' modules that compile CUDA at import."""
    found = []
    for path in files.modules:
        tree = files.tree(path) if b"cpp_extension" in files[path] else None
        if tree is not None and _builds_at_import(tree, files[path]):
            found.append(path)
    return found


def _builds_at_import(tree: ast.Module, text: bytes) -> bool:
    """A statement of the module's body calls a loader with CUDA sources."""
    loaders = _loader_names(tree)
    return any(
        isinstance(statement, (ast.Assign, ast.AnnAssign, ast.Expr))
        and isinstance(statement.value, ast.Call)
        and _calls_loader(statement.value.func, loaders)
        and _cuda_sources(statement.value, text)
        for statement in tree.body
    )


def _loader_names(tree: ast.Module) -> set[str]:
    """The names the module binds to ``torch.utils.cpp_extension``'s loaders, and to the module itself
    (as ``<name>.``: ``from torch.utils import cpp_extension``)."""
    names = set()
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and statement.module == "torch.utils.cpp_extension":
            names |= {alias.asname or alias.name for alias in statement.names if alias.name in LOADERS}
        elif isinstance(statement, ast.ImportFrom) and statement.module == "torch.utils":
            names |= {f"{alias.asname or alias.name}." for alias in statement.names if alias.name == "cpp_extension"}
        elif isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.name == "torch.utils.cpp_extension" and alias.asname:
                    names.add(f"{alias.asname}.")
                elif alias.name.split(".")[0] == "torch" and not alias.asname:
                    names.add("torch.utils.cpp_extension.")
    return names


def _calls_loader(func: ast.expr, loaders: set[str]) -> bool:
    if isinstance(func, ast.Name):
        return func.id in loaders
    return isinstance(func, ast.Attribute) and func.attr in LOADERS and f"{ast.unparse(func.value)}." in loaders


def _cuda_sources(call: ast.Call, text: bytes) -> bool:
    named = any(
        isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(".cu")
        for node in ast.walk(call)
    )
    return builds_cuda((keyword.arg for keyword in call.keywords if keyword.arg), named, text)
