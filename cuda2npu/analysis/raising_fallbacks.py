"""``except ImportError`` fallbacks that raise: the flag the handler sets, read later by a test
whose failing branch raises (NPU606).

``try: import fused_weight_gradient_mlp_cuda; AVAILABLE = True`` / ``except ImportError: AVAILABLE
= False``, then ``if gradient_accumulation_fusion and not AVAILABLE: raise RuntimeError(...)`` (or
``assert AVAILABLE``): on an NPU host the import fails, the flag is False and the code raises under
its defaults, so the handler is no fallback. A flag whose False branch runs a torch fallback is one.
NPU606 marks each such raise (its message names the module and the flag), not the import as well.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from cuda2npu.analysis.cuda_only_modules import cuda_module
from cuda2npu.core.feature_words import implies
from cuda2npu.core.imports import bound_name, catches_import_error
from cuda2npu.core.literals import NOT_LITERAL, literal
from cuda2npu.core.names import dotted_name, target_names
from cuda2npu.core.nodes import code_of
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes

MISSING = ("False", "None")  # what a handler sets its flag to


@dataclass(frozen=True)
class Raise:
    """A ``raise`` (or failing ``assert``) reached when ``module`` did not import and its handler
    set ``flag`` to ``missing``."""

    flag: str
    missing: str  # "False" or "None"
    module: str
    node: cst.CSTNode  # the Raise or Assert
    function: str  # where it is: "Linear.__init__" ("" at module level)
    conditions: tuple[str, ...]  # what else must hold: "`gradient_accumulation_fusion` is True (its default)"
    advice: tuple[str, ...]  # "pass `gradient_accumulation_fusion=False` on NPU"

    def message(self) -> str:
        """NPU606's message at the raise."""
        if self.conditions:
            when = f" when {' and '.join(self.conditions)}"
        else:
            when = f" whenever `{self.function}` runs" if self.function else " at import"
        advice = "; ".join(self.advice) or f"port (or migrate) what needs `{self.module}` and drop the check"
        return (
            f"raises on an NPU host{when}: `{self.module}` cannot be imported there, so `{self.flag}` is "
            f"{self.missing}; {advice}"
        )


@dataclass(frozen=True)
class RaisingFallbacks:
    """The file's raising fallbacks: by the body of their ``try`` and by the raising statement."""

    tries: dict[cst.CSTNode, tuple[Raise, ...]]
    raises: dict[cst.CSTNode, Raise]


def raising_fallbacks(ctx) -> RaisingFallbacks:
    """The file's ``try``/``except ImportError`` blocks around a CUDA-only import whose handler sets
    a flag that a later test turns into a ``raise`` (built once per file)."""
    return ctx.file_state(_build)


def _build(ctx) -> RaisingFallbacks:
    tries: dict[cst.CSTNode, tuple[Raise, ...]] = {}
    if ctx.text is not None and not (b"except" in ctx.text and (b"raise" in ctx.text or b"assert" in ctx.text)):
        return RaisingFallbacks(tries, {})
    import_flags = frozenset(  # the flags of every import's fallback (IPEX's `IPEX_INSTALLED` too)
        flag
        for node in iter_nodes(ctx.module, cst.Try)
        for h in node.handlers
        if catches_import_error(h)
        for flag, _ in missing_flags(h)
    )
    for node in iter_nodes(ctx.module, cst.Try):
        flags = [flag for h in node.handlers if catches_import_error(h) for flag in missing_flags(h)]
        module = cuda_only_import(ctx, node.body) if flags else None
        if module is None:
            continue
        index = TreeIndex.of(ctx)
        scope = index.function.get(node) or ctx.module
        found = [
            _describe(index, module, flag, missing, site, import_flags)
            for flag, missing in flags
            for site in _raising_tests(scope, flag, node)
        ]
        if found:
            tries[node.body] = tuple(found)
    return RaisingFallbacks(tries, {r.node: r for sites in tries.values() for r in sites})


def failed_import_flags(ctx) -> frozenset[str]:
    """Names that are False or None on an NPU host because a CUDA-only import in a ``try`` fails
    there: those its ``except ImportError`` handler sets so (``try: import flash_attn_interface as
    fa3`` / ``except ImportError: fa3 = None``, ``HAVE_FA3 = False``) and :func:`failed_import_names`."""
    return ctx.file_state(_failed_imports)[0]


def failed_import_names(ctx) -> frozenset[str]:
    """The names of :func:`failed_import_flags` that the failing import itself binds: the handler sets
    them False or None (``except ImportError: fa3 = None``), or a statement before the ``try`` did and
    the handler leaves them (``flash_attn_func = None`` / ``try: from flash_attn import
    flash_attn_func`` / ``except ImportError: pass``). Unlike a flag of its own (``HAVE_FA3 = True``
    after the import), a test of them keeps the import while the migration rewrites what it guards."""
    return ctx.file_state(_failed_imports)[1]


def _failed_imports(ctx) -> tuple[frozenset[str], frozenset[str]]:
    if ctx.text is not None and b"except" not in ctx.text:  # `except Exception:` catches a failed import too
        return frozenset(), frozenset()
    flags: set[str] = set()
    names: set[str] = set()
    for node in iter_nodes(ctx.module, cst.Try):
        handlers = [h for h in node.handlers if catches_import_error(h)]
        if not handlers:
            continue
        imported = _cuda_only_names(ctx, node.body)
        set_missing = {flag for h in handlers for flag, _ in missing_flags(h)}
        if set_missing and cuda_only_import(ctx, node.body) is not None:
            flags |= set_missing
        if imported:
            rebound = {n.value for h in handlers for n in iter_nodes(h.body, cst.Name)}
            names |= (set_missing & imported) | ((_preset(ctx, node) & imported) - rebound)
    return frozenset(flags | names), frozenset(names)


def none_on_npu_names(ctx) -> frozenset[str]:
    """The module-level names the file sets to None and binds otherwise only in a function declaring
    them ``global``, inside a ``try`` importing what cannot be imported on an NPU host whose handler
    catches the failure: Qwen's ``apply_rotary_emb_func = None`` / ``rms_norm = None``, set from
    flash-attn in ``_import_flash_attn()`` (Vary's copy drops that function: None for good, round 43).
    On an NPU host they stay None."""
    return ctx.file_state(_none_on_npu)


def _none_on_npu(ctx) -> frozenset[str]:
    if ctx.text is not None and b"= None" not in ctx.text:
        return frozenset()
    preset = {
        target.target.value
        for statement in ctx.module.body
        if _sets_none(statement)
        for small in statement.body
        for target in small.targets
        if isinstance(target.target, cst.Name)
    }
    if not preset:
        return frozenset()
    index = TreeIndex.of(ctx)
    binders = (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.FunctionDef, cst.ClassDef, cst.ImportAlias)
    for node in iter_nodes(ctx.module, binders):
        bound = _bound(node)
        if not bound & preset:
            continue
        statement = index.statement_of(node)
        if statement in ctx.module.body and isinstance(node, cst.AssignTarget) and _sets_none(statement):
            continue  # the preset itself
        if not _set_from_failed_import(ctx, statement):
            preset -= bound
    return frozenset(preset)


def _bound(node: cst.CSTNode) -> set[str]:
    """The plain names a binding node binds."""
    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        return {node.name.value}
    if isinstance(node, cst.ImportAlias):
        name = node.asname.name if node.asname else node.name
        return {dotted_name(name) or ""}
    return set(target_names(node.target))


def _sets_none(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(small, cst.Assign) and isinstance(small.value, cst.Name) and small.value.value == "None"
        for small in statement.body
    )


def _set_from_failed_import(ctx, statement: cst.CSTNode | None) -> bool:
    """``statement`` lies in the body of a ``try`` importing a module that cannot be imported on an NPU
    host and whose handler catches the failure (then it never runs there)."""
    index = TreeIndex.of(ctx)
    return statement is not None and any(
        isinstance(owner, cst.Try)
        and role == "body"
        and any(catches_import_error(h) for h in owner.handlers)
        and cuda_only_import(ctx, owner.body) is not None
        for owner, role in index.enclosing(statement)
    )


def _cuda_only_names(ctx, body: cst.BaseSuite) -> set[str]:
    """The names ``body``'s imports of modules that cannot be imported on an NPU host bind."""
    return {
        bound_name(alias, node)
        for node in iter_nodes(body, (cst.Import, cst.ImportFrom))
        if not isinstance(node.names, cst.ImportStar) and _cuda_only_module(ctx, node) is not None
        for alias in node.names
    }


def _preset(ctx, node: cst.Try) -> set[str]:
    """The names a statement before ``node`` in its block sets to False or None."""
    placement = TreeIndex.of(ctx).placement.get(node)
    if placement is None:
        return set()
    return {name for line in placement.block.body[: placement.index] for name, _ in _set_missing(line)}


def requires_flag(test: cst.BaseExpression, *flags: str) -> bool:
    """Whether ``test`` is true only when one of ``flags`` is (``flag``, ``flag is not None``, ``x and
    flag``, ``self.flag``; ``a or b`` when both sides are): a flag is a dotted name."""
    return implies(test, True, lambda leaf: _flag_sign(leaf, flags))


def lacks_flag(test: cst.BaseExpression, *flags: str) -> bool:
    """Whether ``test`` is false only when one of ``flags`` is set (``flag is None``, ``not flag``): its
    ``else`` needs the flag."""
    return implies(test, False, lambda leaf: _flag_sign(leaf, flags))


def _flag_sign(leaf: cst.BaseExpression, flags: tuple[str, ...]) -> bool | None:
    """True where ``leaf`` being true means one of ``flags`` is set, False where its being false does."""
    name = dotted_name(leaf.left if isinstance(leaf, cst.Comparison) else leaf)
    found = signs(leaf, name) if name in flags else set()
    return next(iter(found)) if len(found) == 1 else None


def cuda_only_import(ctx, body: cst.BaseSuite) -> str | None:
    """The first module imported in ``body`` that cannot be imported on an NPU host."""
    return next(
        (found for node in iter_nodes(body, (cst.Import, cst.ImportFrom)) if (found := _cuda_only_module(ctx, node))),
        None,
    )


def _cuda_only_module(ctx, node: cst.Import | cst.ImportFrom) -> str | None:
    """The first module the import ``node`` names that cannot be imported on an NPU host."""
    options = ctx.options
    if isinstance(node, cst.Import):
        candidates = [dotted_name(a.name) or "" for a in node.names]
    elif node.module is None or node.relative:
        return None
    else:
        module = dotted_name(node.module) or ""
        names = [] if isinstance(node.names, cst.ImportStar) else [dotted_name(a.name) for a in node.names]
        candidates = [module, *(f"{module}.{n}" for n in names)]
    for candidate in candidates:
        found = cuda_module(candidate, options.project.cuda_extensions, options.file.local_modules)
        if found is not None and found[0] == "imports":
            return candidate
    return None


def missing_flags(handler: cst.ExceptHandler) -> list[tuple[str, str]]:
    """(name, "False" or "None") for each name the handler sets to False or None (``HAVE_X = False``), also
    under an ``if`` of the handler (Otter's ``if dist.get_rank() == 0: ... XFORMERS_AVAIL = False``, round
    38: the name is never set True where the import fails)."""
    return [flag for line in _handler_lines(handler.body.body) for flag in _set_missing(line)]


def _handler_lines(body) -> list[cst.CSTNode]:
    """The statement lines of ``body`` and of the ``if`` blocks in it."""
    lines = []
    for line in body:
        lines.append(line)
        branch = line
        while isinstance(branch, (cst.If, cst.Else)):  # `if`, its `elif`s and its `else`
            lines.extend(_handler_lines(branch.body.body))
            branch = branch.orelse if isinstance(branch, cst.If) else None
    return lines


def _set_missing(line: cst.CSTNode) -> list[tuple[str, str]]:
    """(name, "False" or "None") for each name the statement line sets to False or None."""
    flags = []
    for small in line.body if isinstance(line, cst.SimpleStatementLine) else ():
        if (
            isinstance(small, cst.Assign)
            and isinstance(small.value, cst.Name)
            and small.value.value in MISSING
            and all(isinstance(t.target, cst.Name) for t in small.targets)
        ):
            flags.extend((t.target.value, small.value.value) for t in small.targets)
    return flags


def _raising_tests(scope: cst.CSTNode, flag: str, guard: cst.Try):
    """The ``raise``/``assert`` statements of ``scope`` that raise when ``flag`` is False: ``if not
    flag: raise``, ``if flag: ... else: raise``, ``assert flag`` (not those in the ``try`` itself)."""
    inside = set(iter_nodes(guard, (cst.If, cst.Assert)))
    for node in iter_nodes(scope, (cst.If, cst.Assert)):
        if node in inside:
            continue
        if isinstance(node, cst.Assert):
            if True in signs(node.test, flag):
                yield node
            continue
        if isinstance(_last(node.body), cst.Raise) and False in signs(node.test, flag):
            yield _last(node.body)
        orelse = _last(node.orelse.body) if isinstance(node.orelse, cst.Else) else None
        if isinstance(orelse, cst.Raise) and True in signs(node.test, flag):
            yield orelse


def _last(block: cst.BaseSuite) -> cst.CSTNode | None:
    last = block.body[-1] if block.body else None
    return last.body[-1] if isinstance(last, cst.SimpleStatementLine) and last.body else last


def signs(test: cst.BaseExpression, flag: str) -> set[bool]:
    """How ``test`` reads ``flag`` (a dotted name): True where it is true when the flag is (``flag``,
    ``flag is not None``), False where negated (``not flag``, ``flag is None``); through
    ``and``/``or``/``not``."""
    if isinstance(test, (cst.Name, cst.Attribute)):
        return {True} if dotted_name(test) == flag else set()
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return {not sign for sign in signs(test.expression, flag)}
    if isinstance(test, cst.BooleanOperation):
        return signs(test.left, flag) | signs(test.right, flag)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        constant = target.comparator.value if isinstance(target.comparator, cst.Name) else None
        if dotted_name(test.left) != flag or constant not in (*MISSING, "True"):
            return set()
        if isinstance(target.operator, (cst.Is, cst.Equal)):
            return {constant == "True"}
        if isinstance(target.operator, (cst.IsNot, cst.NotEqual)):
            return {constant != "True"}
    return set()


def _required(test: cst.BaseExpression, truth: bool, flag: str) -> list[tuple[cst.BaseExpression, bool]]:
    """The operands of ``test`` besides ``flag`` that must have these truth values for ``test`` to
    be ``truth`` once the flag is False (``x and not flag`` true: ``x`` true)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _required(test.expression, not truth, flag)
    if isinstance(test, cst.BooleanOperation):
        both = isinstance(test.operator, cst.And) == truth  # `and` true, `or` false: both sides
        sides = [s for s in (test.left, test.right) if both or signs(s, flag)]
        return [found for side in sides for found in _required(side, truth, flag)]
    return [] if signs(test, flag) else [(test, truth)]


def _describe(
    index: TreeIndex,
    module: str,
    flag: str,
    missing: str,
    node: cst.Raise | cst.Assert,
    import_flags: frozenset[str],
) -> Raise:
    """The raise, with what else must hold for it (the other operands of its test and of the
    ``if`` statements around it in its function) and how to keep that from holding on NPU; an
    operand that another import's fallback sets (AutoAWQ's ``IPEX_INSTALLED``) says whether that
    package is installed, which no setting changes on NPU."""
    statement = index.parents[node]
    required = _required(node.test, False, flag) if isinstance(node, cst.Assert) else []
    for owner, role in index.enclosing(statement):
        if isinstance(owner, (cst.FunctionDef, cst.ClassDef)):
            break
        if isinstance(owner, cst.If) and role in ("body", "orelse"):
            required = _required(owner.test, role == "body", flag) + required
    function = next((index.function[s] for s in (statement, *index.ancestors(statement)) if s in index.function), None)
    params = {p.name.value: p for p in _params(function)}
    conditions, advice = [], []
    for operand, value in required:
        spelled = code_of(operand).strip()
        param = params.get(spelled)
        default = literal(param.default) if param is not None else NOT_LITERAL
        by_default = default is not NOT_LITERAL and bool(default) == value
        conditions.append(f"`{spelled}` is {value}{' (its default)' if by_default else ''}")
        if spelled in import_flags:
            advice.append(
                f"`{spelled}` says whether another package imported (no setting changes that): port this path to the NPU"
            )
        elif param is None:
            advice.append(f"make `{spelled}` {not value} on NPU")
        elif default is NOT_LITERAL or by_default:
            advice.append(f"pass `{spelled}={not value}` on NPU")
        else:
            advice.append(f"keep `{spelled}={not value}` (its default) on NPU")
    return Raise(flag, missing, module, node, _qualified(index, function), tuple(conditions), tuple(advice))


def _params(function: cst.FunctionDef | None) -> list[cst.Param]:
    if function is None:
        return []
    return [*function.params.params, *function.params.kwonly_params]


def _qualified(index: TreeIndex, function: cst.FunctionDef | None) -> str:
    """``Class.method`` or ``function`` ("" at module level)."""
    if function is None:
        return ""
    owner = index.parents.get(index.parents.get(function))
    return f"{owner.name.value}.{function.name.value}" if isinstance(owner, cst.ClassDef) else function.name.value
