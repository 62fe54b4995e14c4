"""The rule families, one subpackage or module each; :func:`enabled_rules` imports them, which
registers every rule.

Rules run in the order of ``FAMILIES`` (the module defining each), then in the order each module
defines them, however the modules happened to be imported. The import waits for the first call, so
that a run answered from the result cache never loads the rules.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuda2npu.core.options import Options
    from cuda2npu.core.rulebase import Rule

FAMILIES = (
    "advisories",
    "custom_kernels.extensions",
    "custom_kernels.imports",
    "custom_kernels.lookups",
    "distributed",
    "gloo_backend",
    "precision",
    "suppression",
    "apex.amp",
    "apex.modules",
    "apex.imports",
    "apex.kernels",
    "apex.optim",
    "attention.flash",
    "attention.probed_names",
    "attention.xformers",
    "attention.xformers_switch",
    "attention.sdpa",
    "colossalai.common",
    "colossalai.keep",
    "colossalai.native",
    "deepspeed.ops",
    "deepspeed.config",
    "deepspeed.accelerate",
    "deepspeed.distributed_type",
    "device.amp_defaults",
    "device.cuda_api",
    "device.fork_rng",
    "device.cudnn_availability",
    "device.cuda_build_tests",
    "device.patch_targets",
    "device.device",
    "device.device_strings",
    "device.device_index",
    "device.env_vars",
    "device.profiler",
    "device.tensor_types",
    "device.default_tensor_type",
    "device.op_registrations",
    "device.build_version",
    "device.torch_six",
    "device.library_devices",
    "device.checkpoint_loads",
    "device.error_messages",
    "ray.resources",
    "ray.train",
    "ray.workers",
    "vllm",
    "lmdeploy",
    "megatron",
    "lightning",
    "transformer_engine.rules",
    "transformers.attention",
    "transformers.training_args",
    "transformers.device_map",
    "transformers.quantization",
)


def enabled_rules(options: Options) -> list[type[Rule]]:
    """Rule classes with at least one enabled code, in the order they run."""
    from cuda2npu.core.rulebase import enabled_in  # libcst: only once rules are wanted

    return enabled_in(list(_all_rules()), options)


@functools.cache
def _all_rules() -> tuple[type[Rule], ...]:
    """Every rule class in the order they run (the families imported, once per process)."""
    from cuda2npu.core.rulebase import REGISTRY

    for family in FAMILIES:
        importlib.import_module(f"{__name__}.{family}")
    order = {f"{__name__}.{family}": index for index, family in enumerate(FAMILIES)}
    return tuple(sorted(REGISTRY, key=lambda cls: order[cls.__module__]))
