"""``apex.parallel.DistributedDataParallel`` for a single process.

``NVIDIA/apex`` ``apex/parallel/distributed.py`` broadcasts parameters from rank 0 when it is
built and all-reduces (averages) gradients after backward. With one process both are
identities, so the stand-in only forwards to the wrapped module, keeping it as ``.module``
(state-dict keys gain the ``module.`` prefix, as with apex and torch DDP). It also accepts an
uninitialised process group, which apex itself does not. A process group with more than one
rank raises NotImplementedError: the bucketed all-reduce is not emulated.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def _world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


class DistributedDataParallel(torch.nn.Module):
    """Single-process apex DDP: ``forward`` calls the wrapped module."""

    def __init__(
        self,
        module,
        message_size=10000000,
        delay_allreduce=False,
        shared_param=None,
        allreduce_trigger_params=None,
        retain_allreduce_buffers=False,
        allreduce_always_fp32=False,
        num_allreduce_streams=1,
        allreduce_communicators=None,
        gradient_average=True,
        gradient_predivide_factor=1.0,
        gradient_average_split_factor=None,
        prof=False,
    ):
        super().__init__()
        if _world_size() > 1:
            raise NotImplementedError("apex.parallel.DistributedDataParallel with more than one process")
        self.module = module

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)
