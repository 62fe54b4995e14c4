"""NPU114: a custom operator's kernel registered for CUDA tensors only.

``@torch.library.impl("mylib::rms", "cuda")``, ``torch.library.register_kernel(..., "cuda")``,
``torch.library.custom_op(..., device_types="cuda")`` and ``lib.impl("rms", fn, "CUDA")`` register
the implementation under the CUDA dispatch key (``torch._C._dispatch_key_for_device("cuda")`` is
``CUDA``). Called with NPU tensors, the dispatcher looks under ``PrivateUse1``, the backend torch_npu
renames to "npu", finds nothing and raises ``NotImplementedError`` (MagicDec's flashinfer wrappers,
round 33: 19 registrations). The NPU's registration is ``"npu"`` (``PrivateUse1`` for
``Library.impl``), once its body runs there: a body calling a CUDA kernel is ported first, so the
rule marks and rewrites nothing. Not a registration naming the NPU too, nor code that handles the NPU.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import string_value
from cuda2npu.core.nodes import code_of
from cuda2npu.core.rulebase import Rule, register

# registration call -> (position of its device types, keyword), the first argument being the operator
REGISTRATIONS = {
    "torch.library.impl": (1, "types"),
    "torch.library.register_kernel": (1, "device_types"),
    "torch.library.custom_op": (None, "device_types"),
}
CUDA_NAMES = {"cuda", "CUDA", "AutogradCUDA"}
NPU_NAMES = {"npu", "PrivateUse1", "AutogradPrivateUse1", "privateuseone"}
MESSAGE = (
    "registers {op}'s kernel for CUDA tensors only: called with NPU tensors it finds none (NotImplementedError "
    "for PrivateUse1, torch_npu's backend); register the implementation for the NPU too ({npu}), porting a body "
    "that calls CUDA kernels first"
)


@register
class CudaOpRegistration(Rule):
    codes = ("NPU114",)
    triggers = (r"""\.impl\(|register_kernel|custom_op""",)
    requires = (r"""["'](?:cuda|CUDA|AutogradCUDA)["']""",)

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.resolver.qualified_name(node.func) or ""
        positional = [arg.value for arg in node.args if arg.keyword is None]
        keywords = {arg.keyword.value: arg.value for arg in node.args if arg.keyword is not None}
        if qualified in REGISTRATIONS:
            position, keyword = REGISTRATIONS[qualified]
            if positional and not isinstance(positional[0], cst.SimpleString) and qualified == "torch.library.impl":
                position, keyword, npu = 2, "dispatch_key", '"PrivateUse1"'  # the older `impl(lib, name, key)`
            else:
                npu = '"npu"'
            types = keywords.get(keyword) or (
                positional[position] if position is not None and len(positional) > position else None
            )
            op = code_of(positional[0]) if positional else "the operator"
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "impl" and len(positional) >= 1:
            types, npu = (
                keywords.get("dispatch_key") or (positional[2] if len(positional) > 2 else None),
                '"PrivateUse1"',
            )
            op = code_of(positional[0])
        else:
            return
        names = _names(types)
        if names & CUDA_NAMES and not names & NPU_NAMES and not is_cuda_alternative(self.ctx, node):
            self.report("NPU114", node, MESSAGE.format(op=f"`{op}`", npu=npu), tier=Tier.MANUAL, needs_torch_npu=False)


def _names(types: cst.BaseExpression | None) -> set[str]:
    """The device types or dispatch keys a registration names: a string, or a list/tuple of them."""
    if types is None:
        return set()
    members = [e.value for e in types.elements] if isinstance(types, (cst.List, cst.Tuple)) else [types]
    return {value for member in members if (value := string_value(member)) is not None}
