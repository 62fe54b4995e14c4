"""NPU201: ``init_process_group(backend="gloo")`` in a file whose DDP wraps a model on the accelerator.

Gloo's collectives run on CPU tensors (and CUDA ones), not on NPU tensors: MeloTTS' ``train.py`` (round 59)
and RVC's trainer (round 55) start torch.distributed with ``backend="gloo"`` and wrap their models, moved to
the device, in ``DistributedDataParallel(model, device_ids=[rank])``, which on an NPU host fails when it
broadcasts the NPU parameters. The backend is reported (review): ``"hccl"``, the backend torch_npu registers,
is what DDP over NPU tensors needs, unless the model is kept on the CPU; the project may have chosen gloo
for a reason of its own (MeloTTS: "due to some training problem"), so nothing is rewritten.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.arguments import Unbindable, bind
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import string_value
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.traversal import iter_nodes

INIT = "torch.distributed.init_process_group"
INIT_PARAMS = ("backend", "init_method", "timeout", "world_size", "rank", "store", "group_name", "pg_options")
DDP = "torch.nn.parallel.DistributedDataParallel"


@register
class GlooWithDeviceDdp(Rule):
    codes = ("NPU201",)
    triggers = (r"""["']gloo["']""",)
    requires = (r"DistributedDataParallel|\bDDP\b",)

    def visit_Call(self, node: cst.Call) -> None:
        if self.resolver.qualified_name(node.func) != INIT:
            return
        try:
            backend = bind(node, INIT_PARAMS, open_keywords=True).get("backend")
        except Unbindable:
            return
        if backend is None or string_value(backend.value) != "gloo" or not self._device_ddp():
            return
        self.report(
            "NPU201",
            backend.value,
            'backend "gloo" with DistributedDataParallel over a model on the device (`device_ids=`): gloo has no '
            'NPU collectives, so DDP fails on an NPU host when it broadcasts the parameters; use "hccl" (the '
            "backend torch_npu registers), or keep the model on the CPU",
            tier=Tier.REVIEW,
            needs_torch_npu=False,
        )

    def _device_ddp(self) -> bool:
        """A ``DistributedDataParallel(..., device_ids=...)`` call in the file."""
        return any(
            self.resolver.qualified_name(call.func) == DDP
            and any(a.keyword is not None and a.keyword.value == "device_ids" for a in call.args)
            for call in iter_nodes(self.ctx.module, cst.Call)
        )
