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


NULLCONTEXT = "contextlib.nullcontext"  # takes one positional argument too: `nullcontext("cuda")` runs


IMPORT_FALLBACK = {"torch.amp.autocast", "torch.cuda.amp.autocast"}  # `try: from torch.amp import autocast`...


def autocast_alias(ctx, func: cst.BaseExpression, or_nullcontext: bool = False) -> str | None:
    """The autocast a call reaches through a plain name bound once, in its function (or the module),
    to it (generative-models: ``from torch import autocast`` … ``precision_scope = autocast`` …
    ``with precision_scope("cuda"):``): its qualified name (``AUTOCAST``), else None. ``or_nullcontext``:
    also a name bound to ``autocast if ... else nullcontext`` (stablediffusion's ``img2img.py``, round
    39), which takes the device string too, but no ``dtype=``. Also a name imported from ``torch.amp``
    with a fallback to ``torch.cuda.amp`` for an older torch (InspireMusic's ``try: from torch.amp import
    autocast`` / ``except ImportError: from torch.cuda.amp import autocast``, round 58): every torch a
    torch_npu runs on has ``torch.amp.autocast``, so that is what it is."""
    if isinstance(func, cst.Name) and ctx.resolver.qualified_names(func) == IMPORT_FALLBACK:
        return "torch.amp.autocast"
    if not isinstance(func, cst.Name) or func.value not in ctx.file_state(_autocast_aliases):
        return None
    scope = TreeIndex.of(ctx).function.get(ctx.statement) if ctx.statement is not None else None
    value = single_value(ctx.module, scope or ctx.module, func.value)
    if isinstance(value, cst.IfExp):
        if not or_nullcontext:
            return None
        arms = {ctx.resolver.qualified_name(arm) for arm in (value.body, value.orelse)}
        return next((name for name in arms if name in AUTOCAST), None) if NULLCONTEXT in arms else None
    qualified = ctx.resolver.qualified_name(value) if isinstance(value, (cst.Name, cst.Attribute)) else None
    return qualified if qualified in AUTOCAST else None


def _autocast_aliases(ctx) -> frozenset[str]:
    """The names the file assigns an autocast to (``scope = autocast``, ``autocast if ... else
    nullcontext``), by its module-level imports."""
    if ctx.text is not None and b"autocast" not in ctx.text:
        return frozenset()
    module = ctx.resolver.module_scope
    return frozenset(
        target.target.value
        for assign in iter_nodes(ctx.module, cst.Assign)
        if any(
            module_qualified(module, value) in AUTOCAST
            for value in (
                (assign.value.body, assign.value.orelse) if isinstance(assign.value, cst.IfExp) else (assign.value,)
            )
        )
        for target in assign.targets
        if isinstance(target.target, cst.Name)
    )


def never_entered(ctx, call: cst.Call) -> bool:
    """Whether the autocast ``call`` is the left operand of an ``and``, whose truth alone is read: an autocast
    object is true, so ``with autocast() and torch.no_grad():`` enters the ``no_grad`` context only
    (stable-audio-tools, round 54); the autocast is built and never entered, on CUDA as on the NPU, and is
    left as written."""
    parent = TreeIndex.of(ctx).parents.get(call)
    return isinstance(parent, cst.BooleanOperation) and isinstance(parent.operator, cst.And) and parent.left is call
