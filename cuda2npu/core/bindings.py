"""What a plain name is bound to in a scope, read from the tree: the values a rule may follow when
an argument is a name (``bias = torch.zeros(...)``; ``data = Data(x)``; ``bundles = [{...}]``)."""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.names import target_names
from cuda2npu.core.traversal import iter_nodes

OTHER_BINDINGS = (cst.AugAssign, cst.For, cst.AsName, cst.NamedExpr, cst.CompFor)


def assigned_values(scope: cst.CSTNode, name: str) -> list[cst.BaseExpression] | None:
    """The values assigned to ``name`` in ``scope`` (``name = v`` and ``name: T = v``; nested scopes
    included, to stay on the safe side); None when some other statement binds it (augmented, loop,
    unpacking, ``with``/``except``/import ``as``, walrus, comprehension)."""
    values: list[cst.BaseExpression] = []
    for node in iter_nodes(scope, (cst.Assign, cst.AnnAssign, *OTHER_BINDINGS)):
        if isinstance(node, cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Name) and target.target.value == name:
                    values.append(node.value)
                elif name in target_names(target.target):
                    return None
        elif isinstance(node, cst.AnnAssign):
            if isinstance(node.target, cst.Name) and node.target.value == name and node.value is not None:
                values.append(node.value)
        elif name in target_names(node.name if isinstance(node, cst.AsName) else node.target):
            return None
    return values


def single_value(module: cst.Module, scope: cst.CSTNode, name: str) -> cst.BaseExpression | None:
    """The value of the one ``name = value`` binding ``name`` in ``scope`` (a function or the module;
    a function without a binding of it falls back to the module); None where it is bound otherwise."""
    if isinstance(scope, cst.FunctionDef):
        if any(p.name.value == name for p in iter_nodes(scope.params, cst.Param)):
            return None
        values = assigned_values(scope, name)
        if values == []:
            values = assigned_values(module, name)
    else:
        values = assigned_values(module, name)
    return values[0] if values is not None and len(values) == 1 else None
