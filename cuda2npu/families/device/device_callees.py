"""The callables of a file whose parameters are devices: its own functions and classes (a call's
argument fills one of their parameters), the project's imported here with a parameter named like a
device (``ProjectFacts.device_parameters``), and the plain names the file binds one of them to.
Each is a fact of the file, computed once (``RuleContext.file_state``)."""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.analysis.device_parameters import by_callable
from cuda2npu.core.bindings import single_value
from cuda2npu.core.imports import bound_name
from cuda2npu.core.names import dotted_name
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes

ALIAS_ASSIGNMENT = re.compile(r"^[ \t]*(\w+)[ \t]*=[ \t]*(\w+)[ \t]*(?:#[^\n]*)?$", re.M)  # `stream = generate_stream`


def own_callee(ctx, func: cst.BaseExpression) -> tuple[cst.FunctionDef, int] | None:
    """The file's own function a call calls, with the index of the parameter its first positional
    argument fills: ``helper(...)``; ``Class(...)``: its ``__init__`` (1, LatentSync's
    ``VideoProcessor(256, "cuda")``); ``self.method(...)``/``cls.method(...)`` in the method's
    module-level class (1, 0 for a staticmethod); ``Class.method(...)`` (0, 1 for a classmethod)."""
    functions = ctx.file_state(own_functions)
    if isinstance(func, cst.Name):
        function = functions.get(("", func.value))
        if function is None:
            function = functions.get((func.value, "__init__"))
            return (function, 1) if function is not None else None
        return function, 0
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
        return None
    owner = func.value.value
    through_instance = owner in ("self", "cls")
    if through_instance:
        enclosing = TreeIndex.of(ctx).enclosing_class(ctx.statement)
        if enclosing is None or enclosing not in ctx.module.body:
            return None
        owner = enclosing.name.value
    function = functions.get((owner, func.attr.value))
    if function is None or not owner:
        return None
    decorators = {dotted_name(d.decorator) for d in function.decorators}
    bound = "classmethod" in decorators or (through_instance and "staticmethod" not in decorators)
    return function, int(bound)


def imported_device_callables(ctx) -> dict[str, tuple[tuple[int, str], ...]]:
    """The project's callables with a parameter named like a device (``ProjectFacts.device_parameters``)
    that this file imports: name → ((position, parameter), ...)."""
    return ctx.file_state(_imported_device_callables)


def module_device_callable(ctx, func: cst.BaseExpression) -> tuple[tuple[int, str], ...] | None:
    """The device parameters of the project's function a call reaches through a module of the project
    (SpinQuant's ``gptq_utils.rtn_fwrd(model, "cuda", args)`` after ``from eval_utils import
    gptq_utils``, round 33): the call's qualified name starts with a top-level package of the project
    and ends in the name of a function of :func:`imported_device_callables`' table; None otherwise."""
    if not isinstance(func, cst.Attribute):
        return None
    qualified = ctx.resolver.qualified_name(func) or ""
    if qualified.partition(".")[0] not in ctx.options.project.top_packages:
        return None
    return by_callable(ctx.options.project.device_parameters).get(func.attr.value)


def unaliased(ctx, func: cst.BaseExpression) -> cst.BaseExpression:
    """The project's callable a plain name bound once, in its function or the module, stands for
    (ToolBench's ``generate_stream_func = generate_stream`` … ``generate_stream_func(model,
    tokenizer, params, "cuda")``): that callable's name, else ``func``."""
    if not isinstance(func, cst.Name) or func.value not in ctx.file_state(_callable_aliases):
        return func
    scope = TreeIndex.of(ctx).function.get(ctx.statement) if ctx.statement is not None else None
    value = single_value(ctx.module, scope or ctx.module, func.value)
    return value if isinstance(value, cst.Name) and value.value in ctx.file_state(_aliasable) else func


def own_functions(ctx) -> dict[tuple[str, str], cst.FunctionDef]:
    """The file's functions defined once at module level, by ``("", name)``, and the methods defined
    once in its module-level classes, by ``(class, name)``."""
    defined: dict[tuple[str, str], list[cst.FunctionDef]] = {}
    for statement in ctx.module.body:
        members = statement.body.body if isinstance(statement, cst.ClassDef) else [statement]
        owner = statement.name.value if isinstance(statement, cst.ClassDef) else ""
        for member in members:
            if isinstance(member, cst.FunctionDef):
                defined.setdefault((owner, member.name.value), []).append(member)
    return {key: functions[0] for key, functions in defined.items() if len(functions) == 1}


def _imported_device_callables(ctx) -> dict[str, tuple[tuple[int, str], ...]]:
    wanted = by_callable(ctx.options.project.device_parameters)
    module = ctx.resolver.module_scope
    # a classmethod's entry is "Class.method": the file imports its class
    imported = {
        name for name in wanted if (head := name.partition(".")[0]) in module.imports and head not in module.others
    }
    local = _relatively_imported(ctx) | _imported_in_functions(ctx)
    imported |= {name for name in wanted if name.partition(".")[0] in local}
    return {name: wanted[name] for name in imported}


def _imported_in_functions(ctx) -> frozenset[str]:
    """The names ``from ... import`` statements in functions bind, where the module binds none of
    them (FlexLLMGen's ``ExecutionEnv.create``: ``from flexllmgen.pytorch_backend import TorchDevice``
    in the method, against a circular import)."""
    index = TreeIndex.of(ctx)
    module = ctx.resolver.module_scope
    return frozenset(
        bound_name(alias, statement)
        for statement in iter_nodes(ctx.module, cst.ImportFrom)
        if not isinstance(statement.names, cst.ImportStar) and index.function.get(index.statement_of(statement))
        for alias in statement.names
        if bound_name(alias, statement) not in module.imports and bound_name(alias, statement) not in module.others
    )


def _relatively_imported(ctx) -> frozenset[str]:
    """The names the file's module-level relative imports bind (``from .utils import
    generate_stream``): the project's own, which the resolver records as local bindings."""
    return frozenset(
        bound_name(alias, statement)
        for line in ctx.module.body
        if isinstance(line, cst.SimpleStatementLine)
        for statement in line.body
        if isinstance(statement, cst.ImportFrom)
        and statement.relative
        and not isinstance(statement.names, cst.ImportStar)
        for alias in statement.names
    )


def _aliasable(ctx) -> frozenset[str]:
    """The names of the callables whose device parameters calls follow: the file's module-level
    functions and classes, and the project's imported here."""
    own = {
        name if not owner else owner for owner, name in ctx.file_state(own_functions) if not owner or name == "__init__"
    }
    return frozenset(own | imported_device_callables(ctx).keys())


def _callable_aliases(ctx) -> frozenset[str]:
    """The names the file assigns one of :func:`_aliasable` to (``stream = generate_stream``), from
    its text (:data:`ALIAS_ASSIGNMENT`); :func:`unaliased` checks the binding in the tree."""
    aliasable = ctx.file_state(_aliasable)
    return frozenset(
        alias for alias, value in ALIAS_ASSIGNMENT.findall(ctx.code) if value in aliasable and alias != value
    )
