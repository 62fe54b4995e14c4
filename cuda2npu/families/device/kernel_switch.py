"""Tests that switch a CUDA kernel on: ``if x.is_cuda: _C.box_iou(...)`` (NPU102),
``if impl == "cuda" and x.device.type == "cuda": _bias_act_cuda(...)`` (NPU104), ``if not
x.is_cuda: return F.layer_norm(...)`` followed by apex's ``FusedLayerNormAffineFunction.apply``
(gpt-neox). Rewritten to the NPU they would send NPU tensors into a kernel that is not there; they
stay CUDA's (review), and the other branch, usually the portable one, runs on the NPU as it did
before the migration."""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.names import dotted_name
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes
from cuda2npu.families.cuda_only_modules import APEX_EXTENSIONS, APEX_ROOTS, is_cuda_extension
from cuda2npu.families.npu_aware import CUDA_WORD


def kernel_call(ctx, node: cst.If) -> str | None:
    """The first call of a CUDA kernel in the branch ``node``'s test selects: a callee with a
    ``cuda`` word other than torch's (and than ``.cuda()``), a function of a compiled extension (a
    ``_C`` module of the project's, one its setup.py builds with CUDAExtension, a ``<name>_cuda``
    module) or of apex (its kernels are not migrated where they are called this way)."""
    for branch in _cuda_branch(ctx, node):
        for call in iter_nodes(branch, cst.Call):
            name = dotted_name(call.func) or ""
            qualified = ctx.resolver.qualified_name(call.func) or name
            if qualified.startswith("torch."):
                continue
            last = name.rpartition(".")[2]
            module = qualified.rpartition(".")[0]
            if (
                (CUDA_WORD.search(last) and last != "cuda")
                or qualified.split(".")[0] in APEX_ROOTS + APEX_EXTENSIONS
                or (
                    module
                    and (module.rpartition(".")[2] == "_C" or is_cuda_extension(module, ctx.options.cuda_extensions))
                )
            ):
                return name
    return None


def _cuda_branch(ctx, node: cst.If) -> list[cst.CSTNode]:
    """What runs when the test says CUDA: the body; for ``if not ...`` the ``else`` branch, or, when
    the body ends in ``return``/``raise`` and there is none, the statements after the ``if``."""
    if not isinstance(node.test, cst.UnaryOperation):
        return [node.body]
    if node.orelse is not None:
        return [node.orelse]
    last = node.body.body[-1] if node.body.body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1]
    if not isinstance(last, (cst.Return, cst.Raise)):
        return []
    placement = TreeIndex.of(ctx).placement.get(node)
    return list(placement.block.body[placement.index + 1 :]) if placement is not None else []
