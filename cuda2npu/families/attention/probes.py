"""Tests asking whether flash-attn is installed (NPU408): ``is_flash_attn_2_available()``,
``importlib.util.find_spec("flash_attn")``, lightning's ``RequirementCache("flash-attn>=2.0")`` and
module-level flags assigned from them. flash-attn cannot be installed on an NPU host, so such a
test is False there and the branch it guards never runs, even once its calls are rewritten."""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.core.literals import string_value
from cuda2npu.core.names import dotted_name, target_names
from cuda2npu.core.traversal import iter_nodes

PACKAGE = re.compile(r"^flash[-_]attn\b", re.IGNORECASE)  # "flash_attn", "flash-attn>=2.0.0.post1"
PROBE_FUNCTION = re.compile(r"is_flash_attn\w*_available")


def probe_flags(module: cst.Module) -> frozenset[str]:
    """Module-level names assigned from a probe (``FlashAttention2Available = RequirementCache(...)``)."""
    flags: set[str] = set()
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None and find_probe(small.value):
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                flags.update(name for target in targets for name in target_names(target))
    return frozenset(flags)


def find_probe(test: cst.BaseExpression, flags: frozenset[str] = frozenset()) -> cst.CSTNode | None:
    """The probe call in ``test``, or the name of one of ``flags`` it reads (None: neither)."""
    for node in iter_nodes(test, (cst.Call, cst.Name)):
        if node.value in flags if isinstance(node, cst.Name) else _is_probe_call(node):
            return node
    return None


def _is_probe_call(call: cst.Call) -> bool:
    name = dotted_name(call.func) or ""
    if PROBE_FUNCTION.fullmatch(name.rsplit(".", 1)[-1]):
        return True
    return any(PACKAGE.match(string_value(arg.value) or "") for arg in call.args)
