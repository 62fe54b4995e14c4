"""DeepSpeed configurations under the BF16 precision policy, as plain data (no libcst): the Python
rule (NPU913, cuda2npu/families/deepspeed.py) and the JSON config file kind call the same functions.

A value the caller cannot read (an expression in Python code) is any object that is not a bool,
number, string, list or dict: it is carried over unchanged and never interpreted. The facts, with
their DeepSpeed sources, are in docs/reference/deepspeed.md §4.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

FP16 = "fp16"
BF16_NAMES = ("bf16", "bfloat16")  # "bfloat16": DeepSpeed's old spelling, still read
AUTO = "auto"  # HF Trainer / accelerate fill it in from their own precision flags
# the fp16 block's loss-scaling keys: meaningless in a bf16 run (deepspeed/runtime/precision_config.py)
LOSS_SCALING_KEYS = {
    "enabled",
    "loss_scale",
    "initial_scale_power",
    "loss_scale_window",
    "hysteresis",
    "consecutive_hysteresis",
    "min_loss_scale",
}
FP16_DTYPE_NAMES = {"fp16", "float16", "half", "torch.float16", "torch.half"}
# optimizer "type" → why the NPU cannot run it (DeepSpeed's engine builds it from a CUDA-only op)
OPTIMIZERS_WITHOUT_NPU_BUILD = {
    "lamb": "DeepSpeed builds FusedLamb for it, whose FusedLambBuilder has no NPU build (load() raises ValueError)",
}


@dataclass(frozen=True)
class Bf16Result:
    """What :func:`fp16_to_bf16` did: ``config`` is the new configuration (None: keep the old one),
    ``changes`` one line per change, ``problem`` why a person must choose instead (no rewrite then)."""

    config: dict | None = None
    changes: tuple[str, ...] = ()
    problem: str | None = None


def _is_data(value: object) -> bool:
    return value is None or isinstance(value, (bool, int, float, str, list, dict))


def fp16_to_bf16(config: Mapping[str, object]) -> Bf16Result:
    """The configuration with bf16 enabled instead of its enabled ``"fp16"`` block.

    An existing disabled ``"bf16"`` block is enabled and fp16 disabled; otherwise the fp16 block
    becomes ``"bf16": {"enabled": true}`` in its place: its loss-scaling keys go (BF16 needs no loss
    scaling, and DeepSpeed's bf16 block rejects unknown keys). Left as is: no fp16 block,
    ``"enabled": false`` or ``"auto"``. A problem instead of a rewrite: fp16 switched by an
    expression with no bf16 block to switch, another fp16 option set (``auto_cast``), another
    float16 setting in the config (``"communication_data_type": "fp16"``), or a bf16 block that is
    not plainly disabled (both enabled is an error in DeepSpeed).
    """
    block = config.get(FP16)
    if block is None or (not isinstance(block, Mapping) and _is_data(block)):
        return Bf16Result()  # no DeepSpeed fp16 block
    bf16_key = next((name for name in BF16_NAMES if name in config), None)
    enabled = block.get("enabled", False) if isinstance(block, Mapping) else block
    if enabled is False or enabled == AUTO:
        return Bf16Result()
    if enabled is not True:  # an expression (`args.fp16`)
        if bf16_key is not None:
            return Bf16Result()  # chosen at run time, and a bf16 block is there to choose
        return Bf16Result(problem='fp16 is switched by an expression and the config has no "bf16" block to enable')
    others = [key for key, value in block.items() if key not in LOSS_SCALING_KEYS and value not in (False, None)]
    if others:
        return Bf16Result(problem=f"the fp16 block also sets {', '.join(others)}, which the bf16 block does not take")
    elsewhere = _fp16_settings(config, skip=FP16)
    if elsewhere:
        return Bf16Result(problem=f"the config also asks for float16 at {', '.join(elsewhere)}")
    if bf16_key is None:
        new = {("bf16" if key == FP16 else key): ({"enabled": True} if key == FP16 else v) for key, v in config.items()}
        dropped = [key for key in block if key != "enabled"]
        changes = ['"fp16" block → "bf16": {"enabled": true} (--precision bf16)']
        if dropped:
            changes.append(f"dropped {', '.join(dropped)}: BF16 needs no loss scaling (the bf16 block rejects them)")
        return Bf16Result(new, tuple(changes))
    bf16_block = config[bf16_key]
    if not isinstance(bf16_block, Mapping) or bf16_block.get("enabled", False) is not False:
        return Bf16Result(problem=f'the "{bf16_key}" block is there but not `"enabled": false`')
    new = {**config, FP16: {**block, "enabled": False}, bf16_key: {**bf16_block, "enabled": True}}
    return Bf16Result(new, (f'"fp16" disabled, "{bf16_key}" enabled (--precision bf16)',))


def _fp16_settings(value: object, skip: str | None = None, path: str = "") -> list[str]:
    """Where a configuration names float16 as a string value (``data_types.grad_accum_dtype``)."""
    if isinstance(value, str):
        return [path] if value.lower() in FP16_DTYPE_NAMES else []
    if isinstance(value, Mapping):
        return [
            found
            for key, item in value.items()
            if key != skip
            for found in _fp16_settings(item, path=f"{path}.{key}" if path else str(key))
        ]
    if isinstance(value, list):
        return [found for index, item in enumerate(value) for found in _fp16_settings(item, path=f"{path}[{index}]")]
    return []


def optimizer_problem(config: Mapping[str, object]) -> str | None:
    """Why the config's ``"optimizer": {"type": ...}`` cannot run on the NPU, or None."""
    optimizer = config.get("optimizer")
    kind = optimizer.get("type") if isinstance(optimizer, Mapping) else None
    if not isinstance(kind, str) or kind.lower() not in OPTIMIZERS_WITHOUT_NPU_BUILD:
        return None
    return f'optimizer "{kind}": {OPTIMIZERS_WITHOUT_NPU_BUILD[kind.lower()]}'
