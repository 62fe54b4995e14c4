"""The project's functions that read NVIDIA's GPU monitoring: a project fact (no libcst here).

h2o-llmstudio's ``get_gpu_usage()`` averages ``GPUtil.getGPUs()``' loads. GPUtil runs nvidia-smi and
NVML needs NVIDIA's driver library, neither of which an NPU host has: GPUtil finds no GPU there (the
average divides by zero) and ``pynvml.nvmlInit()`` raises. So a CUDA test over a call of such a
function (``if torch.cuda.is_available(): stats.append(get_gpu_usage())``) is a switch the migration
keeps: an NPU host skips the call, as a host without CUDA did (analysis/cuda_gates.py).
"""

from __future__ import annotations

import ast
import re

from cuda2npu.analysis.python_files import PythonFiles
from cuda2npu.core.catalogue import table

MONITOR_PACKAGES = ("gputil", "pynvml")  # entries of rules/tables/cuda_only_packages.toml
MONITOR_TEXT = re.compile(rb"\b(?:GPUtil|pynvml|nvidia_smi)\b")


def gpu_monitors(files: PythonFiles) -> tuple[str, ...]:
    """``module.function`` of each module-level function of the project that reads a name its module
    imports from GPUtil or NVML (pynvml, nvidia-ml-py), sorted. A file outside a package counts under
    its own name."""
    packages = table("cuda_only_packages")["package"]
    modules = {module for name in MONITOR_PACKAGES for module in packages[name]["modules"]}
    found = []
    for path, text in files.items():
        if not MONITOR_TEXT.search(text) or (tree := files.tree(path)) is None:
            continue
        bound = _bound_by(tree, modules)
        functions = [
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef)
            and any(isinstance(inner, ast.Name) and inner.id in bound for inner in ast.walk(node))
        ]
        found += [f"{files.modules.get(path, path.stem)}.{name}" for name in functions]
    return tuple(sorted(found))


def _bound_by(tree: ast.Module, modules: set[str]) -> set[str]:
    """The names the module-level imports of ``modules`` bind (``import GPUtil``, ``from pynvml import
    nvmlInit``)."""
    bound = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] in modules}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in modules and not node.level:
            bound |= {a.asname or a.name for a in node.names if a.name != "*"}
    return bound
