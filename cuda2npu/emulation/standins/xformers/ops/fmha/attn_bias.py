"""CPU stand-in for the causal classes of ``xformers.ops.fmha.attn_bias`` (``facebookresearch/xformers``
``xformers/ops/fmha/attn_bias.py``, v0.0.35): ``materialize`` gives the same additive tensors
(``log`` of a 0/1 lower-triangular matrix, shifted by ``Mkv - Mq`` from the bottom right)."""

from __future__ import annotations

from typing import Tuple, Union

import torch

__all__ = [
    "AttentionBias",
    "LowerTriangularFromBottomRightMask",
    "LowerTriangularMask",
    "LowerTriangularMaskWithTensorBias",
]


class AttentionBias:
    """Base class of xFormers' structured biases."""

    def materialize(self, shape, dtype=torch.float32, device="cpu") -> torch.Tensor:
        raise NotImplementedError()


def _materialize_causal_mask(shape, dtype, device, from_bottomright: bool) -> torch.Tensor:
    create_as = dtype if dtype is not torch.bfloat16 else torch.float32
    tensor = torch.full(shape, dtype=create_as, fill_value=1, device=device)
    num_queries, num_keys = shape[-2:]
    shift = num_keys - num_queries if from_bottomright else 0
    return torch.log(torch.tril(tensor, diagonal=shift)).to(dtype)


class LowerTriangularMask(AttentionBias):
    """Causal from the top-left corner: query i sees keys j <= i."""

    def __init__(self, device: Union[torch.device, None] = None) -> None:
        """``device`` is unused (backward compatibility, as in xFormers)."""

    def to(self, device) -> "LowerTriangularMask":
        return self

    def materialize(self, shape: Tuple[int, ...], dtype=torch.float32, device="cpu") -> torch.Tensor:
        return _materialize_causal_mask(shape, dtype, device, from_bottomright=False)

    def add_bias(self, bias: torch.Tensor) -> "LowerTriangularMaskWithTensorBias":
        return LowerTriangularMaskWithTensorBias(bias)


class LowerTriangularFromBottomRightMask(AttentionBias):
    """Causal from the bottom-right corner: query i sees keys j <= i + Mkv - Mq."""

    def to(self, device) -> "LowerTriangularFromBottomRightMask":
        return self

    def materialize(self, shape: Tuple[int, ...], dtype=torch.float32, device="cpu") -> torch.Tensor:
        return _materialize_causal_mask(shape, dtype, device, from_bottomright=True)


class LowerTriangularMaskWithTensorBias(LowerTriangularMask):
    """Top-left causal plus an additive tensor."""

    def __init__(self, bias: torch.Tensor) -> None:
        self._bias = bias

    def to(self, device) -> "LowerTriangularMaskWithTensorBias":
        return LowerTriangularMaskWithTensorBias(self._bias.to(device))

    def materialize(self, shape: Tuple[int, ...], dtype=torch.float32, device="cpu") -> torch.Tensor:
        return super().materialize(shape, dtype=dtype, device=device) + self._bias
