"""``transformer_engine.common`` stand-in: only the FP8 ``recipe`` configuration classes."""

from . import recipe

__all__ = ["recipe"]
