"""NPU419: ``pipe.enable_xformers_memory_efficient_attention()`` (diffusers' models and pipelines).

diffusers' ``set_use_memory_efficient_attention_xformers`` raises ``ModuleNotFoundError`` where
xFormers is not installed, and ``ValueError`` where ``torch.cuda.is_available()`` is False
(``diffusers/models/attention_processor.py``; projects copy the same setter into their own attention
modules): on an NPU host, where xFormers cannot be installed, the call stops the script. Without it
diffusers keeps its default attention processor (``AttnProcessor2_0``: torch's
``scaled_dot_product_attention``, which runs on the NPU). Reported at the call (manual: the call is
the project's choice, often behind a flag). Left alone: a call that never runs on an NPU host (under
``if is_xformers_available():``), one in a ``try`` whose handler catches the error, and code that
already handles the NPU. Source: docs/reference/xformers.md §6.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.never_run import in_never_run_code
from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.imports import catches
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex

METHOD = "enable_xformers_memory_efficient_attention"
RAISED = frozenset({"ModuleNotFoundError", "ImportError", "ValueError", "Exception", "BaseException"})
MESSAGE = (
    "`{call}` raises ModuleNotFoundError on an NPU host, where xFormers cannot be installed (diffusers' "
    "`set_use_memory_efficient_attention_xformers`); remove the call: diffusers' default attention "
    "processor (torch's scaled_dot_product_attention) runs on the NPU"
)


@register
class XformersAttentionSwitch(Rule):
    codes = ("NPU419",)
    triggers = (METHOD,)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == METHOD):
            return
        if in_never_run_code(self.ctx, node) or is_cuda_alternative(self.ctx, node) or self._handled():
            return
        self.report("NPU419", node, MESSAGE.format(call=f"{METHOD}()"), tier=Tier.MANUAL)

    def _handled(self) -> bool:
        """The call runs in a ``try`` body whose handler catches what the setter raises."""
        return any(
            isinstance(owner, cst.Try) and role == "body" and any(catches(h, RAISED) for h in owner.handlers)
            for owner, role in TreeIndex.of(self.ctx).enclosing(self.ctx.statement)
        )
