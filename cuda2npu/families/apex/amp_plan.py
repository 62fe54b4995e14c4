"""The plan of the apex.amp migration of one file (cuda2npu/families/apex/amp.py says what it does):
from the pre-pass (amp_collect.py) to the edits it registers and the reports it plans, all or nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from cuda2npu.analysis import portable
from cuda2npu.analysis.old_torch import old_torch_code
from cuda2npu.core.arguments import Unbindable, bind, literal_arg
from cuda2npu.core.bindings import function_locals
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import NOT_LITERAL
from cuda2npu.core.names import NameResolver, dotted_name
from cuda2npu.core.nodes import atom, code_of, expression, is_pure, keyword_arg, root_name, statement, with_args
from cuda2npu.core.traversal import walk_batched
from cuda2npu.families.apex.amp_collect import AmpCollector
from cuda2npu.families.apex.amp_shapes import (
    availability_check,
    chain_head,
    consecutive_runs,
    first_param,
    if_chain,
    loss_scale_args,
    mirror_chain,
)
from cuda2npu.families.apex.amp_statements import (
    SCALE_LOSS_PARAMS,
    assigns,
    backward_statements,
    brief,
    conjunction,
    dotted_names,
    given_optimizers,
    names_read,
    only_backward,
    replace_call,
    self_attributes,
    statement_source,
    suppressed,
    with_statement,
)
from cuda2npu.families.apex.common import ApexRule, FileEdits

INITIALIZE_PARAMS = (
    "models",
    "optimizers",
    "enabled",
    "opt_level",
    "cast_model_type",
    "patch_torch_functions",
    "keep_batchnorm_fp32",
    "master_weights",
    "loss_scale",
    "cast_model_outputs",
    "num_losses",
    "verbosity",
    "min_loss_scale",
    "max_loss_scale",
    # Ascend's apex (docs/reference/torch_npu.md §5.3)
    "dynamic_init_scale",
    "scale_growth_factor",
    "scale_backoff_factor",
    "scale_window",
    "combine_grad",
    "combine_ddp",
    "ddp_replica_count",
    "user_cast_preferred",
    "check_combined_tensors",
)


DROPPED_INITIALIZE = {
    "keep_batchnorm_fp32": "autocast runs batch norm in float32",
    "master_weights": "parameters stay float32",
    "cast_model_type": "parameters stay float32",
    "patch_torch_functions": "autocast casts per op",
    "cast_model_outputs": "outputs take the dtype of the op that made them",
    "num_losses": "one GradScaler serves every loss",
    "verbosity": "",
    "min_loss_scale": "GradScaler has no lower bound",
    "max_loss_scale": "GradScaler has no upper bound",
}


REGION_WHY = "apex O1/O2 cast it; the region runs from the first model call to the loss passed to amp.scale_loss"


EVALUATION_NOTE = (
    "apex.amp applied to every forward pass: those outside the wrapped regions (evaluation) now run in float32"
)


UNSUPPORTED = {
    "register_float_function": "torch.npu.amp has no registration API; call the function under "
    '`with torch.autocast("npu", enabled=False):` with float32 inputs, or decorate it with '
    '`torch.amp.custom_fwd(device_type="npu", cast_inputs=torch.float32)`',
    "register_half_function": "torch.npu.amp has no registration API; cast the inputs to the autocast dtype "
    "explicitly where the function is called",
    "register_promote_function": "torch.npu.amp has no registration API; cast the inputs to the widest dtype "
    "explicitly where the function is called",
    "float_function": 'decorate with `torch.amp.custom_fwd(device_type="npu", cast_inputs=torch.float32)` instead',
    "half_function": "cast the inputs to the autocast dtype explicitly instead",
    "promote_function": "cast the inputs to the widest dtype explicitly instead",
    "disable_casts": 'use `with torch.autocast("npu", enabled=False):`',
}


class NotMigrated(Exception):
    """A part of apex.amp that cannot be migrated with confidence; carries the node to flag."""

    def __init__(self, node: cst.CSTNode, message: str) -> None:
        super().__init__(message)
        self.node = node


@dataclass
class _Site:
    """One ``with amp.scale_loss(loss, optimizers, ...) as scaled:``."""

    with_node: cst.With
    call: cst.Call
    bound: dict
    scaled: str
    optimizers: list[str]
    function: cst.CSTNode | None


@dataclass
class _Initialize:
    statement: cst.CSTNode  # the amp.initialize statement, or the `if` choosing between several
    call: cst.Call
    bound: dict
    opt_level: str | None  # None: not a literal
    enabled: str | None  # a condition to pass as enabled=, or None
    disabled: bool
    models: list[str]
    optimizers: list[str]
    targets: list[str]  # the names amp.initialize's results are assigned to
    reassign: str | None  # `targets = arguments` when the names differ
    guard: cst.CSTNode | None  # outermost `if` around the call in its function
    conditions: list = field(default_factory=list)  # the tests `enabled` is made of
    branches: list = field(default_factory=list)  # [(test or None, bound arguments)], one per call
    checks: list = field(default_factory=list)  # apex availability checks before the call
    inference_regions: int | None = None  # without amp.scale_loss: how many model calls are wrapped
    notes: list[str] = field(default_factory=list)

    @property
    def calls(self) -> list[cst.Call]:
        return [call for _, _, call in self.branches] or [self.call]


@dataclass
class _Scaler:
    ref: str  # `scaler` or `self.scaler`
    create: str  # the statement creating it (an `if` choosing its arguments like amp.initialize's)
    anchor: cst.CSTNode  # statement it replaces (the initialize) or is inserted before
    replaces: bool
    where: str

    @property
    def summary(self) -> str:
        lines = self.create.strip().splitlines()
        if len(lines) == 1:
            return f"`{lines[0]}`"
        return f"`{self.ref} = torch.npu.amp.GradScaler(...)` (its arguments chosen by `{lines[0]}`, as amp.initialize's were)"


class AmpPlan:
    """What the native migration of one file's apex.amp does, or why it cannot (see module doc)."""

    def __init__(self, rule: ApexRule) -> None:
        self.rule = rule
        self.ctx = rule.ctx
        self.edits: FileEdits = rule.edits
        self.index = self.edits.index
        self.options = rule.options
        self.collector = AmpCollector(NameResolver(self.ctx.module), old_torch_code(self.ctx))
        walk_batched(self.ctx.module, [self.collector.resolver, self.collector])
        self.problems: list[NotMigrated] = []
        self.actions: list = []  # callables registering edits and planned reports
        self.planned: dict[cst.CSTNode, list] = {}  # node -> report callables (run when visited)

    # public -------------------------------------------------------------------------------

    def build(self) -> None:
        collector = self.collector
        self._unsupported_uses()
        if not (collector.initializes or collector.scale_withs or self._core_calls()):
            return
        if self._ascend_apex:
            self._ascend()
            return
        try:
            self._native()
        except NotMigrated as problem:
            self.problems.append(problem)
        if self.problems:
            self._report_problems()
        else:
            for action in self.actions:
                action()
            if self.actions and self.options.portable:
                portable.need(self.rule, Tier.REVIEW, self.device)

    @property
    def _ascend_apex(self) -> bool:
        """``--apex=ascend``: apex.amp kept for Ascend's apex (not in portable output: CUDA hosts have NVIDIA's)."""
        return self.options.apex == "ascend" and not self.options.portable

    @property
    def device(self) -> str:
        """The device type the native AMP code names (portable output: the host's accelerator)."""
        return portable.device_type() if self.options.portable else '"npu"'

    def report_at(self, node: cst.CSTNode) -> None:
        for report in self.planned.pop(node, ()):
            report()

    # planning helpers -----------------------------------------------------------------------

    def _plan(self, node: cst.CSTNode, report) -> None:
        self.planned.setdefault(node, []).append(report)

    def _core_calls(self) -> list[tuple[cst.Call, str]]:
        core = {"apex.amp.master_params", "apex.amp.state_dict", "apex.amp.load_state_dict", "apex.amp.scale_loss"}
        return [(c, n) for c, n in self.collector.amp_calls if n in core]

    def _unsupported_uses(self) -> None:
        """NPU316 (``--apex=native``): apex.amp APIs with no native AMP counterpart."""
        if self._ascend_apex:
            return
        uses = [
            (c, n) for c, n in self.collector.amp_calls if n.rsplit(".", 1)[1] in UNSUPPORTED or n == "apex.amp.init"
        ]
        uses += self.collector.amp_references
        for node, name in uses:
            short = name.rsplit(".", 1)[1]
            note = UNSUPPORTED.get(short, "the pre-1.0 apex.amp API; use torch.autocast")
            self._plan(
                node,
                lambda node=node, short=short, note=note: self.rule.report(
                    "NPU316", node, f"`amp.{short}` has no native AMP counterpart: {note}"
                ),
            )

    def _statement(self, node: cst.CSTNode) -> cst.CSTNode:
        return self.collector.statement_of[node]

    def _function(self, stmt: cst.CSTNode):
        return self.index.function.get(stmt)

    # native -------------------------------------------------------------------------------

    def _native(self) -> None:
        if not self.collector.initializes and not self.collector.scale_withs:
            self._plan_other_calls(None)  # helpers of a training loop that lives in another file
            return
        init = self._initialize()
        for node, stmt in self.collector.other_references:
            what = (
                "is read as a value (an availability test, or the module passed on)"
                if isinstance(node, cst.Name)
                else "uses apex.amp beyond the calls that become native AMP (such as its loss scalers' state)"
            )
            self.problems.append(
                NotMigrated(
                    stmt,
                    f"apex.amp not migrated: `{code_of(node)}` here {what}; decide by "
                    "hand what it becomes once apex.amp is gone",
                )
            )
        sites = [self._site(w, c) for w, c in self.collector.scale_withs]
        sites = [s for s in sites if s is not None]
        for stmt in [init.statement, *map(self._statement, init.calls), *(site.with_node for site in sites)]:
            if suppressed(stmt):
                raise NotMigrated(
                    stmt,
                    "apex.amp not migrated: a `# noqa` keeps this part, and half a migration "
                    "would not run (the migration of a file's apex.amp is all or nothing)",
                )
        if self.problems:
            return
        autocast = not init.disabled and init.opt_level != "O0"
        if autocast and not sites and given_optimizers(init.bound):
            raise NotMigrated(
                init.call,
                "apex.amp not migrated: amp.initialize is given optimizers but no amp.scale_loss "
                "is in this file: the loss is scaled elsewhere (a loss-scaler helper such as an `ApexScaler` "
                "class), which would still call apex.amp; migrate that helper and this call together by hand",
            )
        scaler_mode = autocast and self.options.precision in ("fp16", "keep") and bool(sites)
        dtype = "torch.bfloat16" if self.options.precision == "bf16" else "torch.float16"
        if autocast and sites:
            self._regions(init, sites, dtype)
        elif autocast:
            self._inference_regions(init, dtype)
        scaler = self._scaler(init, sites) if scaler_mode else None
        if scaler is not None:
            self._steps(init, sites, scaler)
        self._plan_initialize(init, scaler, autocast, dtype)
        for site in sites:
            self._plan_site(site, scaler)
        self._plan_other_calls(scaler)

    def _initialize(self) -> _Initialize:
        calls = self.collector.initializes
        if not calls:
            node = self.collector.scale_withs[0][0] if self.collector.scale_withs else self._core_calls()[0][0]
            raise NotMigrated(
                node,
                "apex.amp not migrated: amp.initialize is not in this file, so the opt_level and the models it returns are unknown",
            )
        head, tests = self._alternatives(calls) if len(calls) > 1 else (None, [None])
        parsed = [self._parse_initialize(call) for call in calls]
        if len({shape for *_, shape in parsed}) > 1:
            raise NotMigrated(
                calls[1],
                "apex.amp not migrated: the amp.initialize calls of this `if` differ in more than "
                "their loss scaling (models, optimizers, results, opt_level or enabled); migrate them by hand",
            )
        stmt, bound, target, opt_level, _ = parsed[0]
        anchor = head or stmt
        enabled = literal_arg(bound, "enabled", True)
        conditions, guard = self._guards(anchor)
        if enabled is NOT_LITERAL:
            conditions.append(bound["enabled"].value)
        init = _Initialize(
            statement=anchor,
            call=calls[0],
            bound=bound,
            opt_level=None if opt_level is NOT_LITERAL else opt_level,
            enabled=conjunction(conditions),
            disabled=enabled is False,
            models=dotted_names(bound.get("models")) + dotted_names(target[0]),
            optimizers=dotted_names(bound.get("optimizers")) + dotted_names(target[1]),
            targets=dotted_names(target[0]) + dotted_names(target[1]),
            reassign=self._reassignment(bound, target),
            guard=guard,
            conditions=conditions,
            branches=[(test, parts[1], call) for test, parts, call in zip(tests, parsed, calls)],
            checks=self._availability_checks(anchor),
        )
        if opt_level is NOT_LITERAL:
            init.notes.append(
                f"opt_level={code_of(bound['opt_level'].value)} is no longer read: O1/O2 mixed precision is assumed"
            )
        return init

    def _parse_initialize(self, call: cst.Call) -> tuple:
        """(statement, bound arguments, targets, opt_level, shape): shape is what alternatives share."""
        stmt = self._statement(call)
        try:
            bound = bind(call, INITIALIZE_PARAMS, max_positional=2)
        except Unbindable as exc:
            raise NotMigrated(call, f"apex.amp not migrated: amp.initialize arguments: {exc}") from None
        target = self._initialize_target(stmt, call, "optimizers" in bound)
        opt_level = literal_arg(bound, "opt_level", "O1")
        if opt_level == "O3":
            raise NotMigrated(
                call,
                "apex.amp not migrated: opt_level O3 is pure float16 training (no master weights); "
                "cast the model with .half() / .bfloat16() by hand, or use O1 semantics with torch.autocast",
            )
        if opt_level is not NOT_LITERAL and opt_level not in ("O0", "O1", "O2"):
            raise NotMigrated(call, f"apex.amp not migrated: unknown opt_level {opt_level!r}")
        shared = [t for t in target if t is not None] + [
            bound[n].value for n in ("models", "optimizers", "opt_level", "enabled") if n in bound
        ]
        shape = tuple(code_of(node) for node in shared) + (len(shared),)
        return stmt, bound, target, opt_level, shape

    def _alternatives(self, calls: list[cst.Call]) -> tuple[cst.If, list]:
        """The ``if``/``elif``/``else`` each of whose branches is one of ``calls`` and nothing else
        (NVIDIA BERT's choice of a loss scale), and its tests: one amp.initialize in effect."""
        stmts = [self._statement(c) for c in calls]
        place = self.index.placement.get(stmts[0])
        owner = self.index.owner.get(place.block, (None, None))[0] if place else None
        head = chain_head(self.index, owner) if isinstance(owner, cst.If) else None
        branches = if_chain(head) if head is not None else None
        if (
            branches is None
            or len(branches) != len(stmts)
            or not all(
                isinstance(block, cst.IndentedBlock) and len(block.body) == 1 and block.body[0] is stmt
                for (_, block), stmt in zip(branches, stmts)
            )
        ):
            raise NotMigrated(
                calls[1],
                "apex.amp not migrated: amp.initialize is called more than once in this file (only "
                "an `if`/`elif`/`else` whose every branch is one amp.initialize statement is one choice)",
            )
        tests = [test for test, _ in branches]
        impure = next((t for t in tests if t is not None and not is_pure(t)), None)
        if impure is not None:
            raise NotMigrated(
                calls[0],
                f"apex.amp not migrated: `{code_of(impure)}`, which chooses between the "
                "amp.initialize calls, is not a plain condition (it calls a function)",
            )
        return head, tests

    def _availability_checks(self, stmt: cst.CSTNode) -> list[cst.CSTNode]:
        """``if not is_apex_available(): raise ...`` before amp.initialize in its block."""
        place = self.index.placement[stmt]
        return [s for s in place.block.body[: place.index] if availability_check(s)]

    def _initialize_target(self, stmt, call, with_optimizers: bool) -> tuple:
        """(models target, optimizers target) of ``models, optimizers = amp.initialize(...)``."""
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if stmt not in self.index.placement or small is None:
            raise NotMigrated(call, "apex.amp not migrated: amp.initialize must be a statement of its own")
        if isinstance(small, cst.Expr) and small.value is call:
            return None, None
        if not (isinstance(small, cst.Assign) and small.value is call and len(small.targets) == 1):
            raise NotMigrated(call, "apex.amp not migrated: amp.initialize's result must be assigned to names")
        target = small.targets[0].target
        if with_optimizers:
            if not (isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2):
                raise NotMigrated(
                    call, "apex.amp not migrated: expected `model, optimizer = amp.initialize(model, optimizer, ...)`"
                )
            return target.elements[0].value, target.elements[1].value
        return target, None

    def _reassignment(self, bound, target) -> str | None:
        """``net, opt = model, optimizer`` when amp.initialize returned to other names."""
        pairs = [(target[0], bound.get("models")), (target[1], bound.get("optimizers"))]
        pairs = [(t, a.value) for t, a in pairs if t is not None and a is not None]
        if all(code_of(t) == code_of(a) for t, a in pairs):
            return None
        targets = ", ".join(code_of(t) for t, _ in pairs)
        values = ", ".join(code_of(a) for _, a in pairs)
        return f"{targets} = {values}"

    def _guards(self, stmt) -> tuple[list, cst.CSTNode | None]:
        """``if`` tests around ``stmt`` inside its function (outermost last) and the outermost if."""
        conditions, guard = [], None
        block = self.index.placement[stmt].block
        while block in self.index.owner:
            owner, role = self.index.owner[block]
            if isinstance(owner, (cst.FunctionDef, cst.ClassDef)):
                break
            if not (
                isinstance(owner, cst.If) and role == "body" and is_pure(owner.test) and owner in self.index.placement
            ):
                if isinstance(owner, cst.Else) or (isinstance(owner, cst.If) and owner not in self.index.placement):
                    where = "an `elif`/`else` branch"
                elif isinstance(owner, cst.If):
                    where = "an `if` whose test is not a plain condition"
                else:
                    where = f"a `{type(owner).__name__.lower()}` block"
                raise NotMigrated(
                    stmt,
                    f"apex.amp not migrated: amp.initialize inside {where} "
                    "(only `if <condition>:` guards can become `enabled=` arguments)",
                )
            conditions.insert(0, owner.test)
            guard = owner
            block = self.index.placement[owner].block
        return conditions, guard

    def _site(self, with_node: cst.With, call: cst.Call) -> _Site | None:
        try:
            if len(with_node.items) != 1 or with_node.items[0].asname is None:
                raise NotMigrated(
                    with_node, "`with amp.scale_loss(...) as scaled_loss:` expected (one item, with `as`)"
                )
            scaled = with_node.items[0].asname.name
            if not isinstance(scaled, cst.Name):
                raise NotMigrated(with_node, "amp.scale_loss's result must be bound to a name")
            try:
                bound = bind(call, SCALE_LOSS_PARAMS)
            except Unbindable as exc:
                raise NotMigrated(with_node, f"amp.scale_loss arguments: {exc}") from None
            if "loss" not in bound or "optimizers" not in bound:
                raise NotMigrated(with_node, "amp.scale_loss needs the loss and the optimizer(s)")
            if with_node not in self.index.placement or not isinstance(with_node.body, cst.IndentedBlock):
                raise NotMigrated(with_node, "amp.scale_loss in a one-line block")
            if not only_backward(with_node.body, scaled.value):
                raise NotMigrated(
                    with_node,
                    f"`{scaled.value}` is used for more than `{scaled.value}.backward(...)` in the "
                    "amp.scale_loss block; the native equivalent needs a hand-written rewrite",
                )
        except NotMigrated as problem:
            self.problems.append(NotMigrated(problem.node, f"apex.amp not migrated: {problem}"))
            return None
        return _Site(with_node, call, bound, scaled.value, dotted_names(bound["optimizers"]), self._function(with_node))

    # forward regions (NPU312) -------------------------------------------------------------

    def _regions(self, init: _Initialize, sites: list[_Site], dtype: str) -> None:
        lower: dict[cst.CSTNode, int] = {}
        placement = self.index.placement[init.statement]
        lower[placement.block] = placement.index + 1
        calls = {name for model in self._model_names(init) for name in (model, f"{model}.forward")}
        if not calls:
            self.problems.append(
                NotMigrated(
                    init.call,
                    "apex.amp not migrated: the models passed to amp.initialize are not "
                    "plain names, so their forward passes cannot be found",
                )
            )
            return
        found: dict[cst.CSTNode, list[tuple[int, int]]] = {}
        assumed: dict[cst.CSTNode, set[str]] = {}
        for site in sites:
            try:
                assumed[site.function] = self._condition_reaches(init, site.function, site.with_node)
                block, start, end, after = self._region(site, calls, lower)
            except NotMigrated as problem:
                self.problems.append(problem)
                continue
            lower[block] = after
            found.setdefault(block, []).append((start, end))
        for block, spans in found.items():
            autocast = self._autocast(init, dtype, block)
            names = assumed.get(self._function(block.body[spans[0][0]]), set())
            note = ""
            if names:
                listed = ", ".join(f"`{n}`" for n in sorted(names))
                note = (
                    f"; `enabled={init.enabled}` reads {listed} of this function, taken to be what amp.initialize's "
                    "condition read in its own function"
                )
            self.actions.append(
                lambda block=block, spans=spans, note=note, autocast=autocast: self._wrap(
                    block, spans, autocast, REGION_WHY + note
                )
            )

    def _model_names(self, init: _Initialize) -> set[str]:
        """The models amp.initialize returned and what wraps them (``ddp_model = DDP(model)``)."""
        names = set(init.models)
        grown = True
        while grown:
            wrappers = {target for target, wrapped in self.collector.wrappings if wrapped in names}
            grown = not wrappers <= names
            names |= wrappers
        return names

    def _region(self, site: _Site, calls: set[str], lower: dict) -> tuple:
        """(block, first, last, next lower bound) of the forward region of one scale_loss."""
        loss_names = names_read(site.bound["loss"].value)
        stmt = site.with_node
        while True:
            place = self.index.placement[stmt]
            start_at = lower.get(place.block, 0)
            body = place.block.body
            end = next((i for i in range(place.index - 1, start_at - 1, -1) if assigns(body[i], loss_names)), None)
            if end is not None:
                break
            owner = self.index.owner.get(place.block)
            if owner is None or not isinstance(owner[0], cst.If) or owner[0] not in self.index.placement:
                loss = code_of(site.bound["loss"].value)
                raise NotMigrated(
                    site.with_node,
                    f"forward region not found: the loss `{loss}` passed to amp.scale_loss is "
                    "not computed before it in this block (it comes from another function or block); wrap "
                    'the forward pass and the loss computation in `with torch.autocast("npu", ...)` by hand',
                )
            stmt = owner[0]
        start = next((i for i in range(start_at, end + 1) if self.collector.callees.get(body[i], set()) & calls), None)
        if start is None:
            models = ", ".join(f"`{c}`" for c in sorted(calls) if not c.endswith(".forward"))
            raise NotMigrated(
                site.with_node,
                f"forward region not found: no call of {models} (returned by amp.initialize) "
                "before the loss in this block; the model seems to run in a helper, so wrap its forward pass in "
                '`with torch.autocast("npu", ...)` by hand',
            )
        return place.block, start, end, place.index + 1

    def _condition_reaches(self, init: _Initialize, function, node: cst.CSTNode) -> set[str]:
        """Whether ``enabled=<amp.initialize's condition>`` can be written in ``function``: it
        reads no name local to the function calling amp.initialize, or only ``self`` (methods of one
        class), or names that ``function`` also takes as parameters (returned: an assumption)."""
        init_function = self._function(init.statement)
        if not init.conditions or init_function is None or self._nested_in(function, init_function):
            return set()
        local = set().union(*map(names_read, init.conditions)) & function_locals(init_function)
        if (
            local == {"self"}
            and first_param(init_function) == first_param(function) == "self"
            and self._same_class(init_function, {function})
        ):
            return set()
        params = {p.name.value for p in function.params.params} if function is not None else set()
        if not local or local <= params:
            return local - {"self"}
        names = ", ".join(f"`{n}`" for n in sorted(local - params))
        raise NotMigrated(
            node,
            f"apex.amp not migrated: the forward region here needs `enabled={init.enabled}`, the condition "
            f"of amp.initialize, but {names} is local to the function calling amp.initialize; wrap the "
            'forward pass in `with torch.autocast("npu", ...)` by hand',
        )

    def _inference_regions(self, init: _Initialize, dtype: str) -> None:
        """No amp.scale_loss (inference): the statements calling the model after amp.initialize, in its function."""
        calls = {name for model in self._model_names(init) for name in (model, f"{model}.forward")}
        function = self._function(init.statement)
        after = self.collector.order[init.statement]
        found: dict[cst.CSTNode, list[int]] = {}
        for stmt, callees in self.collector.callees.items():
            if (
                isinstance(stmt, cst.SimpleStatementLine)
                and callees & calls
                and stmt in self.index.placement
                and self._function(stmt) is function
                and self.collector.order.get(stmt, -1) > after
            ):
                place = self.index.placement[stmt]
                found.setdefault(place.block, []).append(place.index)
        init.inference_regions = sum(len(consecutive_runs(positions)) for positions in found.values())
        why = "apex O1/O2 cast the model's forward passes; amp.initialize had no optimizer and no loss is scaled (inference)"
        for block, positions in found.items():
            autocast = self._autocast(init, dtype, block)
            self.actions.append(
                lambda block=block, runs=consecutive_runs(positions), autocast=autocast: self._wrap(
                    block, runs, autocast, why
                )
            )

    def _autocast(self, init: _Initialize, dtype: str, block: cst.CSTNode) -> str:
        """The context manager wrapping a forward region in ``block``: ``torch.autocast(..., enabled=<the
        condition of amp.initialize>)``, but ``torch.autocast(...) if <condition> else
        contextlib.nullcontext()`` inside another autocast (``with amp_autocast():``, timm's native AMP,
        MambaVision's ``validate.py``): there ``enabled=False`` would switch the outer one off (round 29)."""
        autocast = f"torch.autocast({self.device}, dtype={dtype})"
        if not init.enabled:
            return autocast
        if not self._under_autocast(block):
            return f"torch.autocast({self.device}, dtype={dtype}, enabled={init.enabled})"
        self.edits.need_import("NPU312", Tier.REVIEW, "contextlib")
        return f"{autocast} if {init.enabled} else contextlib.nullcontext()"

    def _under_autocast(self, block: cst.CSTNode) -> bool:
        """A ``with`` around ``block`` enters a context manager whose name says autocast."""
        return any(
            isinstance(owner, cst.With)
            and any("autocast" in (code_of(item.item).split("(")[0]).lower() for item in owner.items)
            for owner in self.index.ancestors(block.body[0])
        )

    def _wrap(self, block, spans, autocast: str, why: str) -> None:
        for start, end in spans:
            self.edits.wrap(block, start, end, lambda members: with_statement(autocast, members))
        texts = []
        for start, end in spans:
            first, last = brief(block.body[start]), brief(block.body[end])
            texts.append(f"`{first}`" if start == end else f"`{first}` … `{last}`")
        message = f"forward pass wrapped in `with {autocast}:` ({'; '.join(texts)}): {why}"
        self.edits.need_import("NPU312", Tier.REVIEW, "torch")
        self._plan(
            block, lambda: self.rule.report("NPU312", block, message, self.edits.wrap_fix(block), tier=Tier.REVIEW)
        )

    # the scaler (fp16 / keep) ---------------------------------------------------------------

    def _scaler(self, init: _Initialize, sites: list[_Site]) -> _Scaler | None:
        users = {site.function for site in sites}
        users |= {self._function(self._statement(c)) for c, n in self._core_calls() if n.endswith("state_dict")}
        init_function = self._function(init.statement)
        name = next(n for n in ("scaler", "amp_scaler", "grad_scaler") if not self.rule.resolver.is_bound(n))
        anchor = init.guard or init.statement
        where = "where amp.initialize was"
        if init_function is None or all(self._nested_in(u, init_function) for u in users):
            return _Scaler(name, self._scaler_create(init, name), anchor, anchor is init.statement, where)
        if self._same_class(init_function, users) and all(first_param(f) == "self" for f in {init_function, *users}):
            ref = f"self.{self._free_attribute(init_function)}"
            return _Scaler(ref, self._scaler_create(init, ref), anchor, anchor is init.statement, where)
        if init.enabled:
            raise NotMigrated(
                init.call,
                f"apex.amp not migrated: the GradScaler is needed outside the function calling "
                f"amp.initialize, but its `enabled` condition ({init.enabled}) is local to it; create the "
                "scaler by hand where both can reach it",
            )
        top = init.statement
        while self.index.placement[top].block is not self.ctx.module:
            top = self.index.ancestors(top)[-1]
        create = self._scaler_create(init, name, function_locals(init_function))
        if "\n" in create.strip():
            raise NotMigrated(
                init.call,
                "apex.amp not migrated: the GradScaler is needed outside the function calling "
                "amp.initialize, and the loss scale is chosen in that function; create the scaler by hand",
            )
        return _Scaler(
            name,
            create,
            top,
            False,
            "at module level (the functions calling amp.initialize and amp.scale_loss differ, like apex's global state)",
        )

    def _scaler_create(self, init: _Initialize, ref: str, hidden: set[str] = frozenset()) -> str:
        """``ref = torch.npu.amp.GradScaler(...)``, or an ``if`` choosing its arguments as the tests
        choosing between amp.initialize calls did; ``hidden``: names it cannot read where it is created."""
        enabled = [f"enabled={init.enabled}"] if init.enabled else []
        sources = []
        for _, bound, _ in init.branches:
            arg = bound.get("loss_scale")
            readable = arg is None or not (names_read(arg.value) & hidden)
            args, note = loss_scale_args(arg, self.options.precision, readable)
            if note and note not in init.notes:
                init.notes.append(note)
            if self.options.portable:
                if any(a.startswith("dynamic=") for a in args):
                    raise NotMigrated(
                        init.call,
                        "apex.amp not portable yet: a static loss scale (`dynamic=` of torch.npu.amp.GradScaler) "
                        "has no torch.amp.GradScaler counterpart on CUDA; kept as written (it runs on CUDA)",
                    )
                args = [portable.device_type(), *args]
            scaler = "torch.amp.GradScaler" if self.options.portable else "torch.npu.amp.GradScaler"
            sources.append(f"{ref} = {scaler}({', '.join(args + enabled)})")
        if len(set(sources)) == 1:
            return sources[0]
        return mirror_chain([test for test, _, _ in init.branches], sources)

    def _free_attribute(self, function) -> str:
        """``scaler`` unless the class of ``function`` already has a ``self.scaler``."""
        place = self.index.placement.get(function)
        cls = self.index.owner[place.block][0]
        taken = {node.attr.value for node in self_attributes(cls)}
        return next(n for n in ("scaler", "amp_scaler", "grad_scaler", "apex_amp_scaler") if n not in taken)

    def _nested_in(self, function, outer) -> bool:
        while function is not None:
            if function is outer:
                return True
            function = self.index.function.get(function)
        return False

    def _same_class(self, function, users) -> bool:
        def cls(fn):
            place = self.index.placement.get(fn)
            owner = self.index.owner.get(place.block) if place else None
            return owner[0] if owner and isinstance(owner[0], cst.ClassDef) else None

        return cls(function) is not None and all(cls(u) is cls(function) for u in users)

    # optimizer steps and clipping (NPU313) -------------------------------------------------

    def _steps(self, init: _Initialize, sites: list[_Site], scaler: _Scaler) -> None:
        functions = {site.function for site in sites}
        init_function = self._function(init.statement)
        after = self.collector.order[init.statement]

        def in_flow(node: cst.CSTNode) -> bool:
            """In a function calling amp.scale_loss, or after amp.initialize in its function (trainers)."""
            stmt = self._statement(node)
            function = self._function(stmt)
            return function in functions or (function is init_function and self.collector.order.get(stmt, -1) > after)

        optimizers = {name for site in sites for name in site.optimizers}
        if not optimizers or any(not site.optimizers for site in sites):
            raise NotMigrated(
                sites[0].with_node, "apex.amp not migrated: the optimizers passed to amp.scale_loss are not plain names"
            )
        steps = [c for c in self.collector.steps if dotted_name(c.func.value) in optimizers and in_flow(c)]
        missing = optimizers - {dotted_name(c.func.value) for c in steps}
        if missing:
            names = ", ".join(f"`{m}.step()`" for m in sorted(missing))
            raise NotMigrated(
                sites[0].with_node,
                f"apex.amp not migrated: {names} not found in the function calling "
                "amp.scale_loss (nor after amp.initialize); call `scaler.step(optimizer)` and `scaler.update()` "
                "there by hand",
            )
        last_in_block = {}
        for call in steps:
            stmt = self._step_statement(call)
            last_in_block[self.index.placement[stmt].block] = stmt
        for call in steps:
            stmt = self._statement(call)
            self.actions.append(
                lambda call=call, stmt=stmt, last=stmt in last_in_block.values(): self._plan_step(
                    call, stmt, scaler, last
                )
            )
        self._gradient_reads(in_flow, optimizers, scaler, steps)

    def _step_statement(self, call: cst.Call) -> cst.CSTNode:
        stmt = self._statement(call)
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if call.args or not (isinstance(small, cst.Expr) and small.value is call) or stmt not in self.index.placement:
            raise NotMigrated(
                call,
                "apex.amp not migrated: `optimizer.step()` must be a statement of its own, without a closure, "
                "to become `scaler.step(optimizer)`",
            )
        return stmt

    def _plan_step(self, call: cst.Call, stmt, scaler: _Scaler, last: bool) -> None:
        optimizer = dotted_name(call.func.value)
        self.edits.replace(
            stmt, lambda updated: [replace_call(updated, f"{scaler.ref}.step({optimizer})")], "NPU313", Tier.REVIEW
        )
        message = f"`{optimizer}.step()` → `{scaler.ref}.step({optimizer})`"
        if last:
            self.edits.insert_after(stmt, [statement(f"{scaler.ref}.update()")], "NPU313", Tier.REVIEW)
            message += f" followed by `{scaler.ref}.update()` (once, after the last step of the block)"
        message += ": the GradScaler skips steps whose gradients overflowed, as apex did"
        self._plan(stmt, lambda: self.edits.report(self.rule, "NPU313", stmt, message, call, tier=Tier.REVIEW))

    def _gradient_reads(self, in_flow, optimizers: set[str], scaler: _Scaler, steps: list[cst.Call]) -> None:
        """``scaler.unscale_(opt)`` before gradient clipping and before any other use of
        ``amp.master_params(opt)``: apex's master gradients were unscaled when amp.scale_loss
        exited, the GradScaler's stay scaled until the step."""
        reads: dict[cst.CSTNode, str | None] = {}
        for call, name in self._core_calls():
            if name == "apex.amp.master_params" and in_flow(call) and len(call.args) == 1:
                optimizer = dotted_name(call.args[0].value)
                if optimizer in optimizers:
                    reads[self._statement(call)] = optimizer
        for call in self.collector.clips:
            if in_flow(call):
                reads.setdefault(self._statement(call), None)
        first: dict[tuple, cst.CSTNode] = {}
        for stmt in sorted(reads, key=lambda s: self.collector.order.get(s, 0)):
            optimizer = reads[stmt]
            if optimizer is None:
                if len(optimizers) != 1:
                    raise NotMigrated(
                        stmt,
                        "apex.amp not migrated: gradients are clipped with several optimizers; call "
                        "`scaler.unscale_(optimizer)` for each before clipping, by hand",
                    )
                optimizer = next(iter(optimizers))
            if stmt not in self.index.placement:
                raise NotMigrated(stmt, "apex.amp not migrated: gradient clipping inside a one-line block")
            if not self._before_step(stmt, optimizer, steps):
                raise NotMigrated(
                    stmt,
                    f"apex.amp not migrated: `{brief(stmt)}` reads the gradients outside the block of "
                    f"`{optimizer}.step()` (with gradient accumulation: at every micro-batch); under float16 "
                    f"`scaler.unscale_({optimizer})` must precede it and may run only once per step; move it "
                    "next to the step and migrate by hand, or use --precision bf16",
                )
            first.setdefault((self.index.placement[stmt].block, optimizer), stmt)
        for (_, optimizer), stmt in first.items():
            self.actions.append(lambda stmt=stmt, optimizer=optimizer: self._plan_unscale(stmt, optimizer, scaler))

    def _before_step(self, stmt: cst.CSTNode, optimizer: str, steps: list[cst.Call]) -> bool:
        """A step of ``optimizer`` follows ``stmt`` (or an ``if`` around it) in the same block."""
        after = [self.index.placement.get(self._statement(c)) for c in steps if dotted_name(c.func.value) == optimizer]
        node = stmt
        while node in self.index.placement:
            place = self.index.placement[node]
            if any(p is not None and p.block is place.block and p.index > place.index for p in after):
                return True
            owner = self.index.owner.get(place.block, (None, None))[0]
            if not isinstance(owner, cst.If):
                return False
            node = chain_head(self.index, owner)
        return False

    def _plan_unscale(self, stmt, optimizer: str, scaler: _Scaler) -> None:
        self.edits.insert_before(stmt, [statement(f"{scaler.ref}.unscale_({optimizer})")], "NPU313", Tier.REVIEW)
        message = (
            f"`{scaler.ref}.unscale_({optimizer})` before gradient clipping: the GradScaler's gradients stay scaled "
            "until the step (apex unscaled them when amp.scale_loss exited)"
        )
        self._plan(stmt, lambda: self.edits.report(self.rule, "NPU313", stmt, message, tier=Tier.REVIEW))

    # amp.initialize and amp.scale_loss (NPU310, NPU311) -------------------------------------

    def _plan_initialize(self, init: _Initialize, scaler: _Scaler | None, autocast: bool, dtype: str) -> None:
        notes = list(init.notes)
        given = {n for _, bound, _ in init.branches for n in bound}
        dropped = [
            n
            for n in INITIALIZE_PARAMS
            if n in given and n not in ("models", "optimizers", "enabled", "opt_level", "loss_scale")
        ]
        if scaler is None and "loss_scale" in given:
            dropped.append("loss_scale")
        if dropped:
            notes.append(
                "dropped: "
                + ", ".join(
                    f"`{n}`" + (f" ({DROPPED_INITIALIZE[n]})" if DROPPED_INITIALIZE.get(n) else "") for n in dropped
                )
            )
        if len(init.branches) > 1:
            notes.insert(
                0,
                f"the {len(init.branches)} amp.initialize calls of `if {code_of(init.branches[0][0])}:` are one choice",
            )
        if not autocast:
            head = (
                "`amp.initialize` removed: apex.amp is disabled here (O0 or enabled=False), which is float32 training"
            )
        elif init.inference_regions == 0:
            head = (
                "`amp.initialize` removed: no call of the model follows it in this function, so no forward pass is wrapped "
                f'in `torch.autocast("npu", dtype={dtype})`: where the model runs (another function or file) it now runs '
                "in float32 unless wrapped by hand"
            )
        elif init.inference_regions is not None:
            head = (
                f"`amp.initialize` removed: the calls of the model that follow it in this function run under "
                f'`torch.autocast("npu", dtype={dtype})` (no loss is scaled: inference)'
            )
            notes.append("calls of the model in other functions now run in float32")
        elif scaler is None:
            head = (
                f"`amp.initialize` removed: native autocast replaces apex.amp (dtype={dtype}; "
                + ("BF16 needs no loss scaling" if dtype == "torch.bfloat16" else "no loss was scaled")
                + ")"
            )
            notes.append(EVALUATION_NOTE)
        else:
            head = f"`amp.initialize` removed; {scaler.summary} created {scaler.where} (--precision {self.options.precision})"
            notes.append(EVALUATION_NOTE)
        message = "; ".join([head, *notes])
        stmt = init.statement
        reassign = [statement(init.reassign)] if init.reassign else []

        def register() -> None:
            if scaler is not None and scaler.replaces:
                self.edits.replace(stmt, lambda _: [statement(scaler.create), *reassign], "NPU310", Tier.REVIEW)
            elif reassign:
                self.edits.replace(stmt, lambda _: reassign, "NPU310", Tier.REVIEW)
            else:
                self.edits.remove(stmt, "NPU310", Tier.REVIEW)
            if scaler is not None and not scaler.replaces:
                self.edits.insert_before(scaler.anchor, [statement(scaler.create)], "NPU310", Tier.REVIEW)
                text = f"{scaler.summary} inserted here ({scaler.where})"
                self._plan(
                    scaler.anchor, lambda: self.edits.report(self.rule, "NPU310", scaler.anchor, text, tier=Tier.REVIEW)
                )
            for call in init.calls:
                self.edits.drop_ref(root_name(call.func), Tier.REVIEW)
            if scaler is not None:
                self.edits.need_import("NPU310", Tier.REVIEW, "torch")
            self._plan(stmt, lambda: self.edits.report(self.rule, "NPU310", stmt, message, init.call, tier=Tier.REVIEW))
            for check in init.checks:
                self.edits.remove(check, "NPU310", Tier.REVIEW)
                text = f"`{brief(check)}` removed: the migrated code no longer needs apex"
                self._plan(
                    check,
                    lambda check=check, text=text: self.edits.report(
                        self.rule, "NPU310", check, text, tier=Tier.REVIEW
                    ),
                )

        self.actions.append(register)

    def _plan_site(self, site: _Site, scaler: _Scaler | None) -> None:
        notes = []
        for name, why in (
            ("loss_id", "one scaler serves every loss"),
            ("delay_unscale", "the GradScaler unscales at the step"),
            ("delay_overflow_check", ""),
            ("model", ""),
        ):
            if name in site.bound:
                notes.append(f"`{name}`" + (f" ({why})" if why else ""))
        loss = code_of(site.bound["loss"].value)
        target = (
            f"{scaler.ref}.scale({loss}).backward()"
            if scaler
            else f"{code_of(atom(site.bound['loss'].value))}.backward()"
        )
        message = f"`with amp.scale_loss(...) as {site.scaled}: {site.scaled}.backward()` → `{target}`"
        if notes:
            message += "; dropped: " + ", ".join(notes)
        stmt = site.with_node

        def register() -> None:
            self.edits.replace(
                stmt,
                lambda updated: backward_statements(updated, site.scaled, scaler.ref if scaler else None),
                "NPU311",
                Tier.REVIEW,
            )
            self.edits.drop_ref(root_name(site.call.func), Tier.REVIEW)
            self._plan(stmt, lambda: self.edits.report(self.rule, "NPU311", stmt, message, site.call, tier=Tier.REVIEW))
            if scaler is None:
                self._merge_identical_branches(site)

        self.actions.append(register)

    def _merge_identical_branches(self, site: _Site) -> None:
        """``if args.fp16: <scale_loss> else: loss.backward()`` has two equal branches once migrated."""
        place = self.index.placement[site.with_node]
        owner, role = self.index.owner.get(place.block, (None, None))
        if not (
            isinstance(owner, cst.If)
            and role == "body"
            and len(place.block.body) == 1
            and owner in self.index.placement
        ):
            return
        if (
            not isinstance(owner.orelse, cst.Else)
            or not isinstance(owner.orelse.body, cst.IndentedBlock)
            or not is_pure(owner.test)
        ):
            return
        migrated = [statement_source(s) for s in backward_statements(site.with_node, site.scaled, None)]
        if migrated != [statement_source(s) for s in owner.orelse.body.body]:
            return
        self.edits.replace(owner, lambda updated: list(updated.orelse.body.body), "NPU311", Tier.REVIEW)
        message = (
            f"`if {code_of(owner.test)}:` and its `else` are the same once amp.scale_loss is gone: one branch kept"
        )
        self._plan(owner, lambda: self.edits.report(self.rule, "NPU311", owner, message, owner.test, tier=Tier.REVIEW))

    # master_params, state_dict (NPU314, NPU315) ----------------------------------------------

    def _plan_other_calls(self, scaler: _Scaler | None) -> None:
        for call, name in self._core_calls():
            short = name.rsplit(".", 1)[1]
            if short == "master_params":
                self.actions.append(lambda call=call: self._plan_master_params(call))
            elif short in ("state_dict", "load_state_dict"):
                self._check_state_dict(call, short, scaler)
                self.actions.append(lambda call=call, short=short: self._plan_state_dict(call, short, scaler))
            elif short == "scale_loss":
                raise NotMigrated(call, "apex.amp not migrated: amp.scale_loss used outside a `with` statement")

    def _plan_master_params(self, call: cst.Call) -> None:
        if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
            self._plan(
                call,
                lambda: self.rule.report("NPU314", call, "amp.master_params with unusual arguments", tier=Tier.MANUAL),
            )
            return
        self.edits.drop_ref(root_name(call.func), Tier.EXACT)

        def fix(updated: cst.Call) -> cst.BaseExpression:
            optimizer = code_of(atom(updated.args[0].value))
            return expression(f'(p for group in {optimizer}.param_groups for p in group["params"])')

        message = "`amp.master_params(optimizer)` → the parameters of `optimizer.param_groups` (native AMP keeps no separate master copy)"
        self._plan(call, lambda: self.rule.report("NPU314", call, message, fix, tier=Tier.EXACT, needs_torch_npu=False))

    def _check_state_dict(self, call: cst.Call, short: str, scaler: _Scaler | None) -> None:
        if scaler is None and self.options.precision != "bf16" and not self.collector.initializes:
            raise NotMigrated(
                call,
                f"apex.amp not migrated: amp.{short} without amp.initialize in this file: whether a "
                "GradScaler holds the state is decided elsewhere",
            )
        if short == "load_state_dict" and scaler is None:
            stmt = self._statement(call)
            small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
            if not (isinstance(small, cst.Expr) and small.value is call and stmt in self.index.placement):
                raise NotMigrated(call, "apex.amp not migrated: amp.load_state_dict inside an expression")

    def _plan_state_dict(self, call: cst.Call, short: str, scaler: _Scaler | None) -> None:
        self.edits.drop_ref(root_name(call.func), Tier.REVIEW)
        if scaler is not None:
            message = (
                f"`amp.{short}` → `{scaler.ref}.{short}`: checkpoints keep their key; apex checkpoints saved before "
                "the migration hold loss-scaler state GradScaler cannot read (load them without it)"
            )
            fix = lambda updated: updated.with_changes(func=expression(f"{scaler.ref}.{short}"))  # noqa: E731
            self._plan(call, lambda: self.rule.report("NPU315", call, message, fix, tier=Tier.REVIEW))
        elif short == "state_dict":
            message = "`amp.state_dict()` → `{}`: BF16 / float32 training has no loss-scaler state; the checkpoint key stays loadable"
            self._plan(
                call,
                lambda: self.rule.report(
                    "NPU315", call, message, lambda _: cst.Dict([]), tier=Tier.REVIEW, needs_torch_npu=False
                ),
            )
        else:
            stmt = self._statement(call)
            self.edits.remove(stmt, "NPU315", Tier.REVIEW)
            message = "`amp.load_state_dict(...)` removed: BF16 / float32 training has no loss-scaler state to restore"
            self._plan(
                stmt,
                lambda: self.edits.report(
                    self.rule, "NPU315", stmt, message, call, tier=Tier.REVIEW, needs_torch_npu=False
                ),
            )

    # failure and ascend ---------------------------------------------------------------------

    def _report_problems(self) -> None:
        flagged = set()
        for problem in self.problems:
            if problem.node in flagged:
                continue
            flagged.add(problem.node)
            code = "NPU312" if "forward region" in str(problem) else "NPU310"
            self._plan(
                problem.node, lambda p=problem, code=code: self.rule.report(code, p.node, str(p), tier=Tier.MANUAL)
            )
        init = self.collector.initializes[0] if self.collector.initializes else None
        if init is not None and not {init, self._statement(init)} & flagged:  # no second marker on its line
            summary = f"apex.amp not migrated (all or nothing): {self.problems[0]}".replace(
                "apex.amp not migrated: ", ""
            )
            self._plan(init, lambda: self.rule.report("NPU310", init, summary, tier=Tier.MANUAL))

    def _ascend(self) -> None:
        """NPU317: keep apex.amp for Ascend's apex, with its NPU-specific ``combine_grad``."""
        for call in self.collector.initializes:
            try:
                bound = bind(call, INITIALIZE_PARAMS, max_positional=2)
            except Unbindable:
                continue
            if "combine_grad" in bound:
                continue
            opt_level = literal_arg(bound, "opt_level", "O1")
            if opt_level in ("O1", "O2"):
                message = (
                    "Ascend's apex: `combine_grad=True` fuses the gradients into one buffer for unscaling "
                    "(O1/O2 only); apex.amp itself stays"
                )
                fix = lambda updated: with_args(updated, [*updated.args, keyword_arg("combine_grad", "True")])  # noqa: E731
                self._plan(
                    call, lambda call=call, fix=fix, message=message: self.rule.report("NPU317", call, message, fix)
                )
            elif opt_level is NOT_LITERAL:
                message = (
                    "Ascend's apex: pass `combine_grad=True` when opt_level is O1 or O2 (it is not a literal here)"
                )
                self._plan(call, lambda call=call, message=message: self.rule.report("NPU317", call, message))
