"""Megatron-LM on Ascend (NPU941): it runs there through MindSpeed, whose adaptor patches
Megatron's CUDA-only parts when imported before megatron (docs/reference/megatron.md).

One review note per file, at its first call of a Megatron entry point (``pretrain``,
``initialize_megatron``, ``parallel_state.initialize_model_parallel``); none in a file that imports
mindspeed already. The code needs no other change for it: what to do is install MindSpeed and
import its adaptor in the entry script.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.rulebase import Rule, register
from cuda2npu.families.npu_aware import in_npu_branch

ENTRY_POINTS = {
    "megatron.training.pretrain",
    "megatron.training.training.pretrain",
    "megatron.training.initialize_megatron",
    "megatron.training.initialize.initialize_megatron",
    "megatron.core.parallel_state.initialize_model_parallel",
    "megatron.core.mpu.initialize_model_parallel",
}
NOTE = (
    "Megatron-LM runs on Ascend through MindSpeed: install the MindSpeed release made for this "
    "Megatron-core version and add `import mindspeed.megatron_adaptor` right after `import torch` in the "
    "entry script, before megatron is imported (it imports torch_npu's transfer_to_npu and patches "
    "Megatron's apex/TransformerEngine fusions and parallel state for the NPU); a fork of Megatron "
    "(Megatron-DeepSpeed) needs its own Ascend port"
)


def _imports_mindspeed(ctx) -> bool:
    text = ctx.text if ctx.text is not None else ctx.module.code.encode()
    return b"mindspeed" in text


@register
class MegatronOnMindSpeed(Rule):
    codes = ("NPU941",)
    triggers = (r"\bpretrain\b", r"initialize_megatron", r"initialize_model_parallel")
    requires = (r"\bmegatron\b",)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.noted = ctx.file_state(_imports_mindspeed)

    def visit_Call(self, node: cst.Call) -> None:
        if self.noted or self.resolver.qualified_name(node.func) not in ENTRY_POINTS:
            return
        if in_npu_branch(self.ctx, node):
            return
        self.noted = True
        self.report("NPU941", node, NOTE, needs_torch_npu=False)
