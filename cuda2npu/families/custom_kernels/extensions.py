"""Custom CUDA code no rewrite can port: CUDA C++ extensions (NPU602), Triton kernels (NPU603) and
`nvidia-smi` probes (NPU605), all tier manual."""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.jit_extensions import builds_cuda
from cuda2npu.core.imports import catches
from cuda2npu.core.literals import string_value
from cuda2npu.core.names import module_qualified
from cuda2npu.core.pins import pinned
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes, walk

SHELL_CALLS = {
    "subprocess.run",
    "subprocess.call",
    "subprocess.check_call",
    "subprocess.check_output",
    "subprocess.Popen",
    "os.system",
    "os.popen",
}

EXTENSION_LOADERS = {"torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline"}


def _mentions_cu_sources(node: cst.Call, text: bytes) -> bool:
    """``load(...)`` given CUDA sources (analysis/jit_extensions.py ``builds_cuda``): a ``cuda_sources`` /
    ``with_cuda`` keyword, a ``.cu`` file name anywhere in its arguments (``os.path.join(module_path,
    "upfirdn2d_kernel.cu")``: StyleGAN2's ops in InternGPT), or ``extra_cuda_cflags`` in a file ``text`` that
    does not name only C++ sources."""
    named = any(
        (string_value(s) or "").endswith(".cu") for arg in node.args for s in iter_nodes(arg.value, cst.SimpleString)
    )
    return builds_cuda((arg.keyword.value for arg in node.args if arg.keyword is not None), named, text)


_OS_ERRORS = frozenset({"FileNotFoundError", "OSError", "EnvironmentError", "IOError", "Exception", "BaseException"})

_PROCESS_ERRORS = frozenset({"CalledProcessError", "SubprocessError", "Exception", "BaseException"})


def _missing_program_errors(node: cst.Call, qualified: str) -> frozenset[str]:
    """The exception classes (any of which a handler may name) that ``node`` raises where the program
    it runs does not exist: FileNotFoundError when subprocess starts it, CalledProcessError when a
    shell does and the call checks the exit code; none from ``os.system``/``os.popen`` or an unchecked shell."""
    if not qualified.startswith("subprocess."):
        return frozenset()
    shell = next((arg.value for arg in node.args if arg.keyword is not None and arg.keyword.value == "shell"), None)
    if not (isinstance(shell, cst.Name) and shell.value == "True"):
        return _OS_ERRORS
    check = next((arg.value for arg in node.args if arg.keyword is not None and arg.keyword.value == "check"), None)
    checked = qualified in {"subprocess.check_output", "subprocess.check_call"} or (
        isinstance(check, cst.Name) and check.value == "True"
    )
    return _PROCESS_ERRORS if checked else frozenset()


def _only_passes(block: cst.BaseSuite) -> bool:
    """The block does nothing (``pass`` or ``...``)."""
    statements = [
        small for line in block.body for small in (line.body if isinstance(line, cst.SimpleStatementLine) else [line])
    ]
    return all(
        isinstance(small, cst.Pass) or (isinstance(small, cst.Expr) and isinstance(small.value, cst.Ellipsis))
        for small in statements
    )


def _leaves_values(index: TreeIndex, statement: cst.Try) -> bool:
    """The ``try`` body returns or yields, or binds a name that the statements after it read."""
    if any(True for _ in iter_nodes(statement.body, (cst.Return, cst.Yield))):
        return True
    bound = {
        target.target.value
        for assign in iter_nodes(statement.body, cst.Assign)
        for target in assign.targets
        if isinstance(target.target, cst.Name)
    }
    later = index.following(statement)
    return any(name.value in bound for after in later for name in iter_nodes(after, cst.Name))


def _strings_in(node: cst.CSTNode) -> list[str]:
    found: list[str] = []

    class Collector(cst.CSTVisitor):
        def visit_SimpleString(self, s: cst.SimpleString) -> None:
            value = string_value(s)
            if value is not None:
                found.append(value)

    walk(node, Collector())
    return found


def _extension_aliases(ctx) -> frozenset[str]:
    """The names the file sets to ``CUDAExtension`` with no CPU build to fall back to (Mask2Former's
    ``extension = CUDAExtension`` where CUDA is found, ``raise NotImplementedError`` otherwise, then
    ``extension("MultiScaleDeformableAttention", ...)``, round 37). A name the file also sets to
    ``CppExtension`` where CUDA is not found (detectron2's setup.py) builds on an NPU host: not one."""
    raising, plain, other = set(), set(), set()
    index = TreeIndex.of(ctx)
    for assign in iter_nodes(ctx.module, cst.Assign):
        names = {t.target.value for t in assign.targets if isinstance(t.target, cst.Name)}
        if ctx.resolver.qualified_name(assign.value) != "torch.utils.cpp_extension.CUDAExtension":
            other |= names
            continue
        owner = next((o for o, _ in index.enclosing(index.statement_of(assign)) if isinstance(o, cst.If)), None)
        refused = owner is not None and owner.orelse is not None and any(iter_nodes(owner.orelse, cst.Raise))
        (raising if refused else plain).update(names)
    return frozenset(raising | (plain - other))


@register
class CustomKernels(Rule):
    codes = ("NPU602", "NPU603", "NPU605")
    triggers = (r"CUDAExtension", r"cpp_extension", r"triton", r"nvidia-smi")

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._kernels_reported = False

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.resolver.qualified_name(node.func) or ""
        alias = isinstance(node.func, cst.Name) and node.func.value in self.ctx.file_state(_extension_aliases)
        if (
            qualified == "torch.utils.cpp_extension.CUDAExtension"
            or alias
            or (qualified in EXTENSION_LOADERS and _mentions_cu_sources(node, self.ctx.source))
        ):
            self.report(
                "NPU602",
                node,
                "CUDA C++ extension: port the kernel to Ascend C (or torch ops) and build with torch_npu's NpuExtension",
            )
        elif qualified in SHELL_CALLS and any("nvidia-smi" in s for s in _strings_in(node)):
            if not self._silenced_probe(node, qualified):
                self.report("NPU605", node, "`nvidia-smi` does not exist on NPU hosts; use `npu-smi info`")

    def _silenced_probe(self, node: cst.Call, qualified: str) -> bool:
        """The call sits in a ``try`` whose handler for what it raises on an NPU host (no
        ``nvidia-smi`` there) only passes, and nothing the ``try`` computes is returned or read after
        it: a probe whose failure the project already meant for hosts without NVIDIA GPUs (deita's
        setup.py installs flash-attn only where it succeeds). A count or flag it leaves for later
        code (a fallback of 0 devices) keeps the marker."""
        raised = _missing_program_errors(node, qualified)
        index = TreeIndex.of(self.ctx)
        for owner, role in index.enclosing(index.statement_of(node)):
            if isinstance(owner, cst.Try) and role == "body":
                handler = next((h for h in owner.handlers if catches(h, raised)), None)
                return handler is not None and _only_passes(handler.body) and not _leaves_values(index, owner)
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        """One finding per file, at the first Triton decorator of its first kernel (``@triton.autotune``
        above ``@triton.jit``), counting the others: a marker at every kernel repeated what the first
        one asks (no ``import triton`` gets an NPU606: the import is not what fails). None in a project
        that pins ``triton-ascend`` (flash-linear-attention's ``npu`` extra): its kernels run there; nor
        in a module the project imports only behind a kept ``.is_cuda`` test (whisper's ``triton_ops``:
        the project fact of analysis/gated_kernels.py): an NPU host never launches them."""
        kernels = triton_kernels(self.ctx)
        if node not in kernels or self._kernels_reported or self.options.file.cuda_gated_kernels:
            return
        if pinned(self.options.project.pins, "triton-ascend"):
            return  # a project building its kernels with Triton-Ascend (an `npu` extra) has ported them
        self._kernels_reported = True
        count = len(kernels)
        others = f" (and {count - 1} other{'s' if count > 2 else ''} in this file)" if count > 1 else ""
        self.report(
            "NPU603",
            kernels[node],
            f"Triton kernel{others}: Triton targets CUDA here; use torch ops, Triton-Ascend or an Ascend kernel",
        )


TRITON_KERNEL_DECORATORS = {"triton.jit", "triton.autotune", "triton.heuristics"}  # not triton.testing.*


def triton_kernels(ctx) -> dict[cst.FunctionDef, cst.CSTNode]:
    """The file's Triton kernels (through its module-level imports), each with its first Triton
    decorator, or itself where a call makes it one (``_fwd_kernel = triton.jit(_fwd)``: ml-cross-entropy,
    round 33) (built once per file)."""
    return ctx.file_state(_triton_kernels)


def _triton_kernels(ctx) -> dict[cst.FunctionDef, cst.CSTNode]:
    if ctx.text is not None and b"triton" not in ctx.text:
        return {}
    scope = ctx.resolver.module_scope
    kernels: dict[cst.FunctionDef, cst.CSTNode] = {}
    for function in iter_nodes(ctx.module, cst.FunctionDef):
        for decorator in function.decorators:
            target = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
            if module_qualified(scope, target) in TRITON_KERNEL_DECORATORS:
                kernels[function] = decorator
                break
    functions = {s.name.value: s for s in ctx.module.body if isinstance(s, cst.FunctionDef)}
    for call in iter_nodes(ctx.module, cst.Call):
        made = call.args[0].value if call.args and call.args[0].keyword is None else None
        if (
            isinstance(made, cst.Name)
            and made.value in functions
            and module_qualified(scope, call.func) in TRITON_KERNEL_DECORATORS
        ):
            kernels.setdefault(functions[made.value], functions[made.value])
    return kernels
