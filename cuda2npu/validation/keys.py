"""Mapping an original state dict onto the migrated model's keys.

Keys that exist on both sides load as they are. TransformerEngine modules store an
``_extra_state`` entry (FP8 metadata) that plain PyTorch modules do not have: such entries are
dropped when the migrated model has no slot for them. Anything else that differs is an error the
harness reports (parameter names must match so checkpoints keep loading).
"""

from __future__ import annotations

EXTRA_STATE_SUFFIX = "_extra_state"


def map_state_dict(original: dict, target: dict) -> tuple[dict, dict]:
    """(state dict for ``target``'s keys, {original key: reason} for keys that were dropped)."""
    mapped, dropped = {}, {}
    for key, value in original.items():
        if key in target:
            mapped[key] = value
        elif key.endswith(EXTRA_STATE_SUFFIX):
            dropped[key] = "TransformerEngine FP8 metadata; no counterpart after migration"
        else:
            mapped[key] = value  # load_state_dict(strict=True) names it as unexpected
    return mapped, dropped
