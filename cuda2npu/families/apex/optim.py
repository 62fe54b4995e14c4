"""apex fused optimizers → torch.optim (Ascend apex's ``apex.optimizers.NpuFused*`` with
``--apex=ascend``) or the generated ``apex_npu_optimizers.py`` (NPU301–NPU304), and torch.optim's
CUDA kernel flags (NPU305).

The optimizers no torch class computes — ``FusedLAMB`` (``NpuFusedLamb`` is another LAMB),
``FusedNovoGrad``, ``FusedMixedPrecisionLamb``, and ``FusedAdam`` without bias correction or with
``adam_w_mode`` decided at run time — go to the same-named classes of the generated
``apex_npu_optimizers.py`` (apex's math and state layout in plain PyTorch, see
``cuda2npu/families/apex/generated.py``): every reference of the first three, FusedAdam's calls.

apex's ``FusedAdam`` defaults to ``adam_w_mode=True`` (decoupled weight decay, i.e. AdamW) and to
``weight_decay=0``, while ``torch.optim.AdamW`` (and ``NpuFusedAdamW``) default to ``1e-2``: the
rewrite picks the class from ``adam_w_mode`` and always states ``weight_decay``.

Why torch.optim and not ``torch_npu.optim.NpuFused*``: the same algorithm, without the fused
buffer. The NpuFused classes copy every parameter and gradient into one buffer at the first step
and break when ``.data``/``.grad`` are replaced afterwards (FSDP, DeepSpeed, Megatron's
mixed-precision optimizers, EMA code, often in another file), on bfloat16 parameters,
``zero_grad(set_to_none=True)`` or a model moved after the first step (docs/reference/torch_npu.md
§3), none of which one file shows. ``--apex=ascend`` is the user's choice of Ascend's apex and keeps
its NpuFused classes, with those constraints in the finding. torch.optim is plain PyTorch, so
``--portable`` output is the same call.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.arguments import Unbindable, bind, literal_arg, positional_count, remap_args
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import NOT_LITERAL
from cuda2npu.core.names import dotted_name
from cuda2npu.core.nodes import expression, keyword_arg, root_name, with_args
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.families.apex.common import ApexRule, apex_dependent
from cuda2npu.families.apex.generated import COMPANION, MODULE, OPTIMIZERS, ApexBindings, point_to_generated

ADAM_PARAMS = (
    "params",
    "lr",
    "bias_correction",
    "betas",
    "eps",
    "adam_w_mode",
    "weight_decay",
    "amsgrad",
    "set_grad_none",
    "capturable",
    "master_weights",
)
SGD_PARAMS = (
    "params",
    "lr",
    "momentum",
    "dampening",
    "weight_decay",
    "nesterov",
    "wd_after_momentum",
    "materialize_master_grads",
    "set_grad_none",
)
ADAGRAD_PARAMS = ("params", "lr", "eps", "weight_decay", "set_grad_none", "adagrad_w_mode")
NO_EFFECT = {
    "set_grad_none": "zero_grad() semantics",
    "capturable": "CUDA graph capture",
    "master_weights": "native AMP keeps float32 parameters",
    "materialize_master_grads": "apex.amp O2 master gradients",
}
FUSED_CONSTRAINTS = (
    "NpuFused optimizers copy all parameters and gradients into one buffer at the first step: afterwards "
    "do not replace p.data/p.grad (FSDP, DeepSpeed and Megatron's fp16 optimizers do), call "
    "zero_grad(set_to_none=True) or move the model, and keep parameters float32/float16 (bfloat16 is "
    "rejected); their zero_grad() zeroes gradients instead of setting them to None"
)
TORCH_OPTIM = (
    "torch.optim, the same algorithm, rather than torch_npu.optim.{fused}: that one copies all parameters and "
    "gradients into one buffer at the first step and breaks when p.data/p.grad are replaced afterwards (FSDP, "
    "DeepSpeed, Megatron's fp16 optimizers), on bfloat16 parameters, zero_grad(set_to_none=True) or a model "
    "moved after it"
)
GENERATED = (
    f"from the generated {COMPANION}: apex's update rule in plain PyTorch (same arguments, defaults and state_dict)"
)
LAMB_DIFFERENCES = (
    "torch.optim has no LAMB and torch_npu.optim.NpuFusedLamb is another one (no bias correction, weight norm "
    "clamped to [0, 10], weight_decay=0 by default, no max_grad_norm clipping)"
)
GENERATED_WHY = {
    "apex.optimizers.FusedLAMB": LAMB_DIFFERENCES,
    "apex.optimizers.FusedMixedPrecisionLamb": LAMB_DIFFERENCES,
    "apex.optimizers.FusedNovoGrad": "NovoGrad exists in neither torch.optim nor torch_npu.optim",
}
OTHER_OPTIMIZERS = {
    "apex.optimizers.FusedLARS": "LARS exists in neither torch.optim nor torch_npu.optim; wrap torch.optim.SGD with a LARS trust ratio written with torch ops",
    "apex.optimizers.FusedLANS": "LANS exists in neither torch.optim nor torch_npu.optim; port it with torch ops",
}


@register
class ApexFusedOptimizers(ApexRule):
    """NPU301 FusedAdam, NPU302 FusedLAMB, NPU303 FusedSGD, NPU304 the other apex optimizers."""

    codes = ("NPU301", "NPU302", "NPU303", "NPU304")
    portable_support = True

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.bindings = ApexBindings.of(ctx) if self.active else None

    def _target(self, fused: str, torch_class: str) -> tuple[str, str]:
        """(qualified target, why) for an NpuFused class name and its torch.optim counterpart: Ascend
        apex's class with ``--apex=ascend`` (not in portable output, which runs on CUDA hosts too),
        torch.optim's otherwise."""
        if self.options.apex == "ascend" and not self.options.portable:
            return f"apex.optimizers.{fused}", FUSED_CONSTRAINTS
        return f"torch.optim.{torch_class}", TORCH_OPTIM.format(fused=fused)

    def _rewrite(
        self, code: str, node: cst.Call, target: str, params, *, drop, positional, extra=(), message: str
    ) -> None:
        """Report the call rewritten to ``target`` with the remapped arguments."""
        tier = Tier.REVIEW
        func = self._callee(node.func, target, code, tier)

        def fix(updated: cst.Call) -> cst.Call:
            args = remap_args(updated, params, drop=drop, positional=positional)
            return with_args(updated.with_changes(func=func(updated.func)), [*args, *extra])

        self.report(code, node, message, fix, tier=tier, needs_torch_npu=False)

    def _callee(self, func: cst.BaseExpression, target: str, code: str, tier: Tier):
        """How to spell ``target``: Ascend's apex classes keep the file's apex import style."""
        module, name = target.rsplit(".", 1)
        if module == "apex.optimizers" and isinstance(func, cst.Attribute):
            return lambda updated: updated.with_changes(attr=cst.Name(name))
        self.edits.drop_ref(root_name(func), tier)
        if module == "apex.optimizers":
            self.edits.need_import(code, tier, module, name)
            return lambda _: cst.Name(name)
        self.edits.need_import(code, tier, "torch")
        return lambda _: expression(target)

    def visit_Call(self, node: cst.Call) -> None:
        if not self.active or is_cuda_alternative(self.ctx, node):
            return
        name = self.apex(node.func)
        if name == "apex.optimizers.FusedAdam":
            self._adam(node)
        elif name == "apex.optimizers.FusedSGD":
            self._sgd(node)
        elif name == "apex.optimizers.FusedAdagrad":
            self._adagrad(node)
        elif name in OTHER_OPTIMIZERS:
            self.report("NPU304", node, f"`{name.rsplit('.', 1)[1]}`: {OTHER_OPTIMIZERS[name]}")

    def visit_Name(self, node: cst.Name) -> None:
        self._generated_reference(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._generated_reference(node)

    def _generated_reference(self, node: cst.BaseExpression) -> None:
        """A reference (a call's callee, a value) to an optimizer only the generated file has."""
        if not self.active or not self.bindings.reads_apex(node):
            return
        name = self.apex(node)
        if name in OPTIMIZERS:
            short = name.rsplit(".", 1)[1]
            message = f"`{short}` → `{MODULE}.{short}` {GENERATED}; {GENERATED_WHY[name]}"
            point_to_generated(self, OPTIMIZERS[name], node, short, message)
        elif name == "apex.optimizers.FusedAdam" and self._plain_value(node):
            message = (
                f"`FusedAdam` used as a value (Megatron-DeepSpeed's `adam_optimizer = Adam`) → `{MODULE}.FusedAdam` "
                f"{GENERATED}; the torch_npu class of a call is chosen from its arguments, which are not in view here"
            )
            point_to_generated(self, "NPU301", node, "FusedAdam", message)

    def _plain_value(self, node: cst.BaseExpression) -> bool:
        """The class assigned to a name to be called later (Megatron-DeepSpeed's ``adam_optimizer = Adam``,
        also as a branch of ``a if c else b`` or a value of a dict of classes, DeepLearningExamples'
        ``proto = {'adam': FusedAdam, 'lamb': FusedLAMB}[args.optimizer]``), not behind an apex import
        that stays. Other uses are left: a base class (fairseq's ``FusedAdamV2(FusedAdam)`` reaches into
        apex's internals), a class test (DeepSpeed's ``fused_opts = (apex.optimizers.FusedAdam, FusedAdam)``
        for ``isinstance``)."""
        statement = self.ctx.statement
        if not isinstance(statement, cst.SimpleStatementLine) or apex_dependent(self.edits.index, statement):
            return False
        small = statement.body[0]
        value = small.value if isinstance(small, cst.Assign) and len(statement.body) == 1 else None
        if isinstance(value, cst.Subscript):
            value = value.value
        if isinstance(value, cst.Dict):
            return any(isinstance(e, cst.DictElement) and e.value is node for e in value.elements)
        return value is node or (isinstance(value, cst.IfExp) and node in (value.body, value.orelse))

    def _bind(self, code: str, node: cst.Call, params, positional: int, what: str):
        """The call's arguments; positions beyond ``positional`` differ between apex releases."""
        try:
            return bind(node, params, max_positional=positional)
        except Unbindable as exc:
            self.report(code, node, f"apex {what} not migrated: {exc}", tier=Tier.MANUAL)
            return None

    def _adam(self, node: cst.Call) -> None:
        if _hidden_keywords(node, 5):  # FastPitch's `FusedAdam(model.parameters(), **kw)`
            why = "`**` arguments hide the parameters the torch_npu class would be chosen from"
            self._adam_generated(node, {}, why)  # it takes apex's parameters (and fails on capturable=True)
            return
        bound = self._bind("NPU301", node, ADAM_PARAMS, 5, "FusedAdam")
        if bound is None:
            return
        adam_w = literal_arg(bound, "adam_w_mode", True)
        why = None
        if adam_w is NOT_LITERAL:
            why = "`adam_w_mode` is not a literal, so AdamW vs Adam is decided at run time"
        elif literal_arg(bound, "bias_correction", True) is not True:
            why = (
                "`bias_correction` may be False, while NpuFusedAdam(W) and torch.optim.Adam(W) always correct the bias"
            )
        if why is not None:
            self._adam_generated(node, bound, why)
            return
        fused, torch_class = ("NpuFusedAdamW", "AdamW") if adam_w else ("NpuFusedAdam", "Adam")
        target, why = self._target(fused, torch_class)
        mode = "adam_w_mode=True: decoupled weight decay" if adam_w else "adam_w_mode=False: L2 weight decay"
        notes = [f"apex FusedAdam ({mode}) → {target}"]
        extra = []
        if adam_w and "weight_decay" not in bound:
            extra.append(keyword_arg("weight_decay", "0.0"))
            notes.append(
                f"weight_decay=0.0 made explicit (apex's default; {target.rsplit('.', 1)[1]} defaults to 1e-2)"
            )
        notes += self._dropped(bound)
        self._rewrite(
            "NPU301",
            node,
            target,
            ADAM_PARAMS,
            drop={"bias_correction", "adam_w_mode", *NO_EFFECT},
            positional=2,
            extra=extra,
            message="; ".join([*notes, why]),
        )

    def _adam_generated(self, node: cst.Call, bound, why: str) -> None:
        """FusedAdam calls no torch_npu/torch class computes: the generated FusedAdam (not its CUDA-graph variant)."""
        for flag in ("capturable", "master_weights"):
            if literal_arg(bound, flag, False) is not False:
                self.report(
                    "NPU301",
                    node,
                    f"apex FusedAdam not migrated: {why}, and the generated {COMPANION}'s "
                    f"FusedAdam has no `{flag}=True` (CUDA-graph variant): port the update by hand",
                    tier=Tier.MANUAL,
                )
                return
        message = f"apex FusedAdam → `{MODULE}.FusedAdam` {GENERATED}: {why}"
        point_to_generated(self, "NPU301", node.func, "FusedAdam", message)

    def _sgd(self, node: cst.Call) -> None:
        bound = self._bind("NPU303", node, SGD_PARAMS, 6, "FusedSGD")
        if bound is None:
            return
        if literal_arg(bound, "wd_after_momentum", False) is not False:
            self.report(
                "NPU303",
                node,
                "apex FusedSGD with wd_after_momentum: NpuFusedSGD and torch.optim.SGD add weight decay before momentum; port the update by hand",
                tier=Tier.MANUAL,
            )
            return
        target, why = self._target("NpuFusedSGD", "SGD")
        notes = [f"apex FusedSGD → {target} (same update and arguments)", *self._dropped(bound)]
        self._rewrite(
            "NPU303",
            node,
            target,
            SGD_PARAMS,
            drop={"wd_after_momentum", *NO_EFFECT},
            positional=6,
            message="; ".join([*notes, why]),
        )

    def _adagrad(self, node: cst.Call) -> None:
        bound = self._bind("NPU304", node, ADAGRAD_PARAMS, 4, "FusedAdagrad")
        if bound is None:
            return
        if literal_arg(bound, "adagrad_w_mode", False) is not False:
            self.report(
                "NPU304",
                node,
                "apex FusedAdagrad with adagrad_w_mode (decoupled decay): torch.optim.Adagrad applies L2 decay; port the update by hand",
                tier=Tier.MANUAL,
            )
            return
        message = "; ".join(
            [
                "apex FusedAdagrad → torch.optim.Adagrad (same update, lr=1e-2 and eps=1e-10 defaults)",
                *self._dropped(bound),
            ]
        )
        self._rewrite(
            "NPU304",
            node,
            "torch.optim.Adagrad",
            ADAGRAD_PARAMS,
            drop={"adagrad_w_mode", *NO_EFFECT},
            positional=2,
            message=message,
        )

    @staticmethod
    def _dropped(bound) -> list[str]:
        dropped = [f"`{name}` ({why})" for name, why in NO_EFFECT.items() if name in bound]
        return [f"dropped: {', '.join(dropped)}"] if dropped else []


def _hidden_keywords(node: cst.Call, positional: int) -> bool:
    """A call whose keyword arguments come (at least partly) from ``**`` and whose at most
    ``positional`` positional arguments are all visible (no ``*``)."""
    star = [arg.star for arg in node.args]
    return "**" in star and "*" not in star and positional_count(node) <= positional


@register
class TorchOptimizerCudaFlags(Rule):
    """NPU305: ``torch.optim.X(..., fused=True)`` / ``foreach=True`` select CUDA-tuned kernels."""

    codes = ("NPU305",)
    triggers = (r"\bfused\s*=", r"\bforeach\s*=")
    NPU_FUSED = {"SGD", "Adam", "AdamW", "RMSprop", "Adadelta"}
    NOTES = {
        "fused": "torch.optim's fused kernels are written for CUDA; on NPU op-plugin implements "
        "`_fused_adamw_` but torch_npu does not document fused=True as supported: check it on the target "
        "or drop it (foreach kernels run on Atlas A2 and newer){alternative}",
        "foreach": "torch_npu enables torch.optim's foreach kernels only on Atlas A2 (910B) and newer; "
        "on older chips drop foreach=True",
    }

    def visit_Call(self, node: cst.Call) -> None:
        if not any(a.keyword is not None and a.keyword.value in self.NOTES for a in node.args):
            return
        qualified = self.resolver.qualified_name(node.func) or ""
        if not qualified.startswith("torch.optim."):
            return
        name = qualified.rsplit(".", 1)[1]
        for arg in node.args:
            if (
                arg.keyword is not None
                and arg.keyword.value in self.NOTES
                and dotted_name(arg.value) not in ("False", "None")
            ):
                flag = arg.keyword.value
                alternative = (
                    f", or torch_npu.optim.NpuFused{name} if the parameters are float32/float16 and their "
                    ".data/.grad are never replaced"
                    if name in self.NPU_FUSED
                    else ""
                )
                self.report("NPU305", arg, f"`{name}({flag}=...)`: " + self.NOTES[flag].format(alternative=alternative))
