"""Tensors as the validation keeps them (statistics and a fixed sample, small enough for JSON), and
two of them compared."""

from __future__ import annotations

import math

import torch

SAMPLE = 64
PROBE_TOLERANCE = (1e-4, 1e-5)  # rtol, atol relative to the tensor's largest element


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


def worst_error(pairs, bounds) -> tuple[bool, float, float]:
    """(ok, error, bound): the worst violation when there is one, else the largest error and its bound."""
    worst, violation = (0.0, 0.0, 0.0), None
    for (want, got), bound in zip(pairs, bounds):
        if want != want or got != got:  # NaN: fine only when both sides have it
            if (want != want) != (got != got):
                return False, math.inf, bound
            continue
        error = abs(got - want)
        ratio = error / bound if bound else (math.inf if error else 0.0)
        if error > bound and (violation is None or ratio > violation[2]):
            violation = (error, bound, ratio)
        if error > worst[0] or not worst[1]:
            worst = (error, bound, ratio)
    error, bound, _ = violation or worst
    return violation is None, error, bound


def summary_values(summary: dict) -> list[float]:
    return [*summary["sample"], *summary["stats"]]


def compare_summaries(
    expected: dict,
    actual: dict,
    tolerance: tuple[float, float],
    relative: bool = False,
    floors: list[float] | None = None,
) -> tuple[bool, float, float, str]:
    """(ok, error, bound, note) of two tensor summaries, statistics and samples, each value within
    ``atol * max(1, max |x|) + rtol * |x|``; ``relative``: ``atol * max |x|`` (probes); ``floors``:
    a smallest bound per value (the calibration)."""
    if expected["shape"] != actual["shape"]:
        return False, math.inf, 0.0, f"shape {actual['shape']} != original {expected['shape']}"
    rtol, atol = tolerance
    top = abs(expected["stats"][2])
    scale = top if relative else max(1.0, top)
    pairs = list(zip(summary_values(expected), summary_values(actual)))
    bounds = [atol * scale + rtol * abs(want) for want, _ in pairs]
    note = ""
    if floors is not None and len(floors) == len(bounds):
        widened = [max(bound, floor) for bound, floor in zip(bounds, floors)]
        note = "bound calibrated" if widened != bounds else ""
        bounds = widened
    ok, error, bound = worst_error(pairs, bounds)
    return ok, error, bound, note
