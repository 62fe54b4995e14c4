"""Tensors as the validation keeps them: statistics and a fixed sample, small enough for JSON."""

from __future__ import annotations

import torch

SAMPLE = 64


def tensor_summary(tensor: torch.Tensor, sample: int = SAMPLE) -> dict:
    """Statistics (sum, mean |x|, max |x|, norm) and a fixed strided sample, on the CPU in float64."""
    data = tensor.detach().cpu()
    summary = {"shape": list(data.shape), "dtype": str(data.dtype).removeprefix("torch.")}
    values = data.double().reshape(-1) if not data.is_complex() else data.abs().double().reshape(-1)
    if values.numel() == 0:
        return {**summary, "stats": [0.0, 0.0, 0.0, 0.0], "sample": []}
    stride = max(1, values.numel() // sample)
    summary["stats"] = [
        float(values.sum()),
        float(values.abs().mean()),
        float(values.abs().max()),
        float(values.norm()),
    ]
    summary["sample"] = values[::stride][:sample].tolist()
    return summary


def output_tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, dict):
        return [t for key in sorted(value, key=str) for t in output_tensors(value[key])]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in output_tensors(item)]
    return []
