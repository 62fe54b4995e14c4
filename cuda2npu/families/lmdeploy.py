"""lmdeploy's engine on Ascend (NPU935).

lmdeploy runs on Ascend only through its PyTorch engine with the device named:
``pipeline(model, backend_config=PytorchEngineConfig(device_type="ascend"))``. Without a
``backend_config``, ``pipeline`` / ``serve`` pick TurboMind, lmdeploy's CUDA engine, whose compiled
``_turbomind`` an NPU host does not have, and fall back to a ``PytorchEngineConfig()``, whose
``device_type`` is ``"cuda"``. So an engine built without a config, or with a
``PytorchEngineConfig`` that names no device, is marked for review (the model must also be in
lmdeploy's list for other platforms), and ``device_type="cuda"`` becomes ``"ascend"`` (lmdeploy's
name of the device, not torch's ``"npu"``; portable output: ``"ascend"`` on an NPU host only). A
``TurbomindEngineConfig`` is the CUDA-only table's (NPU606); the launch scripts' ``lmdeploy serve
api_server`` is cuda2npu/filekinds/shell_programs.py's.
Code that names the Ascend device already (a file with an ``"ascend"`` string, a branch testing an
``ascend`` or NPU word) is left alone. Facts: docs/reference/kernel_libraries.md, "lmdeploy TurboMind".
"""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.analysis import portable
from cuda2npu.analysis.npu_aware import in_npu_branch
from cuda2npu.core.arguments import has_star, positional_count
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import string_value
from cuda2npu.core.nodes import code_of
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes

# the engine builders and the positional arguments that cannot be the config in any release
# (pipeline's second one was `model_name` before lmdeploy 0.6.0; serve's config is its fourth)
ENGINE_BUILDERS = {"lmdeploy.pipeline": 1, "lmdeploy.api.pipeline": 1, "lmdeploy.serve": 3, "lmdeploy.api.serve": 3}
PYTORCH_CONFIGS = frozenset({"lmdeploy.PytorchEngineConfig", "lmdeploy.messages.PytorchEngineConfig"})
ASCEND_STRING = re.compile(rb"""(["'])ascend\1""")
# a test naming Ascend: `if is_ascend:`, `if args.use_ascend:`, `if ASCEND_DEVICE:`
ASCEND_WORD = re.compile(r"(?<![A-Za-z0-9])ascend(?![a-z])", re.IGNORECASE)
CHECK_MODEL = (
    "(lmdeploy >= 0.6.0 with dlinfer-ascend) and check the model is in lmdeploy's supported list for other platforms"
)
NO_CONFIG_NOTE = (
    "without a `backend_config` runs lmdeploy's default engine, TurboMind, whose compiled CUDA library "
    "(`_turbomind`) an NPU host does not have; lmdeploy then falls back to a `PytorchEngineConfig()`, whose "
    '`device_type` is "cuda": on Ascend pass `backend_config=PytorchEngineConfig(device_type="ascend", ...)` '
    f"{CHECK_MODEL}"
)
NO_DEVICE_NOTE = (
    '`PytorchEngineConfig(...)` without `device_type` runs lmdeploy\'s PyTorch engine on "cuda" (its default): '
    f'on Ascend pass `device_type="ascend"` {CHECK_MODEL}'
)
CUDA_DEVICE_NOTE = (
    '`PytorchEngineConfig(device_type="cuda")` → "ascend", lmdeploy\'s name of the Ascend device (not torch\'s '
    '"npu", which its config refuses; lmdeploy >= 0.6.0 with dlinfer-ascend); check the model is in lmdeploy\'s '
    "supported list for other platforms"
)


@register
class LmdeployEngine(Rule):
    """NPU935: an lmdeploy engine that runs on CUDA: built without a config, or with a PyTorch engine
    config naming no device or ``"cuda"``."""

    codes = ("NPU935",)
    triggers = (r"\blmdeploy\b",)
    portable_support = True  # `"ascend" if portable_device.device_type() == "npu" else "cuda"`

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.names_ascend = _names_ascend(ctx)

    def visit_Call(self, node: cst.Call) -> None:
        if self.names_ascend or has_star(node):
            return
        qualified = self.resolver.qualified_name(node.func) or ""
        if qualified in ENGINE_BUILDERS:
            self._engine_builder(node, qualified)
        elif qualified in PYTORCH_CONFIGS:
            self._pytorch_config(node)

    def _engine_builder(self, node: cst.Call, qualified: str) -> None:
        """A ``pipeline(...)`` / ``serve(...)`` given no engine config (or ``backend_config=None``)."""
        config = next(
            (a.value for a in node.args if a.keyword is not None and a.keyword.value == "backend_config"), None
        )
        if positional_count(node) > ENGINE_BUILDERS[qualified] or not _none(config) or self._knows_npu(node):
            return
        name = qualified.rpartition(".")[2]
        self.report("NPU935", node, f"`lmdeploy.{name}(...)` {NO_CONFIG_NOTE}", needs_torch_npu=False)

    def _pytorch_config(self, node: cst.Call) -> None:
        """A ``PytorchEngineConfig(...)`` naming no device (review) or ``"cuda"`` (→ ``"ascend"``)."""
        device = next((a for a in node.args if a.keyword is not None and a.keyword.value == "device_type"), None)
        if (device is not None and string_value(device.value) != "cuda") or self._knows_npu(node):
            return  # another device, or one read from a variable
        if device is None:
            self.report("NPU935", node, NO_DEVICE_NOTE, needs_torch_npu=False)
            return
        quote = device.value.quote if isinstance(device.value, cst.SimpleString) else '"'
        value, message = f"{quote}ascend{quote}", CUDA_DEVICE_NOTE
        if self.options.portable:  # "cuda" kept for CUDA hosts
            value = f"{value} if {portable.on_npu_host()} else {quote}cuda{quote}"
            portable.need(self, Tier.EXACT, value)
            message = f"{message}; portable: `{value}`"
        self.report(
            "NPU935",
            device,
            message,
            # on the argument, after the device rules' rewrite of its "cuda" string (NPU104: "npu", which
            # lmdeploy refuses)
            fix=lambda updated: updated.with_changes(value=cst.parse_expression(value)),
            tier=Tier.EXACT,
            needs_torch_npu=False,
        )

    def leave_Module(self, original_node: cst.Module) -> None:
        portable.report_support(self, "NPU935")

    def _knows_npu(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` is code written knowing the NPU: in an NPU branch (:func:`in_npu_branch`),
        or in an ``if`` / ``a if c else b`` whose test names Ascend (``if on_ascend:``)."""
        if in_npu_branch(self.ctx, node):
            return True
        parents = TreeIndex.of(self.ctx).parents
        child, parent = node, parents.get(node)
        while parent is not None:
            if isinstance(parent, (cst.If, cst.IfExp)) and child is not parent.test:
                if ASCEND_WORD.search(code_of(parent.test)):
                    return True
            child, parent = parent, parents.get(parent)
        return False


def _names_ascend(ctx) -> bool:
    """Whether the module holds an ``"ascend"`` string (``device_type="ascend"``, a ``--device``
    choice): code written for lmdeploy's Ascend device already (the text searched first)."""
    text = ctx.source
    if ASCEND_STRING.search(text) is None:
        return False
    return any(string_value(node) == "ascend" for node in iter_nodes(ctx.module, cst.SimpleString))


def _none(config: cst.BaseExpression | None) -> bool:
    """No engine config: the argument is absent or ``None``."""
    return config is None or (isinstance(config, cst.Name) and config.value == "None")
