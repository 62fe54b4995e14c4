"""CUDA and NCCL environment variable names (NPU202, NPU203).

A string literal that is exactly a known variable name is unambiguous, so it is rewritten wherever
it appears (``os.environ[...]``, ``os.getenv``, ``env={...}`` dicts), except on the CUDA side of
code that already handles the NPU (``npu_aware``). Mapping data: ``rules/tables/env_vars.toml``.

Portable output (``--portable``) keeps the CUDA name, which CUDA hosts need, and reports the
Ascend one to set or read as well (tier review): which one applies is not known before torch
starts, when such variables are usually set.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.catalogue import table
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import rename_fix, string_value
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.families.npu_aware import is_cuda_alternative


@register
class EnvironmentVariables(Rule):
    codes = ("NPU202", "NPU203")
    triggers = (r"CUDA_\w+", r"NCCL_\w+", r"PYTORCH_\w*CUDA")
    portable_support = True

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        name = string_value(node)
        if name is None or not ("CUDA" in name or "NCCL" in name) or is_cuda_alternative(self.ctx, node):
            return
        env = table("env_vars")
        if self.options.portable and (name in env["cuda"] or name in env["nccl"]):
            code, new = ("NPU202", env["cuda"][name]) if name in env["cuda"] else ("NPU203", env["nccl"][name])
            self.report(
                code,
                node,
                f"`{name}` kept for CUDA hosts (portable output); on Ascend hosts the variable is "
                f"`{new}`: set or read it as well",
                tier=Tier.REVIEW,
                needs_torch_npu=False,
            )
        elif name in env["cuda"]:
            new = env["cuda"][name]
            self.report("NPU202", node, f"`{name}` → `{new}`", rename_fix(name, new), needs_torch_npu=False)
        elif name in env["nccl"]:
            new = env["nccl"][name]
            self.report(
                "NPU203",
                node,
                f"`{name}` → `{new}` (closest HCCL analog; no official mapping table exists)",
                rename_fix(name, new),
                needs_torch_npu=False,
            )
        elif name in env["nccl_manual"]:
            self.report("NPU203", node, f"`{name}`: {env['nccl_manual'][name]}", tier=Tier.MANUAL)
