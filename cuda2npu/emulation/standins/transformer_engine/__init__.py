"""CPU stand-in for NVIDIA Transformer Engine (``NVIDIA/TransformerEngine``), PyTorch API.

``transformer_engine.pytorch`` re-implements the high-precision (non-FP8) math of TE's
modules in plain PyTorch with TE's parameter names and state-dict keys; FP8 contexts are
accepted and run in high precision. ``__version__`` names the TE release line whose API
(TE 2.x: ``te.autocast``, op-based ``LayerNorm``/``RMSNorm``) is mirrored.
"""

__version__ = "2.8.0"

from . import common, pytorch

__all__ = ["common", "pytorch"]
