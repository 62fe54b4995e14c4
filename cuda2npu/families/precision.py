"""The mixed-precision policy (``--precision``, NPU340–NPU342) for native torch AMP code.

* ``bf16`` (default): every CUDA autocast runs in bfloat16 — BF16 is the native mixed-precision
  type of Atlas A2 (910B-class) chips and needs no loss scaling (NPU340) — but a float16 one the
  code offers as a choice next to a bfloat16 one (a dict of autocasts, an ``if``/``elif`` on the
  precision), which is the user's and keeps float16, and a dtype variable a test or a loop over
  precisions picks (``def test_x(dtype=torch.float16)``, ``for dtype in (torch.float16,
  torch.bfloat16):``), which is not reported, and a float16 one over a model made float16 (in its
  function, or read there: ``self.model`` of the class, a module-level model), which keeps float16
  (reported once a file, and only where those weights train); models
  cast to float16 that train (not frozen, not evaluation code) are reported with the BF16
  alternative (NPU342). GradScaler stays (NPU106 makes it the NPU one; it is harmless with
  BF16).
* ``fp16``: float16 stays; a CUDA ``GradScaler()`` without ``init_scale`` starts at 2**14 instead
  of 2**16, because NPU overflow detection differs from the GPU's (NPU341).
* ``keep``: nothing here; NPU106 only changes the device.

Device renames (``torch.cuda.amp`` → ``torch.npu.amp``, ``"cuda"`` → ``"npu"``) are NPU106's; these
fixes rebuild the autocast call on top of them, and nothing they emit is a CUDA autocast again.
"""

from __future__ import annotations

import functools
import itertools
import re

import libcst as cst

from cuda2npu.analysis.autocast import AUTOCAST, SCALER, autocast_alias, never_entered
from cuda2npu.analysis.float16_models import (
    float16_models,
    half_cast,
    looks_like_model,
    method_name,
    model_names,
    unmoved,
)
from cuda2npu.analysis.hf_sources import sources, statement_of
from cuda2npu.analysis.kernel_switch import first_kernel
from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.analysis.value_uses import ValueUses
from cuda2npu.core.arguments import Unbindable, bind, literal_arg, remap_args, try_bind
from cuda2npu.core.bindings import function_locals
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.feature_words import name_tokens
from cuda2npu.core.imports import ImportNeed
from cuda2npu.core.literals import literal, string_value
from cuda2npu.core.names import dotted_name, is_torch_dtype, target_names
from cuda2npu.core.nodes import code_of, expression, keyword_arg, named_params, with_args
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes, walk

CUDA_AUTOCAST = "torch.cuda.amp.autocast"
CUDA_AUTOCAST_PARAMS = ("enabled", "dtype", "cache_enabled")
AUTOCAST_PARAMS = ("device_type", "dtype", "enabled", "cache_enabled")
CUSTOM_FWD = {"torch.cuda.amp.custom_fwd", "torch.amp.custom_fwd"}
NPU_CUSTOM_FWD = {"torch.npu.amp.custom_fwd", "torch_npu.npu.amp.custom_fwd"}  # NPU106's renames of the CUDA one
# an `if` choosing 16-bit precision around an autocast in a DeepSpeed branch: `if trainer_kwargs['precision'] == 16:`
PRECISION_NAME = re.compile(r"precision|amp_level|mixed_precision", re.IGNORECASE)
FLOAT16_PRECISIONS = (16, "16", "fp16", "16-mixed", "float16")
CUDA_SCALER = "torch.cuda.amp.GradScaler"
CUDA_SCALER_PARAMS = ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled")
SCALER_PARAMS = ("device", *CUDA_SCALER_PARAMS)
FP16_INIT_SCALE = "2.0**14"
AUTOCAST_DTYPE_GETTERS = {  # the dtype of the active autocast region (NPU106 renames the CUDA ones)
    "torch.get_autocast_gpu_dtype",
    "torch.get_autocast_dtype",
    "torch.npu.get_autocast_dtype",
    "torch_npu.npu.get_autocast_dtype",
}


def _callee_name(node: cst.Call) -> str | None:
    """``autocast`` for ``torch.cuda.amp.autocast(...)`` and ``autocast(...)`` (a cheap pre-check)."""
    return _last_name(node.func)


def _last_name(expr: cst.BaseExpression) -> str | None:
    """``autocast`` for ``torch.cuda.amp.autocast`` and ``autocast``; None for another expression."""
    return expr.attr.value if isinstance(expr, cst.Attribute) else expr.value if isinstance(expr, cst.Name) else None


def _device(bound: dict[str, cst.Arg], name: str, default: str | None) -> str | None:
    arg = bound.get(name)
    return default if arg is None else string_value(arg.value)


def _given_device(call: cst.Call) -> str | None:
    """The device of ``torch.autocast(...)`` arguments that cannot all be bound (``**kwargs``): the
    string, "" for another expression (``state.device.type``: not known to be CUDA), None if not
    visible."""
    for arg in call.args:
        if (arg.keyword is not None and arg.keyword.value == "device_type") or (arg.keyword is None and not arg.star):
            return string_value(arg.value) or ""
    return None


@register
class CudaAutocastBf16(ValueUses, Rule):
    """NPU340: CUDA autocast (call, context manager, decorator, ``custom_fwd``, and the class as a
    value: timm's ``amp_autocast = torch.cuda.amp.autocast``) → BF16 on NPU."""

    codes = ("NPU340",)
    triggers = (r"autocast", r"custom_fwd")

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._values: dict[cst.CSTNode, str | None] = {}  # CUDA autocast as a value -> why not rewritten
        self._half_kept = False  # a float16 autocast kept over trained float16 weights was reported

    def visit_Call(self, node: cst.Call) -> None:
        if self.options.precision == "bf16":
            self.call_value_uses(node)
        if self.options.precision != "bf16":
            return
        named = _callee_name(node) in ("autocast", "custom_fwd")
        alias = None if named else autocast_alias(self.ctx, node.func)  # `precision_scope("cuda")`
        if not named and alias is None:
            return
        if is_cuda_alternative(self.ctx, node):
            return  # `elif is_cuda_available(): with torch.cuda.amp.autocast(): ...` after an NPU branch
        if never_entered(self.ctx, node):
            return  # `with torch.cuda.amp.autocast() and torch.no_grad():`: `and` gives the context the right side
        qualified = alias or self.resolver.qualified_name(node.func) or autocast_alias(self.ctx, node.func)
        if qualified == CUDA_AUTOCAST:
            self._autocast(node, CUDA_AUTOCAST_PARAMS, cuda=True)
        elif qualified in AUTOCAST:
            self._autocast(node, AUTOCAST_PARAMS, cuda=False)
        elif qualified in CUSTOM_FWD or qualified in NPU_CUSTOM_FWD:
            self._custom_fwd(node, npu=qualified in NPU_CUSTOM_FWD)

    def _saved_autocast_state(self, node: cst.Call) -> bool:
        """``autocast(**ctx.gpu_autocast_kwargs)`` where this file assigns ``ctx.gpu_autocast_kwargs`` a dict
        whose ``"dtype"`` is the active region's (the checkpoint helper of Stable Diffusion derived code)."""
        starred = [code_of(arg.value) for arg in node.args if arg.star == "**"]
        return bool(starred) and all(name in self._state_dicts for name in starred)

    def _forwarded(self, node: cst.Call) -> bool:
        """``torch.autocast(*args, **kwargs)`` whose arguments are all unpacked parameters of the function
        around it (audiocraft's ``TorchAutocast`` wrapper, whose callers pass ``device_type=`` and ``dtype=``):
        nothing at the site says CUDA; the callers' device strings are NPU104's."""
        function = TreeIndex.of(self.ctx).function.get(self.ctx.statement)
        if function is None:
            return False
        params = function.params
        names = {
            p.name.value
            for p in (*named_params(function), params.star_arg, params.star_kwarg)
            if isinstance(p, cst.Param)
        }
        return all(arg.star and isinstance(arg.value, cst.Name) and arg.value.value in names for arg in node.args)

    @functools.cached_property
    def _state_dicts(self) -> set[str]:
        """The targets (as code) of dict literals whose ``"dtype"`` entry is an autocast dtype getter."""
        found = set()
        for node in iter_nodes(self.ctx.module, cst.Assign):
            value = node.value
            if isinstance(value, cst.Dict) and any(
                isinstance(e, cst.DictElement)
                and string_value(e.key) == "dtype"
                and self._current_autocast_dtype(e.value)
                for e in value.elements
            ):
                found.update(code_of(target.target) for target in node.targets)
        return found

    def _current_autocast_dtype(self, value: cst.BaseExpression) -> bool:
        """``torch.get_autocast_gpu_dtype()`` and the other getters of the active autocast dtype."""
        return isinstance(value, cst.Call) and self.resolver.qualified_name(value.func) in AUTOCAST_DTYPE_GETTERS

    def _autocast(self, node: cst.Call, params: tuple[str, ...], cuda: bool) -> None:
        try:
            bound = bind(node, params)
        except Unbindable as exc:
            given = _given_device(node)
            hidden = given is None and not self._forwarded(node)  # the device may be CUDA's
            if (cuda or given == "cuda" or hidden) and not self._saved_autocast_state(node):
                self.report("NPU340", node, f"CUDA autocast not migrated to BF16: {exc}", tier=Tier.MANUAL)
            return
        if not cuda and _device(bound, "device_type", None) != "cuda":
            return
        if literal_arg(bound, "enabled", True) is False:
            return  # a float32 region: its dtype is never used (NPU106 changes the device)
        dtype = bound.get("dtype")
        if dtype is not None and is_torch_dtype(self.resolver, dtype.value, "bfloat16"):
            return  # already BF16: NPU106 changes the device
        if dtype is not None and is_torch_dtype(self.resolver, dtype.value, "float32", "float"):
            return  # a float32 region asked for: the precision policy does not apply
        if dtype is not None and self._current_autocast_dtype(dtype.value):
            return  # the enclosing region's dtype (BF16 under the policy): a checkpoint re-entering autocast
        if dtype is not None and not is_torch_dtype(self.resolver, dtype.value, "float16", "half"):
            if self._tested_choice(dtype.value) or not self._half_chosen(dtype.value):
                return  # `for dtype in (torch.float16, torch.bfloat16):`, a test's dtype parameter, a run-time choice
            if not self._half_weights(node) and not self._project_float16(node):  # else as below (AnyGPT's
                self.report(  # `maybe_autocast(self, dtype=torch.float16)` over a `.half()` ViT, round 40)
                    "NPU340",
                    node,
                    f"CUDA autocast with dtype={code_of(dtype.value)}: the BF16 policy wants dtype=torch.bfloat16 here",
                    tier=Tier.REVIEW,
                )
                return
        if self._tests_float16(node):
            return  # a test asserting float16 results (detectron2's `test_autocast`): float16 is what it tests
        numpy = self._results_to_numpy(node)
        if numpy is not None:
            self.report(
                "NPU340",
                node,
                f"CUDA autocast kept float16: what it computes reaches `{code_of(numpy)}` in this function, and "
                "numpy has no bfloat16 (`.numpy()` of a bfloat16 tensor raises TypeError); float16 runs on NPU as it "
                "is — to follow the BF16 policy, cast to float32 before `.numpy()` and switch this autocast then",
                tier=Tier.REVIEW,
            )
            return
        chosen = self._float16_precision_test(node)
        if chosen is not None:
            self.report(
                "NPU340",
                node,
                f"CUDA autocast kept float16: it runs only where the code chose 16-bit precision (`{code_of(chosen)}`), "
                "in a DeepSpeed branch, whose fp16 mode makes the engine's weights float16; bfloat16 autocast over "
                "them mixes the two types; to follow the BF16 policy, move that precision setting and this autocast "
                "to bfloat16 together",
                tier=Tier.REVIEW,
            )
            return
        if self._bf16_offered(node):
            return  # one of the precisions the code offers (`{"fp16": ..., "bf16": ...}[args.precision]`; its
            # float16 arm may rely on autocast's default dtype: composer's `Precision.AMP_FP16`)
        halves = [cast for cast in self._half_weights(node) if not self._evaluated_after(node, cast)]
        default = self._project_float16(node)
        if not halves and default:  # weights built float16 in another file of the project this one reaches
            if not self._half_kept:
                self._half_kept = True
                self.report("NPU340", node, _float16_project_message(default), tier=Tier.REVIEW)
            return
        working = self._float16_working_dtype() if not halves else None
        if working is not None:  # the class (or function) computes in float16: its data and parameters
            if not self._half_kept:
                self._half_kept = True
                self.report("NPU340", node, _float16_dtype_message("CUDA autocast", working), tier=Tier.REVIEW)
            return
        if halves:  # float16 stays: bfloat16 autocast over float16 weights mixes the two types
            trained = [cast for cast in halves if not _inference_only(self.ctx, cast)]
            if trained and not self._half_kept:  # one marker a file; frozen float16 weights need none
                self._half_kept = True
                given = f"with dtype={code_of(dtype.value)}" if dtype is not None else "(float16 by default)"
                self.report(
                    "NPU340",
                    node,
                    f"CUDA autocast {given} kept, here and in this file's other "
                    f"float16 autocasts over float16 weights: the model trained here is float16 "
                    f"(`{code_of(trained[0])}`), and bfloat16 autocast over float16 weights mixes the two types "
                    "(ops outside autocast's lists promote or fail); float16 runs on NPU as it is — to follow "
                    "the BF16 policy, move the weights and these autocasts to bfloat16 together",
                    tier=Tier.REVIEW,
                )
            return
        rebuild = isinstance(node.func, cst.Attribute)

        def fix(updated: cst.Call) -> cst.Call:
            others = remap_args(updated, params, drop={"device_type", "dtype"})
            head = [keyword_arg("dtype", "torch.bfloat16")]
            if rebuild or not cuda:
                head.insert(0, cst.Arg(expression('"npu"')))
            func = expression("torch.autocast") if rebuild else updated.func
            return with_args(updated.with_changes(func=func), [*head, *others])

        target = 'torch.autocast("npu", dtype=torch.bfloat16)' if rebuild else "dtype=torch.bfloat16"
        self.report(
            "NPU340",
            node,
            f"CUDA autocast → {target}: BF16 is the native mixed-precision type of Atlas A2 NPUs and needs no loss "
            "scaling (--precision bf16)",
            fix,
            tier=Tier.NUMERIC,
            imports=[ImportNeed("torch")],
        )

    def _float16_precision_test(self, node: cst.Call) -> cst.BaseExpression | None:
        """The test of an ``if`` around ``node`` that chose 16-bit precision (``if trainer_kwargs['precision']
        == 16:``) inside a DeepSpeed branch (``if ...['strategy'].startswith('deepspeed'):``, DynamiCrafter,
        round 44), whose fp16 mode makes the engine's weights float16: a comparison of something named like
        a precision with 16, "16", "fp16", "16-mixed" or "float16"; None otherwise (a lone float16 choice
        elsewhere follows the BF16 policy: no weights of its own are float16)."""
        tests = self._if_tests_around()
        if not any("deepspeed" in code_of(test).lower() for test in tests):
            return None
        for test in tests:
            if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
                continue
            sides = [test.left, test.comparisons[0].comparator]
            named = any(PRECISION_NAME.search(code_of(side)) for side in sides)
            equal = isinstance(test.comparisons[0].operator, cst.Equal)
            if named and equal and any(literal(side) in FLOAT16_PRECISIONS for side in sides):
                return test
        return None

    def _if_tests_around(self) -> list[cst.BaseExpression]:
        """The tests of the ``if`` statements whose bodies hold the current statement, innermost first."""
        statement = self.ctx.statement
        enclosing = TreeIndex.of(self.ctx).enclosing(statement) if statement is not None else []
        return [owner.test for owner, role in enclosing if isinstance(owner, cst.If) and role == "body"]

    def _project_float16(self, node: cst.BaseExpression) -> str:
        """Where the project builds the weights ``node`` runs over in float16 (``options.file.float16_default``),
        "" where it does not or ``node`` runs only in the project's "amp" mode (:meth:`_amp_mode`)."""
        return "" if self._amp_mode(node) else self.options.file.float16_default

    def _results_to_numpy(self, node: cst.Call) -> cst.Call | None:
        """The ``.numpy()`` call that a value computed in the ``with`` region ``node`` opens reaches later in the
        same function, through the names assigned from it (InstantID's depth map: ``with torch.no_grad(),
        torch.autocast("cuda"): depth_map = model(image).predicted_depth``, then ``image = torch.cat([depth_map]
        ...)`` and ``image.permute(...).cpu().numpy()``; round 57), unless a float cast comes first on the way
        (``.float()``, ``.to(torch.float32)``); None otherwise."""
        index = TreeIndex.of(self.ctx)
        item = index.parents.get(node)
        region = index.parents.get(item) if isinstance(item, cst.WithItem) else None
        if not isinstance(region, cst.With) or self.ctx.text is not None and b".numpy()" not in self.ctx.text:
            return None
        tainted = _assigned_names(region.body)
        placement = index.placement.get(region)
        if not tainted or placement is None:
            return None
        for statement in placement.block.body[placement.index + 1 :]:
            for call in iter_nodes(statement, cst.Call):
                if method_name(call) == "numpy" and _reads(call.func, tainted) and not _cast_on_the_way(call):
                    return call
            if _reads(statement, tainted):
                tainted |= _assigned_names(statement)
        return None

    def _amp_mode(self, node: cst.BaseExpression) -> bool:
        """Whether ``node`` (or what offers it) runs only where a precision option says "amp"
        (open_clip's ``autocast = torch.cuda.amp.autocast if args.precision == "amp" else suppress``): the
        project's mixed-precision mode over float32 weights, which its float16 conversion (``if precision ==
        "fp16": convert_weights_to_fp16(model)``, another value of the option) never meets (AudioLDM's CLAP
        trainer, round 56)."""
        parents = TreeIndex.of(self.ctx).parents
        current: cst.CSTNode = self._offered_as(node)
        tests = []
        while (parent := parents.get(current)) is not None and not isinstance(parent, cst.BaseSmallStatement):
            if isinstance(parent, cst.IfExp) and parent.body is current:
                tests.append(parent.test)
            current = parent
        tests += self._if_tests_around()
        return any(
            isinstance(test, cst.Comparison)
            and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Equal)
            and PRECISION_NAME.search(code_of(test.left)) is not None
            and literal(test.comparisons[0].comparator) == "amp"
            for test in tests
        )

    def _tests_float16(self, node: cst.Call) -> bool:
        """``node`` is in a test (a ``test*`` function) that asserts float16 results: an ``assert`` or a
        ``self.assert*(...)`` call naming ``torch.float16`` / ``torch.half``
        (``self.assertEqual(output.dtype, torch.float16)``): bfloat16 there fails the test it is."""
        function = TreeIndex.of(self.ctx).function.get(self.ctx.statement)
        if function is None or not function.name.value.startswith("test"):
            return False
        checks = [
            check
            for check in iter_nodes(function.body, (cst.Assert, cst.Call))
            if isinstance(check, cst.Assert) or (method_name(check) or "").startswith("assert")
        ]
        return any(
            is_torch_dtype(self.resolver, value, "float16", "half")
            for check in checks
            for value in iter_nodes(check, cst.Attribute)
        )

    def _bf16_offered(self, node: cst.BaseExpression) -> bool:
        """Whether a bfloat16 autocast is another choice next to ``node`` (an autocast call, or the
        class as a value), where the user picks the precision: the float16 one is then the user's, and
        keeps its dtype (NPU106 changes the device). The choice is what ``node`` is offered as: itself,
        or the ``lambda: <autocast>`` / ``functools.partial(<autocast>, ...)`` around it (open_flamingo's
        ``get_autocast``). The choices of the ``if`` chains around it count too (composer: ``if precision
        == AMP_FP16: if torch.cuda.is_available(): <autocast>`` ... ``elif precision == AMP_BF16:``)."""
        parents = TreeIndex.of(self.ctx).parents
        current: cst.CSTNode | None = self._offered_as(node)
        while current is not None:
            if any(
                self._bf16_autocast(call)
                for choice in _other_choices(parents, current)
                for call in iter_nodes(choice, cst.Call)
            ):
                return True
            chain = _enclosing_chain(parents, current)
            current = chain[0] if chain is not None else None
        return False

    def _offered_as(self, node: cst.BaseExpression) -> cst.BaseExpression:
        """The expression that offers the autocast ``node``: the ``lambda`` whose body it is
        (``lambda: torch.cuda.amp.autocast(dtype=torch.float16)``), the ``functools.partial`` call it is
        the first argument of, each in turn; else ``node``."""
        parents = TreeIndex.of(self.ctx).parents
        while True:
            parent = parents.get(node)
            if isinstance(parent, cst.Lambda) and parent.body is node:
                node = parent
            elif isinstance(parent, cst.Arg) and self._partial_of(parents.get(parent)) is node:
                node = parents[parent]
            else:
                return node

    def _partial_of(self, call: cst.CSTNode | None) -> cst.BaseExpression | None:
        """The callable ``functools.partial(<callable>, ...)`` binds; None for any other node."""
        if not isinstance(call, cst.Call) or not call.args or call.args[0].keyword or call.args[0].star:
            return None
        return call.args[0].value if self.resolver.qualified_name(call.func) == "functools.partial" else None

    def _bf16_autocast(self, call: cst.Call) -> bool:
        """``autocast(..., dtype=torch.bfloat16)`` (any autocast, by its name) or
        ``functools.partial(<autocast>, dtype=torch.bfloat16)``."""
        bound = self._partial_of(call)
        return _last_name(call.func if bound is None else bound) == "autocast" and any(
            is_torch_dtype(self.resolver, arg.value, "bfloat16") for arg in call.args
        )

    def _tested_choice(self, dtype: cst.BaseExpression) -> bool:
        """Whether ``dtype`` is a name the code runs with several precisions: the variable of a ``for``
        over dtypes that holds bfloat16 (``for dtype in (torch.float16, torch.bfloat16):``), or a
        parameter of a test (a ``test*`` function, or one ``@pytest.mark.parametrize`` fills)."""
        if not isinstance(dtype, cst.Name):
            return False
        index = TreeIndex.of(self.ctx)
        for owner in index.ancestors(self.ctx.statement):
            if isinstance(owner, cst.For) and code_of(owner.target) == dtype.value:
                choices = owner.iter.elements if isinstance(owner.iter, (cst.List, cst.Tuple)) else ()
                return any(is_torch_dtype(self.resolver, choice.value, "bfloat16") for choice in choices)
        function = index.function.get(self.ctx.statement)
        if function is None or dtype.value not in {param.name.value for param in named_params(function)}:
            return False
        return function.name.value.startswith("test") or any(
            dtype.value in _parametrized(decorator.decorator) for decorator in function.decorators
        )

    def _half_chosen(self, dtype: cst.BaseExpression) -> bool:
        """float16 is among the values ``dtype`` takes in this file (a loop's choices, its assignments
        and parameter defaults) and bfloat16 is not (``amp_dtype = torch.float16``, ``for dtype in
        (torch.float16, torch.float32):``); a dtype the code chooses at run time (``config.dtype``,
        ``self._autocast_dtype``) is the user's precision, not the policy's."""
        loops = [o for o in TreeIndex.of(self.ctx).ancestors(self.ctx.statement) if isinstance(o, cst.For)]
        loop = next((o for o in loops if code_of(o.target) == code_of(dtype)), None)
        if loop is not None:
            values = [e.value for e in loop.iter.elements] if isinstance(loop.iter, (cst.List, cst.Tuple)) else []
        else:
            values = sources(self.ctx, dtype)
        half = any(is_torch_dtype(self.resolver, value, "float16", "half") for value in values)
        bf16 = any(is_torch_dtype(self.resolver, value, "bfloat16") for value in values)
        return half and not bf16 and not self._passed_a_choice(dtype)

    def _passed_a_choice(self, dtype: cst.BaseExpression) -> bool:
        """``dtype`` is a parameter of the function around the statement that a call of it in this file
        passes a value bfloat16 is among (ml-4m's ``train_one_epoch(..., dtype=dtype)`` with the run's
        ``--dtype`` choice, round 53): its float16 default is not what the run uses."""
        function = TreeIndex.of(self.ctx).function.get(self.ctx.statement)
        if not isinstance(dtype, cst.Name) or function is None:
            return False
        if dtype.value not in {param.name.value for param in named_params(function)}:
            return False
        return any(
            arg.keyword is not None
            and arg.keyword.value == dtype.value
            and any(is_torch_dtype(self.resolver, value, "bfloat16") for value in sources(self.ctx, arg.value))
            for call in iter_nodes(self.ctx.module, cst.Call)
            if (dotted_name(call.func) or "").rpartition(".")[2] == function.name.value
            for arg in call.args
        )

    def _half_weights(self, node: cst.Call) -> list[cst.Call]:
        """The float16 models ``node`` runs over: those cast in the function around it, and those whose
        names its region reads where the name is the same binding: ``self.model`` cast in another method
        of the class (InternLM-XComposer's demos: ``.half()`` in ``__init__``, autocast in ``chat``; also read
        by a method of the class the region calls, VLMEvalKit's ``generate_inner`` calling
        ``self.generate_vqa(...)``, round 31), or a
        module-level model (a script's or a notebook's cells) that the function does not rebind."""
        index = TreeIndex.of(self.ctx)
        scope = index.function.get(self.ctx.statement)
        local = set(self._half_weights_of_function())
        region = _region(self.ctx, node)
        own_class = index.enclosing_class(self.ctx.statement)
        read = {code_of(n) for n in iter_nodes(region, (cst.Name, cst.Attribute))}
        read |= _read_by_own_methods(region, own_class)
        rebound = function_locals(scope) if scope is not None else set()
        found = []
        for cast, names in self.ctx.file_state(float16_models):
            shared = names & read
            where = statement_of(self.ctx, cast)
            if cast in local:
                found.append(cast)
            elif any(name.startswith("self.") for name in shared):
                if own_class is not None and index.enclosing_class(where) is own_class:
                    found.append(cast)
            elif shared and index.function.get(where) is None and not {n.split(".")[0] for n in shared} <= rebound:
                found.append(cast)
        return found or self._half_weights_passed_in(scope, own_class, read) or self._half_weights_of_callers(scope)

    def _evaluated_after(self, node: cst.Call, cast: cst.Call) -> bool:
        """Whether ``cast`` follows the autocast ``node`` in its function and casts for evaluation only (LoftQ's
        ``model.half(); model.eval()`` after the training loop, round 52): the autocast ran over the weights
        as they were."""
        index = TreeIndex.of(self.ctx)
        function = index.function.get(self.ctx.statement)
        if function is None or index.function.get(statement_of(self.ctx, cast)) is not function:
            return False
        calls = list(iter_nodes(function.body, cst.Call))
        if node not in calls or cast not in calls:
            return False
        return calls.index(cast) > calls.index(node) and _inference_only(self.ctx, cast)

    def _half_weights_passed_in(
        self, scope: cst.FunctionDef | None, own_class: cst.ClassDef | None, read: set[str]
    ) -> list[cst.Call]:
        """The float16 casts of the class's models (``self.model = model.half()`` in ``__init__``) that its
        methods pass to ``scope``, a method of the class, at a parameter the region reads (GPT-SoVITS'
        ``self.demix_track(self.model, mix, device)``, whose ``model`` runs under the autocast: round 46)."""
        if scope is None or own_class is None:
            return []
        index = TreeIndex.of(self.ctx)
        params = [p.name.value for p in scope.params.params][1:]  # after self
        passed = set()
        for call in iter_nodes(own_class, cst.Call):
            if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == scope.name.value):
                continue
            if code_of(call.func.value) != "self":
                continue
            positional = [arg for arg in call.args if arg.keyword is None]
            for at, arg in enumerate(positional):
                if arg.star or at >= len(params):
                    break
                if params[at] in read:
                    passed.add(code_of(arg.value))
            passed |= {code_of(a.value) for a in call.args if a.keyword is not None and a.keyword.value in read}
        return [
            cast
            for cast, names in self.ctx.file_state(float16_models)
            if names & passed and index.enclosing_class(statement_of(self.ctx, cast)) is own_class
        ]

    def _half_weights_of_callers(self, scope: cst.FunctionDef | None) -> list[cst.Call]:
        """The float16 casts of models in the functions of the file that call ``scope``, a module-level
        function, by its name: EfficientQAT's ``update_dataset(layer, ...)`` runs, under a bare CUDA
        autocast, the layer ``block_ap`` casts with ``qlayer.half()`` and trains under float16 autocast
        (round 28: bfloat16 targets for a float16 student)."""
        if scope is None or scope not in self.ctx.module.body:
            return []
        index = TreeIndex.of(self.ctx)
        callers = {
            index.function.get(statement_of(self.ctx, call))
            for call in iter_nodes(self.ctx.module, cst.Call)
            if isinstance(call.func, cst.Name) and call.func.value == scope.name.value
        }
        casts = [cast for cast, _ in self.ctx.file_state(float16_models)]
        return [
            cast
            for caller in callers - {None, scope}
            for cast in casts
            if index.function.get(statement_of(self.ctx, cast)) is caller
        ]

    def value_use(self, expr: cst.BaseExpression, class_test: bool = False) -> None:
        """Record a CUDA autocast class used as a value; reported when the traversal leaves it, after
        NPU106 has renamed it (a fix on the same node applies in report order)."""
        if (
            class_test
            or self.options.precision != "bf16"
            or self.resolver.qualified_name(expr) != CUDA_AUTOCAST
            or is_cuda_alternative(self.ctx, expr)
        ):
            return
        if self._bf16_offered(expr):
            return  # `if precision == "amp": return torch.cuda.amp.autocast` next to a bfloat16 arm: the user's float16
        call = TreeIndex.of(self.ctx).call_of(expr)  # `functools.partial(torch.cuda.amp.autocast, ...)`
        given = next((a for a in call.args if a.keyword and a.keyword.value == "dtype"), None) if call else None
        if given is not None and is_torch_dtype(self.resolver, given.value, "bfloat16", "float32", "float"):
            return  # `functools.partial(torch.cuda.amp.autocast, dtype=torch.bfloat16)`: the policy's own dtype
        halves = self._half_weights_of_function()
        working = self._float16_working_dtype()
        if not halves and (default := self._project_float16(expr)):
            self._values[expr] = _float16_project_message(default)
        elif not halves and working is not None:
            self._values[expr] = _float16_dtype_message(f"CUDA autocast used as a value (`{code_of(expr)}`)", working)
        elif halves:
            self._values[expr] = (
                f"CUDA autocast used as a value (`{code_of(expr)}`) kept: the function making it also makes a model "
                f"float16 (`{code_of(halves[0])}`), and bfloat16 autocast over float16 weights mixes the two types; "
                "float16 runs on NPU as it is — to follow the BF16 policy, move the weights and the autocast to "
                "bfloat16 together"
            )
        elif given is not None:
            why = f"passed with dtype={code_of(given.value)}"
            self._values[expr] = f"CUDA autocast {why}: the BF16 policy wants dtype=torch.bfloat16 here"
        else:
            self._values[expr] = None

    def _float16_working_dtype(self) -> cst.Assign | None:
        """An assignment of ``torch.float16`` (also in a conditional value) to a ``dtype`` name or
        attribute in the class around the current statement (else its function): llmc's OmniQuant
        sets ``self.dtype = torch.float if self.deactive_amp else torch.float16`` for its calibration
        data and learnable parameters beside ``self.traincast = ... torch.cuda.amp.autocast`` (round 29);
        its autocasts stay float16, as over float16 weights."""
        index = TreeIndex.of(self.ctx)
        scope = index.enclosing_class(self.ctx.statement) or index.function.get(self.ctx.statement)
        if scope is None:
            return None
        for assign in iter_nodes(scope, cst.Assign):
            named = any("dtype" in (dotted_name(t.target) or "").rpartition(".")[2] for t in assign.targets)
            if named and any(
                is_torch_dtype(self.resolver, value, "float16", "half")
                for value in iter_nodes(assign.value, cst.Attribute)
            ):
                return assign
        return None

    def _half_weights_of_function(self) -> list[cst.Call]:
        """The float16 casts of models in the function holding the current statement (OmniQuant's
        ``traincast = torch.cuda.amp.autocast`` beside ``qlayer.half()``)."""
        scope = TreeIndex.of(self.ctx).function.get(self.ctx.statement)
        if scope is None:
            return []
        local = set(iter_nodes(scope, cst.Call))
        return [cast for cast, _ in self.ctx.file_state(float16_models) if cast in local]

    def leave_Attribute(self, original_node: cst.Attribute) -> None:
        self._report_value(original_node)

    def leave_Name(self, original_node: cst.Name) -> None:
        self._report_value(original_node)

    def _report_value(self, node: cst.BaseExpression) -> None:
        if node not in self._values:
            return
        message = self._values.pop(node)
        if message is not None:
            self.report("NPU340", node, message, tier=Tier.REVIEW)
            return
        self.report(
            "NPU340",
            node,
            f"CUDA autocast used as a value (`{code_of(node)}`) → `functools.partial(..., dtype=torch.bfloat16)`: "
            "NPU autocast defaults to float16, the BF16 policy wants bfloat16 where it is entered; a `dtype=` "
            "given where it is entered still wins (--precision bf16)",
            lambda updated: cst.Call(
                func=expression("functools.partial"), args=[cst.Arg(updated), keyword_arg("dtype", "torch.bfloat16")]
            ),
            tier=Tier.NUMERIC,
            imports=[ImportNeed("functools"), ImportNeed("torch")],
        )

    def _custom_fwd(self, node: cst.Call, npu: bool) -> None:
        """``cast_inputs=torch.float16`` → bfloat16, unless the forward calls a CUDA kernel, whose input
        contract it is (reported, also once NPU106 has renamed the decorator: ``npu``)."""
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "cast_inputs":
                if is_torch_dtype(self.resolver, arg.value, "float16", "half"):
                    kernel = self._forward_kernel(node)
                    if kernel is not None:
                        self.report(
                            "NPU340",
                            node,
                            f"`cast_inputs={code_of(arg.value)}` kept: the forward calls `{kernel}`, a CUDA "
                            "kernel, and float16 is its input contract, not a precision choice; the kernel needs "
                            "an NPU port that takes float16 (or change cast_inputs with a port that takes bfloat16)",
                            tier=Tier.REVIEW,
                        )
                        return
                    if npu:
                        return  # NPU code (or this rule's own result): not a CUDA autocast
                    self.report(
                        "NPU340",
                        arg.value,
                        "`custom_fwd(cast_inputs=torch.float16)` → `cast_inputs=torch.bfloat16` (--precision bf16)",
                        lambda _: expression("torch.bfloat16"),
                        imports=[ImportNeed("torch")],
                    )

    def _forward_kernel(self, decorator: cst.Call) -> str | None:
        """The first CUDA kernel the function decorated by ``decorator`` calls (None: none, or not a
        decorator)."""
        index = TreeIndex.of(self.ctx)
        function = index.parents.get(index.parents.get(decorator))
        if not isinstance(function, cst.FunctionDef):
            return None
        return first_kernel(self.ctx, [function.body])


@register
class GradScalerFp16InitScale(Rule):
    """NPU341: ``GradScaler()`` without ``init_scale`` under ``--precision fp16`` starts at 2**14."""

    codes = ("NPU341",)
    triggers = (r"GradScaler",)

    def visit_Call(self, node: cst.Call) -> None:
        if (
            self.options.precision != "fp16"
            or _callee_name(node) != "GradScaler"
            or is_cuda_alternative(self.ctx, node)
        ):
            return
        qualified = self.resolver.qualified_name(node.func)
        if qualified == CUDA_SCALER:
            params, cuda = CUDA_SCALER_PARAMS, True
        elif qualified in SCALER:
            params, cuda = SCALER_PARAMS, False
        else:
            return
        try:
            bound = bind(node, params)
        except Unbindable:
            return
        if "init_scale" in bound or (not cuda and _device(bound, "device", "cuda") != "cuda"):
            return
        self.report(
            "NPU341",
            node,
            "GradScaler() → GradScaler(init_scale=2.0**14): NPU float16 overflow detection differs from the GPU's; "
            "start lower than the default 2**16 and let the scale grow (--precision fp16)",
            lambda updated: with_args(updated, [*updated.args, keyword_arg("init_scale", FP16_INIT_SCALE)]),
        )


@register
class ModelHalfUnderBf16(Rule):
    """NPU342: ``model.half()`` / ``model.to(torch.float16)`` under the BF16 policy (reported) of a
    model that trains (``_inference_only``): float16 inference runs on NPU as it is."""

    codes = ("NPU342",)
    triggers = (r"\.\s*backward\s*\(",)  # it reports only in files that train (float16 inference is fine)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.trains = self.options.precision == "bf16" and ctx.file_state(_file_trains)
        self._restored: set[cst.Call] = set()  # `model.half().float()`: rounds values, trains in float32

    def visit_Call(self, node: cst.Call) -> None:
        if not self.trains or not isinstance(node.func, cst.Attribute):
            return
        method = node.func.attr.value
        receiver = node.func.value
        if method == "float" and isinstance(receiver, cst.Call):  # visited before the call it reads
            self._restored.add(receiver)
        if node in self._restored or not looks_like_model(receiver):
            return
        cast = half_cast(self.resolver, node)
        if cast is None or _inference_only(self.ctx, node):
            return
        self.report(
            "NPU342",
            node,
            f"`{code_of(receiver)}{cast}` trains in pure float16; with the BF16 policy keep float32 weights under "
            '`torch.autocast("npu", dtype=torch.bfloat16)`, or cast with `.bfloat16()` (then use torch.optim '
            "optimizers: torch_npu's NpuFused ones reject bfloat16 parameters)",
        )


def _float16_project_message(where: str) -> str:
    """NPU340's message for a float16 autocast kept in a project that builds its models float16."""
    return (
        f"CUDA autocast kept in float16, here and in this file's other float16 autocasts: the project builds its "
        f"models with float16 weights (`{where}`), and bfloat16 autocast over float16 weights mixes the two types "
        "(a float16 layer outside it then gets bfloat16 input); float16 runs on NPU as it is — to follow the BF16 "
        "policy, move the default dtype and these autocasts to bfloat16 together"
    )


def _float16_dtype_message(what: str, assign: cst.Assign) -> str:
    return (
        f"{what} kept float16: the code around it computes in float16 (`{code_of(assign).strip()}`), its data "
        "and parameters as well as the model, and bfloat16 autocast over them mixes the two types; float16 "
        "runs on NPU as it is — to follow the BF16 policy, move that dtype and these autocasts to bfloat16 together"
    )


def _region(ctx, autocast: cst.Call) -> cst.CSTNode:
    """What ``autocast`` covers: the body of its ``with``, the function it decorates, else its statement."""
    parents = TreeIndex.of(ctx).parents
    owner = parents.get(parents.get(autocast))
    if isinstance(parents.get(autocast), cst.WithItem) and isinstance(owner, cst.With):
        return owner.body
    if isinstance(parents.get(autocast), cst.Decorator) and isinstance(owner, cst.FunctionDef):
        return owner.body
    return statement_of(ctx, autocast)


def _inference_only(ctx, cast: cst.Call) -> bool:
    """Whether the model ``cast`` casts to float16 never trains: the file does not train, or the cast
    is evaluation code (``_evaluates``), or the model is frozen (``_frozen``)."""
    statement = statement_of(ctx, cast)
    return not ctx.file_state(_file_trains) or _evaluates(ctx, cast, statement) or _frozen(ctx, cast, statement)


def _file_trains(ctx) -> bool:
    """Whether the file trains: it calls ``<something>.backward(...)`` and builds or steps an optimizer or
    runs a trainer (:data:`OPTIMIZING`); LLM-Pruner's pruning runs ``loss.backward()`` for importance
    scores and ``pruner.step()``, with no optimizer: its ``model.half()`` casts train nothing (round 32)."""
    return OPTIMIZING.search(ctx.code) is not None and _Backward.found(ctx.module)


def _evaluates(ctx, cast: cst.Call, statement: cst.CSTNode) -> bool:
    """Whether ``cast`` (in ``statement``) is evaluation code: under ``torch.no_grad()`` /
    ``torch.inference_mode()`` or an ``if`` on a flag named for evaluation (``if args.fp16_full_eval:``),
    in a training function after its last ``backward()`` (``_after_training``) where the model is put in
    eval mode, or in a function that does not train (``_training_functions``) and is
    named for evaluation (``evaluate``, ``test``, ``predict``, ...), is decorated with
    ``no_grad``/``inference_mode``, or puts the model in eval mode before the cast (or in the
    statement after it)."""
    index = TreeIndex.of(ctx)
    if any(
        (isinstance(owner, cst.With) and any(_no_grad(ctx, item.item) for item in owner.items))
        or (isinstance(owner, cst.If) and _names_evaluation(owner.test))
        for owner in index.ancestors(statement)
    ):
        return True
    function = index.function.get(statement)
    if function is None:
        return False
    training = ctx.file_state(_training_functions)
    if function.name.value in training:
        return _after_training(index, function, cast, statement, training) and _puts_in_eval_mode(
            ctx, function, cast, statement
        )
    if EVAL_WORDS.intersection(name_tokens(function.name.value)) or any(
        _no_grad(ctx, decorator.decorator) for decorator in function.decorators
    ):
        return True
    return _puts_in_eval_mode(ctx, function, cast, statement)


def _puts_in_eval_mode(ctx, function: cst.FunctionDef, cast: cst.Call, statement: cst.CSTNode) -> bool:
    """Whether ``function`` calls ``.eval()`` on the model ``cast`` casts before the cast (or in the
    statement after it)."""
    model = code_of(unmoved(cast))
    near = [statement, *TreeIndex.of(ctx).following(statement)[:1]]
    calls = [
        *itertools.takewhile(lambda call: call is not cast, iter_nodes(function.body, cst.Call)),
        *(call for part in near for call in iter_nodes(part, cst.Call)),
    ]
    return any(method_name(call) == "eval" and code_of(unmoved(call)) == model for call in calls)


def _after_training(
    index: TreeIndex, function: cst.FunctionDef, cast: cst.Call, statement: cst.CSTNode, training: set[str]
) -> bool:
    """Whether ``cast`` comes after every step that trains in ``function`` (a ``.backward()``, a call of
    one of the file's ``training`` functions) and in no loop holding one (LoftQ's ``run_glue.py``:
    ``model.half(); model.eval()`` after the training loop, for the final evaluation, round 52)."""

    def trains(call: cst.Call) -> bool:
        return method_name(call) == "backward" or (dotted_name(call.func) or "").rpartition(".")[2] in training

    calls = list(iter_nodes(function.body, cst.Call))
    if cast not in calls or any(trains(call) for call in calls[calls.index(cast) :]):
        return False
    loops = (owner for owner in index.ancestors(statement) if isinstance(owner, (cst.For, cst.While)))
    return not any(trains(call) for loop in loops for call in iter_nodes(loop, cst.Call))


def _names_evaluation(test: cst.BaseExpression) -> bool:
    """``args.fp16_full_eval``, ``do_predict``: a test reading a flag named for evaluation (the HF
    Trainer's evaluation loop casts the model for ``fp16_full_eval``: LMFlow's vendored Trainer)."""
    return any(
        EVAL_FLAG_WORDS.intersection(name_tokens(node.attr.value if isinstance(node, cst.Attribute) else node.value))
        for node in iter_nodes(test, (cst.Attribute, cst.Name))
    )


def _frozen(ctx, cast: cst.Call, statement: cst.CSTNode) -> bool:
    """Whether the function around ``cast`` (or the module) switches the gradients of the model it
    casts off and never back on: ``syncnet.requires_grad_(False)``, ``for p in teacher.parameters():
    p.requires_grad = False`` (a loss network, LatentSync's SyncNet), but not ``unet.requires_grad_(False)``
    followed by a loop that sets some parameters' ``requires_grad = True`` again."""
    names = model_names(cast, statement)
    scope = TreeIndex.of(ctx).function.get(statement) or ctx.module
    switches = {switch for node in iter_nodes(scope, (cst.Call, cst.For)) for switch in _grad_switches(node, names)}
    return switches == {False}


def _grad_switches(node: cst.Call | cst.For, names: set[str]) -> list[bool]:
    """How ``node`` sets the gradients of the model named in ``names``: ``[False]`` for
    ``model.requires_grad_(False)``, the literal values a ``for`` over ``model.parameters()`` /
    ``model.named_parameters()`` gives ``p.requires_grad`` or ``p.requires_grad_(...)``; else ``[]``."""
    if isinstance(node, cst.Call):
        if method_name(node) != "requires_grad_" or code_of(node.func.value) not in names:
            return []
        bound = try_bind(node, ("requires_grad",))
        return [literal_arg(bound, "requires_grad", True)] if bound is not None else [True]
    source = node.iter
    if method_name(source) not in ("parameters", "named_parameters") or code_of(source.func.value) not in names:
        return []
    switches = []
    for inner in iter_nodes(node.body, (cst.Assign, cst.Call)):
        if isinstance(inner, cst.Assign) and any(
            isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad" for t in inner.targets
        ):
            switches.append(literal(inner.value))
        elif isinstance(inner, cst.Call) and method_name(inner) == "requires_grad_":
            bound = try_bind(inner, ("requires_grad",))
            switches.append(literal_arg(bound, "requires_grad", True) if bound is not None else True)
    return switches


def _no_grad(ctx, expr: cst.BaseExpression) -> bool:
    """``torch.no_grad()``, ``torch.inference_mode()`` (also as a decorator without parentheses)."""
    return ctx.resolver.qualified_name(expr.func if isinstance(expr, cst.Call) else expr) in NO_GRAD


def _training_functions(ctx) -> set[str]:
    """The names of this file's functions that train (``_trains``) or call one that does."""
    training: set[str] = set()
    callees: dict[str, set[str]] = {}
    for function in TreeIndex.of(ctx).functions:
        name = function.name.value
        for call in iter_nodes(function.body, cst.Call):
            if _trains(call):
                training.add(name)
                break
            callees.setdefault(name, set()).add(_callee_name(call) or "")
    grown = True
    while grown:
        grown = False
        for name, called in callees.items():
            if name not in training and not called.isdisjoint(training):
                training.add(name)
                grown = True
    return training


NO_GRAD = {
    "torch.no_grad",
    "torch.inference_mode",
    "torch.autograd.no_grad",
    "torch.autograd.grad_mode.no_grad",
    "torch.autograd.grad_mode.inference_mode",
}
EVAL_WORDS = {  # function name words of evaluation code
    "eval",
    "evaluate",
    "evaluation",
    "validate",
    "validation",
    "val",
    "test",
    "infer",
    "inference",
    "predict",
    "generate",
    "sample",
}
EVAL_FLAG_WORDS = {"eval", "evaluate", "evaluation", "inference", "predict", "prediction"}  # of a branch's flag
OPTIMIZER_WORDS = {"opt", "optim", "optimizer", "optimiser", "scaler"}
# an optimizer built or stepped, or a trainer or DeepSpeed engine run: what makes `.backward()` training
OPTIMIZING = re.compile(
    r"\b(?:opt|optim|optimizer|optimiser|scaler)\w*\.step\("  # an optimizer stepped
    r"|\btorch\.optim\b|\b(?:Adam\w*|SGD|Adafactor|Lamb|Lion)\("  # or built
    r"|\bdeepspeed\.initialize\b|\bengine\w*\.step\("  # a DeepSpeed engine
    r"|\bTrainer\b|\bFabric\b|\btrainer\w*\.(?:train|fit)\("  # a trainer
)


def _parametrized(decorator: cst.BaseExpression) -> set[str]:
    """The parameters ``@pytest.mark.parametrize("name, dtype", ...)`` fills (none for another decorator)."""
    if not (isinstance(decorator, cst.Call) and (dotted_name(decorator.func) or "").endswith("parametrize")):
        return set()
    names = literal(decorator.args[0].value) if decorator.args else None
    names = names.split(",") if isinstance(names, str) else names if isinstance(names, tuple) else ()
    return {name.strip() for name in names if isinstance(name, str)}


def _other_choices(parents: dict[cst.CSTNode, cst.CSTNode], node: cst.CSTNode) -> list[cst.CSTNode]:
    """The alternatives the code offers next to ``node``: the other entries of the dict, list, tuple
    or set display it is an entry of, the other side of the ``a if c else b`` it is a side of, or
    else the other branches of the nearest ``if``/``elif``/``else`` chain it is in (in its function)."""
    parent = parents.get(node)
    if isinstance(parent, (cst.DictElement, cst.Element)):
        return [element for element in parents[parent].elements if element is not parent]
    if isinstance(parent, cst.IfExp) and node is not parent.test:
        return [parent.orelse if node is parent.body else parent.body]
    found = _enclosing_chain(parents, node)
    if found is None:
        return []
    link, child = found
    branches: list[cst.CSTNode] = []
    while isinstance(link, cst.If):
        branches.append(link.body)
        link = link.orelse
    if isinstance(link, cst.Else):
        branches.append(link)
    return [branch for branch in branches if branch is not child]


def _enclosing_chain(parents: dict[cst.CSTNode, cst.CSTNode], node: cst.CSTNode) -> tuple[cst.If, cst.CSTNode] | None:
    """(the first ``if`` of the ``if``/``elif`` chain holding ``node``, not in its test; the branch
    of that chain ``node`` is in), or None past its function."""
    child, parent = node, parents.get(node)
    while parent is not None and not (isinstance(parent, cst.If) and child is not parent.test):
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
        child, parent = parent, parents.get(parent)
    if parent is None:
        return None
    while isinstance(parents.get(parent), cst.If) and parents[parent].orelse is parent:  # up an `elif` chain
        parent = parents[parent]
    return parent, child


def _trains(call: cst.Call) -> bool:
    """A training call: ``loss.backward()``, ``optimizer.zero_grad()``, ``optimizer.step()`` /
    ``scaler.step(optimizer)``, ``trainer.train()`` / ``trainer.fit(...)`` (not ``model.train()``, which
    evaluation code calls to restore the mode)."""
    method = method_name(call)
    if method in ("backward", "zero_grad"):
        return True
    words = set(name_tokens((dotted_name(call.func.value) or "").rpartition(".")[2])) if method else set()
    return (method == "step" and not words.isdisjoint(OPTIMIZER_WORDS)) or (
        method in ("train", "fit") and "trainer" in words
    )


class _Backward(cst.CSTVisitor):
    """Whether a module calls ``<something>.backward(...)``."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = False

    @classmethod
    def found(cls, module: cst.Module) -> bool:
        visitor = cls()
        walk(module, visitor)
        return visitor.seen

    def visit_Call(self, node: cst.Call) -> bool:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "backward":
            self.seen = True
        return not self.seen


def _read_by_own_methods(region: cst.CSTNode, owner: cst.ClassDef | None) -> set[str]:
    """The names and attributes read by the methods of ``owner`` that ``region`` calls as ``self.<name>(...)``."""
    if owner is None or not isinstance(owner.body, cst.IndentedBlock):
        return set()
    called = {
        call.func.attr.value
        for call in iter_nodes(region, cst.Call)
        if isinstance(call.func, cst.Attribute) and code_of(call.func.value) == "self"
    }
    return {
        code_of(n)
        for method in owner.body.body
        if isinstance(method, cst.FunctionDef) and method.name.value in called
        for n in iter_nodes(method.body, (cst.Name, cst.Attribute))
    }


def _assigned_names(node: cst.CSTNode) -> set[str]:
    """The names the assignments in ``node`` bind (``a = ...``, ``a, b = ...``, ``a: T = ...``)."""
    targets = [t.target for t in iter_nodes(node, cst.AssignTarget)]
    targets += [a.target for a in iter_nodes(node, cst.AnnAssign)]
    return {name for target in targets for name in target_names(target)}


def _reads(node: cst.CSTNode, names: set[str]) -> bool:
    """``node`` reads one of ``names``."""
    return any(name.value in names for name in iter_nodes(node, cst.Name))


def _cast_on_the_way(call: cst.Call) -> bool:
    """The receiver chain of ``call`` (``x.float().cpu().numpy()``) casts to float32 before it."""
    return any(
        method_name(inner) == "float" or (method_name(inner) == "to" and "float32" in code_of(inner))
        for inner in iter_nodes(call.func, cst.Call)
    )
