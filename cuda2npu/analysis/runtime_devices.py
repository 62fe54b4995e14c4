"""Libraries whose ``device=`` is their own vocabulary, not a torch device, and which have no NPU:
CTranslate2 (faster-whisper) takes cpu, cuda or auto; ModelScope's ``verify_device`` cpu, cuda and gpu
(docs/reference/kernel_libraries.md). A ``"cuda"`` chosen for them stays (NPU109 where it is written in
the call), and so does the test choosing it: on an NPU host the choice must fall back to ``"cpu"``.
Likewise a count of CUDA devices given to a library that uses CUDA devices only (colbert-ai's
``nranks``): ``torch.cuda.device_count()`` stays, marked; and a choice reading TorchServe's ``gpu_id``,
which TorchServe sets only for the GPUs it detects."""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.literals import string_value
from cuda2npu.core.names import NameUses
from cuda2npu.core.nodes import code_of
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes, walk

# the call prefixes → what to say of their `device=`
OTHER_RUNTIMES = {
    ("faster_whisper.", "ctranslate2."): (
        "is CTranslate2's device (cpu, cuda or auto), not torch's: it has no NPU backend, and \"npu\" raises "
        'ValueError; on an NPU host run it with device="cpu" (compute_type="int8"), or use another runtime'
    ),
    ("modelscope.",): (
        "is ModelScope's device (cpu, cuda, gpu, cuda:X or gpu:X: modelscope/utils/device.py `verify_device`), not "
        'torch\'s: "npu" fails its assertion, and "cuda" without CUDA runs the pipeline on the CPU; on an NPU '
        'host build the pipeline on "cpu" and move its model to the NPU (`pipe.model.to("npu")`), or check '
        "your ModelScope release"
    ),
}
# the call prefixes → (the keyword taking a count of CUDA devices, why the count stays torch.cuda's)
CUDA_COUNTS = {
    ("colbert.",): (
        "nranks",
        "colbert-ai counts and uses CUDA devices only (`torch.cuda.device_count()`, `torch.cuda.set_device`): on "
        "an NPU host it runs on the CPU, where a count of NPUs as `nranks` starts ranks that fail at their first "
        "barrier; give it `nranks=1` there",
    ),
}
PREFIXES = tuple(prefix for prefixes in OTHER_RUNTIMES for prefix in prefixes)
# TorchServe's worker property naming the GPU it assigned (context.system_properties)
TORCHSERVE_GPU_ID = "gpu_id"
TORCHSERVE_GPU = (
    "TorchServe assigns `gpu_id` only to the GPUs it detects (nvidia-smi; pytorch/serve#2557): None on an NPU "
    "host, where the CUDA side would build `npu:None`"
)
RUNTIME_CHOICE = 'chooses the device of a runtime without an NPU backend, which must fall back to "cpu" there'


def runtime_device_choice(ctx, node: cst.IfExp) -> tuple[str, str] | None:
    """``(what, why)`` where the value of ``node`` (``"cuda" if torch.cuda.is_available() else "cpu"``) is
    only ever another runtime's ``device=``: written there, or assigned to a name whose every read in its
    function is (GPT-SoVITS' ``WhisperModel(path, device=device)``, round 46); else None."""
    call = _only_passed_as(ctx, node, "device", PREFIXES)
    return (f"`{code_of(call.func)}(device=...)`", RUNTIME_CHOICE) if call is not None else None


def torchserve_gpu_id(blocks: list[cst.CSTNode]) -> tuple[str, str] | None:
    """``(what, why)`` where ``blocks`` read TorchServe's ``gpu_id`` (``properties.get("gpu_id")``,
    ``properties["gpu_id"]``: mmpretrain's and poolformer's handlers, ``torch.device(map_location + ":" +
    str(properties.get("gpu_id")) if torch.cuda.is_available() else map_location)``, rounds 61 and 64)."""
    for block in blocks:
        for node in iter_nodes(block, (cst.Call, cst.Subscript)):
            if isinstance(node, cst.Call):
                key = node.args[0].value if node.args and isinstance(node.func, cst.Attribute) else None
                read = key is not None and node.func.attr.value == "get"
            else:
                index = node.slice[0].slice if len(node.slice) == 1 else None
                key = index.value if isinstance(index, cst.Index) else None
                read = key is not None
            if read and string_value(key) == TORCHSERVE_GPU_ID:
                return f"`{code_of(node)}`", TORCHSERVE_GPU
    return None


def library_device_count(ctx, node: cst.Call) -> str | None:
    """Why ``node`` (``torch.cuda.device_count()``) stays where its value is only ever a count of CUDA
    devices a library without NPU support takes (colbert-ai's ``RunConfig(nranks=...)``, stark, round 52);
    else None."""
    for prefixes, (keyword, why) in CUDA_COUNTS.items():
        if _only_passed_as(ctx, node, keyword, prefixes) is not None:
            return why
    return None


def _only_passed_as(ctx, node: cst.BaseExpression, keyword: str, prefixes: tuple[str, ...]) -> cst.Call | None:
    """The first call (of a callable named with one of ``prefixes``) that the value of ``node`` is passed
    to as ``keyword=``, where that is its only use: written there, or assigned to a name every read of
    which in its function is such an argument; else None."""
    index = TreeIndex.of(ctx)
    parent = index.parents.get(node)
    if isinstance(parent, cst.Arg):
        args = [parent]
    elif isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        name = parent.targets[0].target.value
        scope = index.function.get(index.statement_of(parent)) or ctx.module
        uses = NameUses({name}, ctx.resolver.scopes)
        walk(scope, uses)
        args = [index.parents.get(use) for use in uses.uses[name]]
    else:
        return None
    calls = [index.parents.get(arg) for arg in args]
    if not args or not all(
        isinstance(arg, cst.Arg)
        and arg.keyword is not None
        and arg.keyword.value == keyword
        and isinstance(call, cst.Call)
        and (ctx.resolver.qualified_name(call.func) or "").startswith(prefixes)
        for arg, call in zip(args, calls)
    ):
        return None
    return calls[0]
