"""NPU103: a branch taken when torch was *built* with CUDA (``torch.backends.cuda.is_built()``,
``torch.has_cuda``) whose body calls ``torch.cuda`` (DB-GPT's ``_clear_torch_cache``, round 51).
NPU103 renames the body to ``torch.npu``, but torch_npu runs on torch's CPU build, where the test is
False: the migrated body never runs on an NPU host. The test is marked (manual): testing
``torch.npu.is_available()`` there is the fix, which a reviewer chooses (the test often sits in a chain
of other backends' build tests).

A build test ``and``-ed with ``torch.cuda.is_available()`` that any CUDA or ROCm build passes
(``torch.cuda.is_available() and (torch.version.cuda or torch.version.hip)``, WhisperSpeech's device
chooser, round 56) adds nothing to the availability test: it is dropped (exact), so that the migrated
``torch.npu.is_available()`` chooses the NPU (a CPU build of torch, which torch_npu runs on, sets neither)."""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.never_run import availability_with_build_test
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.names import dotted_name
from cuda2npu.core.nodes import code_of
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.traversal import iter_nodes

BUILD_TESTS = ("torch.backends.cuda.is_built", "torch.has_cuda")


@register
class CudaBuildTest(Rule):
    codes = ("NPU103",)
    triggers = (r"\bcuda\.is_built\b", r"\bhas_cuda\b", r"\bversion\.hip\b")

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        available = availability_with_build_test(self.ctx, node)
        if available is None:
            return
        kept = "left" if available is node.left else "right"
        self.report(
            "NPU103",
            node,
            f"`{code_of(node)}` → `{code_of(available)}`: CUDA is available only on a CUDA or ROCm build, so the "
            "build test adds nothing; torch_npu runs on torch's CPU build, where it is False and would keep the "
            "migrated test from ever choosing the NPU",
            lambda updated: getattr(updated, kept).with_changes(lpar=updated.lpar, rpar=updated.rpar),
        )

    def visit_If(self, node: cst.If) -> None:
        test = next((expr for expr in iter_nodes(node.test, cst.BaseExpression) if self._is_build_test(expr)), None)
        if test is None or not self._calls_torch_cuda(node.body):
            return
        self.report(
            "NPU103",
            test,
            f"`{dotted_name(test.func if isinstance(test, cst.Call) else test)}` tests whether torch was built with "
            "CUDA: False on an NPU host (torch_npu runs on torch's CPU build), so the `torch.npu` code this branch "
            "now holds never runs there: test `torch.npu.is_available()`",
            tier=Tier.MANUAL,
        )

    def _is_build_test(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Call):
            name = dotted_name(expr.func) or ""
            return name.endswith("backends.cuda.is_built") or self.resolver.qualified_name(expr.func) in BUILD_TESTS
        return isinstance(expr, cst.Attribute) and self.resolver.qualified_name(expr) == "torch.has_cuda"

    def _calls_torch_cuda(self, body: cst.BaseSuite) -> bool:
        return any(
            (self.resolver.qualified_name(attribute) or "").startswith("torch.cuda.")
            for attribute in iter_nodes(body, cst.Attribute)
        )
