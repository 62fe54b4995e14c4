"""What a plain name is bound to in a scope, read from the tree: the values a rule may follow when
an argument is a name (``bias = torch.zeros(...)``; ``data = Data(x)``; ``bundles = [{...}]``)."""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.names import dotted_name, target_names
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes, walk

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


def self_assignments(ctx) -> dict[str, list[tuple[cst.FunctionDef, cst.BaseExpression]]]:
    """``self.<attr>`` → (method, value) of each ``self.<attr> = value`` in the file's functions,
    built once per file (the attributes whose values rules follow: a kernel held in
    ``self.norm_fn``, an engine in ``self.decoder``)."""
    return ctx.file_state(_self_assignments)


def _self_assignments(ctx) -> dict[str, list[tuple[cst.FunctionDef, cst.BaseExpression]]]:
    found: dict[str, list[tuple[cst.FunctionDef, cst.BaseExpression]]] = {}
    for function in TreeIndex.of(ctx).functions:
        for assign in iter_nodes(function.body, cst.Assign):
            for target in assign.targets:
                if isinstance(target.target, cst.Attribute) and dotted_name(target.target.value) == "self":
                    found.setdefault(target.target.attr.value, []).append((function, assign.value))
    return found


class _Bound(cst.CSTVisitor):
    """Names bound in a function body (parameters too), outside nested functions and classes."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()
        self._depth = 0

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        if self._depth:
            self.names.add(node.name.value)
            return False
        self._depth += 1
        return True

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.names.add(node.name.value)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Param(self, node: cst.Param) -> None:
        self.names.add(node.name.value)

    def _target(self, node) -> None:
        if isinstance(node, cst.Name):
            self.names.add(node.value)
        elif isinstance(node, (cst.Tuple, cst.List)):
            for element in node.elements:
                self._target(element.value)
        elif isinstance(node, cst.StarredElement):
            self._target(node.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._target(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._target(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._target(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._target(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._target(node.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._target(node.target)

    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        name = node.asname.name if node.asname else node.name
        first = dotted_name(name)
        if first:
            self.names.add(first.split(".")[0])


def function_locals(function: cst.FunctionDef) -> set[str]:
    """The names ``function`` binds (parameters, assignments, loops, ``as`` names, imports, nested
    definitions): what another function cannot see."""
    bound = _Bound()
    walk(function, bound)
    return bound.names
