"""Inside Ray workers and drivers (NPU925, NPU926, NPU928): the GPU ids of a worker, Ray's own
collective groups, and the GPU count read from the cluster's resources.

``ray.get_gpu_ids()`` lists the worker's ``"GPU"`` resource, empty on an Ascend host; its NPU ids
are ``ray.get_runtime_context().get_accelerator_ids()["NPU"]`` (strings, where ``get_gpu_ids``
gives ints unless ``CUDA_VISIBLE_DEVICES`` was set). ``ray.util.collective`` has NCCL and GLOO
backends only: an NCCL group has no NPU counterpart in Ray. ``ray.cluster_resources()["GPU"]`` (and
``available_resources()``, ``.get("GPU", 0)``) counts no Ascend card: they are ``"NPU"`` there.
Facts: docs/reference/ray.md §1, §3, §5.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.hf_sources import keyword
from cuda2npu.analysis.npu_aware import in_npu_branch
from cuda2npu.core.bindings import single_value
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import string_value
from cuda2npu.core.nodes import code_of, expression
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes
from cuda2npu.families.ray.common import NPU, has_double_star, report_npu

RESOURCE_VIEWS = ("ray.cluster_resources", "ray.available_resources")
# ray.util.collective group constructors -> position of `backend` (ray 2.60.0 signatures; default "nccl")
GROUPS = {"init_collective_group": 2, "create_collective_group": 3}
COLLECTIVE_MODULES = ("ray.util.collective.", "ray.util.collective.collective.")


@register
class GpuIds(Rule):
    codes = ("NPU925",)
    triggers = (r"get_gpu_ids",)

    def visit_Call(self, node: cst.Call) -> None:
        if self.resolver.qualified_name(node.func) != "ray.get_gpu_ids" or node.args or in_npu_branch(self.ctx, node):
            return
        report_npu(
            self,
            "NPU925",
            node,
            f'`ray.get_gpu_ids()` → `ray.get_runtime_context().get_accelerator_ids()["{NPU}"]`: the NPU ids '
            "are strings (`get_gpu_ids` gives ints unless CUDA_VISIBLE_DEVICES was set when the worker started)",
            _accelerator_ids,
            needs_torch_npu=False,
            imports=[] if isinstance(node.func, cst.Attribute) else [("ray", None)],
        )


def _accelerator_ids(call: cst.Call) -> cst.BaseExpression:
    """``<ray>.get_runtime_context().get_accelerator_ids()["NPU"]``, ``<ray>`` as the call spells Ray."""
    ray = code_of(call.func.value) if isinstance(call.func, cst.Attribute) else "ray"
    return expression(f'{ray}.get_runtime_context().get_accelerator_ids()["{NPU}"]')


@register
class CollectiveNccl(Rule):
    codes = ("NPU926",)
    triggers = (r"collective_group",)

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.resolver.qualified_name(node.func) or ""
        module, _, name = qualified.rpartition(".")
        if f"{module}." not in COLLECTIVE_MODULES or name not in GROUPS or in_npu_branch(self.ctx, node):
            return
        backend = keyword(node, "backend")
        positional = [a for a in node.args if a.keyword is None and not a.star]
        if backend is None and len(positional) > GROUPS[name]:
            backend = positional[GROUPS[name]]
        if backend is None and has_double_star(node):
            return  # the backend may be in the `**` arguments: not known
        value = "nccl" if backend is None else string_value(backend.value)
        if value is None or value.lower() != "nccl":
            return  # gloo, a registered backend ("HCCL" of ray-ascend), or not known
        shown = "the default backend NCCL" if backend is None else f"`backend={code_of(backend.value)}`"
        self.report(
            "NPU926",
            node,
            f"`{name}` with {shown}: Ray's collective library has NCCL and GLOO backends only, and NCCL "
            "does not run on Ascend; move the exchange to torch.distributed with hccl, or register an HCCL "
            "backend (the separate ray-ascend package) and name it",
            tier=Tier.MANUAL,
            needs_torch_npu=False,
        )


@register
class ClusterGpuCount(Rule):
    """NPU928: ``ray.cluster_resources()["GPU"]`` / ``.get("GPU", 0)`` (directly or through a name
    bound once to the call) → ``"NPU"``."""

    codes = ("NPU928",)
    triggers = (r"(?:cluster|available)_resources", r"\bbundle_specs\b")

    def visit_SubscriptElement(self, node: cst.SubscriptElement) -> None:
        index = TreeIndex.of(self.ctx).parents.get(node)
        if isinstance(index, cst.Subscript) and isinstance(node.slice, cst.Index):
            self._key(index.value, node.slice.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "get" and node.args:
            self._key(func.value, node.args[0].value)

    def _key(self, mapping: cst.BaseExpression, key: cst.BaseExpression) -> None:
        if string_value(key) != "GPU" or not self._resource_view(mapping) or in_npu_branch(self.ctx, key):
            return
        report_npu(
            self,
            "NPU928",
            key,
            f'`"GPU"` of Ray\'s resource totals counts no Ascend card: `"{NPU}"` (Ray\'s resource name for them)',
            lambda literal: literal.with_changes(value=literal.value.replace("GPU", NPU)),
            needs_torch_npu=False,
        )

    def _resource_view(self, mapping: cst.BaseExpression) -> bool:
        """``ray.cluster_resources()``, or a name bound once to it in the enclosing function (or module),
        or a bundle of a placement group (:meth:`_bundle`)."""
        if isinstance(mapping, cst.Name):
            if self._bundle(mapping):
                return True
            statement = self.ctx.statement
            scope = TreeIndex.of(self.ctx).function.get(statement) if statement is not None else None
            mapping = single_value(self.ctx.module, scope or self.ctx.module, mapping.value)
        return isinstance(mapping, cst.Call) and self.resolver.qualified_name(mapping.func) in RESOURCE_VIEWS

    def _bundle(self, name: cst.Name) -> bool:
        """``name`` is the target of a loop around it over a placement group's ``bundle_specs`` (also
        ``enumerate(...)`` of them, or a name bound once to them): vLLM 0.4's Ray executor skips every
        bundle whose ``bundle.get("GPU", 0)`` is 0, while the bundles it built ask for ``{"NPU": 1}``
        once NPU922 migrates them (vllm-ltr, round 31)."""
        index = TreeIndex.of(self.ctx)
        scope = index.function.get(self.ctx.statement) if self.ctx.statement is not None else None
        for loop in index.ancestors(self.ctx.statement) if self.ctx.statement is not None else ():
            if not isinstance(loop, cst.For) or name.value not in {n.value for n in iter_nodes(loop.target, cst.Name)}:
                continue
            source = loop.iter
            if isinstance(source, cst.Call) and code_of(source.func) == "enumerate" and source.args:
                source = source.args[0].value
            if isinstance(source, cst.Name):
                source = single_value(self.ctx.module, scope or self.ctx.module, source.value)
            return isinstance(source, cst.Attribute) and source.attr.value == "bundle_specs"
        return False
