"""Megatron-LM on Ascend (NPU941): it runs there through MindSpeed, whose adaptor patches
Megatron's CUDA-only parts when imported before megatron (docs/reference/megatron.md).

One review note per file, at its first call of a Megatron entry point (``pretrain``,
``initialize_megatron``, ``parallel_state.initialize_model_parallel``); none in a file that imports
mindspeed already, and none in a project carrying its own old Megatron (no ``megatron/core``:
Megatron-DeepSpeed, gpt-neox), which MindSpeed does not patch: its code is migrated as the
project's. The code needs no other change for it: what to do is install MindSpeed and import its
adaptor in the entry script.
"""

from __future__ import annotations

from cuda2npu.analysis.file_notes import FileNote
from cuda2npu.core.rulebase import register

ENTRY_POINTS = frozenset(
    {
        "megatron.training.pretrain",
        "megatron.training.training.pretrain",
        "megatron.training.initialize_megatron",
        "megatron.training.initialize.initialize_megatron",
        "megatron.core.parallel_state.initialize_model_parallel",
        "megatron.core.mpu.initialize_model_parallel",
    }
)
NOTE = (
    "Megatron-LM runs on Ascend through MindSpeed: install the MindSpeed release made for this "
    "Megatron-core version and add `import mindspeed.megatron_adaptor` right after `import torch` in the "
    "entry script, before megatron is imported (it imports torch_npu's transfer_to_npu and patches "
    "Megatron's apex/TransformerEngine fusions and parallel state for the NPU); a fork of Megatron "
    "(Megatron-DeepSpeed) needs its own Ascend port"
)


@register
class MegatronOnMindSpeed(FileNote):
    codes = ("NPU941",)
    triggers = (r"\bpretrain\b", r"initialize_megatron", r"initialize_model_parallel")
    requires = (r"\bmegatron\b",)
    entry_points = ENTRY_POINTS
    note = NOTE
    counterpart = b"mindspeed"

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.noted = self.noted or self.options.project.megatron_fork
