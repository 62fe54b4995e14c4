"""``apex.parallel`` stand-in for ONE process: DistributedDataParallel, SyncBatchNorm,
convert_syncbn_model (see :mod:`.distributed` and :mod:`.sync_batchnorm`)."""

from .distributed import DistributedDataParallel
from .sync_batchnorm import SyncBatchNorm, convert_syncbn_model

__all__ = ["DistributedDataParallel", "SyncBatchNorm", "convert_syncbn_model"]
