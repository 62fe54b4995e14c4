"""NPU advisories (NPU801–NPU806): code that runs on an NPU but slowly or differently.

Findings only, no fix and no marker in migrated code (rules/tables/markers.toml lists them as
unmarked): ``torch.compile``, float64 tensors, ``nn.DataParallel``, host synchronisations inside
a training loop, ``torch.backends.cudnn.benchmark`` and ``channels_last``. Turned off as a family
with ``ignore = ["NPU8"]``.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.names import dotted_name
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.traversal import walk

FLOAT64 = {"torch.float64", "torch.double"}
HOST_SYNCS = {"item", "cpu", "tolist", "numpy"}
TRAINING_CALLS = {"backward", "step"}
COMPILE_NOTE = (
    "on NPU goes through torch_npu's own inductor backend; compile times, graph breaks and speed differ "
    "from CUDA: measure it against eager mode"
)
FLOAT64_NOTE = "has no fast path on NPU: the cube units compute in float16/bfloat16/float32; keep float64 for the CPU"


def _is_call_to(node: cst.CSTNode, names: set[str]) -> bool:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in names


class _LoopCalls(cst.CSTVisitor):
    """Calls in a loop body, not descending into nested loops, functions, classes or lambdas."""

    def __init__(self) -> None:
        self.calls: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)

    def visit_FunctionDef(self, node) -> bool:
        return False

    def visit_ClassDef(self, node) -> bool:
        return False

    def visit_Lambda(self, node) -> bool:
        return False

    def visit_For(self, node) -> bool:
        return False

    def visit_While(self, node) -> bool:
        return False


@register
class Advisories(Rule):
    codes = ("NPU801", "NPU802", "NPU803", "NPU805", "NPU806")
    # What each report needs in the text: `torch.compile` or a `compile` imported from torch (not
    # `re.compile`), `.float64`/`.double` attributes, `nn.DataParallel` (not DistributedDataParallel), ...
    triggers = (
        r"(?<!re\.)\bcompile\b",
        r"\.\s*float64\b",
        r"\.\s*double\b",
        r"\bDataParallel\b",
        r"cudnn\.benchmark",
        r"channels_last",
    )

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.resolver.qualified_name(node.func) or ""
        if qualified == "torch.compile":
            self.report("NPU801", node, f"`torch.compile` {COMPILE_NOTE}")
        elif qualified in ("torch.nn.DataParallel", "torch.nn.parallel.DataParallel"):
            self.report(
                "NPU803",
                node,
                "`nn.DataParallel` drives every device from one process; use "
                "DistributedDataParallel with the hccl backend on NPU (older torch_npu releases had no DataParallel)",
            )
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "double" and not node.args:
            self.report("NPU802", node, f"float64 (`.double()`) {FLOAT64_NOTE}")

    def visit_Decorator(self, node: cst.Decorator) -> None:
        target = node.decorator.func if isinstance(node.decorator, cst.Call) else node.decorator
        if self.resolver.qualified_name(target) == "torch.compile":
            self.report("NPU801", node, f"`@torch.compile` {COMPILE_NOTE}")

    def visit_Attribute(self, node: cst.Attribute) -> None:
        qualified = self.resolver.qualified_name(node) or ""
        if qualified in FLOAT64:
            self.report("NPU802", node, f"`{dotted_name(node) or qualified}` (float64) {FLOAT64_NOTE}")
        elif qualified == "torch.backends.cudnn.benchmark":
            self.report(
                "NPU805",
                node,
                "`torch.backends.cudnn.benchmark` has no effect on NPU (there is no cuDNN to "
                "autotune); the speed it bought on CUDA does not carry over",
            )
        elif qualified in ("torch.channels_last", "torch.channels_last_3d"):
            self.report(
                "NPU806",
                node,
                "`channels_last` is not a format the NPU kernels prefer (Ascend's migration "
                "guide lists it as needing manual change); the default contiguous format is usually faster",
            )


@register
class TrainingLoopSyncs(Rule):
    """NPU804: a host synchronisation (``.item()``, ``.cpu()``, ...) in a training loop."""

    codes = ("NPU804",)
    # a training call and a host sync, both: `.item()` alone is in every file, `.step(` in schedulers
    triggers = (r"\.\s*(backward|step)\s*\(",)
    requires = (r"\.\s*(item|cpu|tolist|numpy)\s*\(",)

    def visit_For(self, node: cst.For) -> None:
        self._training_loop(node.body)

    def visit_While(self, node: cst.While) -> None:
        self._training_loop(node.body)

    def _training_loop(self, body: cst.BaseSuite) -> None:
        """Host syncs directly in a loop that also calls ``.backward()`` or ``.step()`` (a training loop)."""
        calls = _LoopCalls()
        walk(body, calls)
        if not any(_is_call_to(call, TRAINING_CALLS) for call in calls.calls):
            return
        for call in calls.calls:
            if _is_call_to(call, HOST_SYNCS) and not call.args:
                name = call.func.attr.value
                self.report(
                    "NPU804",
                    call,
                    f"`.{name}()` inside the training loop waits for the NPU every step "
                    "(a host synchronisation); log every N steps or keep the value on the device",
                )
