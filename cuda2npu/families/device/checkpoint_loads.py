"""NPU118: ``torch.load`` without ``map_location`` feeding ``load_state_dict``.

A checkpoint saved from CUDA tensors (``torch.save(model.state_dict(), path)`` after training on a GPU, as
most released weights are) records each storage's device; ``torch.load`` without ``map_location`` restores
it there, and on a host where ``torch.cuda.is_available()`` is False it raises "Attempting to deserialize
object on a CUDA device" (torch/serialization.py ``_validate_device``). An NPU host is such a host: LoFTR's
``matcher.load_state_dict(torch.load(path)["state_dict"])`` and MobileSAM's ``state_dict = torch.load(f)``
then ``sam.load_state_dict(state_dict)`` fail there (rounds 60 and 62). Where the loaded object only feeds
``load_state_dict`` (directly, through a subscript or ``.get``, or through a local every read of which does),
which copies each tensor into the module's own parameters wherever they live, ``map_location="cpu"`` loads
any checkpoint and changes nothing else (exact). Other loads are left: whether their tensors must be on a
device, and which, is the code's.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.names import NameUses
from cuda2npu.core.nodes import keyword_arg, with_args
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import walk

LOADS = ("torch.load",)


@register
class CheckpointLoads(Rule):
    codes = ("NPU118",)
    triggers = (r"\bload_state_dict\b",)
    requires = (r"\bload\(",)

    def visit_Call(self, node: cst.Call) -> None:
        if self.resolver.qualified_name(node.func) not in LOADS or is_cuda_alternative(self.ctx, node):
            return
        if any(a.star for a in node.args) or any(
            a.keyword is not None and a.keyword.value == "map_location" for a in node.args
        ):
            return
        if len([a for a in node.args if a.keyword is None]) > 1:
            return  # `torch.load(path, "cpu")`: its map_location given positionally
        if not self._only_loads_state(node):
            return
        self.report(
            "NPU118",
            node,
            "`torch.load(...)` without `map_location` restores a checkpoint's CUDA tensors on CUDA, which raises on an "
            'NPU host (torch.cuda.is_available() is False there); it only feeds `load_state_dict`: `map_location="cpu"`',
            lambda updated: with_args(updated, [*updated.args, keyword_arg("map_location", '"cpu"')]),
            needs_torch_npu=False,
        )

    def _only_loads_state(self, node: cst.Call) -> bool:
        """The loaded object reaches nothing but ``load_state_dict(...)`` arguments: the call itself (or a
        subscript or ``.get`` of it) is one, or it is assigned to a local every read of which is."""
        index = TreeIndex.of(self.ctx)
        parent = index.parents.get(node)
        if (
            isinstance(parent, cst.Assign)
            and len(parent.targets) == 1
            and isinstance(parent.targets[0].target, cst.Name)
        ):
            name = parent.targets[0].target.value
            function = index.enclosing_function(parent)
            if function is None:
                return False
            uses = NameUses({name}, self.ctx.resolver.scopes)
            walk(function, uses)
            reads = uses.uses[name]
            return bool(reads) and all(self._state_argument(read) for read in reads)
        return self._state_argument(node)

    def _state_argument(self, node: cst.CSTNode) -> bool:
        """``node`` (or ``node[...]``, ``node.get(...)`` around it) is an argument of a ``load_state_dict`` call."""
        parents = TreeIndex.of(self.ctx).parents
        current = node
        while True:
            parent = parents.get(current)
            if isinstance(parent, cst.Subscript) and parent.value is current:
                current = parent
            elif isinstance(parent, cst.Attribute) and parent.value is current and parent.attr.value == "get":
                call = parents.get(parent)
                if not isinstance(call, cst.Call):
                    return False
                current = call
            else:
                break
        arg = parents.get(current)
        call = parents.get(arg) if isinstance(arg, cst.Arg) else None
        return (
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "load_state_dict"
            and arg.keyword is None
        )
