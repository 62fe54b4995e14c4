"""NPU103: ``torch.random.fork_rng`` forks the RNG of the devices of ``device_type``, ``"cuda"``
unless given (torch 2.1 up to the releases that take the current accelerator's type, pytorch/pytorch
``torch/random.py``). On an NPU host ``fork_rng(devices=[torch.npu.current_device()])`` then calls
``torch.cuda.get_rng_state(i)``, which fails, and ``fork_rng()`` forks no device RNG at all
(``torch.cuda.device_count()`` is 0 there): the NPU generator is not put back. ``device_type="npu"``
forks the NPU's, as the call forked CUDA's. A target torch older than 2.1 has no ``device_type``:
the call is marked.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.arguments import try_bind
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.nodes import keyword_arg, string, with_args
from cuda2npu.core.rulebase import Rule, register

FORK_RNG = "torch.random.fork_rng"
PARAMS = ("devices", "enabled", "_caller", "_devices_kw", "device_type")
TORCH_WITH_DEVICE_TYPE = (2, 1)


@register
class ForkRngDeviceType(Rule):
    codes = ("NPU103",)
    triggers = (r"\bfork_rng\b",)

    def visit_Call(self, node: cst.Call) -> None:
        if self.resolver.qualified_name(node.func) != FORK_RNG or is_cuda_alternative(self.ctx, node):
            return
        bound = try_bind(node, PARAMS)
        if bound is None or "device_type" in bound:
            return  # the call names its device type (or may, through **kwargs)
        if not self.options.target.torch_at_least(TORCH_WITH_DEVICE_TYPE):
            self.report(
                "NPU103",
                node,
                "`torch.random.fork_rng` forks CUDA's RNG only before torch 2.1 (no `device_type=`): "
                "save and restore `torch.npu.get_rng_state()` around the block by hand",
                tier=Tier.MANUAL,
            )
            return
        self.report(
            "NPU103",
            node,
            '`torch.random.fork_rng(...)` → `fork_rng(..., device_type="npu")`: its device type is "cuda" '
            "unless given, and an NPU host has no CUDA RNG to fork",
            lambda call: with_args(call, [*call.args, keyword_arg("device_type", string("npu"))]),
        )
