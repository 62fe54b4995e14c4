"""CPU stand-in for NVIDIA apex (``NVIDIA/apex``): ``amp``, ``optimizers``, ``normalization``,
``parallel``, ``multi_tensor_apply`` (with the ``amp_C`` stand-in it calls).

It behaves like an apex build whose Python APIs are complete: ``fused_layer_norm_cuda`` and the
other CUDA extensions except ``amp_C``'s multi-tensor scale/axpby/l2norm do not exist, and the
public classes re-implement the kernels' math in PyTorch (each module's docstring cites the apex
source and the CUDA kernel it follows). ``apex.contrib``, ``apex.transformer``,
``apex.fp16_utils`` and ``apex.mlp`` are not provided.
"""

from . import amp, multi_tensor_apply, normalization, optimizers, parallel

__all__ = ["amp", "multi_tensor_apply", "normalization", "optimizers", "parallel"]
