"""FP8 recipe configuration (``NVIDIA/TransformerEngine`` ``transformer_engine/common/recipe/__init__.py``).

These are configuration holders with TE's field names and defaults. The stand-in never
quantizes to FP8, so a recipe passed to ``fp8_autocast``/``autocast`` changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable, NamedTuple, Optional, Union


class _FormatHelper(NamedTuple):
    max_fwd: float
    max_bwd: float


class Format(Enum):
    """FP8/FP4 formats: E2M1, E4M3, E5M2, HYBRID (E4M3 forward, E5M2 backward)."""

    E2M1 = _FormatHelper(max_fwd=6, max_bwd=6)
    E4M3 = _FormatHelper(max_fwd=448, max_bwd=448)
    E5M2 = _FormatHelper(max_fwd=57344, max_bwd=57344)
    HYBRID = _FormatHelper(max_fwd=448, max_bwd=57344)


class Recipe:
    """Base recipe class with TE's type predicates."""

    @classmethod
    def delayed(cls):
        return issubclass(cls, DelayedScaling)

    @classmethod
    def float8_current_scaling(cls):
        return issubclass(cls, Float8CurrentScaling)

    @classmethod
    def mxfp8(cls):
        return issubclass(cls, MXFP8BlockScaling)

    @classmethod
    def float8_per_tensor_scaling(cls):
        return issubclass(cls, (DelayedScaling, Float8CurrentScaling))


def _check_format(fp8_format: Format) -> None:
    if fp8_format == Format.E5M2:
        raise AssertionError("Pure E5M2 training is not supported.")


@dataclass
class DelayedScaling(Recipe):
    """Delayed (amax-history) scaling recipe."""

    margin: int = 0
    fp8_format: Format = Format.HYBRID
    amax_history_len: int = 1024
    amax_compute_algo: Union[str, Callable] = "max"
    scaling_factor_compute_algo: Optional[Callable] = None
    reduce_amax: bool = True
    fp8_dpa: bool = False
    fp8_mha: bool = False

    def __post_init__(self) -> None:
        _check_format(self.fp8_format)


@dataclass
class Float8CurrentScaling(Recipe):
    """Per-tensor current scaling recipe."""

    fp8_format: Format = Format.HYBRID
    fp8_dpa: bool = False
    fp8_mha: bool = False

    def __post_init__(self) -> None:
        _check_format(self.fp8_format)


@dataclass
class MXFP8BlockScaling(Recipe):
    """MXFP8 block scaling recipe (blocks of 32 values share an E8M0 scale)."""

    margin: int = 0
    fp8_format: Format = Format.E4M3
    fp8_dpa: bool = False
    fp8_mha: bool = False

    def __post_init__(self) -> None:
        _check_format(self.fp8_format)
