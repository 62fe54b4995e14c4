"""NCCL → HCCL backend names (NPU201).

``"nccl"`` as a whole string literal only ever names the collective backend, so it is rewritten
wherever it appears (``init_process_group("nccl")``, ``backend="nccl"``, ``dist.get_backend() ==
"nccl"``, argparse defaults); mixed strings ``"cpu:gloo,cuda:nccl"`` too; ``dist.Backend.NCCL``
becomes ``dist.Backend.HCCL`` (registered by torch_npu). Log text containing "nccl" is untouched.
"""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.checkers.literals import string_value
from cuda2npu.diagnostics import Tier
from cuda2npu.rulebase import Rule, register

MIXED_BACKEND = re.compile(r"(?:\w+:\w+,)*cuda:nccl(?:,\w+:\w+)*")


@register
class NcclBackend(Rule):
    codes = ("NPU201",)
    triggers = (r"nccl", r"NCCL\b")

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)
        if value == "nccl":
            fix = lambda n: n.with_changes(value=n.value.replace("nccl", "hccl", 1))  # noqa: E731
        elif value is not None and MIXED_BACKEND.fullmatch(value):
            fix = lambda n: n.with_changes(value=n.value.replace("cuda:nccl", "npu:hccl", 1))  # noqa: E731
        else:
            return
        self.report("NPU201", node, "NCCL does not exist on NPU; the collective backend is \"hccl\"", fix)

    def visit_Call(self, node: cst.Call) -> None:
        if self.resolver.qualified_name(node.func) == "torch.distributed.is_nccl_available":
            self.report(
                "NPU201",
                node,
                "`is_nccl_available()` is False on NPU, so code guarded by it never runs; test "
                "`torch.distributed.is_backend_available(\"hccl\")` (torch >= 2.3) instead",
                tier=Tier.MANUAL,
            )

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "NCCL" and self.resolver.qualified_name(node) == "torch.distributed.Backend.NCCL":
            self.report(
                "NPU201",
                node,
                "`Backend.NCCL` → `Backend.HCCL` (registered by torch_npu)",
                lambda n: n.with_changes(attr=cst.Name("HCCL")),
            )
