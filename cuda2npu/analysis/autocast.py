"""Torch's device-generic autocast and GradScaler, and the names a file binds to its autocast: what the
precision policy and the device renames both need to recognise."""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.bindings import single_value
from cuda2npu.core.names import module_qualified
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes

AUTOCAST = {"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"}
SCALER = {"torch.amp.GradScaler", "torch.GradScaler", "torch.amp.grad_scaler.GradScaler"}  # device-generic


def autocast_alias(ctx, func: cst.BaseExpression) -> str | None:
    """The autocast a call reaches through a plain name bound once, in its function (or the module),
    to it (generative-models: ``from torch import autocast`` … ``precision_scope = autocast`` …
    ``with precision_scope("cuda"):``): its qualified name (``AUTOCAST``), else None."""
    if not isinstance(func, cst.Name) or func.value not in ctx.file_state(_autocast_aliases):
        return None
    scope = TreeIndex.of(ctx).function.get(ctx.statement) if ctx.statement is not None else None
    value = single_value(ctx.module, scope or ctx.module, func.value)
    qualified = ctx.resolver.qualified_name(value) if isinstance(value, (cst.Name, cst.Attribute)) else None
    return qualified if qualified in AUTOCAST else None


def _autocast_aliases(ctx) -> frozenset[str]:
    """The names the file assigns an autocast to (``scope = autocast``), by its module-level imports."""
    if ctx.text is not None and b"autocast" not in ctx.text:
        return frozenset()
    module = ctx.resolver.module_scope
    return frozenset(
        target.target.value
        for assign in iter_nodes(ctx.module, cst.Assign)
        if module_qualified(module, assign.value) in AUTOCAST
        for target in assign.targets
        if isinstance(target.target, cst.Name)
    )
