"""CPU stand-in for NVIDIA apex (``NVIDIA/apex``): ``amp``, ``optimizers``, ``normalization``,
``parallel``.

It behaves like an apex build whose CUDA extensions are missing but whose Python APIs are
complete: ``amp_C``, ``fused_layer_norm_cuda`` and friends do not exist, and the public
classes re-implement the kernels' math in PyTorch (each module's docstring cites the apex
source and the CUDA kernel it follows). ``apex.contrib``, ``apex.transformer``,
``apex.fp16_utils`` and ``apex.mlp`` are not provided.
"""

from . import amp, normalization, optimizers, parallel

__all__ = ["amp", "normalization", "optimizers", "parallel"]
