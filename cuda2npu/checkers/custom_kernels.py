"""Custom CUDA code that no rewrite can port (NPU602–NPU605, tier manual)."""

from __future__ import annotations

import libcst as cst

from cuda2npu.checkers.literals import string_value
from cuda2npu.names import dotted_name
from cuda2npu.rulebase import Rule, register

CUDA_LIBRARIES = {
    "pycuda": "PyCUDA drives the CUDA driver API",
    "cupy": "CuPy arrays live on CUDA devices; use torch tensors on npu",
    "numba.cuda": "numba.cuda compiles CUDA kernels",
}
SHELL_CALLS = {"subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output", "subprocess.Popen", "os.system", "os.popen"}
EXTENSION_LOADERS = {"torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline"}


def _mentions_cu_sources(node: cst.Call) -> bool:
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value in {"cuda_sources", "with_cuda"}:
            return True
        for element in getattr(arg.value, "elements", ()):
            value = string_value(getattr(element, "value", None))
            if value is not None and value.endswith(".cu"):
                return True
    return False


def _strings_in(node: cst.CSTNode) -> list[str]:
    found: list[str] = []

    class Collector(cst.CSTVisitor):
        def visit_SimpleString(self, s: cst.SimpleString) -> None:
            value = string_value(s)
            if value is not None:
                found.append(value)

    node.visit(Collector())
    return found


@register
class CustomKernels(Rule):
    codes = ("NPU602", "NPU603", "NPU604", "NPU605")
    triggers = (r"CUDAExtension", r"cpp_extension", r"triton", r"pycuda", r"cupy", r"numba", r"nvidia-smi")

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.resolver.qualified_name(node.func) or ""
        if qualified == "torch.utils.cpp_extension.CUDAExtension" or (
            qualified in EXTENSION_LOADERS and _mentions_cu_sources(node)
        ):
            self.report(
                "NPU602",
                node,
                "CUDA C++ extension: port the kernel to Ascend C (or torch ops) and build with torch_npu's NpuExtension",
            )
        elif qualified in SHELL_CALLS and any("nvidia-smi" in s for s in _strings_in(node)):
            self.report("NPU605", node, "`nvidia-smi` does not exist on NPU hosts; use `npu-smi info`")

    def visit_Decorator(self, node: cst.Decorator) -> None:
        target = node.decorator.func if isinstance(node.decorator, cst.Call) else node.decorator
        if (self.resolver.qualified_name(target) or "").startswith("triton."):
            self.report("NPU603", node, "Triton kernel: Triton targets CUDA here; use torch ops or an Ascend kernel")

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            self._library(alias, dotted_name(alias.name) or "")

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is not None and not node.relative:
            module = dotted_name(node.module) or ""
            names = [] if isinstance(node.names, cst.ImportStar) else [dotted_name(a.name) for a in node.names]
            self._library(node, module, names)

    def _library(self, node: cst.CSTNode, module: str, names: list | None = None) -> None:
        candidates = [module] + [f"{module}.{n}" for n in names or ()]
        for candidate in candidates:
            for library, reason in CUDA_LIBRARIES.items():
                if candidate == library or candidate.startswith(library + "."):
                    self.report("NPU604", node, f"`{library}`: {reason}; no NPU equivalent")
                    return
