"""Device choices in front of the project's own compiled operators (``ProjectFacts.extension_functions``):
pytorch3d's tutorials pick ``torch.device("cuda:0")`` if ``torch.cuda.is_available()`` else the CPU, then
render through ``pytorch3d._C`` (round 60). Such operators have CPU and CUDA kernels only; an NPU host
builds them CPU-only and they reject NPU tensors, so the choice must keep falling back to the CPU there:
its test stays CUDA's (analysis/cuda_gates.py ``gated_cuda_use``), unreported like the other kept switches: the
NPU host takes the CPU, as a host without CUDA did."""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.literals import DEVICE_STRING, string_value
from cuda2npu.core.nodes import code_of
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes

EXTENSION_DEVICE = (
    "chooses the device of the project's own compiled operators, which have CPU and CUDA kernels only and "
    "reject NPU tensors: on an NPU host it must fall back to the CPU; port the operators to Ascend (torch_npu's "
    "NpuExtension) to run them on the NPU"
)


def extension_device_choice(ctx, node: cst.If | cst.IfExp, blocks: list[cst.CSTNode]) -> tuple[str, str] | None:
    """``(what, why)`` where ``blocks`` (the CUDA branch of ``node``) assign a CUDA device to a name and the
    function (or module) holding ``node`` calls one of the project's functions reaching its compiled
    operators; else None."""
    project, own = ctx.options.project.extension_functions, ctx.options.file.own_extension_functions
    if not (project or own) or not _assigns_cuda_device(ctx, node, blocks):
        return None
    index = TreeIndex.of(ctx)
    scope = index.enclosing_function(node) or ctx.module
    for call in iter_nodes(scope, cst.Call):
        qualified = ctx.resolver.qualified_name(call.func)
        if qualified in project or (isinstance(call.func, cst.Name) and qualified is None and call.func.value in own):
            return f"`{code_of(call.func)}(...)`", EXTENSION_DEVICE
    return None


def _assigns_cuda_device(ctx, node: cst.If | cst.IfExp, blocks: list[cst.CSTNode]) -> bool:
    """``device = "cuda" if ... else "cpu"``, or a branch assigning a value spelling a CUDA device."""
    if isinstance(node, cst.IfExp):
        return isinstance(TreeIndex.of(ctx).parents.get(node), (cst.Assign, cst.AnnAssign))
    return any(
        DEVICE_STRING.fullmatch(string_value(literal) or "")
        for block in blocks
        for assign in iter_nodes(block, (cst.Assign, cst.AnnAssign))
        if assign.value is not None
        for literal in iter_nodes(assign.value, cst.SimpleString)
    )
