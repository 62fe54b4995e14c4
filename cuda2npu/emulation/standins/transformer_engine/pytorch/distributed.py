"""``transformer_engine.pytorch.checkpoint`` (``NVIDIA/TransformerEngine``
``transformer_engine/pytorch/distributed.py``): activation recomputation.

TE's extra keywords ``distribute_saved_activations``, ``get_rng_state_tracker`` and
``tp_group`` only concern tensor-parallel sharding and CUDA RNG trackers; in one CPU process
the call is ``torch.utils.checkpoint.checkpoint(function, *args, use_reentrant=...)`` with
TE's default ``use_reentrant=True``. Recomputation gives the same values as the original
forward (dropout RNG state is preserved by torch's checkpoint).
"""

from __future__ import annotations

import torch.utils.checkpoint


def checkpoint(
    function,
    *args,
    distribute_saved_activations=False,
    get_rng_state_tracker=None,
    tp_group=None,
    use_reentrant=True,
    **kwargs,
):
    return torch.utils.checkpoint.checkpoint(function, *args, use_reentrant=use_reentrant, **kwargs)
