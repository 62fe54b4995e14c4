"""NPU904, NPU906 and NPU727: ``TrainingArguments`` switches that mean CUDA (also of TRL's trainer
configs, its subclasses: ``SFTConfig``, ``GRPOConfig``, ...).

- NPU904: ``tf32=True`` raises in ``TrainingArguments.__post_init__`` wherever TF32 cannot be
  enabled, which is every NPU host in every release read (4.35.2 to 5.25.0,
  docs/reference/transformers.md §3). The ``True`` that reaches ``tf32`` (the keyword, a same-file
  variable or argparse default, a ``{"tf32": True}`` / ``dict(tf32=True)`` passed as ``**kwargs``,
  the field default of a ``TrainingArguments`` subclass) becomes ``False``. torch_npu's HF32 switch
  is another format and is not turned on silently: the message names it.
- NPU727: an ``optim=`` value reaching ``TrainingArguments`` the same ways that names a bitsandbytes
  or apex optimizer (cuda2npu/families/transformers/optimizer_names.py): ``adamw_torch`` where that
  is the same AdamW (``paged_adamw_32bit``, ``adamw_apex_fused``), else a manual item.
- NPU906: under the bf16 precision policy, ``fp16=True`` becomes ``bf16=True`` (BF16 is the
  native mixed-precision type of the Atlas A2 NPUs and needs no loss scaling; ``TrainingArguments``
  accepts it on the NPU from transformers 4.34.0, §4: under an older pin fp16 stays, a review
  item). A call also passing ``bf16`` or ``**kwargs`` is a review item, and so is one passing a
  ``deepspeed=`` config that shows no bf16 block to be (a path, an ``"auto"`` fp16 block): the
  Trainer fills the config's ``"auto"`` blocks from these flags.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.float16_models import checkpoint_dtype_loads, float16_models, shown_cast
from cuda2npu.analysis.hf_sources import ARGUMENT_CLASSES, keyword, sources, statement_of
from cuda2npu.analysis.npu_aware import in_npu_branch
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import field_default, literal, rename_fix, string_value
from cuda2npu.core.nodes import code_of
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.families.transformers.optimizer_names import optim_decision
from cuda2npu.families.transformers.releases import bf16_flag_rejected, fp16_under_pin

HF32 = "torch.npu.matmul.allow_hf32 / torch.npu.conv.allow_hf32"


# TRL's trainer configs, subclasses of TrainingArguments (trl/trainer/*_config.py; trl's notebooks pass
# `optim="paged_adamw_8bit"` to SFTConfig and GRPOConfig, round 53)
TRL_ARGUMENT_CLASSES = (
    "SFTConfig",
    "GRPOConfig",
    "DPOConfig",
    "ORPOConfig",
    "KTOConfig",
    "CPOConfig",
    "BCOConfig",
    "RewardConfig",
    "PPOConfig",
    "RLOOConfig",
    "OnlineDPOConfig",
    "XPOConfig",
    "NashMDConfig",
    "GKDConfig",
    "PRMConfig",
)


def _is_arguments_class(name: str | None) -> bool:
    if name is None:
        return False
    root, last = name.split(".")[0], name.rpartition(".")[2]
    return (root == "transformers" and last in ARGUMENT_CLASSES) or (root == "trl" and last in TRL_ARGUMENT_CLASSES)


@register
class TrainingArgumentSwitches(Rule):
    codes = ("NPU904", "NPU906", "NPU727")
    triggers = (r"TrainingArguments", r"\b(?:" + "|".join(TRL_ARGUMENT_CLASSES) + r")\b")

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._done: set[cst.CSTNode] = set()

    def visit_Call(self, node: cst.Call) -> None:
        if not _is_arguments_class(self.resolver.qualified_name(node.func)) or in_npu_branch(self.ctx, node):
            return
        for name, follow in (("tf32", self._tf32_sources), ("optim", self._optim_sources)):
            arg = keyword(node, name)
            if arg is not None:
                follow(arg.value)
            for star in (a for a in node.args if a.star == "**"):
                for mapping in sources(self.ctx, star.value):
                    follow(_entry(mapping, name))
        fp16 = keyword(node, "fp16")
        if fp16 is not None and literal(fp16.value) is True and self.options.precision == "bf16":
            self._fp16(node, fp16)
        bf16 = keyword(node, "bf16")
        if (
            bf16 is not None
            and literal(bf16.value) is True
            and (message := bf16_flag_rejected(self.options, "bf16=True"))
        ):
            self.report("NPU906", bf16, message, tier=Tier.REVIEW, needs_torch_npu=False)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if not any(_is_arguments_class(self.resolver.qualified_name(base.value)) for base in node.bases):
            return
        for statement in node.body.body:
            small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) else None
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                follow = {"tf32": self._tf32_sources, "optim": self._optim_sources}.get(small.target.value)
                if follow is not None:
                    follow(field_default(small.value))

    def _tf32_sources(self, value: cst.BaseExpression | None) -> None:
        if value is None:
            return
        for source in sources(self.ctx, value):
            if literal(source) is not True or not self._fresh(source):
                continue
            message = (
                "`TrainingArguments(tf32=True)` raises on an NPU host (TF32 needs an Ampere GPU, every transformers "
                f"release): tf32=False; the NPU's analogue, HF32, is a different format ({HF32}): enable it "
                "yourself if you want it"
            )
            self.report_in(statement_of(self.ctx, source), "NPU904", source, message, fix=_false, needs_torch_npu=False)

    def _optim_sources(self, value: cst.BaseExpression | None) -> None:
        """NPU727 for an ``optim`` name whose optimizer needs CUDA (bitsandbytes', apex's)."""
        for source in sources(self.ctx, value) if value is not None else ():
            name = string_value(source)
            decision = optim_decision(name, f'`optim="{name}"`') if name else None
            if decision is None or not self._fresh(source):
                continue
            new, message = decision
            fix, tier = (rename_fix(name, new), Tier.NUMERIC) if new else (None, Tier.MANUAL)
            self.report_in(
                statement_of(self.ctx, source), "NPU727", source, message, fix=fix, tier=tier, needs_torch_npu=False
            )

    def _fresh(self, source: cst.BaseExpression) -> bool:
        """A value not reported yet (now it is) and not in code that handles the NPU."""
        if source in self._done or in_npu_branch(self.ctx, source):
            return False
        self._done.add(source)
        return True

    def _fp16(self, call: cst.Call, fp16: cst.Arg) -> None:
        kept = fp16_under_pin(self.options)
        if kept is not None:
            if kept:
                self.report("NPU906", fp16, f"`fp16=True` kept under the bf16 policy: {kept}", tier=Tier.REVIEW)
            return
        if keyword(call, "bf16") is not None or any(arg.star == "**" for arg in call.args):
            message = "`fp16=True` under the bf16 policy: use `bf16=True` (this call also sets bf16 or passes **kwargs)"
            self.report("NPU906", fp16, message, tier=Tier.REVIEW)
            return
        deepspeed = keyword(call, "deepspeed")
        if deepspeed is not None and not all(_bf16_ready(config) for config in sources(self.ctx, deepspeed.value)):
            message = (
                "`fp16=True` under the bf16 policy: use `bf16=True` together with a "
                '`"bf16": {"enabled": "auto"}` block in the DeepSpeed config, which this call does not show: the '
                'Trainer fills the config\'s "auto" blocks from these flags, and with no bf16 block DeepSpeed trains in fp32'
            )
            self.report("NPU906", fp16, message, tier=Tier.REVIEW)
            return
        weights = self.ctx.file_state(float16_models)
        checkpoint = self.ctx.file_state(checkpoint_dtype_loads)
        if not weights and checkpoint:
            message = (
                f"`fp16=True` kept under the bf16 policy: this file loads its model in the checkpoint's dtype "
                f'(`{code_of(checkpoint[0].func)}(..., torch_dtype="auto")`), float16 for many checkpoints, and '
                "`bf16=True` would run bf16 autocast over float16 weights; switch to `bf16=True` where the "
                "checkpoint is bfloat16 (its config.json's `torch_dtype`), or keep fp16, which runs on Ascend"
            )
            self.report("NPU906", fp16, message, tier=Tier.REVIEW)
            return
        if weights:
            shown = shown_cast(self.resolver, weights[0][0])
            message = (
                f"`fp16=True` kept under the bf16 policy: this file makes its model float16 (`{shown}`), which "
                "`bf16=True` would run in bf16 autocast over float16 weights, mixing the two types: switch both "
                "(`.bfloat16()` / `torch_dtype=torch.bfloat16` with `bf16=True`), or keep fp16, which runs on Ascend "
                "(with loss scaling)"
            )
            self.report("NPU906", fp16, message, tier=Tier.REVIEW)
            return
        message = (
            "`fp16=True` → `bf16=True` (bf16 policy: BF16 is the NPU's native mixed-precision type, no loss scaling; "
            "`--precision fp16` keeps fp16)"
        )
        self.report("NPU906", fp16, message, fix=_bf16, needs_torch_npu=False)


def _bf16_ready(config: cst.BaseExpression) -> bool:
    """A DeepSpeed config literal that has a bf16 block once migrated: one already, or an fp16 block
    enabled by a literal (NPU913 turns it into the bf16 block); a path or an ``"auto"`` block: no."""
    if not isinstance(config, cst.Dict):
        return False
    fp16 = _entry(config, "fp16")
    enabled = _entry(fp16, "enabled") if fp16 is not None else None
    return _entry(config, "bf16") is not None or (enabled is not None and literal(enabled) is True)


def _entry(mapping: cst.BaseExpression, key: str) -> cst.BaseExpression | None:
    """The value of ``key`` in a ``{...}`` literal or a ``dict(...)`` call."""
    if isinstance(mapping, cst.Dict):
        return next(
            (e.value for e in mapping.elements if isinstance(e, cst.DictElement) and string_value(e.key) == key), None
        )
    if isinstance(mapping, cst.Call) and isinstance(mapping.func, cst.Name) and mapping.func.value == "dict":
        arg = keyword(mapping, key)
        return arg.value if arg is not None else None
    return None


def _false(node: cst.CSTNode) -> cst.Name:
    return cst.Name("False")


def _bf16(arg: cst.Arg) -> cst.Arg:
    return arg.with_changes(keyword=cst.Name("bf16"))
