"""``transformer_engine.pytorch`` stand-in: TE's PyTorch layers in high precision on the CPU.

Each class keeps TE's constructor arguments, parameter names and state-dict keys (including
``_extra_state``, see :mod:`.module.base`), and computes TE's non-FP8 math in float32 with
rounding to the activation dtype where TE materialises tensors. What is not emulated raises
NotImplementedError naming the feature; see each module's docstring.
"""

from .attention import DotProductAttention, MultiheadAttention
from .distributed import checkpoint
from .fp8 import autocast, fp8_autocast, fp8_model_init
from .module import LayerNorm, LayerNormLinear, LayerNormMLP, Linear, RMSNorm
from .transformer import TransformerLayer

__all__ = [
    "DotProductAttention",
    "LayerNorm",
    "LayerNormLinear",
    "LayerNormMLP",
    "Linear",
    "MultiheadAttention",
    "RMSNorm",
    "TransformerLayer",
    "autocast",
    "checkpoint",
    "fp8_autocast",
    "fp8_model_init",
]
