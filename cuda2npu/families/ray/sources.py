"""Where the dicts of a Ray request come from, followed in the function (or module) using them.

- A dict passed as ``**options`` (``options = {...}; options["num_gpus"] = n; Cls.options(**options)``,
  verl's worker launch): its ``"num_gpus"`` items, and whether every write to it is seen (an
  ``options.update(...)``, a key not spelled out or a value not displayed leave its content open).
- The bundles of a placement group: a list display, ``[...] * n``, a comprehension, a name bound to
  one (also as the target of an enclosing comprehension, ``for i, bundles in enumerate(scheme)``),
  items that are dict displays, ``a if c else b`` of them, or the result of a local function
  returning one (``[_bundle()] * n``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from cuda2npu.analysis.hf_sources import subscript_key
from cuda2npu.core.bindings import assigned_values
from cuda2npu.core.literals import string_value
from cuda2npu.core.names import target_names
from cuda2npu.core.nodes import code_of
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes
from cuda2npu.families.ray.common import literal_dict

COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
MUTATORS = ("update", "setdefault", "__setitem__", "__ior__")
DEPTH = 8  # how many names, comprehensions and local functions are followed for one value


@dataclass
class GpuItem:
    """A ``"num_gpus"`` item of a spread dict: ``node`` is the ``options["num_gpus"] = n`` assignment
    or the dict display holding the entry; ``value`` is ``n``."""

    node: cst.CSTNode
    value: cst.BaseExpression


@dataclass
class SpreadDict:
    gpus: list[GpuItem] = field(default_factory=list)
    open: str | None = None  # why any key may be set (``options.update(extra)`` may set it); None: all seen
    resources: list[cst.CSTNode] = field(default_factory=list)  # where a "resources" key is written


def scope_of(ctx, node: cst.CSTNode) -> cst.CSTNode:
    """The function (or the module) ``node`` is in."""
    parents = TreeIndex.of(ctx).parents
    scope = parents.get(node)
    while scope is not None and not isinstance(scope, (cst.FunctionDef, cst.Module)):
        scope = parents.get(scope)
    return scope if scope is not None else ctx.module


def spread_dict(ctx, name: cst.Name) -> SpreadDict:
    """What is written to the dict ``name`` (passed as ``**name``) in its function."""
    scope = scope_of(ctx, name)
    found = SpreadDict()
    if isinstance(scope, cst.FunctionDef) and any(
        p.name.value == name.value for p in iter_nodes(scope.params, cst.Param)
    ):
        found.open = f"`{name.value}` is a parameter, filled by the caller"
    values = assigned_values(scope, name.value)
    if values is None:
        found.open = f"`{name.value}` is bound otherwise too"
    for value in values or ():
        mapping = literal_dict(value)
        if mapping is None:
            found.open = f"`{name.value} = {code_of(value)}` may set it"
            continue
        for element in mapping.elements:
            key = string_value(element.key)
            if key == "num_gpus":
                found.gpus.append(GpuItem(mapping, element.value))
            elif key == "resources":
                found.resources.append(mapping)
    for assign in iter_nodes(scope, cst.Assign):
        for target in assign.targets:
            sub = target.target
            if not (
                isinstance(sub, cst.Subscript) and isinstance(sub.value, cst.Name) and sub.value.value == name.value
            ):
                continue
            key = subscript_key(sub)
            if key is None:
                found.open = f"`{code_of(sub)} = ...` may set it"
            elif key == "num_gpus":
                found.gpus.append(GpuItem(assign, assign.value))
            elif key == "resources":
                found.resources.append(assign)
    for call in iter_nodes(scope, cst.Call):
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == name.value:
            if func.attr.value in MUTATORS:
                found.open = f"`{name.value}.{func.attr.value}(...)` may set it"
    return found


def bundle_dicts(ctx, bundles: cst.BaseExpression) -> list[cst.Dict] | None:
    """The dict displays the bundle list ``bundles`` is made of (None: one is not seen)."""
    items = _items(ctx, bundles, DEPTH)
    if items is None:
        return None
    found: list[cst.Dict] = []
    for item in items:
        dicts = dicts_of(ctx, item)
        if dicts is None:
            return None
        found += dicts
    return found


def dicts_of(ctx, value: cst.BaseExpression, depth: int = DEPTH) -> list[cst.Dict] | None:
    """The dict displays ``value`` may be (None: it may be something not seen)."""
    if depth <= 0:
        return None
    mapping = literal_dict(value)
    if mapping is not None:
        return [mapping]
    if isinstance(value, cst.IfExp):
        return _joined([dicts_of(ctx, side, depth - 1) for side in (value.body, value.orelse)])
    if isinstance(value, cst.Name):
        sources = _name_values(ctx, value, depth - 1)
        return None if sources is None else _joined([dicts_of(ctx, s, depth - 1) for s in sources])
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
        returned = _returned(ctx, value.func)
        return None if returned is None else _joined([dicts_of(ctx, r, depth - 1) for r in returned])
    return None


def _items(ctx, value: cst.BaseExpression, depth: int) -> list[cst.BaseExpression] | None:
    """The item expressions of the list ``value`` (``[a, b]``, ``[a] * n``, ``[a for ...]``, a name
    bound to one)."""
    if depth <= 0:
        return None
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
        return _items(ctx, value.left, depth - 1) or _items(ctx, value.right, depth - 1)
    if isinstance(value, (cst.List, cst.Tuple)):
        if any(isinstance(e, cst.StarredElement) for e in value.elements):
            return None
        return [e.value for e in value.elements]
    if isinstance(value, (cst.ListComp, cst.GeneratorExp)):
        return [value.elt]
    if isinstance(value, cst.Name):
        sources = _name_values(ctx, value, depth - 1)
        if sources is None:
            return None
        lists = [_items(ctx, source, depth - 1) for source in sources]
        return None if any(items is None for items in lists) else [i for items in lists for i in items]
    return None


def _name_values(ctx, name: cst.Name, depth: int) -> list[cst.BaseExpression] | None:
    """The values ``name`` takes where it is used: the items of what an enclosing comprehension
    iterates (``for b in x``, ``for i, b in enumerate(x)``), else the values assigned to it in its
    function (or module)."""
    parents = TreeIndex.of(ctx).parents
    node = parents.get(name)
    while node is not None and not isinstance(node, (cst.FunctionDef, cst.Module)):
        if isinstance(node, COMPREHENSIONS):
            for_in = node.for_in
            while for_in is not None:
                if name.value in target_names(for_in.target):
                    return _iterated(ctx, for_in, name.value, depth)
                for_in = for_in.inner_for_in
        node = parents.get(node)
    scope = scope_of(ctx, name)
    if isinstance(scope, cst.FunctionDef) and any(
        p.name.value == name.value for p in iter_nodes(scope.params, cst.Param)
    ):
        return None
    values = assigned_values(scope, name.value)
    return values or None


def _iterated(ctx, for_in: cst.CompFor, name: str, depth: int) -> list[cst.BaseExpression] | None:
    """The items ``name`` takes as the target of ``for_in``: the whole target, or the second of
    ``i, x`` over ``enumerate(...)``."""
    target, iterated = for_in.target, for_in.iter
    if isinstance(target, cst.Name):
        return _items(ctx, iterated, depth)
    enumerated = (
        isinstance(target, cst.Tuple)
        and len(target.elements) == 2
        and isinstance(target.elements[1].value, cst.Name)
        and target.elements[1].value.value == name
        and isinstance(iterated, cst.Call)
        and isinstance(iterated.func, cst.Name)
        and iterated.func.value == "enumerate"
        and iterated.args
        and iterated.args[0].keyword is None
        and not iterated.args[0].star
    )
    return _items(ctx, iterated.args[0].value, depth) if enumerated else None


def _returned(ctx, function_name: cst.Name) -> list[cst.BaseExpression] | None:
    """The values a function of this file returns, defined once in the scope of the call
    (``def _bundle(): ...; [_bundle()] * n``) and bound to nothing else."""
    scope = scope_of(ctx, function_name)
    defined = [f for f in iter_nodes(scope, cst.FunctionDef) if f.name.value == function_name.value]
    if len(defined) != 1 or assigned_values(scope, function_name.value) != []:
        return None
    function = defined[0]
    returns = [r for r in iter_nodes(function.body, cst.Return) if scope_of(ctx, r) is function]
    if not returns or any(r.value is None for r in returns):
        return None
    return [r.value for r in returns]


def _joined(lists: list[list[cst.Dict] | None]) -> list[cst.Dict] | None:
    return None if any(found is None for found in lists) else [d for found in lists for d in found]
