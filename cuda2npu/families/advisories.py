"""NPU advisories (NPU801–NPU806): code that runs on an NPU but slowly or differently.

Findings only, no fix and no marker in migrated code (rules/tables/markers.toml lists them as
unmarked): ``torch.compile``, float64 tensors, ``nn.DataParallel``, host synchronisations inside
a training loop, ``torch.backends.cudnn.benchmark`` and ``channels_last``. Outside ``check``'s
default selection (``selected_by_default = false`` in rules/advisories.toml): ``--select NPU8``
enables them; ``migrate`` counts them in its summary; ``ignore = ["NPU8"]`` turns them off.
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


def _is_modulo(node: cst.BaseExpression) -> bool:
    """``step % n`` (also parenthesised, ``(step + 1) % n``), not ``"%d" % x`` string formatting."""
    return (
        isinstance(node, cst.BinaryOperation)
        and isinstance(node.operator, cst.Modulo)
        and not isinstance(node.left, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))
    )


def _every_n_steps(test: cst.BaseExpression) -> bool:
    """An ``if`` condition that holds once every N steps: a modulo test of a counter
    (``step % log_interval == 0``, ``not it % 100``), alone or in an ``and`` (``it % 100 == 0 and master``)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _every_n_steps(test.left) or _every_n_steps(test.right)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _is_modulo(test.expression)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        return isinstance(target.operator, cst.Equal) and (_is_modulo(test.left) or _is_modulo(target.comparator))
    return False


class _LoopCalls(cst.CSTVisitor):
    """Calls in a loop body, not descending into nested loops, functions, classes or lambdas;
    ``sparse``: those that run only every N steps (in the body of such an ``if``)."""

    def __init__(self) -> None:
        self.calls: list[cst.Call] = []
        self.sparse: set[cst.Call] = set()

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)

    def visit_If(self, node: cst.If) -> None:
        if _every_n_steps(node.test):
            self._sparse(node.body)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if _every_n_steps(node.test):
            self._sparse(node.body)

    def _sparse(self, body: cst.CSTNode) -> None:
        inner = _LoopCalls()
        walk(body, inner)
        self.sparse.update(inner.calls)

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
        syncs = [call for call in calls.calls if _is_host_sync(call)]
        inner = {sync for call in syncs for sync in _chain(call)[:-1]}  # `.cpu()` of `.cpu().numpy()`
        for call in syncs:
            if call in inner or call in calls.sparse:
                continue
            self.report(
                "NPU804",
                call,
                f"`{_chain_text(_chain(call))}` inside the training loop waits for the NPU every step "
                "(a host synchronisation); log every N steps or keep the value on the device",
            )


def _is_host_sync(node: cst.CSTNode) -> bool:
    return _is_call_to(node, HOST_SYNCS) and not node.args


def _chain(call: cst.Call) -> list[cst.Call]:
    """The calls of ``call``'s receiver chain from the innermost host synchronisation to ``call``
    (``x.cpu().float().numpy()``: cpu(), float(), numpy()); ``[call]`` when it has no other."""
    chain, calls = [call], [call]
    node = call.func.value
    while True:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            calls.append(node)
            if _is_host_sync(node):
                chain = list(calls)
            node = node.func.value
        elif isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        else:
            return chain[::-1]


def _chain_text(chain: list[cst.Call]) -> str:
    """``.cpu().float().numpy()``: the chain's method calls, arguments elided."""
    return "".join(f".{call.func.attr.value}({'...' if call.args else ''})" for call in chain)
