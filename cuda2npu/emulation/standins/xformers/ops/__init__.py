"""CPU stand-in for ``xformers.ops``: the exports of ``facebookresearch/xformers``
``xformers/ops/__init__.py`` (v0.0.35) that concern ``memory_efficient_attention``."""

from . import fmha
from .fmha import AttentionBias, LowerTriangularMask, memory_efficient_attention

__all__ = ["AttentionBias", "LowerTriangularMask", "fmha", "memory_efficient_attention"]
