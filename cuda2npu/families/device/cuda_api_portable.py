"""What NPU103/NPU106 write for ``torch.cuda`` under ``--portable`` (cuda2npu/analysis/portable.py).

* a function torch.accelerator has (``synchronize``, ``device_count``, ``memory_allocated`` ...)
  → ``torch.accelerator.<name>`` (or the helper's, for an older target torch); its device is
  passed positionally, as torch.accelerator takes it;
* another torch.cuda member with the same name and arguments in torch.npu →
  ``portable_device.device_module().<name>`` (``torch.cuda`` or ``torch.npu`` at run time);
* ``torch.cuda.amp.autocast`` / ``GradScaler`` / ``custom_fwd`` / ``custom_bwd`` → the
  ``torch.amp`` ones with the accelerator's device type;
* names imported from ``torch.cuda`` are replaced where they are read, and leave their import
  once every read was (:func:`cuda_aliases`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from cuda2npu.analysis import portable
from cuda2npu.core.arguments import Unbindable, bind, remap_args
from cuda2npu.core.names import NameUses, dotted_name
from cuda2npu.core.nodes import keyword_arg, with_args

AMP = "torch.cuda.amp."
AUTOCAST_PARAMS = ("enabled", "dtype", "cache_enabled")  # torch.cuda.amp.autocast
AMP_MEMBERS = ("autocast", "GradScaler", "custom_fwd", "custom_bwd")


def amp_call_fix(name: str, call: cst.Call):
    """Fix for a call of ``torch.cuda.amp.<name>`` (None: its arguments cannot be mapped)."""
    kind = portable.device_type()
    func = cst.parse_expression(f"torch.amp.{name}")
    if name == "autocast":
        try:
            bind(call, AUTOCAST_PARAMS)
        except Unbindable:
            return None
        return lambda c: with_args(
            c.with_changes(func=func), [cst.Arg(cst.parse_expression(kind)), *remap_args(c, AUTOCAST_PARAMS)]
        )
    if name == "GradScaler":  # the same parameters, after `device`
        return lambda c: with_args(c.with_changes(func=func), [cst.Arg(cst.parse_expression(kind)), *c.args])
    # custom_fwd(fwd=None, *, cast_inputs=None) / custom_bwd(bwd=None): torch.amp's take device_type=
    return lambda c: with_args(c.with_changes(func=func), [*c.args, keyword_arg("device_type", kind)])


def amp_decorator(name: str) -> cst.BaseExpression:
    """``@torch.cuda.amp.custom_fwd`` (not called) → ``@torch.amp.custom_fwd(device_type=...)``."""
    return cst.parse_expression(f"torch.amp.{name}(device_type={portable.device_type()})")


def positional_device(call: cst.Call) -> cst.Call:
    """``f(device=x)`` → ``f(x)`` (torch.accelerator's functions take the device positionally only)."""
    return call.with_changes(args=[a.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT) for a in call.args])


def accelerator_arguments(call: cst.Call) -> str | None:
    """Why a torch.cuda call cannot become its torch.accelerator function (None: it can)."""
    if any(a.star for a in call.args):
        return "`*`/`**` arguments hide what it would receive"
    if len(call.args) > 1 or any(a.keyword is not None and a.keyword.value != "device" for a in call.args):
        return "torch.accelerator's function takes only the device"
    return None


@dataclass
class Aliases:
    """Names bound to torch.cuda objects by imports, and where they are read."""

    imports: dict[str, cst.CSTNode] = field(default_factory=dict)  # bound name → its Import/ImportFrom
    reads: dict[str, list[cst.Name]] = field(default_factory=dict)


def cuda_aliases(module: cst.Module) -> Aliases:
    """``from torch.cuda[.<sub>] import x [as y]``, ``from torch import cuda``, ``import torch.cuda[.<sub>] as y``."""
    found = Aliases()

    class Imports(cst.CSTVisitor):
        def visit_Import(self, node: cst.Import) -> None:
            for alias in node.names:
                if alias.asname is not None and (dotted_name(alias.name) or "").startswith("torch.cuda"):
                    found.imports[dotted_name(alias.asname.name) or ""] = node

        def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
            module_name = dotted_name(node.module) if node.module is not None and not node.relative else None
            if module_name is None or isinstance(node.names, cst.ImportStar):
                return
            for alias in node.names:
                name = dotted_name(alias.name) or ""
                if module_name.startswith("torch.cuda") or (module_name == "torch" and name == "cuda"):
                    found.imports[dotted_name(alias.asname.name) if alias.asname else name] = node

    module.visit(Imports())
    if found.imports:
        uses = NameUses(set(found.imports))
        module.visit(uses)
        found.reads = uses.uses
    return found
