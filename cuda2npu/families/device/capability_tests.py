"""A test of a CUDA device string and the CUDA compute capability together: ``"cuda" in device and
torch.cuda.get_device_properties(device).major >= 7`` choosing float16 (F5-TTS's ``load_checkpoint``,
round 40). torch_npu leaves the capability empty (``get_device_capability()`` is None, the properties
have no usable ``major``), so the test rewritten for the NPU raises; left as written it is False on an
NPU host, whose other branch (float32 there) runs. The device rules leave it whole: device_strings
keeps its "cuda", cuda_api its ``torch.cuda`` calls, with one review marker."""

from __future__ import annotations

import functools

import libcst as cst

from cuda2npu.analysis.cuda_gates import CAPABILITY_QUERIES
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes
from cuda2npu.families.device.device_expressions import cuda_type_literals
from cuda2npu.families.device.device_roles import device_side

UNFILLED = ("major", "minor")  # fields of get_device_properties() that hold the capability


def capability_device_test(ctx, test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The "cuda" literals of ``test`` where it also reads the CUDA compute capability, else []."""
    literals = cuda_type_literals(test, functools.partial(device_side, ctx))
    return literals if literals and _reads_capability(ctx, test) else []


def _reads_capability(ctx, test: cst.BaseExpression) -> bool:
    parents = TreeIndex.of(ctx).parents
    for call in iter_nodes(test, cst.Call):
        qualified = ctx.resolver.qualified_name(call.func)
        if qualified == "torch.cuda.get_device_capability":
            return True
        parent = parents.get(call)
        if qualified in CAPABILITY_QUERIES and isinstance(parent, cst.Attribute) and parent.attr.value in UNFILLED:
            return True
    return False
