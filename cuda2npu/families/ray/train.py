"""Ray Train on NPUs (NPU923, NPU924).

``ScalingConfig(use_gpu=True)`` reserves one ``"GPU"`` per worker; on Ascend hosts a worker asks for
``resources_per_worker={"NPU": 1}`` instead (``use_gpu`` stays False: Ray raises when it is True and
no ``"GPU"`` is requested). Ray Train picks the torch.distributed backend from the worker's
resources when ``TorchConfig.backend`` is None: ``"nccl"`` with GPUs, else ``"gloo"`` — so NPU workers
need ``TorchConfig(backend="hccl")``. Facts: docs/reference/ray.md §4.
"""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.analysis.hf_sources import keyword
from cuda2npu.analysis.npu_aware import in_npu_branch
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import literal
from cuda2npu.core.nodes import code_of, expression, keyword_arg, with_args
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes
from cuda2npu.families.ray.common import (
    NPU,
    entry,
    has_double_star,
    literal_dict,
    renamed_key,
    report_npu,
    with_entry,
)

SCALING_CONFIGS = {"ray.train.ScalingConfig", "ray.air.ScalingConfig", "ray.air.config.ScalingConfig"}
# TorchTrainer and its subclasses, which take `torch_config` (ray 2.6.3 `ray/train/huggingface/`, `ray/train/lightning/`)
TORCH_TRAINERS = {
    "ray.train.torch.TorchTrainer",
    "ray.train.torch.torch_trainer.TorchTrainer",
    "ray.train.huggingface.AccelerateTrainer",
    "ray.train.huggingface.accelerate.AccelerateTrainer",
    "ray.train.huggingface.accelerate.accelerate_trainer.AccelerateTrainer",
    "ray.train.huggingface.HuggingFaceTrainer",
    "ray.train.huggingface.TransformersTrainer",
    "ray.train.huggingface.transformers.TransformersTrainer",
    "ray.train.huggingface.transformers.transformers_trainer.TransformersTrainer",
    "ray.train.lightning.LightningTrainer",
    "ray.train.lightning.lightning_trainer.LightningTrainer",
}
TORCH_CONFIGS = {"ray.train.torch.TorchConfig", "ray.train.torch.config.TorchConfig"}
HCCL = re.compile(rb"""["']hccl["']""")  # a backend the file names already
HCCL_NOTE = "Ray Train picks gloo for workers that hold no GPU"


@register
class UseGpu(Rule):
    """``ScalingConfig(use_gpu=True, resources_per_worker={...})``."""

    codes = ("NPU923",)
    triggers = (r"use_gpu",)
    requires = (r"ScalingConfig",)

    def visit_Call(self, node: cst.Call) -> None:
        if self.resolver.qualified_name(node.func) not in SCALING_CONFIGS or in_npu_branch(self.ctx, node):
            return
        use_gpu = keyword(node, "use_gpu")
        if use_gpu is None or literal(use_gpu.value) is False:
            return
        per_worker = keyword(node, "resources_per_worker")
        mapping = literal_dict(per_worker.value) if per_worker is not None else None
        if mapping is not None and entry(mapping, NPU) is not None:
            return
        if literal(use_gpu.value) is not True or has_double_star(node) or (per_worker is not None and mapping is None):
            shown = f"`use_gpu={code_of(use_gpu.value)}` reserves GPUs, which an Ascend host has none of"
            if literal(use_gpu.value) is True:
                where = "`resources_per_worker` (built elsewhere)" if per_worker is not None else "the `**` arguments"
                todo = f'drop it and ask for `{{"{NPU}": 1}}` per worker in {where} by hand'
            else:
                todo = f'where it is true, pass `resources_per_worker={{"{NPU}": 1, ...}}` with `use_gpu=False`'
            self.report("NPU923", node, f"{shown}: {todo}", tier=Tier.MANUAL, needs_torch_npu=False)
            return
        message = (
            f'`use_gpu=True` → `resources_per_worker={{"{NPU}": ...}}` (one NPU per worker unless it asked for '
            f"more GPUs; {HCCL_NOTE}"
        )
        if (
            not self._other_trainer(node)
            or self.ctx.file_state(_has_torch_trainer)
            or HCCL.search(self.ctx.text or b"")
        ):
            report_npu(self, "NPU923", node, f"{message}: see NPU924)", _npu_workers, needs_torch_npu=False)
            return
        report_npu(
            self,
            "NPU923",
            node,
            f"{message}, and NPU924 does not know this trainer: if it runs torch.distributed, give it "
            '`TorchConfig(backend="hccl")`)',
            _npu_workers,
            tier=Tier.REVIEW,
            needs_torch_npu=False,
        )

    def _other_trainer(self, node: cst.Call) -> bool:
        """Whether ``node`` is the ``scaling_config`` of a trainer that is no TorchTrainer (the project's own)."""
        parents = TreeIndex.of(self.ctx).parents
        arg = parents.get(node)
        trainer = parents.get(arg) if isinstance(arg, cst.Arg) and arg.value is node else None
        return isinstance(trainer, cst.Call) and self.resolver.qualified_name(trainer.func) not in TORCH_TRAINERS


def _has_torch_trainer(ctx) -> bool:
    """Whether the file calls a TorchTrainer (or subclass), whose backend NPU924 sets."""
    return any(ctx.resolver.qualified_name(call.func) in TORCH_TRAINERS for call in iter_nodes(ctx.module, cst.Call))


def _npu_workers(call: cst.Call) -> cst.Call:
    use_gpu = keyword(call, "use_gpu")
    per_worker = keyword(call, "resources_per_worker")
    args = [a for a in call.args if a is not use_gpu]
    if per_worker is None:
        return with_args(call, [*args, keyword_arg("resources_per_worker", f'{{"{NPU}": 1}}')])
    mapping = per_worker.value
    if entry(mapping, "GPU") is not None:
        updated = renamed_key(mapping, "GPU", NPU)
    else:
        updated = with_entry(mapping, NPU, cst.Integer("1"))
    return with_args(call, [per_worker.with_changes(value=updated) if a is per_worker else a for a in args])


def _reserves_devices(call: cst.Call) -> bool:
    """Whether a ScalingConfig call reserves GPUs or NPUs (``use_gpu=True``, a ``"GPU"`` or ``"NPU"``
    key in ``resources_per_worker``)."""
    use_gpu = keyword(call, "use_gpu")
    per_worker = keyword(call, "resources_per_worker")
    mapping = literal_dict(per_worker.value) if per_worker is not None else None
    reserved = mapping is not None and (entry(mapping, "GPU") is not None or entry(mapping, NPU) is not None)
    return reserved or (use_gpu is not None and literal(use_gpu.value) is True)


def _file_reserves_devices(ctx) -> bool:
    """Whether some ScalingConfig of the file reserves GPUs or NPUs."""
    return any(
        ctx.resolver.qualified_name(call.func) in SCALING_CONFIGS and _reserves_devices(call)
        for call in iter_nodes(ctx.module, cst.Call)
    )


@register
class TorchBackend(Rule):
    """``TorchTrainer`` without ``torch_config`` and ``TorchConfig`` without ``backend`` next to a
    ScalingConfig that reserves devices."""

    codes = ("NPU924",)
    triggers = (r"TorchTrainer", r"TorchConfig", r"AccelerateTrainer", r"(?:Transformers|HuggingFace|Lightning)Trainer")
    requires = (r"ScalingConfig",)

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.resolver.qualified_name(node.func)
        if qualified not in TORCH_TRAINERS and qualified not in TORCH_CONFIGS:
            return
        if has_double_star(node) or in_npu_branch(self.ctx, node) or not self._on_devices(node, qualified):
            return
        if qualified in TORCH_TRAINERS and keyword(node, "torch_config") is None:
            self.report(
                "NPU924",
                node,
                f'`TorchTrainer` without `torch_config`: {HCCL_NOTE}; pass `TorchConfig(backend="hccl")`',
                lambda updated: with_args(
                    updated, [*updated.args, keyword_arg("torch_config", 'TorchConfig(backend="hccl")')]
                ),
                needs_torch_npu=False,
                imports=[("ray.train.torch", "TorchConfig")],
            )
        elif qualified in TORCH_CONFIGS and not any(
            a.keyword is None or a.keyword.value == "backend" for a in node.args
        ):
            self.report(
                "NPU924",
                node,
                f'`TorchConfig` without `backend`: {HCCL_NOTE}; set `backend="hccl"`',
                lambda updated: with_args(updated, [keyword_arg("backend", expression('"hccl"')), *updated.args]),
                needs_torch_npu=False,
            )

    def _on_devices(self, node: cst.Call, qualified: str) -> bool:
        """Whether the trainer (of a TorchConfig: the trainer it is passed to) reserves devices; a
        scaling config that is not a ScalingConfig call there: whether one of the file does."""
        trainer: cst.CSTNode | None = node
        if qualified in TORCH_CONFIGS:
            parents = TreeIndex.of(self.ctx).parents
            arg = parents.get(node)
            trainer = parents.get(arg) if isinstance(arg, cst.Arg) and arg.keyword is not None else None
            if not isinstance(trainer, cst.Call) or self.resolver.qualified_name(trainer.func) not in TORCH_TRAINERS:
                return self.ctx.file_state(_file_reserves_devices)
        scaling = keyword(trainer, "scaling_config")
        if scaling is None:
            return False  # the default ScalingConfig: one CPU worker
        value = scaling.value
        if isinstance(value, cst.Call) and self.resolver.qualified_name(value.func) in SCALING_CONFIGS:
            return _reserves_devices(value)
        return self.ctx.file_state(_file_reserves_devices)
