"""``apex.optimizers`` stand-in: the fused optimizers' update rules, computed in float32.

See each module for the apex source and CUDA kernel followed. ``FusedAdagrad`` and
``FP16_Optimizer`` are not provided.
"""

from .fused_adam import FusedAdam
from .fused_lamb import FusedLAMB
from .fused_mixed_precision_lamb import FusedMixedPrecisionLamb
from .fused_novograd import FusedNovoGrad
from .fused_sgd import FusedSGD

__all__ = ["FusedAdam", "FusedLAMB", "FusedMixedPrecisionLamb", "FusedNovoGrad", "FusedSGD"]
