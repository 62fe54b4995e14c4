"""``transformer_engine.pytorch.attention`` stand-in: DotProductAttention, MultiheadAttention."""

from .dot_product_attention import DotProductAttention
from .multi_head_attention import MultiheadAttention

__all__ = ["DotProductAttention", "MultiheadAttention"]
