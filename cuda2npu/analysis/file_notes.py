"""One review note per file, at its first call of a library's entry point, saying what an NPU host
needs installed for that library (vLLM's plugin, NPU931; MindSpeed for Megatron, NPU941); none in a
file that names the NPU counterpart already, none in code that handles the NPU itself."""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.npu_aware import in_npu_branch
from cuda2npu.core.rulebase import Rule


class FileNote(Rule):
    """A subclass sets ``codes`` (one code), ``triggers``, ``entry_points`` (qualified names),
    ``note`` and ``counterpart`` (text in a file that knows the NPU side: ``b"vllm_ascend"``)."""

    entry_points: frozenset[str] = frozenset()
    note = ""
    counterpart = b""

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        text = ctx.source
        self.noted = self.counterpart in text

    def visit_Call(self, node: cst.Call) -> None:
        if self.noted or self.resolver.qualified_name(node.func) not in self.entry_points:
            return
        if in_npu_branch(self.ctx, node):
            return
        self.noted = True
        self.report(self.codes[0], node, self.message(), needs_torch_npu=False)

    def message(self) -> str:
        """The note (a subclass may word it by the project's facts)."""
        return self.note
