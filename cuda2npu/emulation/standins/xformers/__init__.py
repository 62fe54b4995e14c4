"""CPU stand-in for the ``xformers`` package: ``xformers.ops.memory_efficient_attention`` and the
causal ``attn_bias`` classes (docs/reference/xformers.md). Nothing else of xFormers is emulated."""

__version__ = "0.0.35"
