"""Tests that switch a CUDA kernel of the project on: ``if x.is_cuda: _C.box_iou(...)`` (NPU102),
``if impl == "cuda" and x.device.type == "cuda": _bias_act_cuda(...)`` (NPU104). Rewritten to the
NPU they would send NPU tensors into a kernel that is not there; they stay CUDA's (review), and
the other branch, usually the portable one, runs on the NPU as it did before the migration."""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.names import NameResolver, dotted_name
from cuda2npu.core.traversal import iter_nodes
from cuda2npu.families.cuda_only_modules import is_cuda_extension
from cuda2npu.families.npu_aware import CUDA_WORD


def kernel_call(resolver: NameResolver, cuda_extensions: tuple[str, ...], node: cst.If) -> str | None:
    """The first call of a CUDA kernel of the project's in the branch ``node``'s test selects (the
    ``else`` branch of ``if not ...``): a callee with a ``cuda`` word other than torch's (and than
    ``.cuda()``), or a function of a compiled extension (a ``_C`` module of the project's, one its
    setup.py builds with CUDAExtension, a ``<name>_cuda`` module)."""
    branch = node.orelse if isinstance(node.test, cst.UnaryOperation) else node.body
    for call in iter_nodes(branch, cst.Call) if branch is not None else ():
        name = dotted_name(call.func) or ""
        qualified = resolver.qualified_name(call.func) or name
        if qualified.startswith("torch."):
            continue
        last = name.rpartition(".")[2]
        module = qualified.rpartition(".")[0]
        if (CUDA_WORD.search(last) and last != "cuda") or (
            module and (module.rpartition(".")[2] == "_C" or is_cuda_extension(module, cuda_extensions))
        ):
            return name
    return None
