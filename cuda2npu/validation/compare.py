"""Comparing the two sides' records with dtype-aware tolerances.

A pair passes when ``|a - b| <= atol·max(1, max|b|) + rtol·|b|`` elementwise. Bounds by the
precision the migrated model computes in:

| precision | rtol | atol | why |
|---|---|---|---|
| fp32 | 1e-5 | 1e-6 | same math in float32: only summation order differs |
| bf16 | 2e-2 | 2e-2 | bfloat16 keeps 8 mantissa bits (relative step 2^-8 ≈ 4e-3), errors add up over layers |
| fp16 | 2e-3 | 2e-3 | float16 keeps 11 mantissa bits |

The precision is the lowest floating dtype among the migrated outputs unless given explicitly
(``--precision``): a model that autocasts internally but returns float32 needs it given.

Calibration (bf16/fp16): the original is run once more with its forward under autocast at that
precision, and each tensor's bound is widened to ``CALIBRATION_MARGIN`` times the largest
difference between the original and itself at that precision, where that is larger. A migration
that only changes precision therefore passes however much the model amplifies rounding, and one
that changes the math still fails wherever the math moves more than precision alone does.

The optimizer's probe (a new optimizer like the factory's, three steps over synthetic parameters
and gradients spanning 1e-8 to 1) is compared update by update at float32 bounds relative to each
update's size: one step from the model's weights hides betas and eps.

Parameters after the optimizer step are compared only where the gradient is above the gradient
tolerance and the two sides' gradients agree on sign and size (the difference is under half the
gradient): Adam-type optimizers normalise
the update by the gradient's own magnitude, so a gradient that is zero up to rounding (a key
bias under softmax, say) turns into a full ``lr``-sized step of arbitrary sign on each side.
Those elements say nothing about the migration; the gradients themselves are compared above.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from cuda2npu.validation.summaries import PROBE_TOLERANCE, compare_summaries

TOLERANCES = {"fp32": (1e-5, 1e-6), "bf16": (2e-2, 2e-2), "fp16": (2e-3, 2e-3)}
CALIBRATION_MARGIN = 2.0
DTYPE_PRECISION = {torch.bfloat16: "bf16", torch.float16: "fp16"}


@dataclass
class TensorComparison:
    group: str
    name: str
    shape: tuple
    max_abs: float
    max_rel: float
    ok: bool
    note: str = ""
    where: str = ""  # the place in the migrated tree to look at (path:line or path:first-last)

    def to_json(self) -> dict:
        return {
            "group": self.group,
            "name": self.name,
            "shape": list(self.shape),
            "max_abs_error": self.max_abs,
            "max_rel_error": self.max_rel,
            "ok": self.ok,
            "note": self.note,
            "where": self.where,
        }


def detect_precision(outputs: list[torch.Tensor]) -> str:
    found = {DTYPE_PRECISION.get(t.dtype) for t in outputs} - {None}
    return "bf16" if "bf16" in found else "fp16" if "fp16" in found else "fp32"


def _noise_level(expected: torch.Tensor, actual: torch.Tensor, precision: str) -> torch.Tensor:
    """Gradient elements that are zero within tolerance, or whose two values differ by half their size."""
    if expected.shape != actual.shape:
        return torch.zeros(expected.shape, dtype=torch.bool)
    _, atol = TOLERANCES[precision]
    g = expected.detach().double()
    tiny = g.abs() <= atol * max(1.0, float(g.abs().max()) if g.numel() else 1.0)
    return tiny | ((g - actual.detach().double()).abs() * 2 >= g.abs())


def compare_tensors(
    group: str,
    name: str,
    expected: torch.Tensor,
    actual: torch.Tensor,
    precision: str,
    ignore: torch.Tensor | None = None,
    floor: float = 0.0,
) -> TensorComparison:
    """``floor``: an absolute error every element may have (the calibrated bound)."""
    if expected.shape != actual.shape:
        note = f"shape {tuple(actual.shape)} != original {tuple(expected.shape)}"
        return TensorComparison(group, name, tuple(expected.shape), float("inf"), float("inf"), False, note)
    rtol, atol = TOLERANCES[precision]
    b = expected.detach().double()
    a = actual.detach().double()
    if b.numel() == 0:
        return TensorComparison(group, name, tuple(b.shape), 0.0, 0.0, True)
    diff = (a - b).abs()
    note = f"dtype {expected.dtype} → {actual.dtype}" if expected.dtype != actual.dtype else ""
    if ignore is not None and ignore.shape == diff.shape:
        diff = diff.masked_fill(ignore, 0.0)
        if int(ignore.sum()):
            note = "; ".join(
                filter(None, [note, f"{int(ignore.sum())} element(s) with a noise-level gradient not compared"])
            )
    scale = max(1.0, float(b.abs().max()))
    bound = (atol * scale + rtol * b.abs()).clamp(min=floor)
    if floor > atol * scale:
        note = "; ".join(filter(None, [note, f"bound {floor:.3g} from the original at {precision}"]))
    ok = bool((diff <= bound).all()) and not bool(torch.isnan(a).any() ^ torch.isnan(b).any())
    rel = diff / (b.abs() + atol * scale)
    return TensorComparison(group, name, tuple(b.shape), float(diff.max()), float(rel.max()), ok, note)


def _self_difference(original: torch.Tensor, calibrated, ignore: torch.Tensor | None) -> float:
    """``CALIBRATION_MARGIN`` × max |original − original at the target precision| (0 without one)."""
    if calibrated is None or calibrated.shape != original.shape:
        return 0.0
    diff = (calibrated.detach().double() - original.detach().double()).abs()
    if ignore is not None and ignore.shape == diff.shape:
        diff = diff.masked_fill(ignore, 0.0)
    return CALIBRATION_MARGIN * float(diff.max()) if diff.numel() else 0.0


def compare_records(
    original: dict, migrated: dict, precision: str | None, calibration: dict | None = None
) -> tuple[str, list[TensorComparison], list[str]]:
    """(precision used, per-tensor comparisons, structural problems); ``calibration``: the
    original's record at the target precision."""
    calibration = calibration or {}
    precision = precision or detect_precision(migrated["outputs"])
    rows: list[TensorComparison] = []
    problems: list[str] = []
    if len(original["outputs"]) != len(migrated["outputs"]):
        problems.append(
            f"the original returns {len(original['outputs'])} tensors, the migrated model {len(migrated['outputs'])}"
        )
    calibrated_outputs = calibration.get("outputs", [])
    for index, (e, a) in enumerate(zip(original["outputs"], migrated["outputs"])):
        floor = _self_difference(e, calibrated_outputs[index] if index < len(calibrated_outputs) else None, None)
        rows.append(compare_tensors("output", f"output[{index}]", e, a, precision, floor=floor))
    for group in ("grads", "params_after_step"):
        left, right = original.get(group), migrated.get(group)
        if left is None and right is None:
            continue
        if left is None or right is None:
            problems.append(f"{group}: only one side produced them")
            continue
        if set(left) != set(right):
            missing = sorted(set(left) - set(right))
            extra = sorted(set(right) - set(left))
            problems.append(f"{group}: parameter names differ (missing {missing}, extra {extra})")
        label = "grad" if group == "grads" else "after step"
        for name in sorted(set(left) & set(right)):
            grads = original.get("grads", {}).get(name), migrated.get("grads", {}).get(name)
            ignore = _noise_level(*grads, precision) if group == "params_after_step" and None not in grads else None
            floor = _self_difference(left[name], calibration.get(group, {}).get(name), ignore)
            rows.append(compare_tensors(label, name, left[name], right[name], precision, ignore, floor))
    rows += _probe_rows(original.get("optimizer_probe"), migrated.get("optimizer_probe"), problems)
    rows += _attention_rows(original.get("attention_calls"), migrated.get("attention_calls"), problems)
    rows += _device_rows(original.get("device"), migrated.get("device"))
    places = migrated.get("places", {})
    for row in rows:
        place = places.get(row.group, "")
        row.where = row.where or (place.get(row.name, "") if isinstance(place, dict) else place)
    return precision, rows, problems


def _probe_rows(original: list | None, migrated: list | None, problems: list[str]) -> list[TensorComparison]:
    """The optimizers' probes (three steps over synthetic parameters), update by update."""
    if original is None or migrated is None:
        if (original is None) != (migrated is None):
            problems.append("optimizer probe: only one side's optimizer could be probed")
        return []
    rows = []
    for index, (want, got) in enumerate(zip(original, migrated)):
        ok, error, bound, note = compare_summaries(want, got, PROBE_TOLERANCE, relative=True)
        relative = error / abs(want["stats"][2]) if want["stats"][2] else error
        rows.append(
            TensorComparison("optimizer probe", f"update {index}", tuple(want["shape"]), error, relative, ok, note)
        )
    return rows


def _attention_rows(original: list | None, migrated: list | None, problems: list[str]) -> list[TensorComparison]:
    """The attention calls of a train-mode forward: each one's drop probability and scale, exactly."""
    if original is None or migrated is None:
        return []
    if len(original) != len(migrated):
        problems.append(
            f"attention calls in train mode: the original makes {len(original)}, the migrated model {len(migrated)}"
        )
    rows = []
    for index, (want, got) in enumerate(zip(original, migrated)):
        drop, scale = abs(want["drop"] - got["drop"]), abs(want["scale"] - got["scale"])
        ok = drop <= 1e-6 and scale <= 1e-5 * abs(want["scale"])
        note = (
            ""
            if ok
            else (
                f"{got['op']}: drop probability {got['drop']:.4g} (original {want['drop']:.4g}), "
                f"scale {got['scale']:.4g} (original {want['scale']:.4g})"
            )
        )
        row = TensorComparison("attention call", f"call {index} ({want['op']})", (), max(drop, scale), 0.0, ok, note)
        row.where = got["site"]
        rows.append(row)
    return rows


def first_module_divergence(original: dict, migrated: dict, precision: str) -> str:
    """The place (in the migrated tree) of the first module call, in the forward's order, whose outputs
    differ beyond the bounds: where a change shows first. Empty when none does."""
    calls = {}
    for path, summaries in migrated.get("module_outputs", []):
        calls.setdefault(path, []).append(summaries)
    seen: dict[str, int] = {}
    places = migrated.get("places", {}).get("module", {})
    for path, summaries in original.get("module_outputs", []):
        index = seen[path] = seen.get(path, -1) + 1
        others = calls.get(path, [])
        if index >= len(others):
            continue
        for want, got in zip(summaries, others[index]):
            if not compare_summaries(want, got, TOLERANCES[precision])[0]:
                return places.get(path, "")
    return ""


def _device_rows(original: str | None, migrated: str | None) -> list[TensorComparison]:
    """The device of the models' parameters: where the original's were on CUDA, the migrated ones on the NPU."""
    expected = {"cuda": "npu"}.get(original, original)
    if expected is None or migrated is None:
        return []
    ok = migrated == expected
    note = "" if ok else f"the migrated model's parameters are on {migrated}, the original's on {original}"
    return [TensorComparison("device", "parameters", (), 0.0 if ok else 1.0, 0.0, ok, note)]


def compare_dropout(original: float | None, migrated: float | None, band: float = 1.5) -> str | None:
    """A message when the train-mode output variances differ by more than ``band``× (keep_prob not inverted)."""
    if original is None or migrated is None:
        return None
    if original == 0.0 and migrated == 0.0:
        return None
    low, high = sorted((original, migrated))
    if low == 0.0 or high / low > band:
        return (
            f"train-mode output variance differs: original {original:.4g}, migrated {migrated:.4g} "
            "(dropout probability changed? keep_prob must be 1 - dropout_p)"
        )
    return None
