"""NPU907: bitsandbytes quantization asked of transformers (``load_in_8bit=True``,
``load_in_4bit=True``, ``BitsAndBytesConfig(load_in_4bit=True, ...)``).

No bitsandbytes release has Ascend kernels (docs/reference/kernel_libraries.md, bitsandbytes): older
transformers releases refuse to quantize without CUDA, later ones run bitsandbytes' device-agnostic
pure-torch kernels (4-bit from bitsandbytes 0.47.0, 8-bit from 0.46.0), untested on Ascend; the
Ascend backend of bitsandbytes' multi-backend-refactor branch quantizes NF4 only.
A review item at the flag (or the config's construction); a flag whose every source in the file
is ``False`` or ``None`` quantizes nothing and is left.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.literals import literal
from cuda2npu.core.nodes import code_of
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.families.hf_sources import is_hf_call, keyword, sources
from cuda2npu.families.npu_aware import in_npu_branch

FLAGS = ("load_in_4bit", "load_in_8bit")
CONFIG = "BitsAndBytesConfig"
ADVICE = {
    "load_in_4bit": (
        "no bitsandbytes release has Ascend kernels (older transformers releases refuse to quantize without CUDA; "
        "bitsandbytes >= 0.47 falls back to pure-torch kernels, untested on Ascend): load the model in bf16 without "
        "quantization, or build bitsandbytes' Ascend branch (multi-backend-refactor: NF4 only, no double "
        "quantization)"
    ),
    "load_in_8bit": (
        "no bitsandbytes build has Ascend int8 kernels (older transformers releases refuse to quantize without "
        "CUDA; bitsandbytes >= 0.46 falls back to pure-torch kernels, untested on Ascend): load the model in bf16 without quantization"
    ),
}


@register
class BitsAndBytesQuantization(Rule):
    codes = ("NPU907",)
    triggers = (r"load_in_[48]bit",)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._reported: set[cst.CSTNode] = set()  # statements with a finding: one per statement

    def visit_Call(self, node: cst.Call) -> None:
        """One finding per statement: ``from_pretrained(p, load_in_4bit=True,
        quantization_config=BitsAndBytesConfig(load_in_4bit=True))`` asks one thing twice."""
        statement = self.ctx.statement
        if statement in self._reported or not is_hf_call(self.resolver, node) or in_npu_branch(self.ctx, node):
            return
        flags = [arg for arg in (keyword(node, flag) for flag in FLAGS) if arg is not None and self._may_be_on(arg)]
        if not flags:
            return
        self._reported.add(statement)
        flag, value = flags[0].keyword.value, code_of(flags[0].value)
        shown = f"{flag}={value}" if len(value) <= 40 and "\n" not in value else flag
        if (self.resolver.qualified_name(node.func) or "").rpartition(".")[2] == CONFIG:
            self.report("NPU907", node, f"`{CONFIG}({shown})` quantizes with bitsandbytes: {ADVICE[flag]}")
        else:
            self.report("NPU907", flags[0], f"`{shown}` quantizes with bitsandbytes: {ADVICE[flag]}")

    def _may_be_on(self, arg: cst.Arg) -> bool:
        """Not every value the flag takes in this file is ``False`` / ``None``."""
        found = sources(self.ctx, arg.value)
        return not found or any(literal(value) not in (False, None) for value in found)
