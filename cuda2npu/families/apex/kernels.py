"""NPU306: apex's multi-tensor kernels called directly → the generated ``apex_npu_optimizers.py``.

Gradient clippers and loss scalers (Megatron's ``clip_grads``, NVIDIA BERT's ``run_pretraining.py``)
call ``amp_C.multi_tensor_l2norm`` / ``multi_tensor_scale`` / ``multi_tensor_axpby``, usually
through ``apex.multi_tensor_apply.multi_tensor_applier``. Each reference becomes the generated
module's function of the same name (amp_C's calling convention, results and ``noop_flag``; see
``cuda2npu/families/apex/generated.py``). The other amp_C kernels (the optimizers', which the
generated classes replace) are reported, manual.

A name whose import sits in a ``try`` that catches ImportError is left alone: that is the
project's own feature detection (``HAVE_AMP_C = True``, a local fallback in the ``except``), and
on an NPU host the fallback runs.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.nodes import root_name
from cuda2npu.core.rulebase import register
from cuda2npu.families.apex.common import ApexRule
from cuda2npu.families.apex.generated import COMPANION, KERNELS, MODULE, ApexBindings, point_to_generated

OTHER_KERNELS = (
    "amp_C holds apex's CUDA kernels and the generated {companion} has only multi_tensor_l2norm, "
    "multi_tensor_scale and multi_tensor_axpby: write it with torch._foreach_* ops"
)


@register
class ApexMultiTensorKernels(ApexRule):
    """NPU306: ``amp_C.multi_tensor_*`` kernels and ``multi_tensor_applier`` → the generated module."""

    codes = ("NPU306",)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.bindings = ApexBindings.of(ctx) if self.active else None

    def visit_Name(self, node: cst.Name) -> None:
        self._reference(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._reference(node)

    def _reference(self, node: cst.BaseExpression) -> None:
        if not self.active or not self.bindings.reads_apex(node):
            return
        name = self.apex(node)
        if name is None or self.bindings.guarded(root_name(node).value):
            return
        if name in KERNELS:
            target = f"{MODULE}.{KERNELS[name]}"
            message = (
                f"`{name.replace('.multi_tensor_apply.multi_tensor_apply.', '.multi_tensor_apply.')}` → "
                f"`{target}` from the generated {COMPANION}: apex's kernel in plain PyTorch (same arguments, "
                "results and noop flag)"
            )
            point_to_generated(self, "NPU306", node, KERNELS[name], message)
        elif isinstance(node, cst.Attribute) and name.startswith("amp_C.") and name.count(".") == 1:
            self.report(
                "NPU306", node, f"`{name}` not migrated: " + OTHER_KERNELS.format(companion=COMPANION), tier=Tier.MANUAL
            )
