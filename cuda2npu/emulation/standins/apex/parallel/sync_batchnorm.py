"""``apex.parallel.SyncBatchNorm`` / ``convert_syncbn_model`` for a single process.

With one process, synchronised batch norm is batch norm: the statistics of the local batch
are the global ones. The stand-in therefore runs ``torch.nn.functional.batch_norm`` through
``torch.nn.modules.batchnorm._BatchNorm`` (same running-stat update and ``momentum=None``
cumulative average as apex's Welford kernels). It follows the optimized variant's interface
(``NVIDIA/apex`` ``apex/parallel/optimized_sync_batchnorm.py``): ``channel_last=True`` takes
channels in the last dimension, and ``forward(input, z=None)`` computes
``relu(bn(input) + z)`` when ``fuse_relu`` (``+ z`` whenever ``z`` is given). More than one
process raises NotImplementedError.

``convert_syncbn_model`` mirrors ``apex/parallel/__init__.py``: every ``_BatchNorm`` is
replaced by a ``SyncBatchNorm`` sharing its running-stat buffers and copying its affine
parameters (``num_batches_tracked`` is not carried over, as in apex); instance norms are left
alone. The state-dict keys are those of the replaced batch norms.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.instancenorm import _InstanceNorm

from .distributed import _world_size


class SyncBatchNorm(_BatchNorm):
    """Single-process apex SyncBatchNorm (see module docstring)."""

    def __init__(
        self,
        num_features,
        eps=1e-5,
        momentum=0.1,
        affine=True,
        track_running_stats=True,
        process_group=None,
        channel_last=False,
        fuse_relu=False,
    ):
        super().__init__(
            num_features, eps=eps, momentum=momentum, affine=affine, track_running_stats=track_running_stats
        )
        self.process_group = process_group
        self.channel_last = channel_last
        self.fuse_relu = fuse_relu

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input, z=None):
        if _world_size() > 1:
            raise NotImplementedError("apex.parallel.SyncBatchNorm with more than one process")
        if self.channel_last:
            out = super().forward(input.movedim(-1, 1)).movedim(1, -1)
        else:
            out = super().forward(input)
        if z is not None:
            out = out + z
        return F.relu(out) if self.fuse_relu else out


def convert_syncbn_model(module, process_group=None, channel_last=False):
    """Recursively replace ``_BatchNorm`` modules by :class:`SyncBatchNorm`."""
    mod = module
    if isinstance(module, _InstanceNorm):
        return module
    if isinstance(module, _BatchNorm):
        mod = SyncBatchNorm(
            module.num_features,
            module.eps,
            module.momentum,
            module.affine,
            module.track_running_stats,
            process_group,
            channel_last=channel_last,
        )
        mod.running_mean = module.running_mean
        mod.running_var = module.running_var
        if module.affine:
            mod.weight.data = module.weight.data.clone().detach()
            mod.bias.data = module.bias.data.clone().detach()
    for name, child in module.named_children():
        mod.add_module(name, convert_syncbn_model(child, process_group=process_group, channel_last=channel_last))
    return mod
