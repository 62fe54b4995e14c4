"""torch AMP calls that mean CUDA without saying so (NPU106).

* ``torch.amp.GradScaler()`` without a device is CUDA's: where CUDA is missing (an Ascend host) it
  disables itself with a warning, so float16 training runs without loss scaling. It gets the
  device, ``"npu"``.
* ``torch.is_autocast_enabled()``, ``torch.get_autocast_gpu_dtype()``,
  ``torch.set_autocast_gpu_dtype(dtype)`` and ``torch.set_autocast_enabled(enabled)`` read or set
  CUDA's autocast state: inside an NPU autocast region the first says False and the second gives
  CUDA's dtype (float16, not the region's bfloat16). They become torch_npu's functions of the NPU
  state, ``torch.npu.is_autocast_enabled()``, ``torch.npu.get_autocast_dtype()``, ...; so do
  references to the ``_gpu_`` ones (``dtype = torch.get_autocast_gpu_dtype``, called later).

Calls with a device (``torch.amp.GradScaler("cuda")``, ``torch.is_autocast_enabled("cuda")``) are
device strings (``device_strings.py``). Portable output (``--portable``): the device is the host's,
``torch.get_autocast_dtype(portable_device.device_type())`` (torch >= 2.4: the device-type forms of
these functions), ``torch.amp.GradScaler(portable_device.device_type())``.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis import portable
from cuda2npu.analysis.autocast import SCALER  # torch's device-generic GradScaler names
from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.imports import ImportNeed
from cuda2npu.core.nodes import attribute_chain, code_of, expression, with_args
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.traversal import iter_nodes

# the torch release with torch.is_autocast_enabled(device_type), get_autocast_dtype(device_type) and
# set_autocast_dtype/set_autocast_enabled(device_type, ...), for which the *_gpu_* forms are deprecated
# (pytorch/pytorch#125103, merged May 2024; the release, 2.4, INFERRED from that date)
DEVICE_TYPE_FORMS = (2, 4)
# CUDA's autocast state: (torch function, positional arguments it takes) -> (torch.npu function,
# torch's device-type form for portable output)
STATE = {
    ("torch.is_autocast_enabled", 0): ("torch.npu.is_autocast_enabled", "torch.is_autocast_enabled"),
    ("torch.get_autocast_gpu_dtype", 0): ("torch.npu.get_autocast_dtype", "torch.get_autocast_dtype"),
    ("torch.set_autocast_gpu_dtype", 1): ("torch.npu.set_autocast_dtype", "torch.set_autocast_dtype"),
    ("torch.set_autocast_enabled", 1): ("torch.npu.set_autocast_enabled", "torch.set_autocast_enabled"),
}

# functions whose references (not calls) mean the same with the NPU's function: the *_gpu_* ones
REFERENCES = {name: functions for (name, _), functions in STATE.items() if "_gpu_" in name}


@register
class CudaAmpDefaults(Rule):
    codes = ("NPU106",)
    triggers = (r"GradScaler\(", r"_autocast_")
    portable_support = True

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._not_references: set[cst.CSTNode] = set()  # called functions, attribute and imported names

    def visit_Call(self, node: cst.Call) -> None:
        self._not_references.add(node.func)
        qualified = self.resolver.qualified_name(node.func)
        if qualified is None or is_cuda_alternative(self.ctx, node):
            return
        if qualified in SCALER:
            self._scaler(node)
            return
        if any(arg.keyword is not None or arg.star for arg in node.args):
            return  # a device_type= keyword (device_strings.py), or arguments it cannot read
        functions = STATE.get((qualified, len(node.args)))
        if functions is None or (node.args and isinstance(node.args[0].value, cst.SimpleString)):
            return  # with a device type: device_strings.py
        self._state(node, qualified, *functions)

    def _scaler(self, node: cst.Call) -> None:
        if any(arg.keyword is None or arg.keyword.value == "device" or arg.star for arg in node.args):
            return  # a device is given (device_strings.py), or the arguments cannot be read
        device = portable.device_type() if self.options.portable else '"npu"'
        if self.options.portable:
            portable.need(self, Tier.EXACT, device)
        self.report(
            "NPU106",
            node,
            f"`{code_of(node.func)}()` without a device is CUDA's (it disables itself where CUDA is "
            f"missing: no loss scaling) → device {device}",
            lambda updated: with_args(updated, [cst.Arg(expression(device)), *updated.args]),
            needs_torch_npu=not self.options.portable,
        )

    def _state(self, node: cst.Call, qualified: str, npu: str, generic: str) -> None:
        what = f"`{qualified}()` reads or sets CUDA's autocast state, not the NPU's"
        if not self.options.portable:
            module = node.func.value if isinstance(node.func, cst.Attribute) else None
            bound = module is not None and self.resolver.qualified_name(module) == "torch"
            if bound:  # through the file's own name for torch (`import torch as pytorch`: `pytorch.npu.…`)
                npu = code_of(module) + npu.removeprefix("torch")
            self.report(
                "NPU106",
                node,
                f"{what} → `{npu}()`",
                lambda updated: updated.with_changes(func=attribute_chain(npu)),
                imports=[] if bound else [ImportNeed("torch")],  # added where missing
            )
            return
        target = portable.target_torch(self.options)
        if target is not None and target < DEVICE_TYPE_FORMS:
            self.report(
                "NPU106",
                node,
                f"{what}: not portable yet for a target torch older than 2.4 (no device-type form); use "
                f"`{npu}()` on Ascend hosts",
                tier=Tier.MANUAL,
            )
            return
        device = portable.device_type()
        portable.need(self, Tier.EXACT, device, generic)
        self.report(
            "NPU106",
            node,
            f"{what} → `{generic}({device}, ...)`",
            lambda updated: with_args(
                updated.with_changes(func=attribute_chain(generic)), [cst.Arg(expression(device)), *updated.args]
            ),
            needs_torch_npu=False,
        )

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._not_references.add(node.attr)
        self._reference(node)

    def visit_ImportAlias(self, node: cst.ImportAlias) -> None:
        self._not_references.update(iter_nodes(node, cst.Name))

    def visit_Name(self, node: cst.Name) -> None:
        self._reference(node)

    def _reference(self, node: cst.Attribute | cst.Name) -> None:
        """``dtype = torch.get_autocast_gpu_dtype`` (called later, without a device): the NPU's
        function of the same arguments. (``torch.is_autocast_enabled`` may be called with a device
        type: its references are left alone.)"""
        if node in self._not_references:
            return
        qualified = self.resolver.qualified_name(node)
        functions = REFERENCES.get(qualified or "")
        if functions is None or is_cuda_alternative(self.ctx, node):
            return
        npu, _ = functions
        what = f"`{qualified}` is CUDA's autocast state, not the NPU's"
        if self.options.portable:
            self.report(
                "NPU106",
                node,
                f"{what}: not portable yet as a function value; use `{npu}` on Ascend hosts",
                tier=Tier.MANUAL,
            )
            return
        self.report(
            "NPU106",
            node,
            f"{what} → `{npu}`",
            lambda _: attribute_chain(npu),
            imports=[ImportNeed("torch")],  # added where missing
        )

    def leave_Module(self, original_node: cst.Module) -> None:
        portable.report_support(self, "NPU106")
