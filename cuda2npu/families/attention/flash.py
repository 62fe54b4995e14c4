"""flash-attn → ``torch_npu.npu_fusion_attention`` (NPU401, NPU402), flash-attn APIs without an
exact NPU counterpart (NPU403), flash-attn's RMSNorm → ``torch_npu.npu_rms_norm`` (NPU404), the
removal of flash-attn imports nothing uses any more (NPU405) and flash-attn's rotary embedding →
``torch_npu.npu_rotary_mul`` through a module-level helper (NPU407).

Semantics: docs/reference/torch_npu.md §1 (§1.8 is the template); the flash-attn side
follows ``Dao-AILab/flash-attention`` ``flash_attn/flash_attn_interface.py`` 2.x.

Decisions worth knowing when reading the code:

* ``q`` (or the packed ``qkv`` / ``kv``) is needed more than once (``head_num``, the default
  ``scale``, the mask's device). A name, attribute or subscript is repeated; any other expression
  is hoisted into ``query = <expr>`` just before the statement when the call is the first thing
  that statement evaluates (so the order of evaluation is unchanged), and reported as manual
  otherwise. Hoisting and the rewrite are one fix on the statement, so they never apply apart.
* ``causal=True`` uses a module-level ``functools.lru_cache`` helper ``_npu_causal_mask(device)``
  (added once per file), so the 2048×2048 mask is built once per device, not once per call.
* Positional arguments after ``causal`` changed meaning between flash-attn releases (2.0–2.2:
  ``return_attn_probs``; 2.3+: ``window_size``; 2.6 inserted ``softcap`` before
  ``alibi_slopes``): a tuple literal in ``window_size``'s position is accepted, anything else
  must be passed by keyword.
* ``flash_attn_func`` only takes BSND tensors, so SBND/BNSD code transposes q, k and v at the
  call. When all three are the same transpose (``transpose``, ``permute``, ``einops.rearrange``),
  the untransposed tensors are passed as ``"SBH"`` (heads merged by ``flatten(2)``) or
  ``"BNSD"`` and the output is transposed back to BSND and made contiguous, as flash-attn's
  output is (code after the call may ``.view()`` it): one copy of the output instead of the
  kernel copying three transposed inputs. The untransposed ``q`` is
  what is repeated or hoisted; ``k``/``v`` are used once. Mixed transposes keep BSND.
* A class the file selects only when transformers 4.34–4.35's ``config._flash_attn_2_enabled`` is set
  (their ``XFlashAttention2``, vendored into many projects) never runs on an NPU host: that flag needs
  flash-attn installed (``flash_probes.flag_selected_classes``), unless the project sets it True itself
  (a config's ``_flash_attn_2_enabled=True`` default: then the class is migrated as any other). When the file's flash-attn imports are guarded
  (a probe ``if``, ``try``/``except ImportError``), the class is left as written, its imports stay, and
  the one NPU408 marker goes to where the class is selected; an unguarded import would fail on the NPU
  host, so then the class is migrated as any other code.
* A branch taken only where flash-attn is installed (``if is_flash_attn_2_available():``, flash_probes.py's
  ``in_probed_branch``) or a ``try`` body after a flash-attn import never runs on an NPU host: no
  NPU403 there (a value use such as ``inspect.signature(flash_attn_func)``, an unsupported call),
  and an import there keeps its unused names unless the whole ``if`` goes (NPU405). Calls there are
  still rewritten, with NPU408 at the probe, unless the code has a fallback (an ``else``, or the branch
  returns): then the branch is left as written (``never_run``). A value use is marked once per block.
  So is a branch with a fallback under ``if flash_attn_func is not None:`` (the import's handler leaves
  the name None), also through a flag assigned from that test: no NPU403 at such a guard when every
  call of the function is left so, or at the test of the branch itself.
* Portable output (``--portable``): each rewrite becomes ``(<NPU call> if q.device.type == "npu"
  else <the original call>)`` and the flash-attn imports the original calls need are guarded
  (``except ImportError: name = None``); an NPU branch already there (the other side of such a
  conditional) is left alone (``npu_aware``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import libcst as cst

from cuda2npu.analysis import portable
from cuda2npu.analysis.cuda_only_modules import (
    FLASH_UNPORTED,
    FLASH_UNPORTED_ARGUMENTS,
    FLASH_UNPORTED_PREFIXES,
    import_port,
)
from cuda2npu.analysis.exports import exported
from cuda2npu.analysis.flash_probes import (
    file_probe_flags,
    find_probe,
    flag_selected_classes,
    in_flash_import_try,
    in_probed_branch,
    patched_flash_functions,
)
from cuda2npu.analysis.kernel_rewrites import (
    CAUSAL_MASK_HELPER,
    HELPER_IMPORTS,
    PORTABLE_NOTE,
    ROTARY_HELPER,
    ModuleFacts,
    describe_support,
    dispatch,
    follow,
    fresh_name,
    import_needs,
    import_port_note,
    marked_imports,
    may_be_none,
    missing_imports,
    node_path,
    package_names,
    plan_fallback_removals,
    plan_guard_removals,
    plan_import_removals,
    support_fix,
)
from cuda2npu.analysis.never_run import in_never_run_code
from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.analysis.raising_fallbacks import missing_flags, raising_fallbacks
from cuda2npu.analysis.value_uses import ValueUses
from cuda2npu.core.arguments import Unbindable, arg_value, bind, literal_arg
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.imports import (
    TORCH_IMPORT,
    bound_name,
    bound_object,
    catches_import_error,
    import_root,
    remove_import_names,
)
from cuda2npu.core.literals import NOT_LITERAL, literal
from cuda2npu.core.names import dotted_name
from cuda2npu.core.nodes import atom, code_of, expression, is_pure
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes
from cuda2npu.families.attention.flash_api import (
    FLASH_PACKAGES,
    MIGRATED_MARKS,
    NPU_KERNELS,
    OP,
    PATCHED_CODES,
    QKV,
    RMS_NORM,
    ROTARY,
    SPECS,
    FlashSpec,
    flash_function,
    successor_of,
    use_name,
)
from cuda2npu.families.attention.flash_guards import (
    guarded_read,
    runs_only_with,
    tests_only,
    top_statement,
)
from cuda2npu.families.attention.flash_plan import (
    HOIST_NAMES,
    SOURCE_LAYOUTS,
    Manual,
    Plan,
    dispatch_base,
    permute_order,
    rearrange_order,
    render,
    swap_order,
    with_hoisted,
)


@dataclass(frozen=True)
class Binding:
    """A name a flash-attn import binds: the import, its statement, the function it runs in (None: the
    module) and the qualified name of what it binds."""

    node: cst.Import | cst.ImportFrom
    statement: cst.CSTNode | None
    function: cst.FunctionDef | None
    bound: str


def _flash_names(node: cst.CSTNode) -> list[str]:
    """The names an import of flash-attn packages only binds (empty for any other import)."""
    return list(dict.fromkeys(package_names(node, ("flash_attn", "flash_attn_interface")) or ()))


@register
class FlashAttention(ValueUses, Rule):
    """NPU401–NPU405: flash-attn calls and imports."""

    codes = ("NPU401", "NPU402", "NPU403", "NPU404", "NPU405", "NPU407", "NPU408")
    triggers = (r"flash_attn",)
    portable_support = True

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.facts = ModuleFacts.of(ctx.module)
        # not the project's own flash_attn (migrating flash-attn itself): its imports are no dependency
        packages = tuple(p for p in FLASH_PACKAGES if p not in self.options.file.local_modules)
        keep = functools.partial(exported, ctx)  # a re-export other modules read is no unused import
        self.removals = plan_import_removals(self.facts, packages, keep)
        migrated = any(mark in ctx.code for mark in MIGRATED_MARKS)
        self.guard_removals = plan_guard_removals(ctx.module, self.facts, packages, migrated, keep)
        self.removals.update(self.guard_removals)
        self.fallback_removals = plan_fallback_removals(self.facts, packages, migrated, keep)
        if self.options.portable:  # the original calls stay (on CUDA): so do their imports
            self.removals, self.guard_removals, self.fallback_removals = {}, {}, {}
        self.probe_flags = file_probe_flags(ctx)
        self.patches = patched_flash_functions(ctx)  # flash-attn functions the project replaces -> where
        self.probes_reported: set[cst.If] = set()
        self.unreached = self._flag_only_classes()  # classes never selected on an NPU host -> where they are
        self.skipped: set[cst.ClassDef] = set()  # those with a flash-attn call left as written
        self.unreached_calls: set[str] = set()  # the functions of those calls
        self.flash_imports: list[tuple[cst.CSTNode, cst.CSTNode | None]] = []  # (import, its statement)
        self.target = self.options.target
        self.helpers: list[str] = []
        self.imports: list[str] = []
        self.rewrites: list[tuple[str, Tier]] = []
        self.value_refs: list[tuple[cst.BaseExpression, str, cst.CSTNode | None]] = []
        self.kept: set[str] = set()  # functions with a call left as it is (manual)
        self.unrun: set[str] = set()  # functions with a call left as written where it never runs (never_run)
        self.run: set[str] = set()  # functions with a call elsewhere
        self.bindings: dict[str, list[Binding]] = {}  # name -> the flash-attn imports binding it
        # imports of names ported at the import alone -> (its binding, the uses as written -> what they are)
        self.ported: dict[cst.CSTNode, tuple[Binding, dict[str, str]]] = {}

    def _flag_only_classes(self) -> dict[cst.ClassDef, list[cst.CSTNode]]:
        """``flag_selected_classes`` no other module imports, when no module-level flash-attn import is
        unguarded (else the file fails at that import on an NPU host unless the class's calls are
        rewritten and the import goes)."""
        found = flag_selected_classes(self.ctx)
        classes = {cls: sites for cls, sites in found.items() if not exported(self.ctx, cls, cls.name.value)}
        index = TreeIndex.of(self.ctx)
        for node in iter_nodes(self.ctx.module, (cst.Import, cst.ImportFrom)) if classes else ():
            statement = index.parents.get(node)
            if not _flash_names(node) or node in self.facts.guards or index.function.get(statement) is not None:
                continue
            if not self._probed(statement) and not any(isinstance(o, cst.ClassDef) for o in index.ancestors(statement)):
                return {}
        return classes

    def _probed(self, statement: cst.CSTNode | None) -> bool:
        return in_probed_branch(self.ctx, statement, self.probe_flags)

    def _unreached_class(self) -> cst.ClassDef | None:
        """The class of :attr:`unreached` the current statement is in (through the parents: ``ancestors``
        stops at an ``elif``)."""
        node = self.ctx.statement if self.unreached else None
        parents = TreeIndex.of(self.ctx).parents
        while node is not None and node not in self.unreached:
            node = parents.get(node)
        return node

    # ---------------------------------------------------------------- calls
    def visit_Call(self, node: cst.Call) -> None:
        cls = self._unreached_class()
        if cls is not None:  # left as written, with what it uses
            for qualified in self.resolver.qualified_names(node.func):
                if qualified.split(".")[0] in FLASH_PACKAGES:
                    self.skipped.add(cls)
                    self.unreached_calls.add(use_name(qualified))
            return
        self.call_value_uses(node)
        qualified = self._callee(node)
        if qualified is None or is_cuda_alternative(self.ctx, node):
            if qualified is not None and in_never_run_code(self.ctx, node):
                self.unrun.add(use_name(qualified))
            return  # also the original call of portable output's `npu_call if x.device.type == "npu" else call`
        self.run.add(use_name(qualified))
        function = flash_function(qualified)
        if qualified in self.patches:
            self._patched(node, qualified, function)
            return
        if function in SPECS or qualified in RMS_NORM or qualified in ROTARY or qualified in NPU_KERNELS:
            self._behind_probe()
        if function in SPECS:
            self._attention(node, function)
        elif qualified in RMS_NORM:
            self._rms_norm(node, qualified)
        elif qualified in ROTARY:
            self._rotary(node, qualified)
        elif qualified.split(".")[0] in ("flash_attn", "flash_attn_interface"):
            self._unsupported(node, qualified, function)

    def _patched(self, node: cst.Call, qualified: str, function: str | None) -> None:
        """A call of a flash-attn function the project replaces with its own (veScale's wrapper unwrapping
        DTensors): it runs that wrapper, whose work the bare NPU kernel would skip; left as written."""
        code = SPECS[function].code if function in SPECS else PATCHED_CODES.get(qualified, "NPU403")
        self.kept.add(use_name(qualified))
        self.report(
            code,
            node,
            f"`{qualified}` is replaced by the project's own function ({self.patches[qualified]}): this call runs "
            "that wrapper (which may convert its arguments, such as DTensors), not flash-attn's kernel, so it is left "
            "as written; port the wrapper around its NPU counterpart and call that",
            tier=Tier.REVIEW,
        )

    def _behind_probe(self) -> None:
        """NPU408 at each ``if`` whose test asks whether flash-attn is installed around the current call."""
        statement = self.ctx.statement
        if statement is None:
            return
        for owner, role in TreeIndex.of(self.ctx).enclosing(statement):
            if isinstance(owner, cst.If) and role == "body" and owner not in self.probes_reported:
                probe = find_probe(owner.test, self.probe_flags)
                if probe is not None:
                    self.probes_reported.add(owner)
                    self.report_in(
                        owner,
                        "NPU408",
                        probe,
                        f"`{code_of(probe)}` asks whether flash-attn is installed: it cannot be on an NPU host, so "
                        "this branch (with its flash-attn call, rewritten or not) never runs there; test for what "
                        "the branch needs instead",
                    )

    def _callee(self, node: cst.Call) -> str | None:
        """The qualified name of the called function. A name bound to a flash-attn 1.x function or to
        its 2.x successor (LLaVA's ``try: from flash_attn.flash_attn_interface import
        flash_attn_unpadded_qkvpacked_func`` / ``except ImportError: ... import
        flash_attn_varlen_qkvpacked_func as flash_attn_unpadded_qkvpacked_func``) calls the 2.x one when
        its arguments mean the same to both (up to ``causal``); other names with several bindings are None,
        reported when one of them is flash-attn's."""
        names = self._run_bindings(node.func)
        if len(names) <= 1:
            return next(iter(names), None)
        successors = {successor_of(name) for name in names}
        if not any(flash_function(name) for name in names):
            return None
        why = ""
        if len(successors) == 1:
            successor = next(iter(successors))
            spec = SPECS.get(flash_function(successor) or "")
            shared = spec.params.index("causal") + 1 if spec is not None else 0
            if sum(1 for arg in node.args if arg.keyword is None) <= shared:
                return successor
            why = f", whose positional arguments after the {shared}th differ (return_attn_probs / window_size)"
        bindings = " or ".join(f"`{n}`" for n in sorted(names))
        self.report("NPU403", node, f"`{code_of(node.func)}` is bound to {bindings}{why}: migrate the call by hand")
        return None

    def _run_bindings(self, func: cst.BaseExpression) -> frozenset[str]:
        """The qualified names of ``func`` less its flash-attn bindings in code an NPU host never runs
        (``try: import torch_npu; from .npu import attn`` / ``except ImportError: from flash_attn import
        flash_attn_func as attn``), unless nothing else binds it."""
        names = self.resolver.qualified_names(func)
        head = func
        while isinstance(head, cst.Attribute):
            head = head.value
        if len(names) <= 1 or not isinstance(head, cst.Name):
            return names
        unrun = {b.bound for b in self.bindings.get(head.value, ()) if in_never_run_code(self.ctx, b.node)}
        suffix = (dotted_name(func) or "").partition(".")[2]
        unrun = {f"{bound}.{suffix}" if suffix else bound for bound in unrun}
        return names - unrun or names

    def _unsupported(self, node: cst.Call, qualified: str, function: str | None) -> None:
        binding = self._binding(node.func)
        statement = self.ctx.statement
        if self._import_fallback(statement) or self._probed(statement) or (binding and self._only_with_import(binding)):
            return  # on an NPU host the import fails first and the handler's fallback runs, or the branch is not taken
        kind = import_port(qualified)
        if kind is not None and binding is not None:  # ported at the import (one marker there, not one per use)
            self.ported.setdefault(binding.node, (binding, {}))[1][code_of(node.func)] = kind
            return
        if kind is not None:
            reason = f"flash-attn cannot be installed on an NPU host; {import_port_note({code_of(node.func): kind})}"
        elif function in FLASH_UNPORTED:
            reason = FLASH_UNPORTED[function]
        else:
            prefix, reason = next(
                (prefix, text)
                for prefix, text in FLASH_UNPORTED_PREFIXES
                if qualified.startswith(prefix) or prefix == "flash_attn."
            )
            if prefix == "flash_attn." and self._after_raise(node.func, statement):
                return  # the function raises before, where NPU606's marker says so; nothing specific to add
        self.report("NPU403", node, f"`{qualified}`: {reason}")

    def _after_raise(self, func: cst.BaseExpression, statement: cst.CSTNode | None) -> bool:
        """``statement`` follows, in its function, a statement raising whenever the function runs because the
        import binding the head name of ``func`` failed (OLMo's ``if flash_attn_4 is None: raise ...``, marked
        NPU606): on an NPU host it is never reached."""
        while isinstance(func, cst.Attribute):
            func = func.value
        index = TreeIndex.of(self.ctx)
        function = index.function.get(statement) if statement is not None else None
        if not isinstance(func, cst.Name) or function is None or not self.options.code_enabled("NPU606"):
            return False
        here = top_statement(index, statement, function)
        return here is not None and any(
            found.flag == func.value
            and not found.conditions
            and (raising := top_statement(index, index.parents[found.node], function)) is not None
            and index.placement[raising].index < index.placement[here].index
            for found in raising_fallbacks(self.ctx).raises.values()
        )

    def _import_fallback(self, statement: cst.CSTNode | None) -> bool:
        """``try: from flash_attn.ops... import f; out = f(x)`` / ``except ImportError: out = torch_op(x)``."""
        return in_flash_import_try(self.ctx, statement, _flash_names)

    def _binding(self, expr: cst.BaseExpression, statement: cst.CSTNode | None = None) -> Binding | None:
        """The flash-attn import that binds the head name of ``expr`` where ``statement`` (default: the
        current one) runs: one in its function (or an enclosing one) first, else one at module level."""
        while isinstance(expr, cst.Attribute):
            expr = expr.value
        statement = statement or self.ctx.statement
        if not isinstance(expr, cst.Name) or statement is None:
            return None
        scopes = [*TreeIndex.of(self.ctx).ancestors(statement), None]
        found = [b for b in self.bindings.get(expr.value, ()) if b.function in scopes]
        return min(found, key=lambda b: scopes.index(b.function), default=None)

    def _only_with_import(self, binding: Binding) -> bool:
        """Whether the current statement runs only where ``binding``'s import succeeded: the import is
        in a ``try`` whose ``except ImportError`` sets a flag False (``OK = False``) and the statement
        is under ``if OK:``, or in a function every call of which is (TinyZero's
        ``if FLASH_CE_AVAILABLE: out = loss_with_flash_ce(...)``)."""
        index = TreeIndex.of(self.ctx)
        flags = [
            flag
            for owner, role in index.enclosing(binding.statement)
            if isinstance(owner, cst.Try) and role == "body"
            for handler in owner.handlers
            if catches_import_error(handler)
            for flag, _ in missing_flags(handler)
        ]
        return bool(flags) and runs_only_with(index, flags, self.ctx.statement, set())

    def _import_ported(self) -> None:
        """One NPU403 at each import of names ported at the import alone (flash-attn's pure-PyTorch
        helpers, einops' functions it re-exports), naming the uses, unless its NPU606 marker does."""
        marked = marked_imports(self.ctx)
        for node, (binding, uses) in self.ported.items():
            if node in marked and import_port(binding.bound) is not None:
                continue  # NPU606's message there says how to port what the import binds
            self.report_in(
                binding.statement,
                "NPU403",
                node,
                f"flash-attn cannot be installed on an NPU host, so this import fails there: {import_port_note(uses)}",
            )

    def _attention(self, node: cst.Call, function: str) -> None:
        spec = SPECS[function]
        try:
            plan, bound = self._plan(node, function, spec)
        except (Manual, Unbindable) as exc:
            self.report(spec.code, node, f"`{function}` not rewritten: {exc}", tier=Tier.MANUAL)
            self.kept.add(function)
            return
        message = self._message(plan)
        if plan.hoist:
            statement = self.facts.heads[node]
            path = node_path(statement, node)
            assert path is not None
            self.report(spec.code, statement, message, self._hoisting_fix(plan, path))
        else:
            self.report(spec.code, node, message, lambda updated: self._rewrite(plan, updated))
        self._needs(plan)

    def _plan(self, node: cst.Call, function: str, spec: FlashSpec) -> tuple[Plan, dict[str, cst.Arg]]:
        def positional_ok(index: int, arg: cst.Arg) -> str | None:
            if index == spec.window_index and isinstance(arg.value, (cst.Tuple, cst.List)):
                return None
            return "ambiguous"

        bound = bind(node, spec.params, max_positional=spec.window_index, positional_check=positional_ok)
        missing = [p for p in spec.params[: spec.params.index("dropout_p")] if p not in bound]
        if missing:
            raise Manual(f"required argument `{missing[0]}` is missing")
        for name, reason in FLASH_UNPORTED_ARGUMENTS.items():
            value = literal_arg(bound, name, None)
            if value not in (None, False, 0, 0.0):
                raise Manual(f"`{name}=`: {reason}")

        plan = Plan(spec, function, causal=False, window=False)
        causal = arg_value(bound, "causal")
        if causal is not None:
            value = literal(causal)
            if value is NOT_LITERAL:
                if not is_pure(causal):
                    raise Manual(
                        "`causal` is an expression with side effects or cost, needed twice "
                        "(mask and sparse_mode); assign it to a variable first"
                    )
                plan.causal = "expr"
            else:
                plan.causal = bool(value)
        window = arg_value(bound, "window_size")
        if window is not None:
            value = literal(window)
            if value is NOT_LITERAL:
                sides = window.elements if isinstance(window, (cst.Tuple, cst.List)) else None
                if sides is not None and (len(sides) != 2 or not all(is_pure(s.value) for s in sides)):
                    raise Manual("`window_size` must be a pair of names or numbers")
                if sides is None and not is_pure(window):
                    raise Manual("`window_size` is an expression needed twice; assign it to a variable first")
                plan.window = True
            elif not (isinstance(value, tuple) and len(value) == 2 and all(isinstance(s, int) for s in value)):
                raise Manual("`window_size` must be a pair of integers")
            else:
                plan.window = value != (-1, -1)
        scale = arg_value(bound, "softmax_scale")
        if scale is not None and literal(scale) is not None and may_be_none(scale) and not is_pure(scale):
            raise Manual(
                "`softmax_scale` may be None at run time (then flash-attn uses 1/sqrt(headdim)) and is "
                "an expression with side effects or cost; assign it to a variable first"
            )
        if "deterministic" in bound:
            plan.notes.append("`deterministic` dropped (it selects flash-attn's CUDA backward kernel)")
        if any(p in bound for p in ("max_seqlen_q", "max_seqlen_k", "max_seqlen")):
            plan.notes.append("max_seqlen dropped (npu_fusion_attention reads the lengths from actual_seq_*len)")
        self._plan_source_layout(plan, bound)
        self._plan_hoisting(node, plan, bound)
        problems = self.target.unsupported(OP, ["atten_mask", "scale", "keep_prob", "sparse_mode"])
        if problems:
            raise Manual("; ".join(problems))
        return plan, bound

    def _plan_source_layout(self, plan: Plan, bound: dict[str, cst.Arg]) -> None:
        """Drop the transposes when q, k and v of ``flash_attn_func`` are all the same SBND/BNSD → BSND one.

        The packed forms keep BSND: their packing dimension makes the source layout ambiguous.
        """
        if plan.function != "flash_attn_func":
            return
        orders = [self._order_of(bound[p].value) for p in QKV]
        if orders[0] in SOURCE_LAYOUTS and orders.count(orders[0]) == len(QKV):
            plan.source = SOURCE_LAYOUTS[orders[0]]
        elif any(order in SOURCE_LAYOUTS for order in orders):
            plan.notes.append("q/k/v are not all transposed from the same layout: passed as BSND, transposes kept")

    def _order_of(self, node: cst.BaseExpression) -> tuple[int, ...] | None:
        """The dimension order a transpose of a 4-D tensor gives (``(1, 0, 2, 3)`` for ``X.transpose(0, 1)``),
        for ``X.transpose(a, b)``, ``X.permute(...)`` and ``einops.rearrange(X, pattern)``; None otherwise."""
        if not isinstance(node, cst.Call) or any(a.keyword or a.star for a in node.args):
            return None
        values = [literal(a.value) for a in node.args]
        method = node.func.attr.value if isinstance(node.func, cst.Attribute) else None
        if method == "transpose" and len(values) == 2:
            return swap_order(*values)
        if method == "permute":
            return permute_order(values[0] if len(values) == 1 and isinstance(values[0], tuple) else tuple(values))
        rearrange = self.resolver.qualified_name(node.func) == "einops.rearrange"
        if rearrange and len(values) == 2 and isinstance(values[1], str):
            return rearrange_order(values[1])
        return None

    def _plan_hoisting(self, node: cst.Call, plan: Plan, bound: dict[str, cst.Arg]) -> None:
        spec = plan.spec
        needs = [p for p in spec.multi_use if p in bound and not is_pure(plan.operand(p, bound[p]))]
        if not needs:
            return
        reason = (
            f"`{needs[0]}` is an expression needed more than once (head_num, scale, mask device); "
            f"assign it to a variable first"
        )
        if node not in self.facts.heads:
            raise Manual(reason)
        taken: set[str] = set()
        for arg in node.args:  # every argument evaluated before a hoisted one must be harmless to reorder
            name = next(p for p, a in bound.items() if a is arg)
            if name in needs:
                plan.hoist[name] = fresh_name(self.resolver, HOIST_NAMES[name], taken)
                taken.add(plan.hoist[name])
                if len(plan.hoist) == len(needs):
                    break
            elif not is_pure(arg.value):
                raise Manual(reason)

    def _message(self, plan: Plan) -> str:
        spec = plan.spec
        layout = spec.layout if plan.source is None else plan.source.input_layout
        parts = [
            f'`{plan.function}` → `torch_npu.{OP}(..., "{layout}")[0]` with scale passed explicitly '
            f"(the NPU default is 1.0) and keep_prob = 1 - dropout_p"
        ]
        if plan.source is not None:
            parts.append(f"q/k/v are {plan.source.name} transposed to BSND: {plan.source.how}")
        if plan.window:
            parts.append(
                "window_size → sparse_mode=4 band with pre_tockens/next_tockens (bottom-right origin; "
                "the Sq != Skv offset is INFERRED in the reference)"
            )
        elif plan.causal:
            parts.append("causal → compressed mask with sparse_mode=3 (bottom-right, as flash-attn ≥ 2.1)")
        if spec.cu_seqlens:
            parts.append("cu_seqlens → cumulative actual_seq_qlen/actual_seq_kvlen lists (a host sync per call)")
        if plan.hoist:
            parts.append(
                "hoists " + ", ".join(f"`{p}` into `{n}`" for p, n in plan.hoist.items()) + " to evaluate it once"
            )
        return "; ".join(parts + plan.notes) + (PORTABLE_NOTE if self.options.portable else "")

    def _rewrite(self, plan: Plan, updated: cst.Call) -> cst.BaseExpression:
        bound = bind(updated, plan.spec.params, max_positional=None)
        if self.options.portable:
            return expression(dispatch(render(plan, bound), dispatch_base(plan, bound), updated))
        return expression(render(plan, bound))

    def _hoisting_fix(self, plan: Plan, path):
        def fix(statement: cst.SimpleStatementLine):
            call = follow(statement, path)
            if not isinstance(call, cst.Call):
                raise ValueError("the call moved")
            bound = bind(call, plan.spec.params, max_positional=None)
            lines = [
                cst.parse_statement(f"{name} = {code_of(plan.operand(p, bound[p]))}\n")
                for p, name in plan.hoist.items()
            ]
            lines[0] = lines[0].with_changes(leading_lines=statement.leading_lines)
            replacement = render(plan, bound)
            if self.options.portable:  # the original call on other devices, with the hoisted names
                replacement = dispatch(replacement, dispatch_base(plan, bound), with_hoisted(plan, bound, call))
            rewritten = statement.deep_replace(call, expression(replacement))
            return cst.FlattenSentinel([*lines, rewritten.with_changes(leading_lines=[])])

        return fix

    def _needs(self, plan: Plan) -> None:
        self.rewrites.append((plan.spec.code, Tier.NUMERIC))
        if plan.causal or plan.window:
            self.helpers.append(CAUSAL_MASK_HELPER)
            self.imports.extend(HELPER_IMPORTS[CAUSAL_MASK_HELPER])

    # ---------------------------------------------------------------- rms norm
    def _rms_norm(self, node: cst.Call, qualified: str) -> None:
        params, positional, required = RMS_NORM[qualified]
        short = qualified.rsplit(".", 1)[1]
        try:
            bound = bind(node, params, max_positional=positional)
            if "x" not in bound or "weight" not in bound:
                raise Manual("`x` and `weight` are required")
            for name, default in required.items():
                if literal_arg(bound, name, default) not in (default, None, False, 0, 0.0):
                    raise Manual(f"`{name}=` (fused residual/dropout/bias) has no npu_rms_norm counterpart")
            self._portable_operand(bound)
        except (Manual, Unbindable) as exc:
            self.report("NPU404", node, f"`{short}` not rewritten: {exc}", tier=Tier.MANUAL)
            return
        eps_name = "epsilon" if "epsilon" in params else "eps"

        def fix(updated: cst.Call) -> cst.BaseExpression:
            b = bind(updated, params, max_positional=None)
            eps = code_of(b[eps_name].value) if eps_name in b else "1e-6"
            return self._portable(
                f"torch_npu.npu_rms_norm({code_of(b['x'].value)}, {code_of(b['weight'].value)}, epsilon={eps})[0]",
                b,
                updated,
            )

        self.report(
            "NPU404",
            node,
            f"`{short}` → `torch_npu.npu_rms_norm(x, weight, epsilon=eps)[0]` (same math, "
            f"computed in fp32 and cast to x's dtype){PORTABLE_NOTE if self.options.portable else ''}",
            fix,
        )
        self.rewrites.append(("NPU404", Tier.NUMERIC))

    # ---------------------------------------------------------------- rotary embedding
    def _rotary(self, node: cst.Call, qualified: str) -> None:
        params, positional = ROTARY[qualified]
        short = qualified.rsplit(".", 1)[1]
        try:
            bound = bind(node, params, max_positional=positional)
            if not all(p in bound for p in ("x", "cos", "sin")):
                raise Manual("`x`, `cos` and `sin` are required")
            if literal_arg(bound, "inplace", False) is not False:
                raise Manual("`inplace=True` rotates x in place; assign the result to x instead")
            if literal_arg(bound, "seqlen_offsets", 0) != 0:
                raise Manual("`seqlen_offsets` (KV-cache positions): slice cos/sin by the offsets and pass them")
            if literal_arg(bound, "conjugate", False) is not False:
                raise Manual("`conjugate=True` (the backward rotation): pass `-sin` to the rewritten call instead")
            if literal_arg(bound, "cu_seqlens", None) is not None:
                raise Manual(
                    "packed sequences (`cu_seqlens`): gather cos/sin per token and call "
                    "torch_npu.npu_rotary_mul on the [T, N, D] tensor"
                )
            problems = self.target.unsupported("npu_rotary_mul", ["rotary_mode"])
            if problems:
                raise Manual("; ".join(problems))
            self._portable_operand(bound)
        except (Manual, Unbindable) as exc:
            self.report("NPU407", node, f"`{short}` not rewritten: {exc}", tier=Tier.MANUAL)
            return

        def fix(updated: cst.Call) -> cst.BaseExpression:
            b = bind(updated, params, max_positional=None)
            args = [code_of(b[p].value) for p in ("x", "cos", "sin")]
            if "interleaved" in b:
                args.append(f"interleaved={code_of(b['interleaved'].value)}")
            return self._portable(f"{ROTARY_HELPER}({', '.join(args)})", b, updated)

        self.report(
            "NPU407",
            node,
            f"`{short}` → `{ROTARY_HELPER}(x, cos, sin, interleaved)`, a module-level helper "
            "calling torch_npu.npu_rotary_mul with cos/sin widened to the rotated channels (`half` mode for "
            "GPT-NeoX style, `interleave` for GPT-J style); channels after rotary_dim pass through"
            f"{PORTABLE_NOTE if self.options.portable else ''}",
            fix,
        )
        self.rewrites.append(("NPU407", Tier.NUMERIC))
        self.helpers.append(ROTARY_HELPER)
        self.imports.extend(HELPER_IMPORTS[ROTARY_HELPER])

    def _portable_operand(self, bound: dict[str, cst.Arg]) -> None:
        """Portable output tests the device of ``x`` before the call: it must be cheap to evaluate twice."""
        if self.options.portable and not is_pure(bound["x"].value):
            raise Manual(
                "portable output tests `x.device` before the call, so `x` is evaluated twice; assign it "
                "to a variable first"
            )

    def _portable(self, npu: str, bound: dict[str, cst.Arg], original: cst.Call) -> cst.BaseExpression:
        """``npu`` (source), or under ``--portable`` the dispatch between it and the original call."""
        if self.options.portable:
            return expression(dispatch(npu, code_of(atom(bound["x"].value)), original))
        return expression(npu)

    # ---------------------------------------------------------------- uses other than calls
    def value_use(self, expr: cst.BaseExpression, class_test: bool = False) -> None:
        name = use_name(self.resolver.qualified_name(expr))
        if (name in SPECS or name in RMS_NORM or name in ROTARY) and self._unreached_class() is None:
            self.value_refs.append((expr, name, self.ctx.statement))

    def _value_uses(self) -> None:
        """A flash-attn function whose calls this rule rewrites (none of them is left as it is), used as a
        value (a guard, an alias): the use keeps needing flash-attn, so it is reported where it is."""
        index = TreeIndex.of(self.ctx)
        uses: dict[tuple[cst.CSTNode | None, str], list[tuple[cst.BaseExpression, cst.CSTNode | None]]] = {}
        for expr, name, statement in self.value_refs:
            if name in self.kept:
                continue  # its calls stay flash-attn too: consistent, the import's marker says what to do
            if name in self.unreached_calls and self._probed(statement):
                continue  # both this use and those calls run only where flash-attn is installed
            if tests_only(index, expr) and (
                (name in self.unrun and name not in self.run) or self._guards_unrun(statement, expr)
            ):
                continue  # `f is not None` keeps off calls left as written where they never run (never_run)
            if (self._import_fallback(statement) or self._probed(statement)) and self._leaves_nothing(expr):
                continue  # never runs on an NPU host, and leaves no alias read there without a test
            if self._after_local_import(expr, statement):
                continue  # its function fails at the import first, where NPU606's marker says so
            place = index.placement.get(statement) if statement is not None else None
            uses.setdefault((place.block if place is not None else None, code_of(expr)), []).append((expr, statement))
        for (_, text), found in uses.items():  # one marker per block for the same use
            expr, statement = found[0]
            more = len({s for _, s in found[1:]} - {statement})
            these = {0: "this use still needs", 1: "this use and the next in this block still need"}.get(
                more, f"this use and the next {more} in this block still need"
            )
            self.report_in(
                statement,
                "NPU403",
                expr,
                f"`{text}` used other than by calling it: {these} flash-attn, which cannot be installed on an NPU "
                "host (a guard such as `is not None` is False there; direct calls are rewritten, a call through an "
                "alias or an attribute is not): replace it by hand",
            )

    def _guards_unrun(self, statement: cst.CSTNode | None, expr: cst.BaseExpression) -> bool:
        """``expr`` is in the test of the ``if`` ``statement`` whose body never runs on an NPU host."""
        return (
            isinstance(statement, cst.If)
            and expr in set(iter_nodes(statement.test))
            and in_never_run_code(self.ctx, statement.body)
        )

    def _after_local_import(self, expr: cst.BaseExpression, statement: cst.CSTNode | None) -> bool:
        """``expr`` is bound by an import of the function it is used in (OLMo's ``from
        flash_attn.ops.triton.layer_norm import rms_norm_fn`` then ``self._fn = rms_norm_fn``) that NPU606
        marks (:meth:`_first_failing_import`)."""
        binding = self._binding(expr, statement) if statement is not None else None
        return (
            binding is not None
            and binding.function is not None
            and binding.function is TreeIndex.of(self.ctx).function.get(statement)
            and self._first_failing_import(import_root(binding.node)) is binding.node
            and self.options.code_enabled("NPU606")
        )

    def _first_failing_import(self, package: str | None) -> cst.CSTNode | None:
        """The file's first import of ``package`` that runs and stays on an NPU host (no ``try`` around it,
        no probe, not removed): the one NPU606 marks."""
        index = TreeIndex.of(self.ctx)
        for node in iter_nodes(self.ctx.module, (cst.Import, cst.ImportFrom)):
            statement = index.parents.get(node)
            if import_root(node) != package or node in self.removals:
                continue
            if not (self._import_fallback(statement) or self._probed(statement) or node in self.facts.guards):
                return node
        return None

    def _leaves_nothing(self, expr: cst.BaseExpression) -> bool:
        """``expr`` is not assigned as it is (``inspect.signature(f)``, ``f is not None``), or is to a
        target every read of which tests it (:meth:`_guarded_alias`)."""
        assign = TreeIndex.of(self.ctx).parents.get(expr)
        return not (isinstance(assign, cst.Assign) and assign.value is expr) or self._guarded_alias(expr)

    def _guarded_alias(self, expr: cst.BaseExpression) -> bool:
        """``expr`` is assigned (``self.attn = flash_attn_func``) to a target every read of which tests
        it (``if self.attn is not None:``) or runs in an ``if`` that does; not an ``assert``."""
        index = TreeIndex.of(self.ctx)
        assign = index.parents.get(expr)
        if not isinstance(assign, cst.Assign) or assign.value is not expr or len(assign.targets) != 1:
            return False
        target = assign.targets[0].target
        if not isinstance(target, (cst.Name, cst.Attribute)):
            return False
        text = code_of(target)
        stores = {t.target for a in iter_nodes(self.ctx.module, cst.Assign) for t in a.targets}
        imported = {n for i in iter_nodes(self.ctx.module, (cst.Import, cst.ImportFrom)) for n in iter_nodes(i)}
        last = target.attr.value if isinstance(target, cst.Attribute) else target.value
        reads = [
            node
            for node in iter_nodes(self.ctx.module, type(target))
            if node not in stores
            and not isinstance(index.parents.get(node), cst.NameItem)  # `global apply_rotary_emb_func`
            and node not in imported  # `from flash_attn.ops.rms_norm import rms_norm as __rms_norm`
            and (node.attr.value if isinstance(node, cst.Attribute) else node.value) == last
            and code_of(node) == text
        ]
        return bool(reads) and all(guarded_read(index, read, text) for read in reads)

    # ---------------------------------------------------------------- imports and module support
    def visit_Import(self, node: cst.Import) -> None:
        self._import(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._import(node)

    def visit_If(self, node: cst.If) -> None:
        """``if is_flash_attn_2_available(): from flash_attn import ...`` whose imports all go: the whole ``if``
        goes (a probe has no side effect; libcst would leave ``if ...: pass``)."""
        body = node.body
        if (
            node.orelse is not None
            or not isinstance(body, cst.IndentedBlock)
            or find_probe(node.test, self.probe_flags) is None
        ):
            return
        if all(self._removed_whole(line) for line in body.body):
            self.report(
                "NPU405",
                node,
                f"`if {code_of(node.test)}:` only imported flash-attn names nothing uses any more; removed",
                lambda _: cst.RemoveFromParent(),
                needs_torch_npu=False,
            )

    def _removed_whole(self, line: cst.BaseStatement) -> bool:
        return isinstance(line, cst.SimpleStatementLine) and all(
            isinstance(small, (cst.Import, cst.ImportFrom))
            and small in self.removals
            and len(self.removals[small]) == len(package_names(small, FLASH_PACKAGES) or ())
            for small in line.body
        )

    def visit_Try(self, node: cst.Try) -> None:
        names = self.fallback_removals.get(node)
        if names:
            self.report(
                "NPU405",
                node,
                f"flash-attn import of {', '.join(f'`{n}`' for n in names)} and its `except ImportError` fallback "
                "are unused (flash-attn cannot be installed on an NPU host); removed",
                lambda _: cst.RemoveFromParent(),
                needs_torch_npu=False,
            )

    def _import(self, node: cst.Import | cst.ImportFrom) -> None:
        if self.options.portable and node not in self.facts.guards and _flash_names(node):
            self.flash_imports.append((node, self.ctx.statement))
        if _flash_names(node):
            statement = self.ctx.statement
            function = TreeIndex.of(self.ctx).function.get(statement) if statement is not None else None
            for alias in node.names:
                bound = bound_object(alias, node) or ""
                binding = Binding(node, statement, function, bound)
                self.bindings.setdefault(bound_name(alias, node), []).append(binding)
        unused = self.removals.get(node)
        if unused and (self._probed(self.ctx.statement) or is_cuda_alternative(self.ctx, node)):
            return  # the branch never runs on an NPU host: left as written (unless it all goes, visit_If)
        if unused:
            names = ", ".join(f"`{n}`" for n in unused)
            guard = (
                "; it sat in a `try` guard, so the code after it (an availability flag) now runs the rewritten "
                "calls instead of never running on an NPU host"
                if node in self.guard_removals
                else ""
            )
            self.report(
                "NPU405",
                node,
                f"flash-attn import of {names} is unused (flash-attn cannot be installed on "
                f"an NPU host); removed{guard}",
                remove_import_names(node, unused),
                needs_torch_npu=False,
            )

    def _guard_imports(self, code_: str, tier: Tier) -> None:
        """Portable output: the flash-attn imports the original calls need, guarded for Ascend hosts."""
        for node, statement in self.flash_imports:
            portable.report_import_guard(self, statement, node, _flash_names(node), "flash-attn", code_, tier)

    def _unreached_selections(self) -> None:
        """NPU408 where a class left as written (:attr:`unreached`) is selected, once per ``if``."""
        index = TreeIndex.of(self.ctx)
        sites: dict[cst.CSTNode, list[str]] = {}
        for cls, found in self.unreached.items():
            for site in found if cls in self.skipped else ():
                sites.setdefault(site, []).append(cls.name.value)
        for site, names in sites.items():
            shown = " / ".join(f"`{n}`" for n in sorted(names))
            self.report_in(
                index.statement_of(site),
                "NPU408",
                site.test,
                f"{shown} is selected only when `config._flash_attn_2_enabled` is set, which transformers 4.34–4.35 "
                "do for `from_pretrained(..., use_flash_attention_2=True)` after checking that flash-attn is "
                "installed (it cannot be on an NPU host; later releases never set it), and no file of this project "
                "sets it True: the class never runs there and is left as written; the other class of this choice is "
                "the one an NPU host runs (if code outside this project sets the flag, migrate the class)",
            )

    def leave_Module(self, original_node: cst.Module) -> None:
        self._unreached_selections()
        self._value_uses()
        self._import_ported()
        if not self.rewrites or not self.options.fix:
            return
        if self.options.portable:
            self._guard_imports(
                *next(((c, t) for c, t in self.rewrites if self.options.code_enabled(c)), self.rewrites[0])
            )
        imports = missing_imports(self.resolver, original_node, self.imports)
        if not TORCH_IMPORT.search(original_node.code) and "torch" not in imports:
            imports.append("torch")  # the engine adds `import torch_npu` next to a torch import
        helpers = [h for h in dict.fromkeys(self.helpers) if not self.resolver.is_bound(h)]
        if imports or helpers:
            # under a code that is enabled (the calls of an ignored code are not rewritten)
            code_, tier = next(((c, t) for c, t in self.rewrites if self.options.code_enabled(c)), self.rewrites[0])
            imports = list(dict.fromkeys(imports))
            self.report(
                code_,
                original_node,
                describe_support(imports, helpers),
                support_fix(helpers),
                tier=tier,
                needs_torch_npu=False,
                imports=import_needs(imports),
            )
