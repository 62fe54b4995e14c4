"""GPUs requested from Ray's scheduler (NPU921, NPU922, NPU927).

Ray schedules Ascend cards as the accelerator resource ``"NPU"`` (ray >= 2.9.0); ``num_gpus`` has
no NPU counterpart keyword, so ``num_gpus=n`` (of Ray's calls and Ray Data's transforms, or an item
of a dict passed as ``**options``) becomes ``resources={"NPU": n}`` (merged into a
``resources`` dict display), the ``"GPU"`` key of a placement-group bundle and the ``"gpu"`` key of
a Tune resource dict (``resources_per_trial``, ``tune.with_resources``: one bundle) become ``"NPU"``,
and an NVIDIA ``accelerator_type`` (no Ascend node carries it) is marked. Facts: docs/reference/ray.md.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.hf_sources import keyword, statement_of
from cuda2npu.analysis.npu_aware import in_npu_branch, mentions
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import literal, string_value
from cuda2npu.core.nodes import code_of, with_args
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.families.ray.common import (
    NPU,
    entry,
    has_double_star,
    imports_ray,
    literal_dict,
    renamed_key,
    report_npu,
    with_entry,
)
from cuda2npu.families.ray.sources import GpuItem, SpreadDict, bundle_dicts, dicts_of, spread_dict

REQUEST_CALLS = {"ray.remote", "ray.init"}
# `.options(...)` of a remote function or actor class; Ray Data's transforms, which start their tasks and
# actors with `num_gpus` and `**ray_remote_args` as Ray remote options (docs/reference/ray.md §8)
REQUEST_METHODS = {"options", "map", "map_batches", "flat_map", "filter", "map_groups"}
BUNDLE_CALLS = {
    "ray.util.placement_group": 0,
    "ray.util.placement_group.placement_group": 0,
    "ray.tune.PlacementGroupFactory": 0,
    "ray.tune.execution.placement_groups.PlacementGroupFactory": 0,
}
# Ray Tune callables taking a resource dict ({"cpu": 1, "gpu": 1}) -> (keyword, position)
TUNE_RESOURCES = {
    "ray.tune.run": ("resources_per_trial", None),
    "ray.tune.tune.run": ("resources_per_trial", None),
    "ray.tune.Experiment": ("resources_per_trial", None),
    "ray.tune.experiment.Experiment": ("resources_per_trial", None),
    "ray.tune.experiment.experiment.Experiment": ("resources_per_trial", None),
    "ray.tune.with_resources": ("resources", 1),
    "ray.tune.trainable.util.with_resources": ("resources", 1),
}
NVIDIA_TYPES = {"V100", "P100", "T4", "P4", "K80", "A10G", "L4", "L40S", "A100", "H100", "H200", "H20", "B200"}
ACCELERATOR_NOTE = (
    'Ray labels an Ascend node with its SoC name (`acl.get_soc_name()`, such as "Ascend910B", '
    "`ray.util.accelerators.HUAWEI_NPU_910B`): name the type of your cards or drop the constraint"
)


def _npu_dict(value: cst.BaseExpression) -> cst.Dict:
    return cst.Dict([cst.DictElement(cst.SimpleString(f'"{NPU}"'), value)])


def _asks_nothing(value: cst.BaseExpression) -> bool:
    """``num_gpus=0`` / ``None``: no GPU requested, nothing to change."""
    return literal(value) in (0, None)


@register
class NumGpus(Rule):
    """``num_gpus=`` of ``ray.remote`` / ``ray.init`` / ``.options`` / Ray Data's transforms, the
    ``"num_gpus"`` item of a dict they get as ``**options``, and the ``"num_gpus"`` entry of a
    ``ray_actor_options`` dict (Ray Serve)."""

    codes = ("NPU921",)
    triggers = (r"num_gpus",)
    requires = (r"\bray\b",)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._done: set[cst.CSTNode] = set()  # the spread items reported (a dict may be passed twice)

    def visit_Call(self, node: cst.Call) -> None:
        if not imports_ray(self.ctx):
            return
        options = keyword(node, "ray_actor_options")
        if options is not None and (mapping := literal_dict(options.value)) is not None:
            self._actor_options(mapping)
        if not self._requests(node):
            return
        for star in node.args:
            if star.star == "**" and isinstance(star.value, cst.Name):
                self._spread(node, star.value)
        arg = keyword(node, "num_gpus")
        if arg is None or _asks_nothing(arg.value):
            return
        if mentions(arg.value)[1] or in_npu_branch(self.ctx, node):  # `num_gpus=0 if use_npu else 1`
            return
        resources = keyword(node, "resources")
        shown = f"`num_gpus={code_of(arg.value)}`"
        if has_double_star(node) or (resources is not None and literal_dict(resources.value) is None):
            where = "the `**` arguments" if has_double_star(node) else f"`resources={code_of(resources.value)}`"
            self.report(
                "NPU921",
                node,
                f'{shown} asks for GPUs, which an Ascend host has none of: request `{{"{NPU}": n}}` in '
                f"{where} by hand (Ray's resource name of Ascend cards)",
                tier=Tier.MANUAL,
                needs_torch_npu=False,
            )
            return
        if resources is not None and entry(resources.value, NPU) is not None:
            return  # already asks for NPUs as well
        report_npu(
            self,
            "NPU921",
            node,
            f'{shown} → `resources={{"{NPU}": ...}}` (Ray schedules Ascend cards as the "{NPU}" resource)',
            _move_num_gpus,
            needs_torch_npu=False,
        )

    def _requests(self, call: cst.Call) -> bool:
        if self.resolver.qualified_name(call.func) in REQUEST_CALLS:
            return True
        return isinstance(call.func, cst.Attribute) and call.func.attr.value in REQUEST_METHODS

    def _spread(self, call: cst.Call, name: cst.Name) -> None:
        """The ``"num_gpus"`` items of the dict ``name`` that ``call`` gets as ``**name``: rewritten
        where every write to it is seen and nothing else may pass ``resources``, else marked."""
        spread = spread_dict(self.ctx, name)
        passed = f"`**{name.value}` of `{code_of(call.func)}(...)`"
        for item in spread.gpus:
            if item.node in self._done or _asks_nothing(item.value) or mentions(item.value)[1]:
                continue
            if in_npu_branch(self.ctx, item.node):
                continue
            self._done.add(item.node)
            statement = statement_of(self.ctx, item.node)
            shown = f"`{code_of(item.node)}`" if isinstance(item.node, cst.Assign) else '`"num_gpus"`'
            blocker = _spread_blocker(call, name, spread, item)
            if blocker is not None:
                message = (
                    f"{shown} asks for GPUs through {passed}, which an Ascend host has none of: request "
                    f'`{{"{NPU}": n}}` in its `"resources"` by hand ({blocker}; Ray\'s resource name of Ascend cards)'
                )
                self.report_in(statement, "NPU921", item.node, message, tier=Tier.MANUAL, needs_torch_npu=False)
                continue
            fix = _subscript_to_resources if isinstance(item.node, cst.Assign) else _move_num_gpus_entry
            message = (
                f'{shown} (passed as {passed}) → `"resources": {{"{NPU}": ...}}` (Ray schedules Ascend cards '
                f'as the "{NPU}" resource)'
            )
            report_npu(self, "NPU921", item.node, message, fix, statement=statement, needs_torch_npu=False)

    def _actor_options(self, mapping: cst.Dict) -> None:
        gpus = entry(mapping, "num_gpus")
        if gpus is None or _asks_nothing(gpus.value) or mentions(gpus.value)[1] or in_npu_branch(self.ctx, mapping):
            return
        resources = entry(mapping, "resources")
        if resources is not None and literal_dict(resources.value) is None:
            self.report(
                "NPU921",
                mapping,
                f'`"num_gpus"` asks for GPUs: request `{{"{NPU}": n}}` in `{code_of(resources.value)}` by hand',
                tier=Tier.MANUAL,
                needs_torch_npu=False,
            )
        elif resources is None or entry(resources.value, NPU) is None:
            report_npu(
                self,
                "NPU921",
                mapping,
                f'`"num_gpus"` → `"resources": {{"{NPU}": ...}}` (Ray schedules Ascend cards as the "{NPU}" resource)',
                _move_num_gpus_entry,
                needs_torch_npu=False,
            )


def _move_num_gpus(call: cst.Call) -> cst.Call:
    arg = keyword(call, "num_gpus")
    resources = keyword(call, "resources")
    if resources is None:
        replacement = arg.with_changes(keyword=cst.Name("resources"), value=_npu_dict(arg.value))
        return with_args(call, [replacement if a is arg else a for a in call.args])
    merged = resources.with_changes(value=with_entry(resources.value, NPU, arg.value))
    return with_args(call, [merged if a is resources else a for a in call.args if a is not arg])


def _spread_blocker(call: cst.Call, name: cst.Name, spread: SpreadDict, item: GpuItem) -> str | None:
    """Why the ``"num_gpus"`` item of a spread dict is not rewritten (None: it is)."""
    if spread.open is not None:
        return spread.open
    if keyword(call, "resources") is not None or sum(a.star == "**" for a in call.args) > 1:
        return "the call may get `resources` otherwise too"
    if isinstance(item.node, cst.Assign) and len(item.node.targets) > 1:
        return "a chained assignment"
    if any(node is not item.node for node in spread.resources):
        return f'`{name.value}` gets a `"resources"` entry elsewhere'
    return None


def _subscript_to_resources(assign: cst.Assign) -> cst.Assign:
    """``options["num_gpus"] = n`` → ``options["resources"] = {"NPU": n}`` (the key's quotes kept)."""
    target = assign.targets[0]
    element = target.target.slice[0]
    key = element.slice.value
    quote = key.value[0] if isinstance(key, cst.SimpleString) else '"'
    index = element.slice.with_changes(value=cst.SimpleString(f"{quote}resources{quote}"))
    subscript = target.target.with_changes(slice=[element.with_changes(slice=index)])
    return assign.with_changes(targets=[target.with_changes(target=subscript)], value=_npu_dict(assign.value))


def _move_num_gpus_entry(mapping: cst.Dict) -> cst.Dict:
    gpus = entry(mapping, "num_gpus")
    resources = entry(mapping, "resources")
    if resources is None:
        replacement = gpus.with_changes(key=cst.SimpleString('"resources"'), value=_npu_dict(gpus.value))
        return mapping.with_changes(elements=[replacement if e is gpus else e for e in mapping.elements])
    merged = resources.with_changes(value=with_entry(resources.value, NPU, gpus.value))
    elements = [merged if e is resources else e for e in mapping.elements if e is not gpus]
    last = elements[-1]
    if isinstance(mapping.elements[-1].comma, cst.MaybeSentinel) and isinstance(last.comma, cst.Comma):
        elements[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return mapping.with_changes(elements=elements)


@register
class GpuBundles(Rule):
    """The ``"GPU"`` key of placement-group bundles (``ray.util.placement_group``, Tune's
    ``PlacementGroupFactory``): in the call, or followed from the name passed to the dict displays
    it is built of in the same function (cuda2npu/families/ray/sources.py)."""

    codes = ("NPU922",)
    triggers = (r"placement_group", r"PlacementGroupFactory")
    requires = (r"GPU",)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._done: set[cst.CSTNode] = set()  # the bundles reported (two groups may share them)

    def visit_Call(self, node: cst.Call) -> None:
        position = BUNDLE_CALLS.get(self.resolver.qualified_name(node.func) or "")
        if position is None or in_npu_branch(self.ctx, node):
            return
        bundles = keyword(node, "bundles")
        positional = [a for a in node.args if a.keyword is None and not a.star]
        value = bundles.value if bundles is not None else (positional[0].value if positional else None)
        if value is None:
            return
        displays = bundle_dicts(self.ctx, value)
        if displays is None:
            self.report(
                "NPU922",
                node,
                f"bundles `{code_of(value)}` are not dict displays cuda2npu follows in this function: a "
                f'`"GPU"` key in them must be `"{NPU}"` (Ray\'s resource name of Ascend cards), or the placement '
                "group is never placed",
                tier=Tier.REVIEW,
                needs_torch_npu=False,
            )
            return
        for bundle in displays:
            if entry(bundle, "GPU") is None or entry(bundle, NPU) is not None or bundle in self._done:
                continue
            if in_npu_branch(self.ctx, bundle):
                continue
            self._done.add(bundle)
            report_npu(
                self,
                "NPU922",
                bundle,
                f'bundle key `"GPU"` → `"{NPU}"` (Ray\'s resource name of Ascend cards)',
                lambda updated: renamed_key(updated, "GPU", NPU),
                statement=statement_of(self.ctx, bundle),
                needs_torch_npu=False,
            )


@register
class TuneResources(Rule):
    """The ``"gpu"`` (or ``"GPU"``) key of a Tune resource dict: ``resources_per_trial=`` of
    ``tune.run`` / ``Experiment`` and the resources of ``tune.with_resources``, displayed in the
    call or assigned to the name passed. Tune makes one bundle of it (``resource_dict_to_pg_factory``):
    ``cpu``/``gpu``/``memory`` are its CPU/GPU/memory, any other key a Ray resource of that name."""

    codes = ("NPU922",)
    triggers = (r"resources_per_trial", r"with_resources")
    requires = (r"""["'](?:gpu|GPU)["']""",)

    def visit_Call(self, node: cst.Call) -> None:
        place = TUNE_RESOURCES.get(self.resolver.qualified_name(node.func) or "")
        if place is None or in_npu_branch(self.ctx, node):
            return
        name, position = place
        arg = keyword(node, name)
        positional = [a for a in node.args if a.keyword is None and not a.star]
        if arg is None and position is not None and len(positional) > position:
            arg = positional[position]
        if arg is None:
            return
        for mapping in dicts_of(self.ctx, arg.value) or []:  # None: a PlacementGroupFactory (NPU922), a callable
            self._resources(mapping)

    def _resources(self, mapping: cst.Dict) -> None:
        key = next((k for k in ("gpu", "GPU") if entry(mapping, k) is not None), None)
        if key is None or _asks_nothing(entry(mapping, key).value) or entry(mapping, NPU) is not None:
            return
        if entry(mapping, "custom_resources") is not None:
            self.report(
                "NPU922",
                mapping,
                f'`"{key}"` asks for GPUs, and with `"custom_resources"` Tune ignores the other keys of the '
                f'dict: ask for `"{NPU}"` in `"custom_resources"` by hand (Ray\'s resource name of Ascend cards)',
                tier=Tier.MANUAL,
                needs_torch_npu=False,
            )
            return
        report_npu(
            self,
            "NPU922",
            mapping,
            f'Tune resource key `"{key}"` → `"{NPU}"` (Tune passes keys other than cpu/gpu/memory on as Ray '
            "resources; Ray's resource name of Ascend cards)",
            lambda updated: renamed_key(updated, key, NPU),
            needs_torch_npu=False,
        )


@register
class NvidiaAcceleratorType(Rule):
    """``accelerator_type=`` naming an NVIDIA GPU (``ray.util.accelerators.NVIDIA_*`` or its string)."""

    codes = ("NPU927",)
    triggers = (r"accelerator_type",)
    requires = (r"\bray\b",)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is None or node.keyword.value != "accelerator_type" or not imports_ray(self.ctx):
            return
        qualified = self.resolver.qualified_name(node.value) or ""
        nvidia = qualified.rpartition(".")[2].startswith("NVIDIA_") and qualified.startswith("ray.util.accelerators")
        if (nvidia or string_value(node.value) in NVIDIA_TYPES) and not in_npu_branch(self.ctx, node):
            self.report(
                "NPU927",
                node,
                f"`accelerator_type={code_of(node.value)}` names an NVIDIA GPU, which no Ascend node has: "
                + ACCELERATOR_NOTE,
                tier=Tier.MANUAL,
                needs_torch_npu=False,
            )
