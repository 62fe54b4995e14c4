"""The whole-file plan of ``--colossalai native``: each ``Booster`` of a file and every use of it,
rewritten to plain PyTorch distributed, or the reasons it cannot be.

A ``Booster`` with ``TorchDDPPlugin`` or ``LowLevelZeroPlugin`` becomes ``DistributedDataParallel``
(+ ``ZeroRedundancyOptimizer`` for ZeRO), with ``boost``/``backward``/``no_sync``/checkpoint calls,
``plugin.prepare_dataloader`` and the ColossalAI wrapper methods rewritten, also inside helper
functions the booster or plugin is passed to. A plugin chosen at run time among those two (``if
args.plugin == "torch_ddp": plugin = TorchDDPPlugin() elif ...``, or a conditional expression) gets
the set-up of each, chosen by the script's own conditions (:class:`_Choice`).

A file is planned all or nothing: either every use of every booster gets an edit, or each booster
that cannot be replaced gets a reason (other plugins, also among the choices of a plugin chosen at
run time, a booster used in ways the rewrite does not know) and the plan has no edits at all: the
file is then migrated as under ``--colossalai keep`` (never half native, see :func:`replaces_every_booster`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

import libcst as cst

from cuda2npu.core.arguments import try_bind
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import NOT_LITERAL, literal
from cuda2npu.core.names import dotted_name, module_qualified, target_names
from cuda2npu.core.nodes import (
    as_keyword,
    as_positional,
    assign,
    attribute_chain,
    code_of,
    keyword_arg,
    named_params,
    string,
    with_args,
)
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import walk
from cuda2npu.families.colossalai.support import ImportEditor, symbol_of

DDP_OPTIONS = (
    "broadcast_buffers",
    "bucket_cap_mb",
    "find_unused_parameters",
    "check_reduction",
    "gradient_as_bucket_view",
    "static_graph",
)
LLZ_PARAMS = (
    "stage",
    "precision",
    "initial_scale",
    "min_scale",
    "growth_factor",
    "backoff_factor",
    "growth_interval",
    "hysteresis",
    "max_scale",
    "max_norm",
    "norm_type",
    "reduce_bucket_size_in_m",
    "communication_dtype",
    "overlap_communication",
    "overlap_allgather",
    "cpu_offload",
    "master_weights",
    "verbose",
)
BOOST_PARAMS = ("model", "optimizer", "criterion", "dataloader", "lr_scheduler")
PREPARE_PARAMS = (
    "dataset",
    "batch_size",
    "shuffle",
    "seed",
    "drop_last",
    "pin_memory",
    "num_workers",
    "distributed_sampler_cls",
)
OTHER_PLUGINS = {
    "GeminiPlugin": "GeminiPlugin (chunked ZeRO-3 with CPU/NVMe offload) corresponds to torch FSDP "
    "(FullyShardedDataParallel, supported on NPU) with another sharding granularity and checkpoint format: "
    "migrate to FSDP by hand",
    "TorchFSDPPlugin": "TorchFSDPPlugin wraps torch FSDP: use FullyShardedDataParallel(model, "
    "device_id=torch.npu.current_device(), <the plugin's options>) and rebuild the optimizer on the FSDP "
    "parameters by hand",
    "HybridParallelPlugin": "tensor/pipeline parallelism (ShardFormer) has no plain-PyTorch equivalent: use "
    "MindSpeed (Megatron on Ascend)",
    "MoeHybridParallelPlugin": "expert/tensor/pipeline parallelism has no plain-PyTorch equivalent: use MindSpeed "
    "(Megatron on Ascend)",
}


def _simple(expr: cst.BaseExpression) -> bool:
    """Cheap to evaluate more than once, no side effects: names, attributes, literals, subscripts."""
    if isinstance(expr, (cst.Name, cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(expr, cst.Attribute):
        return _simple(expr.value)
    if isinstance(expr, cst.UnaryOperation):
        return _simple(expr.expression)
    if isinstance(expr, cst.Subscript):
        return _simple(expr.value) and all(
            isinstance(s.slice, cst.Index) and _simple(s.slice.value) for s in expr.slice
        )
    return False


def _atom(expr: cst.BaseExpression) -> cst.BaseExpression:
    """``expr`` parenthesised when it is not an atom (for ``(a / n).backward()``)."""
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or expr.lpar:
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _method(obj: cst.BaseExpression, name: str, *args: cst.Arg) -> cst.Call:
    return with_args(cst.Call(cst.Attribute(_atom(obj), cst.Name(name))), list(args))


def _strip_comma(arg: cst.Arg) -> cst.Arg:
    return arg.with_changes(comma=cst.MaybeSentinel.DEFAULT)


# --------------------------------------------------------------------------------------------
# name collection per scope


class _ScopeNames(cst.CSTVisitor):
    """Loads and stores of plain names in one scope (nested functions and classes excluded)."""

    def __init__(self, root: cst.CSTNode) -> None:
        self.root = root
        self.loads: dict[str, list[cst.Name]] = defaultdict(list)
        self.stores: dict[str, list[cst.CSTNode]] = defaultdict(list)
        self.nested: set[str] = set()  # every name spelled inside nested functions, lambdas and classes

    def _nested(self, node: cst.CSTNode) -> None:
        names = self.nested

        class Names(cst.CSTVisitor):
            def on_visit(self, child: cst.CSTNode) -> bool:
                if isinstance(child, cst.Name):
                    names.add(child.value)
                return True

        walk(node, Names())

    def _store(self, target: cst.BaseExpression, owner: cst.CSTNode) -> None:
        for name in target_names(target):
            self.stores[name].append(owner)
        if not isinstance(target, (cst.Name, cst.Tuple, cst.List, cst.StarredElement)):
            walk(target, self)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        if node is self.root:
            for param in named_params(node):
                self.stores[param.name.value].append(param)
            walk(node.body, self)
        else:
            self.stores[node.name.value].append(node)
            self._nested(node)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.stores[node.name.value].append(node)
        self._nested(node)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        self._nested(node)
        return False

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        walk(node.value, self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        walk(node.value, self)
        return False

    def visit_Assign(self, node: cst.Assign) -> bool:
        for target in node.targets:
            self._store(target.target, node)
        walk(node.value, self)
        return False

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        self._store(node.target, node)
        if node.value is not None:
            walk(node.value, self)
        return False

    def visit_AugAssign(self, node: cst.AugAssign) -> bool:
        self._store(node.target, node)
        walk(node.target, self)
        walk(node.value, self)
        return False

    def visit_For(self, node: cst.For) -> bool:
        self._store(node.target, node)
        walk(node.iter, self)
        walk(node.body, self)
        if node.orelse is not None:
            walk(node.orelse, self)
        return False

    def visit_CompFor(self, node: cst.CompFor) -> bool:
        self._store(node.target, node)
        walk(node.iter, self)
        for condition in node.ifs:
            walk(condition, self)
        if node.inner_for_in is not None:
            walk(node.inner_for_in, self)
        return False

    def visit_AsName(self, node: cst.AsName) -> bool:
        self._store(node.name, node)
        return False

    def visit_NamedExpr(self, node: cst.NamedExpr) -> bool:
        self._store(node.target, node)
        walk(node.value, self)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.loads[node.value].append(node)


# --------------------------------------------------------------------------------------------
# the plan


@dataclass
class _Edit:
    message: str
    fix: Callable | None
    tier: Tier = Tier.REVIEW
    needs_torch_npu: bool = False
    code: str = "NPU512"


class _Unsupported(Exception):
    """Raised while planning one booster: the reason becomes an NPU513 report."""


@dataclass
class _Save:
    line: cst.SimpleStatementLine
    save: cst.SimpleStatementLine
    consolidate: cst.SimpleStatementLine | cst.If | None
    message: str
    torch: cst.Name
    block: cst.CSTNode | None = None
    index: int = -1


@dataclass
class _Migration:
    """The edits for one booster, committed only if planning finished without _Unsupported."""

    edits: dict[cst.CSTNode, list[_Edit]] = field(default_factory=lambda: defaultdict(list))
    saves: list[_Save] = field(default_factory=list)

    def add(self, node: cst.CSTNode, edit: _Edit) -> None:
        self.edits[node].append(edit)


class Planner:
    """Whole-file analysis of the ColossalAI boosters for the native strategy."""

    def __init__(self, ctx) -> None:
        self.rewrites = ctx.options.code_enabled("NPU512")  # not opt-in; deselected: no booster is replaced
        self.imports = ImportEditor.of(ctx)
        self.module: cst.Module = ctx.module
        self.scope = ctx.resolver.module_scope
        self.index = TreeIndex.of(ctx)
        self.edits: dict[cst.CSTNode, list[_Edit]] = defaultdict(list)
        self.problems: dict[cst.CSTNode, str] = {}
        self.functions = {stmt.name.value: stmt for stmt in self.module.body if isinstance(stmt, cst.FunctionDef)}
        self.names: dict[cst.CSTNode, _ScopeNames] = {}
        self.migrated_any = False
        self._plan()

    # ---------------------------------------------------------------- helpers
    def symbol(self, expr: cst.BaseExpression) -> str | None:
        return symbol_of(module_qualified(self.scope, expr))

    def names_of(self, root: cst.CSTNode) -> _ScopeNames:
        if root not in self.names:
            collector = _ScopeNames(root)
            walk(root, collector)
            self.names[root] = collector
        return self.names[root]

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.index.parents.get(node)

    def sole_expression_statement(self, call: cst.Call) -> cst.SimpleStatementLine | None:
        expr = self.parent(call)
        line = self.parent(expr) if isinstance(expr, cst.Expr) else None
        if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
            return line
        return None

    def removal(self, stmt: cst.SimpleStatementLine) -> Callable:
        """Remove a statement, or leave ``pass`` when it is the only one of its block."""
        block = self.parent(stmt)
        body = getattr(block, "body", ())
        if isinstance(body, (list, tuple)) and len(body) == 1:
            return lambda s: s.with_changes(body=[cst.Pass()])
        return lambda s: cst.RemoveFromParent()

    def torch(self, code: str = "NPU512") -> cst.Name:
        name = self.imports.module_name("torch", code=code, tier=Tier.REVIEW)
        if name is None:
            raise _Unsupported("the name `torch` is bound to something else in this file")
        return name

    def from_import(self, module: str, name: str, also=()) -> cst.Name:
        bound = self.imports.from_name(module, name, code="NPU512", tier=Tier.REVIEW, also=also)
        if bound is None:
            raise _Unsupported(f"the name `{name}` is bound to something else in this file")
        return bound

    # ---------------------------------------------------------------- planning
    def _plan(self) -> None:
        saved = self.imports.snapshot()
        scopes = [self.module, *self.index.functions]
        for root in scopes:
            body = root.body.body if isinstance(root, cst.FunctionDef) else root.body
            for stmt in _walk_statements(body):
                self._plan_statement(root, stmt)
        if self.problems:  # the file stays on ColossalAI (keep strategy): no booster of it is replaced
            self.imports.restore(saved)
            self.edits.clear()
            self.migrated_any = False

    def _plan_statement(self, root: cst.CSTNode, stmt: cst.CSTNode) -> None:
        if not isinstance(stmt, cst.SimpleStatementLine):
            return
        for small in stmt.body:
            value = getattr(small, "value", None)
            if not isinstance(value, cst.Call) or self.symbol(value.func) != "Booster":
                continue
            targets = small.targets if isinstance(small, cst.Assign) else ()
            if len(targets) != 1 or not isinstance(targets[0].target, cst.Name) or len(stmt.body) != 1:
                self.problems[value] = "`Booster(...)` is not assigned to a plain variable; migrate it by hand"
                continue
            migration = _Migration()
            imports = self.imports
            saved = imports.snapshot()
            try:
                self._plan_booster(root, stmt, value, targets[0].target.value, migration)
            except _Unsupported as exc:
                imports.restore(saved)  # imports requested while planning are not needed after all
                self.problems[value] = f"Booster not replaced by plain PyTorch: {exc}"
                continue
            for node, edits in migration.edits.items():
                self.edits[node].extend(edits)
            self.migrated_any = True

    def _plan_booster(self, root, stmt, call: cst.Call, booster: str, migration: _Migration) -> None:
        args = try_bind(call, ("device", "mixed_precision", "plugin"), open_keywords=True)
        opaque = args is None
        if opaque:  # `Booster(plugin=plugin, **kwargs)`: look at the plugin first, it usually says more
            args = {a.keyword.value: a for a in call.args if a.keyword is not None}
        if "plugin" not in args:
            raise _Unsupported("a Booster without a plugin does no distributed training to translate")
        if not self.rewrites:
            raise _Unsupported("NPU512 (the plain-PyTorch booster rewrite) is not selected")
        names = self.names_of(root)
        if len(names.stores[booster]) != 1:
            raise _Unsupported(f"`{booster}` is assigned more than once")
        if booster in names.nested:
            raise _Unsupported(f"`{booster}` is used inside a nested function, lambda or class")
        plugin_expr = args["plugin"].value
        plugin_var = None
        if isinstance(plugin_expr, cst.Name) and self.symbol(plugin_expr) is None:
            plugin_var = plugin_expr.value
            assignments = self._plugin_assignments(root, plugin_var)
        elif isinstance(plugin_expr, cst.Call):
            assignments = [(None, [plugin_expr])]
        else:
            raise _Unsupported(f"the plugin `{code_of(plugin_expr)}` is not a local variable or a plugin call")
        plugin = _Choice.of(self, root, plugin_var, assignments)
        if "mixed_precision" in args and literal(args["mixed_precision"].value) is not None:
            raise _Unsupported(
                "`Booster(mixed_precision=...)` wraps forward in autocast and the optimizer in a GradScaler; add "
                'torch.autocast("npu", dtype=torch.bfloat16) by hand'
            )
        if opaque:
            raise _Unsupported(
                f"`{code_of(call)}` passes options through *args/**kwargs the rewrite cannot see "
                "(mixed_precision among them)"
            )

        # uses of the booster and of the plugin variable, in this scope and in helper functions
        for ref in names.loads[booster]:
            self._booster_use(root, ref, plugin, migration, helper_of=None)
        if plugin_var is not None:
            if len(names.stores[plugin_var]) != len(assignments):
                raise _Unsupported(f"`{plugin_var}` is also assigned otherwise than by a plugin call")
            if plugin_var in names.nested:
                raise _Unsupported(f"`{plugin_var}` is used inside a nested function, lambda or class")
            for ref in names.loads[plugin_var]:
                if ref is plugin_expr:
                    continue
                self._plugin_use(root, ref, migration, helper_of=None)
        # the constructions go away (a plugin chosen at run time becomes the name of the set-up chosen)
        for plugin_stmt, calls in assignments:
            if plugin.tags:
                for plugin_call in calls:
                    tag = plugin.tag_of(plugin_call)
                    message = (
                        f'`{code_of(plugin_call)}` → `"{tag}"`: the plain-PyTorch set-up chosen at run time '
                        f"(`booster.boost` branches on `{plugin_var}`); {plugin.spec_of(plugin_call).where_options}"
                    )
                    migration.add(plugin_call, _Edit(message, lambda _, t=tag: string(t)))
            elif plugin_stmt is not None:
                migration.add(
                    plugin_stmt,
                    _Edit(f"`{code_of(calls[0])}` removed: {plugin.spec.where_options}", self.removal(plugin_stmt)),
                )
        migration.add(stmt, _Edit("`Booster(...)` removed: plain PyTorch DDP replaces the booster", self.removal(stmt)))
        self._plan_saves(migration)

    def _plugin_assignments(self, root, name: str) -> list[tuple[cst.SimpleStatementLine, list[cst.Call]]]:
        """Each ``name = <plugin>`` statement of the scope with the plugin calls it may assign: one call,
        or the calls of a conditional expression (``A() if args.zero else B()``)."""
        found = []
        for stmt in _walk_statements(root.body.body if isinstance(root, cst.FunctionDef) else root.body):
            if (
                isinstance(stmt, cst.SimpleStatementLine)
                and len(stmt.body) == 1
                and isinstance(stmt.body[0], cst.Assign)
            ):
                small = stmt.body[0]
                if any(isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets):
                    calls = _choice_calls(small.value)
                    if calls is None or len(small.targets) != 1:
                        raise _Unsupported(f"`{name}` is not built by a plugin call here")
                    found.append((stmt, calls))
        if not found:
            raise _Unsupported(
                f"the plugin `{name}` is not built in this function (a parameter or a global): "
                "the rewrite cannot see which plugin it is"
            )
        return found

    # ---------------------------------------------------------------- booster uses
    def _booster_use(self, root, ref: cst.Name, plugin: "_Choice", migration: _Migration, helper_of) -> None:
        attribute = self.parent(ref)
        call = self.parent(attribute) if isinstance(attribute, cst.Attribute) else None
        if isinstance(call, cst.Call) and call.func is attribute:
            method = attribute.attr.value
            handler = getattr(self, f"_booster_{method}", None)
            if handler is None:
                raise _Unsupported(f"`{code_of(call)}`: `Booster.{method}` has no plain-PyTorch rewrite")
            handler(root, call, plugin, migration)
            return
        self._passed_to_helper(root, ref, plugin, migration, helper_of, kind="booster")

    def _booster_boost(self, root, call: cst.Call, plugin: "_Choice", migration: _Migration) -> None:
        assign_node = self.parent(call)
        line = self.parent(assign_node)
        if not (
            isinstance(assign_node, cst.Assign)
            and len(assign_node.targets) == 1
            and isinstance(line, cst.SimpleStatementLine)
            and len(line.body) == 1
        ):
            raise _Unsupported("`booster.boost(...)` is not assigned to a tuple of names")
        args = try_bind(call, BOOST_PARAMS, open_keywords=True)
        if args is None or "model" not in args:
            raise _Unsupported("`booster.boost(...)` without a model argument")
        targets = _boost_targets(assign_node.targets[0].target)
        if targets is None or targets.get(0) is None:
            raise _Unsupported("the results of `booster.boost(...)` are not unpacked into names")
        if len(plugin.setups) > 1 and root is not plugin.root:
            where = f"`{root.name.value}`" if isinstance(root, cst.FunctionDef) else "module code"
            raise _Unsupported(
                f"`booster.boost(...)` is in {where}, where `{plugin.variable}` (the plugin chosen at run time) "
                "is not visible"
            )
        torch = self.torch()
        setups = {tag: self._boost_statements(spec, args, targets, torch) for tag, spec in plugin.setups.items()}
        lines = _branch_on(plugin.variable, setups)

        def fix(stmt, lines=lines):
            return cst.FlattenSentinel([lines[0].with_changes(leading_lines=stmt.leading_lines), *lines[1:]])

        migration.add(line, _Edit(plugin.boost_message(), fix, needs_torch_npu=True))
        self._wrapper_calls(root, targets, torch, migration)

    def _boost_statements(
        self, spec: "_PluginSpec", args: dict, targets: dict, torch: cst.Name
    ) -> list[cst.SimpleStatementLine]:
        """What ``booster.boost(...)`` does with one plugin, as assignments to the names it returned into."""
        ddp = self.from_import(
            "torch.nn.parallel",
            "DistributedDataParallel",
            also=("torch.nn.parallel.distributed.DistributedDataParallel",),
        )
        model_target = targets[0]
        model_value = args["model"].value
        statements = [
            assign(model_target, _method(model_value, "npu")),
        ]
        if spec.kind == "TorchDDPPlugin":
            statements.append(
                assign(
                    model_target,
                    cst.Call(
                        attribute_chain(f"{torch.value}.nn.SyncBatchNorm.convert_sync_batchnorm"),
                        [cst.Arg(model_target)],
                    ),
                )
            )
        statements.append(assign(model_target, with_args(cst.Call(ddp), [cst.Arg(model_target), *spec.ddp_args])))
        for index in range(1, len(BOOST_PARAMS)):
            target = targets.get(index)
            if target is None:
                continue
            value = args[BOOST_PARAMS[index]].value if BOOST_PARAMS[index] in args else cst.Name("None")
            if index == 1 and spec.kind == "LowLevelZeroPlugin" and BOOST_PARAMS[1] in args:
                if not _simple(value):
                    raise _Unsupported("the optimizer passed to `boost` is an expression; ZeRO needs a name")
                value = with_args(
                    cst.Call(self.zero_optimizer()),
                    [
                        cst.Arg(cst.Attribute(value, cst.Name("param_groups"))),
                        keyword_arg("optimizer_class", cst.Call(cst.Name("type"), [cst.Arg(value)])),
                        cst.Arg(cst.Attribute(value, cst.Name("defaults")), star="**"),
                    ],
                )
            if code_of(value) == code_of(target):
                continue
            statements.append(assign(target, value))
        return [cst.SimpleStatementLine(body=[s]) for s in statements]

    def zero_optimizer(self) -> cst.Name:
        return self.from_import(
            "torch.distributed.optim",
            "ZeroRedundancyOptimizer",
            also=("torch.distributed.optim.zero_redundancy_optimizer.ZeroRedundancyOptimizer",),
        )

    def _wrapper_calls(self, root, targets: dict, torch: cst.Name, migration: _Migration) -> None:
        """``optimizer.clip_grad_by_norm(...)``, ``model.unwrap()`` (ColossalAI wrappers) in the same scope."""
        names = self.names_of(root)
        model = targets.get(0)
        optimizer = targets.get(1)
        for target, methods in (
            (model, ("unwrap",)),
            (optimizer, ("clip_grad_by_norm", "clip_grad_by_value", "backward")),
        ):
            if not isinstance(target, cst.Name):
                continue
            for ref in names.loads[target.value]:
                attribute = self.parent(ref)
                call = self.parent(attribute) if isinstance(attribute, cst.Attribute) else None
                if not (isinstance(call, cst.Call) and call.func is attribute and attribute.attr.value in methods):
                    continue
                method = attribute.attr.value
                if method == "unwrap" and not call.args:
                    migration.add(
                        call,
                        _Edit(
                            "`model.unwrap()` (ColossalAI ModelWrapper) → `model.module` (DDP)",
                            lambda _, t=target: cst.Attribute(t, cst.Name("module")),
                        ),
                    )
                elif method == "backward" and len(call.args) == 1 and not call.args[0].keyword:
                    loss = call.args[0].value
                    migration.add(
                        call,
                        _Edit(
                            "`optimizer.backward(loss)` (ColossalAI OptimizerWrapper) → `loss.backward()`",
                            lambda _, value=loss: _method(value, "backward"),
                        ),
                    )
                elif method in ("clip_grad_by_norm", "clip_grad_by_value") and isinstance(model, cst.Name):
                    bound = try_bind(
                        call,
                        ("max_norm", "norm_type") if method == "clip_grad_by_norm" else ("clip_value",),
                        open_keywords=True,
                    )
                    if bound is None or any(k not in ("max_norm", "norm_type", "clip_value") for k in bound):
                        raise _Unsupported(f"`{code_of(call)}` has arguments the rewrite does not know")
                    function = "clip_grad_norm_" if method == "clip_grad_by_norm" else "clip_grad_value_"
                    new_args = [cst.Arg(cst.Call(cst.Attribute(model, cst.Name("parameters"))))]
                    new_args += [as_positional(bound[k]) for k in ("max_norm", "norm_type", "clip_value") if k in bound]
                    migration.add(
                        call,
                        _Edit(
                            f"`optimizer.{method}(...)` (ColossalAI OptimizerWrapper) → `torch.nn.utils.{function}"
                            "(model.parameters(), ...)` on the DDP gradients",
                            lambda c, f=attribute_chain(f"{torch.value}.nn.utils.{function}"), a=new_args: with_args(
                                c.with_changes(func=f), a
                            ),
                        ),
                    )

    def _booster_backward(self, root, call: cst.Call, plugin, migration: _Migration) -> None:
        args = try_bind(call, ("loss", "optimizer"), open_keywords=True)
        if args is None or "loss" not in args:
            raise _Unsupported(f"`{code_of(call)}` cannot be analysed")
        loss = args["loss"].value
        note = " (no loss scaling: the migrated training runs in fp32)" if "LowLevelZeroPlugin" in plugin.kinds else ""
        migration.add(
            call,
            _Edit(
                f"`booster.backward(loss, optimizer)` → `loss.backward()`{note}",
                lambda _, value=loss: _method(value, "backward"),
            ),
        )

    def _booster_no_sync(self, root, call: cst.Call, plugin, migration: _Migration) -> None:
        args = try_bind(call, ("model", "optimizer"), open_keywords=True)
        if args is None or "model" not in args:
            raise _Unsupported(f"`{code_of(call)}`: no_sync without the model")
        model = args["model"].value
        migration.add(
            call, _Edit("`booster.no_sync(model)` → `model.no_sync()` (DDP)", lambda _, m=model: _method(m, "no_sync"))
        )

    def _checkpoint_args(self, call: cst.Call, params, method: str) -> dict:
        args = try_bind(call, params, open_keywords=True)
        if args is None or len([p for p in params[:2] if p in args]) != 2:
            raise _Unsupported(f"`{code_of(call)}` cannot be analysed")
        for key, allowed in (("shard", (False,)), ("use_safetensors", (False,)), ("prefix", (None,))):
            if key in args and literal(args[key].value) not in allowed:
                raise _Unsupported(
                    f"`booster.{method}({key}=...)`: sharded/safetensors/prefixed checkpoints are "
                    "ColossalAI formats; write them by hand"
                )
        return args

    def _save(
        self, root, call: cst.Call, migration: _Migration, method: str, params, state, note: str, gather: str = ""
    ) -> None:
        """``gather``: "always" (ZeRO) or "if sharded" (a plugin chosen at run time, ZeRO among them): the
        optimizer consolidates its shards on rank 0 first."""
        line = self.sole_expression_statement(call)
        if line is None:
            raise _Unsupported(f"`booster.{method}(...)` is not a statement of its own")
        args = self._checkpoint_args(call, params, method)
        torch = self.torch()
        obj, path = args[params[0]].value, args[params[1]].value
        save = cst.SimpleStatementLine(
            body=[
                cst.Expr(
                    cst.Call(
                        attribute_chain(f"{torch.value}.save"),
                        [
                            cst.Arg(state(obj), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                            cst.Arg(path),
                        ],
                    )
                )
            ]
        )
        consolidate = None
        if gather:
            consolidate = cst.SimpleStatementLine(
                body=[cst.Expr(_method(obj, "consolidate_state_dict", keyword_arg("to", cst.Integer("0"))))]
            )
        if gather == "if sharded":
            test = cst.Call(
                cst.Name("isinstance"),
                [
                    cst.Arg(obj, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                    cst.Arg(self.zero_optimizer()),
                ],
            )
            consolidate = cst.If(test=test, body=cst.IndentedBlock(body=[consolidate]))
        migration.saves.append(
            _Save(
                line,
                save,
                consolidate,
                f"`booster.{method}(...)` → `torch.save(...)` of the state dict on rank 0 (same path){note}",
                torch,
            )
        )

    def _plan_saves(self, migration: _Migration) -> None:
        """One ``if rank == 0:`` block per run of consecutive checkpoint saves."""
        runs: list[list[_Save]] = []
        for save in migration.saves:
            block = self.parent(save.line)
            body = list(getattr(block, "body", ()))
            index = next(i for i, stmt in enumerate(body) if stmt is save.line)
            previous = runs[-1][-1] if runs else None
            if previous is not None and previous.block is block and previous.index == index - 1:
                runs[-1].append(save)
            else:
                runs.append([save])
            save.block, save.index = block, index
        dist = self.imports.bound_to(["torch.distributed"])
        for run in runs:
            first = run[0]
            rank = cst.parse_expression(f"{dist or first.torch.value + '.distributed'}.get_rank() == 0")
            block = cst.If(test=rank, body=cst.IndentedBlock(body=[s.save for s in run]))
            before = [s.consolidate for s in run if s.consolidate is not None]

            def fix(stmt, block=block, before=before):
                lines = [*before, block]
                return cst.FlattenSentinel([lines[0].with_changes(leading_lines=stmt.leading_lines), *lines[1:]])

            migration.add(first.line, _Edit(first.message, fix))
            for save in run[1:]:
                migration.add(
                    save.line, _Edit(save.message + " (merged into the block above)", lambda _: cst.RemoveFromParent())
                )

    def _booster_save_model(self, root, call, plugin, migration) -> None:
        self._save(
            root,
            call,
            migration,
            "save_model",
            ("model", "checkpoint", "shard", "gather_dtensor", "prefix", "size_per_shard", "use_safetensors"),
            lambda m: _method(cst.Attribute(_atom(m), cst.Name("module")), "state_dict"),
            "",
        )

    def _booster_save_optimizer(self, root, call, plugin, migration) -> None:
        zero = "LowLevelZeroPlugin" in plugin.kinds
        gather = "" if not zero else "always" if plugin.kinds == {"LowLevelZeroPlugin"} else "if sharded"
        self._save(
            root,
            call,
            migration,
            "save_optimizer",
            ("optimizer", "checkpoint", "shard", "gather_dtensor", "prefix", "size_per_shard"),
            lambda o: _method(o, "state_dict"),
            "; ZeroRedundancyOptimizer first gathers its shards on rank 0 (every rank must call it)" if zero else "",
            gather=gather,
        )

    def _booster_save_lr_scheduler(self, root, call, plugin, migration) -> None:
        self._save(
            root,
            call,
            migration,
            "save_lr_scheduler",
            ("lr_scheduler", "checkpoint"),
            lambda s: _method(s, "state_dict"),
            "",
        )

    def _load(self, call: cst.Call, migration: _Migration, method: str, params, build) -> None:
        args = self._checkpoint_args(call, params, method)
        torch = self.torch()
        obj, path = args[params[0]].value, args[params[1]].value
        loaded = with_args(
            cst.Call(attribute_chain(f"{torch.value}.load")),
            [cst.Arg(path), keyword_arg("map_location", string("cpu"))],
        )
        migration.add(
            call,
            _Edit(
                f"`booster.{method}(...)` → `load_state_dict(torch.load(...))` (same path)",
                lambda _, o=obj, path=loaded, a=args: build(o, path, a),
            ),
        )

    def _booster_load_model(self, root, call, plugin, migration) -> None:
        def build(model, loaded, args):
            extra = [as_keyword(args["strict"], "strict")] if "strict" in args else []
            return _method(cst.Attribute(_atom(model), cst.Name("module")), "load_state_dict", cst.Arg(loaded), *extra)

        self._load(call, migration, "load_model", ("model", "checkpoint", "strict"), build)

    def _booster_load_optimizer(self, root, call, plugin, migration) -> None:
        self._load(
            call,
            migration,
            "load_optimizer",
            ("optimizer", "checkpoint"),
            lambda o, loaded, _: _method(o, "load_state_dict", cst.Arg(loaded)),
        )

    def _booster_load_lr_scheduler(self, root, call, plugin, migration) -> None:
        self._load(
            call,
            migration,
            "load_lr_scheduler",
            ("lr_scheduler", "checkpoint"),
            lambda o, loaded, _: _method(o, "load_state_dict", cst.Arg(loaded)),
        )

    # ---------------------------------------------------------------- plugin uses
    def _plugin_use(self, root, ref: cst.Name, migration: _Migration, helper_of) -> None:
        attribute = self.parent(ref)
        call = self.parent(attribute) if isinstance(attribute, cst.Attribute) else None
        if isinstance(call, cst.Call) and call.func is attribute and attribute.attr.value == "prepare_dataloader":
            self._prepare_dataloader(call, migration)
            return
        self._passed_to_helper(root, ref, None, migration, helper_of, kind="plugin")

    def _passed_to_helper(self, root, ref: cst.Name, plugin, migration: _Migration, helper_of, kind: str) -> None:
        """Rewrite a helper function that ``ref`` (the booster or plugin) is passed to, or give up."""
        arg = self.parent(ref)
        site = self.parent(arg) if isinstance(arg, cst.Arg) else None
        if helper_of is None and isinstance(site, cst.Call) and arg.value is ref:
            self._helper(root, site, arg, plugin, migration, kind=kind)
            return
        statement = self.index.statement_of(ref)
        raise _Unsupported(f"the {kind} is used as `{code_of(statement).strip() if statement else ref.value}`")

    def _prepare_dataloader(self, call: cst.Call, migration: _Migration) -> None:
        args = try_bind(call, PREPARE_PARAMS, open_keywords=True)
        if args is None or "dataset" not in args or "batch_size" not in args:
            raise _Unsupported(f"`{code_of(call)}` cannot be analysed")
        if "distributed_sampler_cls" in args:
            raise _Unsupported("`prepare_dataloader(distributed_sampler_cls=...)`: build the sampler by hand")
        dataset = args["dataset"].value
        if not _simple(dataset):
            raise _Unsupported("`prepare_dataloader` gets a dataset expression; assign it to a name first")
        torch = self.torch()
        shuffle = (
            as_keyword(args["shuffle"], "shuffle") if "shuffle" in args else keyword_arg("shuffle", cst.Name("False"))
        )
        sampler = with_args(
            cst.Call(attribute_chain(f"{torch.value}.utils.data.DistributedSampler")),
            [cst.Arg(dataset), _strip_comma(shuffle)],
        )
        new_args = [
            as_positional(args["dataset"]),
            as_keyword(args["batch_size"], "batch_size"),
            keyword_arg("sampler", sampler),
        ]
        new_args += [as_keyword(args[k], k) for k in ("drop_last", "pin_memory", "num_workers") if k in args]
        new_args += [a for a in call.args if a.keyword is not None and a.keyword.value not in PREPARE_PARAMS]
        workers = literal(args["num_workers"].value) if "num_workers" in args else 0
        note = ""
        if workers not in (0, None):
            note = (
                "; ColossalAI also seeded every worker with `seed` (worker_init_fn): add one if the dataset "
                "draws random numbers"
            )
        migration.add(
            call,
            _Edit(
                "`plugin.prepare_dataloader(...)` → `DataLoader(..., sampler=DistributedSampler(dataset, "
                f"shuffle=...))`, as the plugin builds it{note}",
                lambda c, f=attribute_chain(f"{torch.value}.utils.data.DataLoader"), a=new_args: with_args(
                    c.with_changes(func=f), a
                ),
            ),
        )

    # ---------------------------------------------------------------- helper functions
    def _helper(self, root, site: cst.Call, arg: cst.Arg, plugin, migration: _Migration, kind: str) -> None:
        """``train(model, booster)`` → ``train(model)``; uses of the parameter inside are rewritten too."""
        name = dotted_name(site.func)
        function = self.functions.get(name or "")
        if function is None or name in self.scope.imports:
            raise _Unsupported(f"the {kind} is passed to `{code_of(site.func)}`, which is not a function of this file")
        params = function.params
        if isinstance(params.star_arg, cst.Param) or params.star_kwarg is not None:
            raise _Unsupported(f"`{name}` takes *args/**kwargs")
        positional = [a for a in site.args if a.keyword is None]
        if arg.keyword is None:
            index = positional.index(arg)
            if index >= len(params.params):
                raise _Unsupported(f"cannot match the {kind} argument of `{name}` to a parameter")
            param = params.params[index]
        else:
            param = next(
                (p for p in [*params.params, *params.kwonly_params] if p.name.value == arg.keyword.value), None
            )
            if param is None:
                raise _Unsupported(f"`{name}` has no parameter `{arg.keyword.value}`")
        inner = self.names_of(function)
        if len(inner.stores[param.name.value]) != 1:
            raise _Unsupported(f"`{name}` rebinds its parameter `{param.name.value}`")
        if param.name.value in inner.nested:
            raise _Unsupported(f"`{name}` uses `{param.name.value}` inside a nested function, lambda or class")
        for ref in inner.loads[param.name.value]:
            if kind == "booster":
                self._booster_use(function, ref, plugin, migration, helper_of=function)
            else:
                self._plugin_use(function, ref, migration, helper_of=function)
        # every call of the helper passes the same object at the same place: drop argument and parameter
        passed = code_of(arg.value)
        for other in self.index.calls_to(name):
            other_arg = _matching_arg(other, param, params)
            if other_arg is None or code_of(other_arg.value) != passed:
                raise _Unsupported(f"a call of `{name}` does not pass `{passed}` as `{param.name.value}`")
            migration.add(
                other,
                _Edit(
                    f"`{name}(...)`: the {kind} argument is dropped (the {kind} is gone)",
                    lambda c, p=param.name.value, v=passed: _drop_argument(c, p, v),
                ),
            )
        migration.add(
            params,
            _Edit(
                f"`def {name}`: parameter `{param.name.value}` dropped (the {kind} is gone)",
                lambda ps, p=param.name.value: _drop_parameter(ps, p),
            ),
        )


class _PluginSpec:
    def __init__(self, kind: str, ddp_args: list[cst.Arg], stage: int, precision: str) -> None:
        self.kind = kind
        self.ddp_args = ddp_args
        self.stage = stage
        self.precision = precision

    @classmethod
    def of(cls, kind: str, call: cst.Call) -> "_PluginSpec":
        if kind == "TorchDDPPlugin":
            args = try_bind(call, DDP_OPTIONS, open_keywords=True)
            if args is None:
                raise _Unsupported("`TorchDDPPlugin(*args/**kwargs)` cannot be analysed")
            unknown = [k for k in args if k not in DDP_OPTIONS]
            if unknown:
                raise _Unsupported(f"TorchDDPPlugin option(s) {', '.join(unknown)} have no DDP equivalent")
            for key, arg in args.items():
                if not _simple(arg.value):
                    raise _Unsupported(f"TorchDDPPlugin({key}={code_of(arg.value)}) is not a simple value to move")
            return cls(kind, [_strip_comma(as_keyword(args[k], k)) for k in DDP_OPTIONS if k in args], 1, "fp32")
        args = try_bind(call, LLZ_PARAMS, open_keywords=True)
        if args is None or any(k not in LLZ_PARAMS for k in args):
            raise _Unsupported("LowLevelZeroPlugin arguments cannot be analysed")
        stage = literal(args["stage"].value) if "stage" in args else 1
        if stage not in (1, 2):
            raise _Unsupported("LowLevelZeroPlugin(stage=...) is not a literal 1 or 2")
        max_norm = literal(args["max_norm"].value) if "max_norm" in args else 0.0
        if max_norm not in (0, 0.0):
            raise _Unsupported(
                "LowLevelZeroPlugin(max_norm=...) clips gradients inside the ZeRO step: after the rewrite call "
                "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm) before optimizer.step() by hand"
            )
        if "cpu_offload" in args and literal(args["cpu_offload"].value) is not False:
            raise _Unsupported("LowLevelZeroPlugin(cpu_offload=...) has no DDP/ZeroRedundancyOptimizer equivalent")
        precision = literal(args["precision"].value) if "precision" in args else "fp16"
        if precision is NOT_LITERAL:
            precision = code_of(args["precision"].value)
        return cls(kind, [], stage, str(precision))

    @property
    def where_options(self) -> str:
        if self.kind == "TorchDDPPlugin":
            return "its options are passed to DistributedDataParallel"
        return "ZeRO is rebuilt with DistributedDataParallel + ZeroRedundancyOptimizer"

    def boost_message(self) -> str:
        if self.kind == "TorchDDPPlugin":
            return (
                "`booster.boost(...)` with TorchDDPPlugin → model moved to the current npu, BatchNorm converted "
                "to SyncBatchNorm and wrapped in DistributedDataParallel, as the plugin does; the other "
                "returned objects are the ones passed in"
            )
        parts = [
            f"`booster.boost(...)` with LowLevelZeroPlugin(stage={self.stage}) → DistributedDataParallel + "
            "torch.distributed.optim.ZeroRedundancyOptimizer (optimizer states sharded across ranks, built from the "
            "optimizer's param_groups, class and defaults)"
        ]
        if self.stage == 2:
            parts.append(
                "stage 2 also shards gradients; ZeroRedundancyOptimizer does not (each rank keeps full "
                "gradients: more memory, same update)"
            )
        if self.precision != "fp32":
            parts.append(
                f"the plugin trained with precision={self.precision!r} (low-precision params, fp32 master "
                'weights, loss scaling for fp16); the migrated model stays fp32: add torch.autocast("npu", '
                "dtype=torch.bfloat16) around the forward pass for mixed precision"
            )
        return "; ".join(parts)


# the name of each plain-PyTorch set-up when the plugin is chosen at run time (ColossalAI's examples' --plugin values)
NATIVE_TAGS = {"TorchDDPPlugin": "torch_ddp", "LowLevelZeroPlugin": "low_level_zero"}


class _Choice:
    """The plugin a booster gets: one plugin call, or one of several chosen at run time (``if args.plugin
    == "torch_ddp": plugin = TorchDDPPlugin() elif ...``, ``A() if cond else B()``). For a choice, each call
    becomes the name (tag) of its plain-PyTorch set-up, so the script's own conditions still choose, and
    ``booster.boost`` branches on the variable where the set-ups differ."""

    def __init__(self, variable: str | None, root, specs: dict[cst.Call, _PluginSpec]) -> None:
        self.variable = variable
        self.root = root
        self.specs = specs
        self.tags = len(specs) > 1
        self.setups: dict[str, _PluginSpec] = {}  # tag → its set-up, in the order the script names them
        for spec in specs.values():
            self.setups.setdefault(NATIVE_TAGS[spec.kind], spec)
        self.kinds = {spec.kind for spec in specs.values()}

    @classmethod
    def of(cls, planner: Planner, root, variable: str | None, assignments) -> "_Choice":
        calls = [call for _, found in assignments for call in found]
        kinds = [planner.symbol(call.func) for call in calls]
        if len(calls) == 1 and kinds[0] in OTHER_PLUGINS:
            raise _Unsupported(OTHER_PLUGINS[kinds[0]])
        named = [kind or code_of(call.func) for call, kind in zip(calls, kinds)]
        lacking = list(dict.fromkeys(name for name, kind in zip(named, kinds) if kind not in NATIVE_TAGS))
        if len(calls) == 1 and lacking:
            raise _Unsupported(f"`{code_of(calls[0].func)}` is not a ColossalAI plugin this rewrite knows")
        if lacking:
            reasons = "; ".join(
                text if text.startswith(kind) else f"{kind}: {text}"
                for kind, text in ((kind, OTHER_PLUGINS.get(kind)) for kind in lacking)
                if text
            )
            raise _Unsupported(
                f"the plugin `{variable}` is chosen at run time among {', '.join(dict.fromkeys(named))}; "
                f"{', '.join(lacking)} {'has' if len(lacking) == 1 else 'have'} no plain-PyTorch rewrite"
                + (f" ({reasons})" if reasons else "")
            )
        specs = {call: _PluginSpec.of(kind, call) for call, kind in zip(calls, kinds)}
        ddp_options = {tuple(code_of(a) for a in s.ddp_args) for s in specs.values() if s.kind == "TorchDDPPlugin"}
        if len(ddp_options) > 1:
            raise _Unsupported(
                f"the plugin `{variable}` is chosen at run time among TorchDDPPlugin calls with different options "
                "(one DistributedDataParallel set-up per plugin kind)"
            )
        return cls(variable, root, specs)

    @property
    def spec(self) -> _PluginSpec:
        return next(iter(self.specs.values()))

    def spec_of(self, call: cst.Call) -> _PluginSpec:
        return self.specs[call]

    def tag_of(self, call: cst.Call) -> str:
        return NATIVE_TAGS[self.specs[call].kind]

    def boost_message(self) -> str:
        messages = " | ".join(dict.fromkeys(spec.boost_message() for spec in self.specs.values()))
        if len(self.setups) == 1:
            return messages
        branches = ", ".join(f'`{self.variable} == "{tag}"`' for tag in self.setups)
        return (
            f"the plugin is chosen at run time: the set-up of each, under {branches} (the tags its plugin calls "
            f"became); {messages}"
        )


def _choice_calls(value: cst.BaseExpression) -> list[cst.Call] | None:
    """The calls a plugin assignment may assign: the call, or the calls of a conditional expression."""
    if isinstance(value, cst.Call):
        return [value]
    if isinstance(value, cst.IfExp):
        body, orelse = _choice_calls(value.body), _choice_calls(value.orelse)
        return None if body is None or orelse is None else body + orelse
    return None


def _branch_on(variable: str | None, setups: dict[str, list[cst.SimpleStatementLine]]) -> list[cst.BaseStatement]:
    """The statements of each set-up, with those they share before and after, and an ``if variable ==
    "tag": ... elif ...`` for the rest (a set-up with nothing of its own gets no branch)."""
    lists = list(setups.values())
    if len(lists) == 1:
        return lists[0]
    texts = [[code_of(line) for line in lines] for lines in lists]
    prefix = 0
    while all(len(t) > prefix for t in texts) and len({t[prefix] for t in texts}) == 1:
        prefix += 1
    suffix = 0
    while all(len(t) - prefix > suffix for t in texts) and len({t[len(t) - 1 - suffix] for t in texts}) == 1:
        suffix += 1
    branch: cst.If | None = None
    for tag, lines in reversed(list(setups.items())):
        own = lines[prefix : len(lines) - suffix]
        if own:
            test = cst.Comparison(cst.Name(variable), [cst.ComparisonTarget(cst.Equal(), string(tag))])
            branch = cst.If(test=test, body=cst.IndentedBlock(body=own), orelse=branch)
    first = lists[0]
    return [*first[:prefix], *([branch] if branch is not None else []), *first[len(first) - suffix :]]


def _walk_statements(body):
    """Statements of a block and of the blocks nested in it (not entering functions or classes)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            continue
        for child in ("body", "orelse", "finalbody"):
            block = getattr(stmt, child, None)
            if isinstance(block, cst.Else):
                block = block.body
            if isinstance(block, cst.If):  # elif
                yield from _walk_statements([block])
                continue
            if isinstance(block, cst.BaseSuite) and isinstance(block.body, (list, tuple)):
                yield from _walk_statements(block.body)
        for handler in getattr(stmt, "handlers", ()):
            yield from _walk_statements(handler.body.body)


def _boost_targets(target: cst.BaseExpression) -> dict[int, cst.BaseExpression] | None:
    """Position in boost's 5-tuple → the name it is unpacked into (``_`` and starred ``_`` skipped)."""
    if not isinstance(target, (cst.Tuple, cst.List)):
        return None
    elements = list(target.elements)
    star = next((i for i, e in enumerate(elements) if isinstance(e, cst.StarredElement)), None)
    if star is not None:
        starred = elements[star].value
        if not (isinstance(starred, cst.Name) and starred.value.startswith("_")):
            return None
        left, right = elements[:star], elements[star + 1 :]
        positions = list(range(len(left))) + list(range(len(BOOST_PARAMS) - len(right), len(BOOST_PARAMS)))
        elements = left + right
    elif len(elements) == len(BOOST_PARAMS):
        positions = list(range(len(BOOST_PARAMS)))
    else:
        return None
    result: dict[int, cst.BaseExpression] = {}
    for position, element in zip(positions, elements):
        value = element.value
        if isinstance(value, cst.Name) and value.value == "_":
            continue
        if not isinstance(value, (cst.Name, cst.Attribute)):
            return None
        result[position] = value.with_changes(lpar=[], rpar=[])
    return result


def _matching_arg(call: cst.Call, param: cst.Param, params: cst.Parameters) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == param.name.value:
            return arg
    positional = [a for a in call.args if a.keyword is None]
    if param in params.params:
        index = list(params.params).index(param)
        if index < len(positional) and not positional[index].star:
            return positional[index]
    return None


def _drop_argument(call: cst.Call, param_name: str, value: str) -> cst.Call:
    """The call without the argument passing ``value`` (by position) or ``param_name=`` (by keyword)."""
    kept, dropped = [], False
    for arg in call.args:
        by_keyword = arg.keyword is not None and arg.keyword.value == param_name
        by_position = arg.keyword is None and not arg.star and code_of(arg.value) == value
        if not dropped and (by_keyword or by_position):
            dropped = True
            continue
        kept.append(arg)
    return with_args(call, kept)


def _drop_parameter(params: cst.Parameters, name: str) -> cst.Parameters:
    def without(seq):
        kept = [p for p in seq if p.name.value != name]
        return kept

    new_params = without(params.params)
    new_kwonly = without(params.kwonly_params)
    original_last = (list(params.params) + list(params.kwonly_params))[-1:]
    trailing = bool(original_last) and isinstance(original_last[0].comma, cst.Comma) and not params.kwonly_params
    if new_params and not new_kwonly and isinstance(params.star_arg, cst.MaybeSentinel) and not trailing:
        new_params[-1] = new_params[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    if not new_kwonly and isinstance(params.star_arg, cst.ParamStar):
        return params.with_changes(params=new_params, kwonly_params=[], star_arg=cst.MaybeSentinel.DEFAULT)
    if new_kwonly:
        new_kwonly[-1] = new_kwonly[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return params.with_changes(params=new_params, kwonly_params=new_kwonly)


def _build_plan(ctx) -> Planner | None:
    """None when no Booster is reachable (only through an import of it, of `colossalai` or of `colossalai.booster`)."""
    reachable = any(
        q in ("colossalai", "colossalai.booster") or symbol_of(q) == "Booster"
        for targets in ctx.resolver.module_scope.imports.values()
        for q in targets
    )
    return Planner(ctx) if reachable else None


def planner_of(ctx) -> Planner | None:
    """The file's booster plan, built once per traversal by whichever ColossalAI rule asks first."""
    return ctx.file_state(_build_plan)


def replaces_every_booster(ctx) -> bool:
    """Whether every Booster of the file gets its plain-PyTorch rewrite (true without boosters)."""
    plan = planner_of(ctx)
    return plan is None or not plan.problems
