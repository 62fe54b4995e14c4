"""apex modules and utilities (NPU320–NPU326).

* NPU320/NPU321 ``apex.normalization.FusedLayerNorm`` / ``FusedRMSNorm`` and their functional forms
  → ``torch.nn.LayerNorm`` / ``torch.nn.RMSNorm`` / ``torch.nn.functional.layer_norm`` / ``rms_norm``
  (same parameter names, so checkpoints load; apex's defaults made explicit where torch's differ);
* NPU322 ``apex.parallel.DistributedDataParallel`` → ``torch.nn.parallel.DistributedDataParallel``
  (the wrapped model's ``disable/enable_allreduce()`` → ``require_backward_grad_sync``; any other
  apex-only member keeps apex's DDP, manual);
* NPU323 ``apex.parallel.convert_syncbn_model`` / ``SyncBatchNorm`` → ``torch.nn.SyncBatchNorm``;
* NPU324 CUDA-only apex parts (``amp_C``, ``multi_tensor_applier``, ``apex.contrib``, ...): manual,
  with the nearest alternative (``rules/tables/apex_cuda_only.toml``);
* NPU325 apex names in strings (optimizer factories, configs): reported;
* NPU326 ``apex.fp16_utils.to_python_float(t)`` → ``t.item()``.

Class names used as values (``isinstance(model, DDP)``, base classes) are renamed too.

Portable output (``--portable``): the norms' rewrites are plain PyTorch, written as without it
(torch.nn.RMSNorm needs the ``--target-torch`` to be 2.4 or newer); the other rewrites here are not
portable yet (kept, reported).
"""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.analysis import portable
from cuda2npu.analysis.exports import exported
from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.analysis.value_uses import ValueUses
from cuda2npu.core.arguments import Unbindable, bind, literal_arg, remap_args
from cuda2npu.core.catalogue import table
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import string_value
from cuda2npu.core.names import NameResolver, NameUses, dotted_name
from cuda2npu.core.nodes import as_positional, atom, expression, keyword_arg, root_name, with_args
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.traversal import iter_nodes, walk, walk_batched
from cuda2npu.families.apex.common import (
    FP16_UTILS_EXPORTS,
    ApexRule,
    apex_dependent,
    apex_name,
    behind_apex_import,
    canonical,
)

NORM_PARAMS = ("normalized_shape", "eps", "elementwise_affine", "memory_efficient")
TORCH_WITH_RMSNORM = (2, 4)
DDP_PARAMS = (
    "module",
    "message_size",
    "delay_allreduce",
    "shared_param",
    "allreduce_trigger_params",
    "retain_allreduce_buffers",
    "allreduce_always_fp32",
    "num_allreduce_streams",
    "allreduce_communicators",
    "gradient_average",
    "gradient_predivide_factor",
    "gradient_average_split_factor",
    "prof",
)
DDP_TUNING = {
    "message_size": "bucket size: torch's knob is bucket_cap_mb (MiB, default 25)",
    "delay_allreduce": "torch overlaps the all-reduce with backward",
    "allreduce_always_fp32": "native AMP keeps float32 gradients",
    "num_allreduce_streams": "CUDA streams",
    "allreduce_communicators": "NCCL communicators",
    "prof": "NVTX ranges",
}
APEX_DDP_MEMBERS = (  # apex DDP's own methods and attributes (apex/parallel/distributed.py)
    "disable_allreduce",
    "enable_allreduce",
    "needs_refresh",
    "sync_bucket_structure",
    "delay_allreduce",
    "allreduce_params",
    "allreduce_fallback",
    "allreduce_bucket",
    "allreduce_buffers",
    "_disable_allreduce",
)
TOGGLES = {"disable_allreduce": False, "enable_allreduce": True}  # -> require_backward_grad_sync
SYNCBN_PARAMS = (
    "num_features",
    "eps",
    "momentum",
    "affine",
    "track_running_stats",
    "process_group",
    "channel_last",
    "fuse_relu",
)
APEX_STRING = re.compile(r"apex(\.[A-Za-z_]\w*)+")


def cuda_only_note(qualified: str) -> str | None:
    """The NPU324 note for a CUDA-only apex name (longest matching prefix), else None."""
    data = table("apex_cuda_only")
    if qualified in data["handled"] or canonical(qualified) in data["handled"]:
        return None
    for name in (qualified, canonical(qualified) or qualified):
        matches = [p for p in data["cuda_only"] if name == p or name.startswith(p + ".")]
        if matches:
            return data["cuda_only"][max(matches, key=len)]
    return None


class ClassRenames(ApexRule):
    """Renames apex classes used as values: ``isinstance``/``issubclass`` arguments, base classes."""

    RENAMES: dict[str, tuple[str, str]] = {}  # apex name -> (code, torch name)

    def _rename_reference(self, node: cst.BaseExpression) -> None:
        name = self.apex(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        if name in self.RENAMES:
            code, torch_name = self.RENAMES[name]
            self.replaced(code, node, node, f"`{name}` → `{torch_name}`", lambda _: expression(torch_name))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if self.active:
            for base in node.bases:
                self._rename_reference(base.value)

    def class_arguments(self, node: cst.Call) -> None:
        """``isinstance(x, C)`` / ``issubclass(x, (C, D))``."""
        if dotted_name(node.func) in ("isinstance", "issubclass") and len(node.args) == 2:
            classes = node.args[1].value
            elements = classes.elements if isinstance(classes, cst.Tuple) else [cst.Element(classes)]
            for element in elements:
                self._rename_reference(element.value)


def _passes_eps(cls: cst.ClassDef) -> bool:
    """The class's ``__init__`` passes ``eps`` to ``super().__init__(...)`` (ColossalAI's
    ``CUDAFusedRMSNormWithHook``): the base's default eps never applies."""
    for statement in cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ():
        if isinstance(statement, cst.FunctionDef) and statement.name.value == "__init__":
            for call in iter_nodes(statement, cst.Call):
                func = call.func
                if (
                    isinstance(func, cst.Attribute)
                    and func.attr.value == "__init__"
                    and isinstance(func.value, cst.Call)
                    and dotted_name(func.value.func) == "super"
                ):
                    try:
                        return "eps" in bind(call, NORM_PARAMS)
                    except Unbindable:
                        return False
    return False


@register
class FusedNorms(ValueUses, ClassRenames):
    """NPU320 FusedLayerNorm, NPU321 FusedRMSNorm and their functional forms; the classes also where
    they are values (``norm_layer = FusedLayerNorm``, Swin-Transformer), base classes and class tests."""

    codes = ("NPU320", "NPU321")
    portable_support = True  # torch.nn / torch.nn.functional run on both hosts
    RENAMES = {
        "apex.normalization.FusedLayerNorm": ("NPU320", "torch.nn.LayerNorm"),
        "apex.normalization.FusedRMSNorm": ("NPU321", "torch.nn.RMSNorm"),
    }
    FUNCTIONS = {
        "apex.normalization.fused_layer_norm_affine": ("NPU320", ("input", "weight", "bias", "normalized_shape")),
        "apex.normalization.fused_layer_norm": ("NPU320", ("input", "normalized_shape")),
        "apex.normalization.fused_rms_norm_affine": ("NPU321", ("input", "weight", "normalized_shape")),
        "apex.normalization.fused_rms_norm": ("NPU321", ("input", "normalized_shape")),
    }

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        if self.options.apex == "ascend":  # Ascend's apex runs FusedLayerNorm (as F.layer_norm)
            self.RENAMES = {k: v for k, v in self.RENAMES.items() if k != "apex.normalization.FusedLayerNorm"}

    def visit_Call(self, node: cst.Call) -> None:
        if not self.active:
            return
        self.call_value_uses(node)
        name = self.apex(node.func)
        if name in self.RENAMES:
            self._module(node, name)
        elif name in self.FUNCTIONS:
            self._function(node, name)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if self.active:
            for base in node.bases:
                self._use(base.value)

    def value_use(self, expr: cst.BaseExpression, class_test: bool = False) -> None:
        """The class passed around, subclassed or tested: torch's class where it is constructed the same way."""
        name = self.apex(expr) if self.active else None
        if name not in self.RENAMES or is_cuda_alternative(self.ctx, expr):
            return  # also the CUDA side of NPU-aware code (ColossalAI's `else: class ...(ApexFusedRMSNorm)`)
        code, torch_name = self.RENAMES[name]
        short = name.rsplit(".", 1)[1]
        statement = self.ctx.statement
        subclassed = isinstance(statement, cst.ClassDef) and any(expr is base.value for base in statement.bases)
        if not subclassed and apex_dependent(self.edits.index, statement):
            return
        if self._rms_unavailable(code, expr, f"`{short}`"):
            return
        if code == "NPU321" and not class_test and not (subclassed and _passes_eps(statement)):
            self.report(
                code,
                expr,
                f"`{short}` as a class (not a call) is not renamed: `{torch_name}` defaults to eps=machine "
                f"epsilon, apex to 1e-5; rename it and pass eps=1e-5 where it is constructed",
                tier=Tier.MANUAL,
            )
            return
        self._rename_reference(expr)

    def _rms_unavailable(self, code: str, node: cst.CSTNode, what: str) -> bool:
        if code == "NPU321" and not self._has_rms_norm():
            self.report(
                "NPU321",
                node,
                f"{what} needs torch >= 2.4 (torch.nn.RMSNorm / torch.nn.functional.rms_norm); for the targeted "
                "torch_npu write a module computing `torch_npu.npu_rms_norm(x, self.weight, epsilon=eps)[0]`",
                tier=Tier.MANUAL,
            )
            return True
        return False

    def _has_rms_norm(self) -> bool:
        """Whether the targeted torch (portable output: ``--target-torch``) has torch.nn.RMSNorm."""
        if self.options.portable:
            target = portable.target_torch(self.options)
            return target is None or target >= TORCH_WITH_RMSNORM
        return self.options.target.torch_at_least(TORCH_WITH_RMSNORM)

    def _module(self, node: cst.Call, name: str) -> None:
        code, torch_name = self.RENAMES[name]
        short = name.rsplit(".", 1)[1]
        if self._rms_unavailable(code, node, f"`{short}`"):
            return
        try:
            bound = bind(node, NORM_PARAMS)
        except Unbindable as exc:
            self.report(code, node, f"`{short}` not migrated: {exc}", tier=Tier.MANUAL)
            return
        notes = []
        extra = []
        if code == "NPU321" and "eps" not in bound:
            extra.append(keyword_arg("eps", "1e-5"))
            notes.append("apex's eps=1e-5 made explicit (torch.nn.RMSNorm defaults to the dtype's machine epsilon)")
        if "memory_efficient" in bound:
            notes.append("`memory_efficient` dropped (a CUDA kernel option)")

        def fix(updated: cst.Call) -> cst.Call:
            args = remap_args(updated, NORM_PARAMS, drop={"memory_efficient"}, positional=3)
            return with_args(updated.with_changes(func=expression(torch_name)), [*args, *extra])

        message = "; ".join([f"`{short}` → `{torch_name}` (same parameters and state_dict keys)", *notes])
        self.replaced(code, node, node.func, message, fix)

    def _function(self, node: cst.Call, name: str) -> None:
        code, params = self.FUNCTIONS[name]
        short = name.rsplit(".", 1)[1]
        if self._rms_unavailable(code, node, f"`{short}`"):
            return
        try:
            bound = bind(node, (*params, "eps", "memory_efficient"))
        except Unbindable as exc:
            self.report(code, node, f"`{short}` not migrated: {exc}", tier=Tier.MANUAL)
            return
        if not all(p in bound for p in params):
            self.report(code, node, f"`{short}` not migrated: required arguments are missing", tier=Tier.MANUAL)
            return
        target = "torch.nn.functional.layer_norm" if code == "NPU320" else "torch.nn.functional.rms_norm"

        def fix(updated: cst.Call) -> cst.Call:
            args = bind(updated, (*params, "eps", "memory_efficient"))
            new = [as_positional(args["input"]), as_positional(args["normalized_shape"])]
            new += [keyword_arg(p, args[p].value) for p in ("weight", "bias") if p in args]
            new.append(keyword_arg("eps", args["eps"].value if "eps" in args else expression("1e-6")))
            return with_args(updated.with_changes(func=expression(target)), new)

        message = f"`{short}` → `{target}`"
        if "eps" not in bound:
            message += " with apex's default eps=1e-6 made explicit (torch's is 1e-5)"
        self.replaced(code, node, node.func, message, fix)


@register
class ApexDistributedDataParallel(ClassRenames):
    """NPU322: ``apex.parallel.DistributedDataParallel`` → torch's, with apex's behaviour kept.

    The wrapped model's apex-only members (``model.disable_allreduce()``, ``model.needs_refresh``)
    are found through the names the DDP results are assigned to: ``disable_allreduce()`` /
    ``enable_allreduce()`` statements become the flag torch's ``no_sync()`` sets; any other member
    keeps apex's DDP (manual), and so does a member used on a model this file cannot trace.
    """

    codes = ("NPU322",)
    RENAMES = {"apex.parallel.DistributedDataParallel": ("NPU322", "torch.nn.parallel.DistributedDataParallel")}

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.members = _ApexDdpMembers(ctx.module) if self.active else None
        self.problems: dict[cst.Call, str | None] = {}  # apex DDP call -> why it stays
        self.kept_subclasses: dict[cst.ClassDef, str] = {}  # apex DDP subclass -> an apex-only member it uses
        if self.active:
            self.problems = {call: self._problem(call, target) for call, target in self.members.calls.items()}
            self.kept_subclasses = {c: m for c in self.members.subclasses if (m := self.members.subclass_member(c))}
        # `isinstance(m, DDP)` and base classes keep apex's class while an apex DDP stays in the file
        self.renames_class = not self.kept_subclasses and all(p is None for p in self.problems.values())

    def _problem(self, call: cst.Call, target: str | None) -> str | None:
        """Why this apex DDP call stays (manual), or None."""
        try:
            bound = bind(call, DDP_PARAMS, max_positional=1)
        except Unbindable as exc:
            return str(exc)
        if "module" not in bound:
            return "the wrapped module is not passed"
        return self._unsupported(bound) or self.members.blocker(target)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if node in self.kept_subclasses:
            self.report(
                "NPU322",
                node,
                f"apex DistributedDataParallel subclass kept: it uses `self.{self.kept_subclasses[node]}`, "
                "which torch's DistributedDataParallel lacks (`with self.no_sync():` skips gradient all-reduces)",
                tier=Tier.MANUAL,
            )
        elif self.renames_class:
            super().visit_ClassDef(node)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        toggle = self.members.toggles.get(node) if self.active else None
        if toggle is None:
            return
        receiver, enable = toggle
        calls = [call for call, target in self.members.calls.items() if target == receiver]
        if not calls or any(self.problems[call] is not None for call in calls):
            return  # not an apex DDP model of this file, or one that stays apex's (the blocker reports it)
        value = "True" if enable else "False"
        method = "enable_allreduce" if enable else "disable_allreduce"
        self.report(
            "NPU322",
            node,
            f"`{receiver}.{method}()` → `{receiver}.require_backward_grad_sync = {value}`, the flag torch DDP's "
            "`no_sync()` sets: torch reads it in the forward pass, so it must be set before the forward of the step "
            "(as apex required); `with model.no_sync():` around the forward and backward is the idiomatic form",
            lambda updated: updated.with_changes(
                body=[
                    cst.Assign(
                        targets=[cst.AssignTarget(expression(f"{receiver}.require_backward_grad_sync"))],
                        value=cst.Name(value),
                    )
                ]
            ),
            tier=Tier.REVIEW,
            needs_torch_npu=False,
        )

    def visit_Call(self, node: cst.Call) -> None:
        if not self.active:
            return
        if self.renames_class:
            self.class_arguments(node)
        if node not in self.problems:
            return
        if self.problems[node] is not None:
            self.report(
                "NPU322", node, f"apex DistributedDataParallel not migrated: {self.problems[node]}", tier=Tier.MANUAL
            )
            return
        bound = bind(node, DDP_PARAMS, max_positional=1)
        delay = bound.get("delay_allreduce") if literal_arg(bound, "delay_allreduce", False) is not False else None
        dropped = [
            f"`{name}` ({DDP_TUNING[name]})"
            for name in DDP_PARAMS
            if name in bound and name in DDP_TUNING and not (name == "delay_allreduce" and delay is not None)
        ]

        def fix(updated: cst.Call) -> cst.Call:
            args = bind(updated, DDP_PARAMS, max_positional=1)
            extra = [keyword_arg("find_unused_parameters", args["delay_allreduce"].value)] if delay is not None else []
            args = [
                as_positional(args["module"]),
                keyword_arg("device_ids", "[torch.npu.current_device()]"),
                keyword_arg("broadcast_buffers", "False"),
            ]
            return with_args(
                updated.with_changes(func=expression("torch.nn.parallel.DistributedDataParallel")), [*args, *extra]
            )

        message = (
            "apex DistributedDataParallel → torch.nn.parallel.DistributedDataParallel with "
            "device_ids=[torch.npu.current_device()] (apex required torch.npu.set_device(local_rank) first) and "
            "broadcast_buffers=False (apex never re-broadcast buffers such as BatchNorm statistics)"
        )
        if delay is not None:
            message += (
                "; `delay_allreduce` → `find_unused_parameters` (apex's delayed all-reduce skipped parameters without a "
                "gradient, torch's DDP fails on them unless told to look for them; drop it if every parameter gets a "
                "gradient each step: it costs a graph traversal per step)"
            )
        if dropped:
            message += "; dropped: " + ", ".join(dropped)
        self.replaced("NPU322", node, node.func, message, fix, needs_torch_npu=True)

    @staticmethod
    def _unsupported(bound) -> str | None:
        """Why apex-only behaviour cannot be reproduced by torch's DDP, or None."""
        if literal_arg(bound, "gradient_average", True) is not True:
            return "gradient_average=False (torch DDP always averages; use a communication hook)"
        if literal_arg(bound, "gradient_predivide_factor", 1.0) != 1.0:
            return "gradient_predivide_factor (use a DDP communication hook that divides before the all-reduce)"
        for name in ("shared_param", "allreduce_trigger_params", "gradient_average_split_factor"):
            if literal_arg(bound, name, None) is not None:
                return f"`{name}` has no torch counterpart"
        if literal_arg(bound, "retain_allreduce_buffers", False) is not False:
            return "retain_allreduce_buffers (apex-internal flat gradient buffers)"
        return None


class _ApexDdpMembers(cst.BatchableCSTVisitor):
    """A file's apex DDP calls, the names their results are assigned to, and the apex-only members
    (``APEX_DDP_MEMBERS``) it uses."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__()
        self.resolver = NameResolver(module)
        self.calls: dict[cst.Call, str | None] = {}  # DDP call -> the name its result is assigned to
        self.toggles: dict[cst.SimpleStatementLine, tuple[str, bool]] = {}  # `model.disable_allreduce()` lines
        self.uses: list[tuple[str | None, str, bool, bool, cst.ClassDef | None]] = []  # see `visit_Attribute`
        self.subclasses: list[cst.ClassDef] = []
        self._toggle_attrs: set[cst.Attribute] = set()
        self._called: set[cst.BaseExpression] = set()
        self._classes: list[cst.ClassDef] = []
        walk_batched(module, [self.resolver, self])

    def ddp(self, node: cst.BaseExpression) -> bool:
        return apex_name(self.resolver, node) == "apex.parallel.DistributedDataParallel"

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.append(node)
        if any(self.ddp(base.value) for base in node.bases):
            self.subclasses.append(node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._classes.pop()

    def visit_Call(self, node: cst.Call) -> None:
        self._called.add(node.func)
        if self.ddp(node.func):
            self.calls.setdefault(node, None)

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.value, cst.Call) and self.ddp(node.value.func):
            self.calls[node.value] = dotted_name(node.targets[0].target)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        small = node.body[0] if len(node.body) == 1 else None
        call = small.value if isinstance(small, cst.Expr) else None
        if isinstance(call, cst.Call) and not call.args and isinstance(call.func, cst.Attribute):
            receiver = dotted_name(call.func.value)
            if receiver not in (None, "self") and call.func.attr.value in TOGGLES:
                self.toggles[node] = (receiver, TOGGLES[call.func.attr.value])
                self._toggle_attrs.add(call.func)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        """(receiver, member, called, a toggle statement, the class around it)."""
        if node.attr.value in APEX_DDP_MEMBERS:
            cls = self._classes[-1] if self._classes else None
            self.uses.append(
                (dotted_name(node.value), node.attr.value, node in self._called, node in self._toggle_attrs, cls)
            )

    def blocker(self, target: str | None) -> str | None:
        """Why the apex DDP assigned to ``target`` must stay: an apex-only member used on it (other
        than a ``disable/enable_allreduce()`` statement), or an apex-only method called on a model
        this file does not trace (a helper's result; ``self`` aside)."""
        traced = {t for t in self.calls.values() if t is not None}
        for receiver, member, called, toggle, _ in self.uses:
            ours = target is not None and receiver == target and not toggle
            untraced = called and receiver not in traced and receiver != "self"
            if ours or untraced:
                hint = (
                    "; `with model.no_sync():` skips the gradient all-reduce of the steps it wraps"
                    if member in TOGGLES
                    else ""
                )
                return f"`{receiver or ''}.{member}` is apex DDP's own: torch's DistributedDataParallel lacks it{hint}"
        return None

    def subclass_member(self, cls: cst.ClassDef) -> str | None:
        """An apex-only member a class uses on ``self``."""
        return next((member for receiver, member, _, _, c in self.uses if c is cls and receiver == "self"), None)


@register
class ApexSyncBatchNorm(ClassRenames):
    """NPU323: ``convert_syncbn_model`` and ``SyncBatchNorm`` → ``torch.nn.SyncBatchNorm``."""

    codes = ("NPU323",)
    RENAMES = {"apex.parallel.SyncBatchNorm": ("NPU323", "torch.nn.SyncBatchNorm")}

    def visit_Call(self, node: cst.Call) -> None:
        if not self.active:
            return
        self.class_arguments(node)
        name = self.apex(node.func)
        if name == "apex.parallel.convert_syncbn_model":
            self._convert(node)
        elif name == "apex.parallel.SyncBatchNorm":
            self._class(node)

    def _channel_last(self, node: cst.Call, bound, what: str) -> bool:
        for flag in ("channel_last", "fuse_relu"):
            if literal_arg(bound, flag, False) is not False:
                self.report(
                    "NPU323",
                    node,
                    f"`{what}` not migrated: `{flag}` is a CUDA kernel option torch.nn.SyncBatchNorm lacks",
                    tier=Tier.MANUAL,
                )
                return True
        return False

    def _convert(self, node: cst.Call) -> None:
        params = ("module", "process_group", "channel_last")
        try:
            bound = bind(node, params, max_positional=2)
        except Unbindable as exc:
            self.report("NPU323", node, f"`convert_syncbn_model` not migrated: {exc}", tier=Tier.MANUAL)
            return
        if self._channel_last(node, bound, "convert_syncbn_model"):
            return

        def fix(updated: cst.Call) -> cst.Call:
            args = remap_args(updated, params, drop={"channel_last"}, positional=2)
            return with_args(
                updated.with_changes(func=expression("torch.nn.SyncBatchNorm.convert_sync_batchnorm")), args
            )

        self.replaced(
            "NPU323",
            node,
            node.func,
            "`apex.parallel.convert_syncbn_model` → `torch.nn.SyncBatchNorm.convert_sync_batchnorm` (same layers replaced, "
            "running statistics and affine parameters copied)",
            fix,
        )

    def _class(self, node: cst.Call) -> None:
        try:
            bound = bind(node, SYNCBN_PARAMS)
        except Unbindable as exc:
            self.report("NPU323", node, f"`SyncBatchNorm` not migrated: {exc}", tier=Tier.MANUAL)
            return
        if self._channel_last(node, bound, "SyncBatchNorm"):
            return

        def fix(updated: cst.Call) -> cst.Call:
            args = remap_args(updated, SYNCBN_PARAMS, drop={"channel_last", "fuse_relu"}, positional=6)
            return with_args(updated.with_changes(func=expression("torch.nn.SyncBatchNorm")), args)

        self.replaced(
            "NPU323", node, node.func, "`apex.parallel.SyncBatchNorm` → `torch.nn.SyncBatchNorm` (same parameters)", fix
        )


@register
class CudaOnlyApex(ApexRule):
    """NPU324: apex parts that only exist as CUDA kernels (manual, with the nearest alternative)."""

    codes = ("NPU324",)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._in_import = False
        self._reported_notes: set[str] = set()  # apex parts whose imports this file reported

    def leave_Import(self, original_node: cst.Import) -> None:
        self._in_import = False

    def leave_ImportFrom(self, original_node: cst.ImportFrom) -> None:
        self._in_import = False

    def visit_Import(self, node: cst.Import) -> None:
        self._in_import = True
        if self.active:
            found = []
            for alias in node.names:
                bound = (
                    dotted_name(alias.asname.name) if alias.asname else (dotted_name(alias.name) or "").split(".")[0]
                )
                found.append(self._cuda_only(alias, dotted_name(alias.name) or "", [bound]))
            self._report_import(node, found)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._in_import = True
        if not self.active or node.relative or node.module is None:
            return
        module = dotted_name(node.module) or ""
        if isinstance(node.names, cst.ImportStar):
            provided = [
                n for n in FP16_UTILS_EXPORTS if cuda_only_note(f"{module}.{n}") and not self.resolver.is_bound(n)
            ]
            self._report_import(
                node, [self._cuda_only(node, module, provided if module == "apex.fp16_utils" else None)]
            )
            return
        found = []
        for alias in node.names:
            bound = dotted_name(alias.asname.name) if alias.asname else dotted_name(alias.name)
            found.append(self._cuda_only(alias, f"{module}.{dotted_name(alias.name)}", [bound]))
        self._report_import(node, found)

    def _report_import(self, node: cst.Import | cst.ImportFrom, found: list[tuple[str, str] | None]) -> None:
        """One NPU324 per import statement and apex part, naming what it imports, and none for a part
        this file's imports were already reported for (one marker says what to do about it)."""
        by_note: dict[str, list[str]] = {}
        for item in filter(None, found):
            by_note.setdefault(item[1], []).append(item[0])
        for note, names in by_note.items():
            if note in self._reported_notes:
                continue
            self._reported_notes.add(note)
            listed = ", ".join(f"`{name}`" for name in names)
            self.report("NPU324", node, f"{listed} {'is' if len(names) == 1 else 'are'} CUDA-only: {note}")

    def visit_Attribute(self, node: cst.Attribute) -> None:
        """``apex.contrib.X`` reached through ``import apex``: flag the shortest matching chain,
        unless it sits behind the apex import of its ``try`` (it never runs without apex)."""
        if not self.active or self._in_import or not isinstance(node.value, (cst.Name, cst.Attribute)):
            return
        name = self.resolver.qualified_name(node)
        if (
            name
            and name.startswith("apex.")
            and cuda_only_note(name)
            and not cuda_only_note(self.resolver.qualified_name(node.value) or "")
        ):
            if self.ctx.statement is None or not behind_apex_import(self.edits.index, self.ctx.statement):
                self._flag(node, name)

    def _flag(self, node: cst.CSTNode, qualified: str) -> None:
        found = self._cuda_only(node, qualified)
        if found is not None:
            self.report("NPU324", node, f"`{qualified}` is CUDA-only: {found[1]}")

    def _cuda_only(self, node: cst.CSTNode, qualified: str, bound: list[str] | None = None) -> tuple[str, str] | None:
        """``(qualified, note)`` if ``qualified`` is CUDA-only and, for an import, if the names it
        binds are read (an unread apex import does no harm: NPU330 removes it with ``--apex=native``)."""
        note = cuda_only_note(qualified)
        if note is None:
            return None
        if bound is not None:
            uses = NameUses(set(bound), self.resolver.scopes)
            walk(self.ctx.module, uses)
            if not any(uses.uses.values()) and not any(exported(self.ctx, node, name) for name in bound):
                return None  # (a re-export other modules read is a use: analysis/exports.py)
        return qualified, note


@register
class ApexStringReference(Rule):
    """NPU325: ``"apex.optimizers.FusedAdam"`` in a string (factories, configs, registries)."""

    codes = ("NPU325",)
    triggers = (r"""["']apex\.""",)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)
        if value is None or not APEX_STRING.fullmatch(value):
            return
        replacements = table("apex_replacements")["native"]
        name = canonical(value)
        hint = replacements.get(name) or cuda_only_note(name)
        message = f"the string {value!r} names an apex object that does not run on NPU"
        self.report("NPU325", node, f"{message}: {hint}" if hint else message)


@register
class ToPythonFloat(ApexRule):
    """NPU326: ``apex.fp16_utils.to_python_float(t)`` → ``t.item()``."""

    codes = ("NPU326",)

    def visit_Call(self, node: cst.Call) -> None:
        if not self.active or self.apex(node.func) != "apex.fp16_utils.to_python_float":
            return
        if len(node.args) != 1 or node.args[0].keyword is not None or node.args[0].star:
            self.report("NPU326", node, "`to_python_float` with unusual arguments: use `t.item()`", tier=Tier.MANUAL)
            return
        tier = Tier.REVIEW
        self.edits.drop_ref(root_name(node.func), tier)
        self.report(
            "NPU326",
            node,
            "`to_python_float(t)` → `t.item()` (what apex does for tensors)",
            lambda updated: cst.Call(cst.Attribute(atom(updated.args[0].value), cst.Name("item"))),
            tier=tier,
        )
