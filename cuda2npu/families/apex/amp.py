"""apex.amp → native AMP (NPU310–NPU316), or apex.amp kept for Ascend's apex (NPU317).

With ``--apex=native`` the whole file is planned before anything is reported, and the plan is
all or nothing: a half-migrated apex.amp (``amp.initialize`` removed while an ``amp.scale_loss``
stays) would crash, so any uncertain part makes every part a ``manual`` finding instead.

* ``amp.initialize(...)`` (NPU310) is removed; the precision policy picks the dtype
  (``--precision bf16``: ``torch.bfloat16``, no loss scaling; ``fp16``/``keep``: ``torch.float16``
  with a ``torch.npu.amp.GradScaler`` created where ``amp.initialize`` was). O0 (or
  ``enabled=False``) means float32: no autocast. O3 is pure float16 training: manual.
  ``if`` tests around ``amp.initialize`` (``if args.fp16:``) become ``enabled=`` arguments.
* ``with amp.scale_loss(loss, opt) as scaled: scaled.backward()`` (NPU311) becomes
  ``loss.backward()`` or ``scaler.scale(loss).backward()``.
* The forward region (NPU312) — the statements of the block of ``amp.scale_loss`` (or of the
  ``if`` blocks around it) from the first call of a model returned by ``amp.initialize`` through
  the last assignment of a name the loss is computed from — is wrapped in
  ``with torch.autocast("npu", dtype=...):``. No such region: manual.
* With a scaler (NPU313), ``opt.step()`` becomes ``scaler.step(opt)`` followed by
  ``scaler.update()`` after the block's last step, and gradient clipping gets
  ``scaler.unscale_(opt)`` first (apex unscaled when ``scale_loss`` exited).
* ``amp.master_params(opt)`` (NPU314) iterates ``opt.param_groups``; ``amp.state_dict()`` /
  ``amp.load_state_dict(...)`` (NPU315) become the scaler's, or ``{}`` / nothing without one.
* ``amp.register_*_function`` and other apex-only AMP APIs (NPU316) are reported.

Portable output (``--portable``): native AMP runs on both hosts, so the plan is the same with the
accelerator's device type, ``torch.autocast(portable_device.device_type(), ...)`` and
``torch.amp.GradScaler(portable_device.device_type(), ...)``; ``--apex=ascend`` is not applied
(NVIDIA's apex has no ``combine_grad``), and a static loss scale, which torch.amp.GradScaler lacks
(``dynamic=False`` is torch.npu's), leaves apex.amp as written (manual).
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis import portable
from cuda2npu.core.rulebase import register
from cuda2npu.families.apex.amp_plan import AmpPlan
from cuda2npu.families.apex.common import ApexRule


@register
class ApexAmp(ApexRule):
    """NPU310–NPU317: reports the :class:`AmpPlan` of the file where each part is visited."""

    codes = ("NPU310", "NPU311", "NPU312", "NPU313", "NPU314", "NPU315", "NPU316", "NPU317")
    portable_support = True  # native AMP with the host's device type (AmpPlan.device)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.plan: AmpPlan | None = None
        if self.active:
            self.plan = AmpPlan(self)
            self.plan.build()

    def _visit(self, node: cst.CSTNode) -> None:
        if self.plan is not None and node in self.plan.planned:
            self.plan.report_at(node)
        if isinstance(node, cst.Module) and self.options.portable:  # the helper's import, for AmpPlan.device
            portable.report_support(self, next((c for c in self.codes if self.options.code_enabled(c)), "NPU310"))

    def get_visitors(self) -> dict:
        """Planned findings are reported when their node is visited (markers need the statement)."""
        types = (
            cst.Module,
            cst.IndentedBlock,
            cst.SimpleStatementLine,
            cst.With,
            cst.If,
            cst.For,
            cst.While,
            cst.Try,
            cst.FunctionDef,
            cst.ClassDef,
            cst.Call,
            cst.Decorator,
        )
        return {f"visit_{t.__name__}": self._visit for t in types}
