"""CPU stand-in for the ``flash_attn`` package (FlashAttention 2 Python API).

Mirrors the exports of ``Dao-AILab/flash-attention`` ``flash_attn/__init__.py``; the
functions live in :mod:`.flash_attn_interface`, whose docstring lists the semantics.
``__version__`` names the flash-attn release whose interface is mirrored (softcap and
``block_table`` arguments, bottom-right causal alignment).
"""

__version__ = "2.6.3"

from .flash_attn_interface import (
    flash_attn_func,
    flash_attn_kvpacked_func,
    flash_attn_qkvpacked_func,
    flash_attn_varlen_func,
    flash_attn_varlen_kvpacked_func,
    flash_attn_varlen_qkvpacked_func,
    flash_attn_with_kvcache,
)

__all__ = [
    "flash_attn_func",
    "flash_attn_kvpacked_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_kvpacked_func",
    "flash_attn_varlen_qkvpacked_func",
    "flash_attn_with_kvcache",
]
