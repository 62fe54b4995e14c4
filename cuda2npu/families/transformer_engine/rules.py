"""TransformerEngine → plain PyTorch on NPU (NPU411–NPU417).

* NPU411 ``te.fp8_autocast`` / ``te.autocast`` → ``torch.autocast("npu", dtype=torch.bfloat16)``
  (FP8 training is not available on Atlas A2; BF16 is the replacement; ``--precision fp16``
  picks float16). ``enabled=False`` → ``contextlib.nullcontext()``; an ``enabled`` expression
  chooses between the two, because ``torch.autocast(enabled=False)`` would also switch off an
  enclosing autocast, which TE's ``enabled=False`` does not.
* NPU412 ``te.Linear`` / ``te.LayerNorm`` / ``te.RMSNorm`` → ``torch.nn`` modules with the same
  parameter names (``weight``, ``bias``); NPU413 is one entry per TE-only constructor argument
  mapped (``params_dtype`` → ``dtype``) or dropped. A call using tensor parallelism, userbuffers,
  ``return_bias``, ``parameters_split``, ``fuse_wgrad_accumulation`` or ``zero_centered_gamma``
  is not rewritten (manual): plain modules cannot do it.
* NPU414 ``te.checkpoint`` → ``torch.utils.checkpoint.checkpoint`` (``use_reentrant`` explicit,
  TE's default True); TE < 1.5's positional options are recognised and dropped, never passed to the
  function as inputs (:func:`checkpoint_plan`).
* NPU415 FP8 recipe objects (``transformer_engine.common.recipe``) left unused are removed, those
  still used elsewhere reported (:mod:`cuda2npu.families.transformer_engine.recipes`); NPU416
  removes TE imports nothing uses; NPU417 reports TE APIs without a rewrite (grouped GEMM,
  ONNX export, FP8 parameters, userbuffers).
* NPU418 ``te.LayerNormLinear``, ``te.LayerNormMLP``, ``te.DotProductAttention``,
  ``te.MultiheadAttention``, ``te.TransformerLayer`` (and ``te.Linear`` with ``return_bias`` or
  ``parameters_split``) → the same-named classes of a generated ``te_npu_modules.py`` placed next
  to the file (``migrate`` writes it; see :mod:`cuda2npu.families.transformer_engine.generated`), imported with
  ``from . import te_npu_modules`` inside a package, ``import te_npu_modules`` otherwise.
  Other uses of a replaced class follow it (``isinstance(m, te.Linear)`` → ``te_npu_modules.Linear``,
  ``TransformerEngineBaseModule`` → ``te_npu_modules.TEModule``); such a class always goes to the
  generated file, and a use that cannot follow (kept calls, TE internals) is reported where it is.

Portable output (``--portable``): each rewrite becomes a run-time choice, ``(<NPU rewrite> if
portable_device.device_type() == "npu" else <TE's code>)``: the torch.nn / generated module, BF16
autocast and torch.utils.checkpoint on Ascend hosts, TE itself everywhere else (a subclass's base and
the class tests likewise). TE's imports are guarded (``except ImportError: te = None``), and a recipe
assignment the NPU rewrite would remove (also in an ``if`` choosing the recipe) is ``None`` on Ascend
hosts and TE's recipe elsewhere. Not portable yet (kept, reported): a recipe read elsewhere, an import
in a one-line suite, and what the NPU rewrite leaves to a human.
"""

from __future__ import annotations

import functools
import itertools
from typing import NamedTuple

import libcst as cst

from cuda2npu.analysis import portable
from cuda2npu.analysis.exports import exported
from cuda2npu.analysis.kernel_rewrites import (
    ModuleFacts,
    describe_support,
    import_needs,
    missing_imports,
    package_names,
    plan_import_removals,
)
from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.analysis.value_uses import ValueUses
from cuda2npu.core.arguments import Unbindable, arg_value, bind, literal_arg
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.imports import TORCH_IMPORT, ImportNeed, remove_import_names
from cuda2npu.core.literals import NOT_LITERAL, literal
from cuda2npu.core.names import dotted_name
from cuda2npu.core.nodes import atom, code_of, expression, is_pure
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.traversal import iter_nodes, walk
from cuda2npu.families.transformer_engine.generated import (
    COMPANION,
    EXTRA_DROPPABLE,
    FUSED,
    MODULE,
)
from cuda2npu.families.transformer_engine.recipes import NO_RECIPES, assigned, describe_use, plan_recipes

TE_PYTORCH = "transformer_engine.pytorch"
RECIPE = "transformer_engine.common.recipe"
AUTOCAST = {
    "fp8_autocast": ("enabled", "calibrating", "fp8_recipe", "fp8_group", "_graph"),
    "autocast": ("enabled", "calibrating", "recipe", "amax_reduction_group", "_graph"),
}
RECIPE_ARGS = ("fp8_recipe", "recipe")
PORTABLE_NOTE = (
    f"; portable: on Ascend hosts only (`{portable.on_npu_host()}`), TransformerEngine's code elsewhere "
    "(its import guarded)"
)
RECIPE_BY_HAND = (
    "FP8 training is not available on NPU (the FP8 autocasts become BF16 autocast, which takes no "
    "recipe): remove it and its uses by hand, then the recipe import, which fails on an NPU host"
)

LINEAR_PARAMS = (
    "in_features",
    "out_features",
    "sequence_parallel",
    "fuse_wgrad_accumulation",
    "tp_group",
    "tp_size",
    "get_rng_state_tracker",
    "rng_tracker_name",
    "init_method",
    "bias",
    "return_bias",
    "params_dtype",
    "parallel_mode",
    "skip_weight_param_allocation",
    "parameters_split",
    "ub_overlap_ag",
    "ub_overlap_rs",
    "ub_overlap_rs_dgrad",
    "ub_bulk_dgrad",
    "ub_bulk_wgrad",
    "ub_name",
    "ub_split_rs",
    "ub_split_ag",
    "delay_wgrad_compute",
    "symmetric_ar_type",
    "save_original_input",
    "name",
    "device",
)
NORM_PARAMS = (
    "hidden_size",
    "eps",
    "sequence_parallel",
    "params_dtype",
    "zero_centered_gamma",
    "device",
    "normalized_shape",
    "dtype",
    "sm_margin",
    "fwd_sm_margin",
    "bwd_sm_margin",
    "name",
)
MODULES = {
    "Linear": ("torch.nn.Linear", LINEAR_PARAMS, ("in_features", "out_features")),
    "LayerNorm": ("torch.nn.LayerNorm", NORM_PARAMS, ("hidden_size",)),
    "RMSNorm": ("torch.nn.RMSNorm", NORM_PARAMS, ("hidden_size",)),
}
KEEP = {"in_features", "out_features", "bias", "device", "hidden_size", "eps", "dtype", "normalized_shape"}
RENAME = {"params_dtype": "dtype"}
# argument → (values that may be dropped, why it can be dropped, why any other value cannot)
DROPPABLE = {
    "sequence_parallel": (
        (False, None),
        "sequence parallelism needs a tensor-parallel group",
        "sequence parallelism (reduce-scatter/all-gather of activations) has no plain-module counterpart",
    ),
    "fuse_wgrad_accumulation": (
        (False,),
        "off",
        "accumulates weight gradients into `weight.main_grad` (Megatron); nn modules write `.grad`",
    ),
    "tp_group": (
        (None,),
        "no tensor-parallel group",
        "tensor parallelism: shard the layer by hand (or keep Megatron/MindSpeed)",
    ),
    "tp_size": (
        (1,),
        "tensor-parallel size 1",
        "tensor parallelism: shard the layer by hand (or keep Megatron/MindSpeed)",
    ),
    "parallel_mode": (None, "without a tensor-parallel group TE performs no communication", ""),
    "get_rng_state_tracker": (None, "only selects the RNG used for weight initialisation", ""),
    "rng_tracker_name": (None, "only selects the RNG used for weight initialisation", ""),
    "init_method": (
        (None,),
        "TE's default initialisation is asked for; nn.Linear initialises Kaiming-uniform",
        "a custom initialisation: the generated Linear applies it",
    ),
    "return_bias": ((False,), "off", "nn.Linear cannot return its bias unapplied; add it by hand"),
    "skip_weight_param_allocation": (None, "ignored by TE since 0.11", ""),
    "parameters_split": (
        (None,),
        "off",
        "split parameters get other names (`query_weight`, ...); no plain-module counterpart",
    ),
    "delay_wgrad_compute": ((False,), "off", "delayed weight-gradient computation has no plain-module counterpart"),
    "symmetric_ar_type": ((None,), "off", "symmetric all-reduce is a tensor-parallel feature"),
    "save_original_input": (None, "an FP8 memory option", ""),
    "name": (None, "a debug name", ""),
    "zero_centered_gamma": ((False,), "off", "TE stores gamma - 1 in `weight`; nn norms store gamma"),
    "sm_margin": (None, "a CUDA SM reservation", ""),
    "fwd_sm_margin": (None, "a CUDA SM reservation", ""),
    "bwd_sm_margin": (None, "a CUDA SM reservation", ""),
}
UB_PREFIX = "ub_"
DEFAULT_EPS = "1e-5"

UNSUPPORTED = {
    "GroupedLinear": "grouped GEMM for MoE: torch_npu.npu_grouped_matmul, by hand",
    "onnx_export": "exports FP8 graphs to ONNX; use torch.onnx.export without it",
    "fp8_model_init": "creates FP8 parameters; NPU trains in BF16: remove the context and keep parameters in bf16/fp32",
    "quantized_model_init": "creates FP8/FP4 parameters; NPU trains in BF16: remove the context and keep parameters in bf16/fp32",
    "initialize_ub": "userbuffers (communication/GEMM overlap) have no NPU counterpart; remove it",
    "destroy_ub": "userbuffers have no NPU counterpart; remove it",
    "make_graphed_callables": "CUDA-graph capture with FP8 state; on NPU use aclgraph (torch.npu.NPUGraph) by hand",
    "Float8Tensor": "FP8 tensors do not exist on NPU training; keep bf16/fp32 tensors",
    "fp8_group": "FP8 amax reduction group; FP8 is not used on NPU",
}


def te_name(qualified: str | None) -> str | None:
    """``Linear`` for ``transformer_engine.pytorch[.module[.linear]].Linear``; None outside TE's pytorch API."""
    if not qualified or not qualified.startswith(TE_PYTORCH + "."):
        return None
    rest = qualified[len(TE_PYTORCH) + 1 :]
    if rest.startswith("ops."):
        return None  # the fusible-ops API has other signatures
    return rest.rsplit(".", 1)[-1]


class Manual(Exception):
    pass


def _droppable(name: str, arg: cst.Arg, uses_tp: bool) -> tuple[bool, str]:
    """(may drop, reason) for a TE-only argument."""
    if name.startswith(UB_PREFIX):
        value = literal(arg.value)
        if value in (False, None):
            return True, "userbuffers off"
        return False, "userbuffers (communication/GEMM overlap) have no NPU counterpart"
    if name not in DROPPABLE and name not in EXTRA_DROPPABLE:
        return False, "not supported by the generated module"
    allowed, why_drop, why_not = DROPPABLE.get(name) or EXTRA_DROPPABLE[name]
    if allowed is None:
        return True, why_drop
    if name in ("sequence_parallel", "parallel_mode", "set_parallel_mode") and not uses_tp:
        return True, "without tensor parallelism it has no effect"
    value = literal(arg.value)
    if value is not NOT_LITERAL and value in allowed:
        return True, why_drop
    return False, why_not


def _te_only_arguments(bound: dict[str, cst.Arg], kept, renamed=None) -> list[tuple[cst.Arg, str]]:
    """An NPU413 entry (argument, message) per argument not ``kept``: renamed or dropped; Manual when
    one can be neither (it changes what the module computes or needs tensor parallelism)."""
    renamed = renamed or {}
    uses_tp = (literal_arg(bound, "tp_group", None) is not None) or (literal_arg(bound, "tp_size", 1) != 1)
    entries = []
    for param, arg in bound.items():
        if param in kept:
            continue
        if param in renamed:
            entries.append((arg, f"`{param}=` → `{renamed[param]}=`"))
            continue
        ok, why = _droppable(param, arg, uses_tp)
        if not ok:
            raise Manual(f"`{param}=`: {why}")
        entries.append((arg, f"`{param}=` dropped: {why}"))
    return entries


@register
class TransformerEngine(ValueUses, Rule):
    codes = ("NPU411", "NPU412", "NPU413", "NPU414", "NPU415", "NPU416", "NPU417", "NPU418")
    # the first name of an import (`import transformer_engine.pytorch as te`), not a string or
    # megatron's `megatron.core.extensions.transformer_engine`: every report reads an imported name
    triggers = (r"(?<![\w.'\"])transformer_engine",)
    portable_support = True  # the NPU rewrites run on Ascend hosts only, TE's code elsewhere (_report_rewrite)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.target = self.options.target
        self.te_bindings = _te_bindings(ctx.module)
        if ctx.text is None or b"recipe" in ctx.text:  # a recipe object is named through that word
            self.recipes = plan_recipes(ctx.module, self._is_recipe, self._autocast_recipe, self.options.portable)
        else:
            self.recipes = NO_RECIPES
        self.facts = ModuleFacts.of(ctx.module, skip=self.recipes.removed_lines)
        packages = tuple(p for p in ("transformer_engine",) if p not in self.options.file.local_modules)
        self.import_removals = plan_import_removals(self.facts, packages, functools.partial(exported, ctx))
        if self.options.portable:  # TE's code stays (for CUDA hosts): so do its imports and recipes
            self.import_removals = {}
        self.te_imports: list[tuple[cst.CSTNode, cst.CSTNode | None]] = []  # portable: (import, statement)
        self.dispatches: list[tuple[Tier, str]] = []  # portable: (tier, code) of each run-time choice
        self.dropped_recipe_args: set[cst.CSTNode] = set()
        self._inside_recipe: dict[cst.CSTNode, bool] = {}
        self.imports: list[str] = []
        self.rewrites: list[tuple[str, Tier]] = []
        self.uses_generated = False
        self.outcomes: dict[str, set[str]] = {}  # TE class → what this file's uses became (KEPT: not rewritten)
        self.references: list[Reference] = []
        self.used_as_value, self.generated_used = self._other_uses_prepass(ctx.module)

    # ---------------------------------------------------------------- recipe objects (see recipes.py)
    def _is_recipe(self, expr: cst.BaseExpression) -> bool:
        """A name or attribute of ``transformer_engine.common.recipe``, through the file's imports."""
        return any(n.startswith(RECIPE + ".") for n in self._prepass_qualified(expr))

    def _autocast_recipe(self, call: cst.Call) -> cst.BaseExpression | None:
        """The recipe argument of a TE autocast call; None for other calls."""
        name = next((n for n in map(te_name, self._prepass_qualified(call.func)) if n in AUTOCAST), None)
        if name is None:
            return None
        try:
            bound = bind(call, AUTOCAST[name])
        except Unbindable:
            return None
        return next((bound[p].value for p in RECIPE_ARGS if p in bound), None)

    def _prepass_qualified(self, node: cst.BaseExpression) -> set[str]:
        """Qualified names usable before the traversal: through module-level imports, else through TE
        imports in any scope (a function-local ``from transformer_engine.common import recipe``)."""
        dotted = dotted_name(node)
        if not dotted:
            return set()
        head, _, rest = dotted.partition(".")
        found = self.resolver.module_scope.lookup(head)
        if found is None:
            found = self.te_bindings.get(head, ())
        return {f"{q}.{rest}" if rest else q for q in found}

    # ---------------------------------------------------------------- portable output
    def report(self, code: str, node: cst.CSTNode, message: str, fix=None, **kwargs) -> None:
        """Under ``--portable`` a finding left to a human is TE code kept as written, which runs on CUDA
        hosts only: the message says so (``not portable yet``), as for the rules without portable fixes."""
        if self.options.portable and fix is None and "not portable yet" not in message:
            message = f"not portable yet, kept as written (it runs on CUDA): {message}"
        super().report(code, node, message, fix, **kwargs)

    def _report_rewrite(self, code_: str, node: cst.CSTNode, message: str, fix, **kwargs) -> None:
        """Report a rewrite of TE code; under ``--portable`` it runs on Ascend hosts only and TE's code,
        kept, everywhere else (:meth:`_fix`)."""
        self.report(
            code_, node, message + (PORTABLE_NOTE if self.options.portable else ""), self._fix(code_, fix), **kwargs
        )

    def _fix(self, code_: str, fix, tier: Tier = Tier.REVIEW):
        """``fix``; under ``--portable`` its run-time choice: ``(<its result> if <Ascend host> else <TE's code>)``
        (``tier``: the fix's)."""
        if not self.options.portable:
            return fix
        host = portable.on_npu_host()
        portable.need(self, tier, host)
        self.dispatches.append((tier, code_))

        def choose(updated: cst.BaseExpression) -> cst.BaseExpression:
            npu = fix(updated)
            npu = atom(npu) if isinstance(npu, cst.IfExp) else npu  # `a if enabled else b` stays one branch
            if not isinstance(updated, cst.Call):  # a class named (a base, a class test): one line
                return expression(f"{code_of(npu)} if {host} else {code_of(updated)}")
            return expression(portable.choose(code_of(npu), host, code_of(updated)))

        return choose

    def _guard_imports(self) -> None:
        """Portable output: TE's imports, which its kept code needs on CUDA hosts, guarded for Ascend hosts
        (``except ImportError: te = None``), where only the NPU branches run. NPU416 (TE's imports) guards
        them, an exact fix (a guarded import behaves the same where TE is installed), so it applies
        whenever a choice does; under the first choice's code if NPU416 is ignored."""
        code_ = "NPU416" if self.options.code_enabled("NPU416") else min(self.dispatches)[1]
        for node, statement in self.te_imports:
            names = list(dict.fromkeys(package_names(node, ("transformer_engine",)) or ()))
            portable.report_import_guard(self, statement, node, names, "TransformerEngine", code_, Tier.EXACT)

    # ---------------------------------------------------------------- calls
    def visit_Call(self, node: cst.Call) -> None:
        self.call_value_uses(node)
        qualified = self.resolver.qualified_name(node.func)
        if qualified is None or is_cuda_alternative(self.ctx, node):
            return  # also TE's call of portable output's `npu_code if <Ascend host> else te_call`
        if qualified.startswith(RECIPE + "."):
            self._recipe_call(node)
            return
        name = te_name(qualified)
        if name in AUTOCAST:
            self._autocast(node, name)
        elif name in MODULES and not self._needs_generated(node, name):
            self._module(node, name)
        elif name in FUSED:
            self._fused(node, name)
        elif name == "checkpoint":
            self._checkpoint(node)
        elif name is not None or qualified.startswith("transformer_engine."):
            short = name or qualified
            reason = UNSUPPORTED.get(short, "TransformerEngine API without an NPU rewrite")
            self.report("NPU417", node, f"`{qualified}`: {reason}")

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        for base in node.bases:
            qualified = self.resolver.qualified_name(base.value)
            if is_cuda_alternative(self.ctx, base.value):
                continue  # TE's class of portable output's `generated if <Ascend host> else te_class`
            if not qualified or not qualified.startswith("transformer_engine."):
                continue
            name = te_name(qualified)
            problem = self._super_init_problem(node, name) if name in FUSED and name[0].isupper() else "no counterpart"
            if problem is None:
                target = f"{MODULE}.{name}"
                self.report(
                    "NPU418",
                    base,
                    f"subclass of `te.{name}` → of `{target}` from the generated {COMPANION}: "
                    "it takes the arguments its `super().__init__` passes and keeps TE's parameter names; "
                    "review whether the subclass uses TE internals (`fp8_meta`, ...), which do not exist there",
                    lambda updated, f=self._fix("NPU418", lambda _, t=target: expression(t)): updated.with_changes(
                        value=f(updated.value)
                    ),
                    companion=COMPANION,
                )
                self.uses_generated = True
                self._outcome(name, target)
            elif problem == "no counterpart" and qualified.startswith(RECIPE + "."):
                self.report(
                    "NPU417",
                    base,
                    f"subclass of `{qualified}`: an FP8 recipe; FP8 training is not available "
                    "on NPU (the autocast becomes BF16): remove the class and its uses",
                )
            elif problem == "no counterpart" and name and name[0].isupper() and ".distributed." not in qualified:
                self.report(
                    "NPU417",
                    base,
                    f"subclass of `{qualified}`: TE modules carry FP8 state and TE-only "
                    "forward arguments; derive from the matching torch.nn module by hand",
                )
            elif problem == "no counterpart":
                self.report(
                    "NPU417",
                    base,
                    f"subclass of `{qualified}`: TransformerEngine cannot be installed on an "
                    "NPU host and this class has no rewrite; reimplement what the subclass needs by hand",
                )
            else:
                self.report("NPU418", base, f"subclass of `te.{name}` not rewritten: {problem}", tier=Tier.MANUAL)
                self._outcome(name, KEPT)

    @staticmethod
    def _super_init_problem(node: cst.ClassDef, name: str) -> str | None:
        """Why the class cannot derive from the generated class (None: it can): its ``super().__init__(...)``
        passes what that class does not take, or its methods use TE internals it lacks (``self.fp8_meta``)."""
        internals = sorted(
            {
                a.attr.value
                for a in (
                    a
                    for a in iter_nodes(node.body, cst.Attribute)
                    if isinstance(a.value, cst.Name) and a.value.value == "self"
                )
            }
            & _te_internals(node.body)
        )
        if internals:
            return "uses TE internals the generated class does not have: " + ", ".join(f"`self.{a}`" for a in internals)
        spec = FUSED[name]
        for call in (c for c in iter_nodes(node.body, cst.Call) if _is_super_init(c)):
            try:
                bound = bind(call, spec.params, max_positional=spec.positional)
            except Unbindable as exc:
                return f"its `super().__init__` call cannot be checked against the generated `{MODULE}.{name}`: {exc}"
            extra = [param for param in bound if param not in spec.accepted]
            if extra:
                names = ", ".join(f"`{param}=`" for param in extra)
                return (
                    f"its `super().__init__` call passes {names}, which the generated `{MODULE}.{name}` does not "
                    "take (TE-only arguments)"
                )
        return None

    def _recipe_call(self, node: cst.Call) -> None:
        if node in self.dropped_recipe_args:
            return  # an argument of a rewritten autocast: it goes with it
        statement = self.ctx.statement
        if statement in self.recipes.lines:
            return  # `name = recipe.X(...)`: removed once the rewritten autocasts no longer read it, or reported
        if self._inside_recipe.get(node):
            return
        for arg in node.args:
            if isinstance(arg.value, cst.Call):
                self._inside_recipe[arg.value] = True
        self.report(
            "NPU415",
            node,
            f"FP8 recipe object {describe_use(statement, node)}: kept; {RECIPE_BY_HAND}",
            tier=Tier.MANUAL,
        )

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._recipe_statement(node)

    def visit_If(self, node: cst.If) -> None:
        super().visit_If(node)
        self._recipe_statement(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._recipe_statement(node)

    def _recipe_statement(self, node: cst.CSTNode) -> None:
        removed = node in self.recipes.removals
        names, why = (self.recipes.removals[node], "") if removed else self.recipes.kept.get(node, ((), ""))
        if not names:
            return
        if isinstance(node, cst.FunctionDef):
            what = f"function `{node.name.value}` building an FP8 recipe"
        else:
            kind = "FP8 recipe " if isinstance(node, cst.SimpleStatementLine) else "`if` choosing FP8 recipe "
            what = kind + ", ".join(f"`{n}`" for n in assigned(node))
        if self.options.portable:
            self._portable_recipe(node, what, None if removed else why)
        elif removed:
            review = self.recipes.review.get(node, "")
            verb = "called" if isinstance(node, cst.FunctionDef) else "used"
            self.report(
                "NPU415",
                node,
                f"{what} is no longer {verb} (FP8 autocast was rewritten to BF16 autocast); removed"
                + (f": {review}" if review else ""),
                lambda _: cst.RemoveFromParent(),
                tier=Tier.REVIEW if review else None,
                needs_torch_npu=False,
            )
        else:
            self.report("NPU415", node, f"{what} kept: {why}; {RECIPE_BY_HAND}", tier=Tier.MANUAL)

    def _portable_recipe(self, node: cst.CSTNode, what: str, kept: str | None) -> None:
        """Portable output: a recipe only the rewritten autocasts read (``kept`` None) is built on CUDA hosts
        only, ``None`` on Ascend hosts (whose BF16 autocast takes none; TE's recipe module is None there): a
        ``name = <recipe>`` line, each recipe value an ``if`` choosing one assigns (its tests are side-effect
        free); a function building one stays (called only there). A recipe read elsewhere is not portable
        yet."""
        if kept is not None:
            self.report(
                "NPU415",
                node,
                f"{what}: {kept}; TE's recipe module is None on Ascend hosts once its import is guarded: build "
                f"the recipe only where `{portable.on_npu_host()}` is false, by hand",
                tier=Tier.MANUAL,
            )
            return
        lines = [node] if isinstance(node, cst.SimpleStatementLine) else []
        if isinstance(node, cst.If):  # the plan's `if` holds `name = value` lines and such `if` statements
            lines = [line for line in iter_nodes(node, cst.SimpleStatementLine) if self._builds_recipe(line)]
        for line in lines:
            self.report(
                "NPU415",
                line.body[0].value,
                f"{what}: only TE's autocasts read it, so it is built where TE runs, `None` on Ascend hosts "
                f"(no recipe for BF16 autocast){PORTABLE_NOTE}",
                self._fix("NPU415", lambda _: expression("None"), Tier.EXACT),
                needs_torch_npu=False,
            )

    def _builds_recipe(self, line: cst.SimpleStatementLine) -> bool:
        """Whether a line of a recipe ``if`` assigns a recipe object or a call's result (a recipe-building
        function), not a plain value (``fp8_recipe = None``)."""
        value = line.body[0].value
        return any(
            isinstance(n, cst.Call) or self._is_recipe(n)
            for n in iter_nodes(value, (cst.Call, cst.Name, cst.Attribute))
        )

    # ---------------------------------------------------------------- autocast
    def _autocast(self, node: cst.Call, name: str) -> None:
        params = AUTOCAST[name]
        try:
            bound = bind(node, params)
        except Unbindable as exc:
            self.report("NPU411", node, f"`te.{name}` not rewritten: {exc}", tier=Tier.MANUAL)
            return
        enabled = arg_value(bound, "enabled")
        value = True if enabled is None else literal(enabled)
        if value is NOT_LITERAL and not is_pure(enabled):
            self.report(
                "NPU411",
                node,
                f"`te.{name}` not rewritten: `enabled` is an expression with side effects; "
                "assign it to a variable first",
                tier=Tier.MANUAL,
            )
            return
        for recipe_name in RECIPE_ARGS:
            if recipe_name in bound:
                self.dropped_recipe_args.add(bound[recipe_name].value)
        dtype = "torch.float16" if self.options.precision == "fp16" else "torch.bfloat16"
        autocast = f'torch.autocast("npu", dtype={dtype})'
        imports = ["torch"]
        if value is NOT_LITERAL:
            imports.append("contextlib")
            source = lambda b: f"{autocast} if {code_of(atom(b['enabled'].value))} else contextlib.nullcontext()"  # noqa: E731
            what = f"`{autocast}` when enabled, else `contextlib.nullcontext()`"
        elif value:
            source = lambda b: autocast  # noqa: E731
            what = f"`{autocast}`"
        else:
            imports = ["contextlib"]
            source = lambda b: "contextlib.nullcontext()"  # noqa: E731
            what = "`contextlib.nullcontext()` (enabled=False: no autocast)"
        dropped = [p for p in bound if p not in ("enabled",)]
        message = (
            f"`te.{name}` → {what}: FP8 training is not available on NPU, BF16 autocast replaces it; unlike FP8 "
            "autocast it also casts plain torch ops (matmul, linear) inside the block"
        )
        if dropped:
            message += "; dropped " + ", ".join(f"`{p}`" for p in dropped)
        # torch.autocast("npu") needs the npu backend, which `import torch_npu` registers
        self._report_rewrite(
            "NPU411",
            node,
            message,
            lambda updated: expression(source(bind(updated, params))),
            needs_torch_npu=value is not False,
        )
        self._need("NPU411", imports)

    # ---------------------------------------------------------------- Linear / LayerNorm / RMSNorm
    def _module(self, node: cst.Call, name: str) -> None:
        replacement, params, required = MODULES[name]
        try:
            bound = bind(node, params, max_positional=2)
            if not any(r in bound for r in required) and "normalized_shape" not in bound:
                raise Manual(f"`{required[0]}` is missing")
            if "hidden_size" in bound and "normalized_shape" in bound:
                raise Manual("both `hidden_size` and `normalized_shape` given")
            entries = _te_only_arguments(bound, KEEP, RENAME)
        except (Manual, Unbindable) as exc:
            self.report("NPU412", node, f"`te.{name}` not rewritten: {exc}", tier=Tier.MANUAL)
            self._outcome(name, KEPT)
            return
        self._outcome(name, replacement)
        add_device = "device" not in bound
        add_eps = name == "RMSNorm" and "eps" not in bound
        notes = [
            f"`te.{name}` → `{replacement}` (parameters `weight`/`bias` keep their names; TE checkpoints also "
            "hold `_extra_state` keys: load them with strict=False or drop those keys)"
        ]
        if add_device:
            notes.append(
                '`device="npu"` added: TE allocates parameters on the accelerator by default, torch.nn on the CPU'
            )
        if add_eps:
            notes.append(f"`eps={DEFAULT_EPS}` added (TE's default; torch.nn.RMSNorm's default is the dtype's epsilon)")
        if name == "Linear" and "init_method" not in bound:
            notes.append(
                "initialisation differs when training from scratch (TE: normal(0, 0.023); nn.Linear: Kaiming-uniform)"
            )
        notes.append("forward arguments such as `is_first_microbatch` do not exist on torch.nn modules")
        self._report_rewrite(
            "NPU412",
            node,
            "; ".join(notes),
            lambda updated: self._rewrite_module(updated, replacement, params, add_device, add_eps),
        )
        for arg, message in entries:
            self.report("NPU413", arg, message, lambda a: a, needs_torch_npu=False)
        self._need("NPU412", ["torch"])

    def _rewrite_module(self, call: cst.Call, replacement: str, params, add_device: bool, add_eps: bool) -> cst.Call:
        bound = bind(call, params, max_positional=2)
        by_arg = {arg: param for param, arg in bound.items()}

        def kept(arg: cst.Arg) -> cst.Arg | None:
            param = by_arg[arg]
            if param == "normalized_shape":
                return arg.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT)
            if param in RENAME:
                return arg.with_changes(keyword=cst.Name(RENAME[param]))
            return arg if param in KEEP else None

        args = _kept_arguments(call.args, kept)
        if "normalized_shape" in bound:  # it becomes the first positional argument
            args.sort(key=lambda a: a.keyword is not None)
        if add_eps:
            args.append(cst.Arg(expression(DEFAULT_EPS), keyword=cst.Name("eps"), equal=_equal()))
        if add_device:
            args.append(cst.Arg(cst.SimpleString('"npu"'), keyword=cst.Name("device"), equal=_equal()))
        return _with_arguments(call, replacement, args)

    # ---------------------------------------------------------------- fused modules → generated te_npu_modules.py
    def _needs_generated(self, node: cst.Call, name: str) -> bool:
        """What torch.nn cannot do and the generated module can: a Linear returning its bias, with split
        parameters or with its own ``init_method`` (nn.Linear would drop it and initialise Kaiming-uniform),
        a zero-centred norm, an RMSNorm for a torch older than 2.4 (no torch.nn.RMSNorm); and a class the
        file also names otherwise (``isinstance(m, te.Linear)``, ``partial(te.LayerNorm, ...)``), which can
        follow the generated class but not a torch.nn one."""
        if name in self.used_as_value or (name in BASE_FAMILY and BASE_MODULE in self.used_as_value):
            return True
        try:
            bound = bind(node, FUSED[name].params, max_positional=FUSED[name].positional)
        except Unbindable:
            return False  # NPU412 says why
        if name == "Linear":
            return (
                literal_arg(bound, "return_bias", False) is not False
                or literal_arg(bound, "parameters_split", None) is not None
                or literal_arg(bound, "init_method", None) is not None
            )
        return literal_arg(bound, "zero_centered_gamma", False) is not False or (
            name == "RMSNorm" and not self.target.torch_at_least((2, 4))
        )

    def _fused(self, node: cst.Call, name: str) -> None:
        spec = FUSED[name]
        try:
            bound = bind(node, spec.params, max_positional=spec.positional)
            for param, supported, why in spec.limited:
                value = literal_arg(bound, param, supported[0])
                if value is not NOT_LITERAL and value not in supported:
                    raise Manual(f"`{param}={value!r}`: {why}")
            entries = _te_only_arguments(bound, spec.accepted)
        except (Manual, Unbindable) as exc:
            self.report("NPU418", node, f"`te.{name}` not rewritten: {exc}", tier=Tier.MANUAL)
            self._outcome(name, KEPT)
            return
        target = f"{MODULE}.{name}"
        self._outcome(name, target)
        what = (
            "TE's parameter names, so TE checkpoints load; `_extra_state` entries are accepted and ignored; "
            "attention runs on torch_npu.npu_fusion_attention, RoPE on torch_npu.npu_rotary_mul"
            if name[0].isupper()
            else "TE's arguments, on torch_npu.npu_rotary_mul"
        )
        self._report_rewrite(
            "NPU418",
            node,
            f"`te.{name}` → `{target}` from the generated {COMPANION} ({what}); options it does "
            "not implement raise NotImplementedError (see the file's docstring)",
            lambda updated: self._rewrite_fused(updated, spec, target),
            companion=COMPANION,
        )
        for arg, message in entries:
            self.report("NPU413", arg, message, lambda a: a, needs_torch_npu=False)
        self.uses_generated = True

    @staticmethod
    def _rewrite_fused(call: cst.Call, spec, target: str) -> cst.Call:
        bound = bind(call, spec.params, max_positional=spec.positional)
        accepted = {arg for param, arg in bound.items() if param in spec.accepted}
        return _with_arguments(call, target, _kept_arguments(call.args, lambda arg: arg if arg in accepted else None))

    # ---------------------------------------------------------------- checkpoint
    def _checkpoint(self, node: cst.Call) -> None:
        try:
            plan = checkpoint_plan(node)
        except Manual as exc:
            self.report("NPU414", node, f"`te.checkpoint` not rewritten: {exc}", tier=Tier.MANUAL)
            return

        def fix(updated: cst.Call) -> cst.Call:
            dropped = {
                a
                for i, a in enumerate(updated.args)
                if 0 < i < plan.skip or (a.keyword is not None and a.keyword.value in TE_CHECKPOINT_OPTIONS)
            }
            args = _kept_arguments(updated.args, lambda a: None if a in dropped else a)
            if plan.add_reentrant:  # after the last argument, which hands over what ends the call
                last = args[-1]
                args[-1] = last.with_changes(
                    comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=cst.SimpleWhitespace("")
                )
                args.append(
                    cst.Arg(
                        cst.Name("True"),
                        keyword=cst.Name("use_reentrant"),
                        equal=_equal(),
                        whitespace_after_arg=last.whitespace_after_arg,
                    )
                )
            return _with_arguments(updated, "torch.utils.checkpoint.checkpoint", args)

        message = (
            "`te.checkpoint` → `torch.utils.checkpoint.checkpoint` with `use_reentrant` explicit (TE's default "
            "is True); torch restores the default RNG state on recomputation"
        )
        if plan.skip > 1:
            message += (
                "; the options of TE < 1.5's positional form (distribute_saved_activations, "
                "get_rng_state_tracker, tp_group) are dropped, not passed to the function"
            )
        elif plan.drops_tracker:
            message += "; TE's `get_rng_state_tracker` (tensor-parallel RNG states) is dropped"
        self._report_rewrite("NPU414", node, message, fix, needs_torch_npu=False)
        self._need("NPU414", ["torch", "torch.utils.checkpoint"])

    # ---------------------------------------------------------------- other uses of the replaced classes
    def _other_uses_prepass(self, module: cst.Module) -> tuple[set[str], set[str]]:
        """(TE classes this file names other than by calling or deriving from them, the generated
        classes it uses already): the calls of the former must become generated classes, which the
        other uses can follow (decided before the traversal, through the file's TE imports)."""
        used: set[str] = set()
        generated: set[str] = set()
        bindings = self.te_bindings  # in any scope: a function-local import counts too

        def note(expr: cst.BaseExpression, called: bool = False) -> None:
            dotted = dotted_name(expr) or ""
            if dotted.startswith(MODULE + "."):
                generated.add(dotted[len(MODULE) + 1 :])
            head, _, rest = dotted.partition(".")
            if called or head not in bindings:
                return
            for qualified in bindings[head]:
                name = te_name(f"{qualified}.{rest}" if rest else qualified)
                if name in FUSED or name in MODULES or name == BASE_MODULE:
                    used.add(name)

        class _Collect(ValueUses, cst.CSTVisitor):
            resolver = self.resolver  # only asked whether `isinstance` is shadowed

            def value_use(inner, expr: cst.BaseExpression, class_test: bool = False) -> None:
                note(expr)

            def visit_Call(inner, node: cst.Call) -> None:
                inner.call_value_uses(node)
                note(node.func, called=True)

            def visit_ClassDef(inner, node: cst.ClassDef) -> None:
                for base in node.bases:
                    note(base.value, called=True)

            def visit_Annotation(inner, node: cst.Annotation) -> None:
                note(node.annotation)

        walk(module, _Collect())
        return used, generated

    def visit_Annotation(self, node: cst.Annotation) -> None:
        self._use(node.annotation)

    def value_use(self, expr: cst.BaseExpression, class_test: bool = False) -> None:
        """Remember a TE class used as a value (not called, not a base class): checked in leave_Module,
        once it is known what this file's uses of the class became."""
        name = te_name(self.resolver.qualified_name(expr))
        if name is None or not (name in FUSED or name in MODULES or name == BASE_MODULE):
            return
        if is_cuda_alternative(self.ctx, expr):
            return  # TE's class of portable output's `generated if <Ascend host> else te_class`
        self.references.append(Reference(expr, name, self.ctx.statement, class_test))

    def _outcome(self, name: str, target: str) -> None:
        self.outcomes.setdefault(name, set()).add(target)

    def _other_use(self, ref: Reference) -> None:
        """A replaced TE class still named: it moves to the generated class (whose calls this file now
        makes), unless some calls of it were kept or a class test guards TE internals (manual)."""
        base = ref.name == BASE_MODULE
        family = BASE_FAMILY if base else (ref.name,)
        outcomes = set().union(*(self.outcomes.get(n, set()) for n in family))
        if not outcomes - {KEPT} and not self.generated_used & set(family):
            return  # nothing of it was replaced here: the TE code around it stays as it was
        target = f"{MODULE}.{BASE_GENERATED if base else ref.name}"
        what = "TE module" if base else f"`te.{ref.name}`"
        source = code_of(ref.node)
        internals = sorted(_te_internals(ref.statement)) if ref.class_test and ref.statement is not None else []
        code_ = "NPU418"
        plain = sorted(t for t in outcomes if t != KEPT and not t.startswith(MODULE + "."))
        if KEPT in outcomes:
            why = (
                f"some of this file's {what} calls were not rewritten (see their findings), others became "
                f"`{target}`: decide which this {'class test' if ref.class_test else 'use'} means"
            )
        elif plain:  # a use the pre-pass could not see (a local import): its calls went to torch.nn
            why = (
                f"this file's {what} calls became `{plain[0]}`, which this use cannot follow (it also matches "
                "modules that never were TE ones): adapt it by hand"
            )
        elif internals:
            why = (
                f"this file's {what} calls became `{MODULE}` classes, but the code this class test guards uses TE "
                "internals (" + ", ".join(f"`{a}`" for a in internals) + ") they do not have: remove it (FP8 "
                "state does not exist on NPU) or adapt it"
            )
        else:
            role = (
                "in a class test"
                if ref.class_test
                else "as a value (arguments passed through it must be ones the generated class takes)"
            )
            self.report_in(
                ref.statement,
                code_,
                ref.node,
                f"`{source}` {role} → `{target}`, as this file's {what} calls; review the code around it "
                "(the generated modules have TE's parameters and `reset_parameters`, no FP8 state)"
                + (PORTABLE_NOTE if self.options.portable else ""),
                self._fix(code_, lambda _: expression(target)),
                companion=COMPANION,
            )
            self.uses_generated = True
            return
        self.report_in(ref.statement, code_, ref.node, f"`{source}` kept: {why}", tier=Tier.MANUAL)

    # ---------------------------------------------------------------- imports and module support
    def visit_Import(self, node: cst.Import) -> None:
        self._import(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._import(node)

    def _import(self, node: cst.CSTNode) -> None:
        if self.options.portable and node not in self.facts.guards and package_names(node, ("transformer_engine",)):
            self.te_imports.append((node, self.ctx.statement))
        unused = self.import_removals.get(node)
        if unused:
            names = ", ".join(f"`{n}`" for n in unused)
            self.report(
                "NPU416",
                node,
                f"TransformerEngine import of {names} is unused (TE cannot be installed on an NPU host); removed",
                remove_import_names(node, unused),
                needs_torch_npu=False,
            )

    def _need(self, code_: str, imports: list[str]) -> None:
        self.rewrites.append((code_, Tier.REVIEW))
        self.imports.extend(imports)

    def leave_Module(self, original_node: cst.Module) -> None:
        for ref in self.references:
            self._other_use(ref)
        if self.dispatches and self.options.fix:
            self._guard_imports()
            portable.report_support(self, min(self.dispatches)[1])
        if self.uses_generated and self.options.fix:
            relative = self.options.file.in_package
            statement = f"from . import {MODULE}" if relative else f"import {MODULE}"
            self.report(
                "NPU418",
                original_node,
                f"adds `{statement}` (the generated {COMPANION} next to this file)",
                lambda module: module,  # the engine adds the import
                companion=COMPANION,
                needs_torch_npu=False,
                imports=[ImportNeed(".", MODULE) if relative else ImportNeed(MODULE)],
            )
        if not self.rewrites or not self.options.fix:
            return
        imports = missing_imports(self.resolver, original_node, self.imports)
        if "torch" not in imports and not TORCH_IMPORT.search(original_node.code):
            imports.append("torch")
        if imports:
            # under a code that is enabled (the calls of an ignored code are not rewritten)
            code_, tier = next(((c, t) for c, t in self.rewrites if self.options.code_enabled(c)), self.rewrites[0])
            self.report(
                code_,
                original_node,
                describe_support(imports, ()),
                lambda module: module,  # the engine adds the imports
                tier=tier,
                needs_torch_npu=False,
                imports=import_needs(imports),
            )


# te.checkpoint's own keyword options (TE >= 1.5); the TE < 1.5 signature took the first three
# positionally: checkpoint(function, distribute_saved_activations, get_rng_state_tracker, tp_group, *args)
TE_CHECKPOINT_OPTIONS = ("distribute_saved_activations", "get_rng_state_tracker", "tp_group")
# torch.utils.checkpoint options TE >= 1.5 passes on; torch takes `context_fn`/`debug` only without reentrancy
TORCH_CHECKPOINT_OPTIONS = {"use_reentrant", "context_fn", "determinism_check", "debug"}


class CheckpointPlan(NamedTuple):
    skip: int  # leading arguments that are not the function's inputs (1: just `function`)
    add_reentrant: bool
    drops_tracker: bool


def checkpoint_plan(call: cst.Call) -> CheckpointPlan:
    """How a ``te.checkpoint`` call becomes ``torch.utils.checkpoint.checkpoint``; Manual when it cannot.

    TE < 1.5 took its options positionally, TE >= 1.5 as keywords (it still accepts the old form when
    the 2nd-4th arguments are a bool, a callable and a group). The old form is recognised by a literal
    bool second argument or by the names of its 2nd-4th arguments."""
    if any(a.star == "**" for a in call.args):
        raise Manual("`**kwargs` hide which TE options are passed")
    leading = list(itertools.takewhile(lambda a: a.keyword is None and not a.star, call.args))
    keywords = {a.keyword.value: a for a in call.args if a.keyword is not None}
    if not leading:
        raise Manual("`function` is missing")
    old = _old_checkpoint_form(leading)
    if old and len(leading) < 4:
        raise Manual(
            "TE < 1.5's form (function, distribute_saved_activations, get_rng_state_tracker, tp_group, "
            "*args) is incomplete or its options are hidden in `*` arguments"
        )
    dsa = leading[1].value if old else arg_value(keywords, "distribute_saved_activations")
    if dsa is not None and literal(dsa) is not False:
        form = "TE < 1.5's positional form, " if old else ""
        value = "=True`" if literal(dsa) is True else f"` is `{code_of(dsa)}`, which may be True"
        raise Manual(
            f"{form}`distribute_saved_activations{value}: it splits saved activations across the "
            "tensor-parallel group (no torch.utils.checkpoint counterpart; with False it is dropped)"
        )
    reentrant = arg_value(keywords, "use_reentrant")
    non_reentrant = reentrant is not None and literal(reentrant) is False
    for_function = set(keywords) - set(TE_CHECKPOINT_OPTIONS) - TORCH_CHECKPOINT_OPTIONS
    if for_function and not non_reentrant:
        raise Manual(
            f"keyword arguments {sorted(for_function)} for the function need use_reentrant=False in "
            "torch.utils.checkpoint"
        )
    torch_only = sorted({"context_fn", "debug"} & set(keywords))
    if torch_only and not non_reentrant:
        raise Manual(
            f"{', '.join(f'`{k}`' for k in torch_only)}: only with use_reentrant=False in torch.utils.checkpoint"
        )
    return CheckpointPlan(
        skip=4 if old else 1, add_reentrant=reentrant is None, drops_tracker=old or "get_rng_state_tracker" in keywords
    )


def _old_checkpoint_form(leading: list[cst.Arg]) -> bool:
    """Whether the positional arguments after ``function`` start with TE < 1.5's options (else they are
    the function's inputs): a literal bool second, or names saying distribute / rng tracker / group."""
    hints = (("distribute",), ("rng", "tracker"), ("group",))
    if len(leading) > 1 and literal(leading[1].value) in (True, False):
        return True
    for arg, words in zip(leading[1:4], hints):
        name = (dotted_name(arg.value.func if isinstance(arg.value, cst.Call) else arg.value) or "").rsplit(".", 1)[-1]
        if any(word in name.lower() for word in words):
            return True
    return False


KEPT = ""  # an outcome: the TE call or base class was not rewritten
BASE_MODULE = "TransformerEngineBaseModule"
BASE_GENERATED = "TEModule"  # its place in the generated file
BASE_FAMILY = ("Linear", "LayerNormLinear", "LayerNormMLP", "DotProductAttention")  # TE classes derived from it
# attributes of TE modules that the generated ones lack (besides anything naming fp8)
TE_INTERNALS = frozenset(
    {
        "fast_setattr",
        "param_init_meta",
        "quantizers",
        "primary_weights_in_fp8",
        "set_tensor_parallel_group",
        "fsdp_wrapped",
        "fsdp_group",
        "backward_dw",
        "activation_dtype",
        "set_activation_dtype",
        "prepare_forward",
        "set_meta_tensor",
        "preserve_high_precision_init_val",
        "wgrad_store",
        "tp_group",
        "tp_size",
    }
)


class Reference(NamedTuple):
    node: cst.BaseExpression
    name: str  # te_name of the class
    statement: cst.CSTNode | None
    class_test: bool  # in isinstance/issubclass or an is/== comparison


def _te_bindings(module: cst.Module) -> dict[str, set[str]]:
    """Name → the TransformerEngine objects an import binds it to, in any scope of the file."""
    bindings: dict[str, set[str]] = {}
    for node in iter_nodes(module, (cst.Import, cst.ImportFrom)):
        if isinstance(node, cst.ImportFrom) and (node.relative or isinstance(node.names, cst.ImportStar)):
            continue
        base = dotted_name(node.module) + "." if isinstance(node, cst.ImportFrom) else ""
        for alias in node.names:
            qualified = base + dotted_name(alias.name)
            if not qualified.startswith("transformer_engine"):
                continue
            if alias.asname is not None:
                bound = alias.asname.name.value
            elif base:
                bound = alias.name.value
            else:  # `import transformer_engine.pytorch` binds `transformer_engine`
                bound = qualified = qualified.split(".")[0]
            bindings.setdefault(bound, set()).add(qualified)
    return bindings


def _te_internals(statement: cst.CSTNode) -> set[str]:
    names = {a.attr.value for a in iter_nodes(statement, cst.Attribute)}
    return {n for n in names if "fp8" in n.lower() or n in TE_INTERNALS}


def _is_super_init(call: cst.Call) -> bool:
    """``super().__init__(...)`` (``super``'s own arguments are free)."""
    func = call.func
    return (
        isinstance(func, cst.Attribute)
        and func.attr.value == "__init__"
        and isinstance(func.value, cst.Call)
        and isinstance(func.value.func, cst.Name)
        and func.value.func.value == "super"
    )


def _with_arguments(call: cst.Call, func: str, args: list[cst.Arg]) -> cst.Call:
    """``call`` with another callee and arguments, in the call's layout: an argument without a comma
    (added) gets the separator the call used last, and the last one the call's own ending (a trailing
    comma before a closing line, or none)."""
    if not args:
        return call.with_changes(func=expression(func), args=[])
    separators = [a.comma for a in call.args[:-1] if isinstance(a.comma, cst.Comma)]
    separator = separators[-1] if separators else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    ending = call.args[-1].comma if call.args else cst.MaybeSentinel.DEFAULT
    middle = [a if isinstance(a.comma, cst.Comma) else a.with_changes(comma=separator) for a in args[:-1]]
    return call.with_changes(func=expression(func), args=[*middle, args[-1].with_changes(comma=ending)])


def _kept_arguments(args, keep) -> list[cst.Arg]:
    """``keep(arg)`` (the argument, changed or not, or None to drop it) for each argument; a dropped
    argument's comma that ends a line moves to the kept argument before it (unless that one ends a
    line already), so line breaks stay."""
    kept: list[cst.Arg] = []
    for arg in args:
        new = keep(arg)
        if new is not None:
            kept.append(new)
        elif kept and _ends_line(arg.comma) and not _ends_line(kept[-1].comma):
            kept[-1] = kept[-1].with_changes(comma=arg.comma)
    return kept


def _ends_line(comma) -> bool:
    return isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace)


def _equal() -> cst.AssignEqual:
    return cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
