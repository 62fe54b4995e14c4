"""CMake builds of CUDA code (``CMakeLists.txt``): NPU602, as a setup.py's ``CUDAExtension``.

Quest's ``quest/ops/CMakeLists.txt`` declares ``project(_kernels LANGUAGES CUDA CXX)`` and builds the
Python module ``_kernels`` from ``csrc/*.cu`` with ``pybind11_add_module``; the package imports it as
``quest._kernels``. An NPU host has no nvcc, so the build fails there, and without the module every
file importing it fails at import. The project's file is reported at the line that makes it a CUDA
project (``project(... LANGUAGES CUDA ...)``, ``enable_language(CUDA)``, else the first ``.cu``
source), with a ``# TODO(cuda2npu): NPU602`` comment line above it (a comment in CMake too); the
modules it builds are CUDA extensions for NPU606 (analysis/cuda_only_modules.py
:func:`cmake_extensions`), so their imports are marked where they are. Nothing else in it is read.
"""

from __future__ import annotations

import re
from pathlib import Path

from cuda2npu.analysis.cuda_only_modules import CMAKE_MODULE, cmake_cuda
from cuda2npu.core.catalogue import rule as rule_doc
from cuda2npu.core.diagnostics import Finding, Tier
from cuda2npu.core.markers import MARKER_PREFIX, marker_reason, marker_text
from cuda2npu.core.noqa import line_directives
from cuda2npu.core.text_edits import apply_edits

CODE = "NPU602"


def is_cmake_file(path: Path) -> bool:
    return path.name == "CMakeLists.txt"


def check_cmake_file(text: str, display: str, options) -> tuple[list[Finding], str]:
    """The NPU602 finding of a CMake project compiling CUDA, and its text with the marker line."""
    doc = rule_doc(CODE)
    found = cmake_cuda(text)
    if found is None or not options.code_enabled(CODE, doc.opt_in):
        return [], text
    start = text.rfind("\n", 0, found.start()) + 1
    number = text.count("\n", 0, start) + 1
    directive = line_directives(text, options.ignore_noqa).get(number)
    if directive is not None and directive.matches(CODE):
        return [], text
    modules = ", ".join(f"`{name}`" for name in CMAKE_MODULE.findall(text)) or "what it builds"
    line = text[start:].split("\n", 1)[0]
    message = (
        f"`{line.split('#', 1)[0].strip()}` compiles CUDA, which an NPU host cannot (no nvcc): {modules} has no Ascend build, and "
        "the files importing it fail there; port its kernels to Ascend C (torch_npu's NpuExtension) or torch ops"
    )
    finding = Finding(display, number, found.start() - start + 1, CODE, doc.name, message, Tier.MANUAL, False)
    reason = marker_reason(CODE, Tier.MANUAL, message, options, False) if options.fix else None
    above = text[:start].rstrip("\r\n").rsplit("\n", 1)[-1].strip()
    if reason is None or above.startswith(f"{MARKER_PREFIX}{CODE}"):
        return [finding], text
    indent = re.match(r"[ \t]*", line).group(0)
    newline = "\r\n" if line.endswith("\r") else "\n"
    return [finding], apply_edits(text, [(start, start, f"{indent}{marker_text(CODE, reason)}{newline}")])
