"""Comparing two traces of a training script (``validate --run``): what diverges, and where.

A divergence is either a tensor beyond its bound or a record one side has and the other lacks:

* **structure**: a different number of optimizer steps, of ``backward()`` calls, losses,
  attention kernel calls or calls of a module path both sides have, in any step; a different
  number of optimizers;
* **values**: module outputs, losses (unscaled), gradients, updates (what a step added to each
  parameter, bounded relative to the update's own size, so a learning rate of 3e-7 is seen) and
  parameters, in the original's order; an attention kernel's drop probability and softmax scale
  (the dropout itself is off in both runs: the sides draw their masks differently);
* **devices and dtypes**: a module whose parameters the original put on the device but the
  migrated run left on the CPU; in the ``policy`` mode a module the original computed in float16
  or bfloat16 that the migrated run computes in float32, or in another low precision than the
  migration's precision policy; a loss scaler the original has and a float16 migrated run lacks;
* **probes** (:mod:`cuda2npu.validation.probes`): each optimizer's and normalization/attention
  module's probe outputs.

Modules only one side has (TransformerEngine or apex modules the migration replaced by modules
with other children) are listed, not counted. Each divergence names a place in the migrated tree:
the line of the call (losses, kernels), the class of the innermost module of the project's own
(outputs), the optimizer's construction (gradients, updates, probes) or, for something only the
original did, the migrated line where the original's stands (:mod:`cuda2npu.validation.lines`).

What was checked is counted per kind, with the smallest relative error each kind could have shown
(its detection floor); the canary injects ten times that error into one record of each kind and
confirms the comparison flags it.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from cuda2npu.validation.compare import TOLERANCES
from cuda2npu.validation.lines import LineMap
from cuda2npu.validation.summaries import PROBE_TOLERANCE, compare_summaries, summary_values, worst_error

LOW_PRECISION = {"bfloat16": "bf16", "float16": "fp16"}
POLICY_DTYPE = {"bf16": "bfloat16", "fp16": "float16"}
RUN_TOLERANCES = {**TOLERANCES, "fp32": (1e-4, 1e-5)}  # two runs of a script: errors add up over layers and steps
UPDATE_STATISTICS = 1e-2
CALIBRATION_MARGIN = 2.0
DROP_TOLERANCE = 1e-6
SCALE_TOLERANCE = 1e-5
CANARY_FACTOR = 10.0
VALUE_KINDS = ("forward", "loss", "grad", "update")
COUNTED = {  # count name -> (the event kind that carries its sites, what it says)
    "backward": ("loss", "backward() ran"),
    "loss": ("loss", "a scalar loss was backpropagated"),
    "kernel": ("kernel", "an attention kernel ran"),
    "optimizer step": ("step", "the optimizer stepped"),
}


@dataclass
class Divergence:
    step: int
    kind: str  # forward | loss | grad | update | param | kernel | count | steps | device | dtype | scale | probe
    module: str = ""
    call: int = 0
    tensor: int = 0
    max_abs: float = 0.0
    bound: float = 0.0
    note: str = ""
    where: str = ""  # path:line (or path:first-last) in the migrated tree
    what: str = ""  # the sentence, for divergences that are not one tensor's error

    def describe(self) -> str:
        place = f" (at {self.where})" if self.where else ""
        if self.what:
            return f"step {self.step}: {self.what}{place}"
        subject = {
            "forward": f"output of {self.module or '<root>'} (call {self.call})",
            "loss": f"loss {self.call}",
            "grad": f"gradient of {self.module}",
            "update": f"update of {self.module} by the optimizer step",
        }[self.kind]
        text = f"step {self.step}, {subject}, tensor {self.tensor}: max abs error {self.max_abs:.3g} > bound {self.bound:.3g}"
        return text + (f" ({self.note})" if self.note else "") + place


@dataclass
class Comparison:
    divergences: list[Divergence] = field(default_factory=list)
    compared: Counter = field(default_factory=Counter)  # kind -> records compared
    floors: dict = field(default_factory=dict)  # kind -> smallest relative error it could show
    canary: dict = field(default_factory=dict)  # kind -> flagged (bool)
    max_abs: float = 0.0
    only_original: list[str] = field(default_factory=list)
    only_migrated: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def calibration_floors(pairs: list[tuple[dict, dict]]) -> list[float] | None:
    """``CALIBRATION_MARGIN`` x how far each side's value moved from its float32 run: a migration
    that changes only the precision differs from the original no more than the two differ from the
    float32 result they share (the exact mode checked that they share it)."""
    values = [(summary_values(low), summary_values(full)) for low, full in pairs if low["shape"] == full["shape"]]
    if len(values) != len(pairs) or len({len(v) for pair in values for v in pair}) != 1:
        return None
    return [CALIBRATION_MARGIN * sum(abs(low[i] - full[i]) for low, full in values) for i in range(len(values[0][0]))]


def compare_update(
    expected: dict, actual: dict, grad: dict | None, tolerance: tuple[float, float]
) -> tuple[bool, float, float, str]:
    """Two updates of a parameter, bounded relative to the update's own size (so a tiny warm-up
    learning rate still shows), each sampled element allowed the relative error its gradient may
    carry (Adam-type steps divide by the gradient's own size), and not compared where the gradient is
    within its tolerance of zero (there the step's sign is arbitrary). The magnitude statistics
    (mean, max, norm) are bounded at ``UPDATE_STATISTICS`` relative, where no sampled gradient is
    at noise level."""
    if expected["shape"] != actual["shape"]:
        return False, math.inf, 0.0, f"shape {actual['shape']} != original {expected['shape']}"
    rtol, atol = tolerance
    top = abs(expected["stats"][2])
    pairs, bounds, skipped = [], [], 0
    grad_sample = grad["sample"] if grad and grad["shape"] == expected["shape"] else [None] * len(expected["sample"])
    grad_top = max(1.0, abs(grad["stats"][2])) if grad else 1.0
    for want, got, g in zip(expected["sample"], actual["sample"], grad_sample):
        allowance = 0.0
        if g is not None:
            g_error = atol * grad_top + rtol * abs(g)
            if abs(g) <= 2 * g_error:
                skipped += 1
                continue
            allowance = abs(want) * 2 * g_error / abs(g)
        pairs.append((want, got))
        bounds.append(atol * top + rtol * abs(want) + allowance)
    if not skipped:  # elements at noise level move the statistics arbitrarily
        statistics = list(zip(expected["stats"][1:], actual["stats"][1:]))
        pairs += statistics
        bounds += [UPDATE_STATISTICS * abs(want) + atol * top for want, _ in statistics]
    ok, error, bound = worst_error(pairs, bounds)
    return (
        ok,
        error,
        bound,
        f"{skipped} sampled element(s) with a gradient at noise level not compared" if skipped else "",
    )


def _parent(path: str) -> str | None:
    return path.rpartition(".")[0] if "." in path else ("<root>" if path not in ("", "<root>") else None)


def module_place(trace: dict, path: str) -> str:
    """The class of the innermost module of the project's own on ``path``, else where it was built."""
    modules = trace.get("modules", {})
    current = path
    while current is not None:
        info = modules.get(current)
        if info and info.get("defined"):
            return info["defined"]
        current = _parent(current)
    return (modules.get(path) or {}).get("built") or ""


def _optimizer_place(trace: dict, event: dict) -> str:
    optimizers = trace.get("optimizers", [])
    index = event.get("optimizer", 0)
    return optimizers[index]["built"] or "" if index < len(optimizers) else ""


class TraceComparison:
    """One comparison of an original and a migrated trace (see the module docstring)."""

    def __init__(
        self,
        original: dict,
        migrated: dict,
        precision: str,
        lines: LineMap,
        policy: str | None = None,
        exact: tuple[dict, dict] | None = None,
    ) -> None:
        """``policy``: the policy mode, checked against the migration's precision policy (bf16, fp16,
        keep, any); ``exact``: the two traces of the exact mode, which calibrate its bounds."""
        self.original = original
        self.migrated = migrated
        self.precision = precision
        self.lines = lines
        self.policy = policy
        self.exact = [{_key(e): e for e in trace["events"]} for trace in exact] if exact else None
        self.result = Comparison()

    def run(self) -> Comparison:
        if self.policy is None:
            self._steps()
            self._counts()
            self._optimizers()
            self._events()
            self._probes()
        else:  # a float16 original may skip its first steps on overflow: its first forward and loss only
            self._events(steps=1)
            self._fp8_region()
            self._scales()
        self._modules_on_one_side()
        self.result.divergences.sort(key=lambda d: d.step)  # stable: each step's order is kept
        return self.result

    # -- structure ------------------------------------------------------------------------------

    def _diverge(self, divergence: Divergence) -> None:
        self.result.divergences.append(divergence)

    def _original_place(self, place: str | None) -> str:
        return self.lines.migrated_place(place) or ""

    def _sites(self, trace: dict, kind: str, step: int | None = None) -> list[str]:
        return [
            e.get("site") or "" for e in trace["events"] if e["kind"] == kind and (step is None or e["step"] == step)
        ]

    def _missing_place(self, kind: str, step: int | None, want: int, got: int) -> str:
        """Where the first record one side lacks stands: the migrated run's extra one, or the place of
        the original's first unmatched one in the migrated tree."""
        if got > want:
            extra = self._sites(self.migrated, kind, step)[want:]
            return extra[0] if extra else ""
        missing = self._sites(self.original, kind, step)[got:]
        return self._original_place(missing[0]) if missing else ""

    def _steps(self) -> None:
        made, expected = self.migrated["steps"], self.original["steps"]
        if made == expected:
            return
        stopped = self.migrated.get("status")
        self._diverge(
            Divergence(
                min(made, expected),
                "steps",
                what=f"the migrated run made {made} optimizer step(s), the original {expected}"
                + (f" ({stopped})" if stopped not in (None, "steps reached") else ""),
                where=self._missing_place("step", None, expected, made),
            )
        )

    def _counts(self) -> None:
        steps = min(self.original["steps"], self.migrated["steps"])
        last = steps if self.original["steps"] == self.migrated["steps"] else steps - 1
        shared = set(self.original["modules"]) & set(self.migrated["modules"])
        for step in range(last + 1):
            want = self.original["counts"].get(str(step), {})
            got = self.migrated["counts"].get(str(step), {})
            for name, (kind, label) in COUNTED.items():
                if want.get(name, 0) != got.get(name, 0):
                    self._diverge(
                        Divergence(
                            step,
                            "count",
                            what=f"{label} {got.get(name, 0)} time(s) in the migrated run, {want.get(name, 0)} in the original",
                            where=self._missing_place(kind, step, want.get(name, 0), got.get(name, 0)),
                        )
                    )
            for key in sorted(set(want) | set(got)):
                path = key.removeprefix("forward ")
                if key.startswith("forward ") and path in shared and want.get(key, 0) != got.get(key, 0):
                    self._diverge(
                        Divergence(
                            step,
                            "count",
                            module=path,
                            what=f"{path} was called {got.get(key, 0)} time(s), in the original {want.get(key, 0)}",
                            where=module_place(self.migrated, path),
                        )
                    )

    def _optimizers(self) -> None:
        want, got = self.original.get("optimizers", []), self.migrated.get("optimizers", [])
        if len(want) != len(got):
            where = got[-1]["built"] if got else self._original_place(want[-1]["built"] if want else None)
            self._diverge(
                Divergence(
                    0,
                    "count",
                    what=f"the migrated run built {len(got)} optimizer(s), the original {len(want)}",
                    where=where or "",
                )
            )

    # -- values ---------------------------------------------------------------------------------

    def _events(self, steps: int | None = None) -> None:
        migrated = {_key(e): e for e in self.migrated["events"]}
        grads = {_key(e): e for e in self.original["events"] if e["kind"] == "grad"}
        tolerance = RUN_TOLERANCES[self.precision]
        dtype_reported = False
        for event in self.original["events"]:
            other = migrated.get(_key(event))
            if other is None or (steps is not None and event["step"] >= steps):
                continue
            kind = event["kind"]
            if kind == "kernel":
                self._kernel(event, other)
                continue
            if kind not in VALUE_KINDS or (steps is not None and kind not in ("forward", "loss")):
                continue
            if kind == "forward":
                self._device(event, other)
                if not dtype_reported:
                    dtype_reported = self._dtype(event, other)
            grad = grads.get((event["step"], "grad", event["module"], 0)) if kind == "update" else None
            for index, (want, got) in enumerate(zip(event["tensors"], other["tensors"])):
                if kind == "update":
                    ok, error, bound, note = compare_update(want, got, grad["tensors"][0] if grad else None, tolerance)
                else:
                    ok, error, bound, note = compare_summaries(want, got, tolerance, floors=self._floors(event, index))
                self._count(kind, want, bound)
                self.result.max_abs = max(self.result.max_abs, error if error != math.inf else 0.0)
                if not ok:
                    self._diverge(
                        Divergence(
                            event["step"],
                            kind,
                            event["module"],
                            event["call"],
                            index,
                            error,
                            bound,
                            note,
                            self._event_place(other),
                        )
                    )

    def _floors(self, event: dict, index: int) -> list[float] | None:
        if self.exact is None:
            return None
        references = [trace.get(_key(event)) for trace in self.exact]
        if None in references:
            return None
        low = [event, next(e for e in self.migrated["events"] if _key(e) == _key(event))]
        pairs = [(side["tensors"][index], reference["tensors"][index]) for side, reference in zip(low, references)]
        return calibration_floors(pairs)

    def _event_place(self, event: dict) -> str:
        if event["kind"] == "forward":
            return module_place(self.migrated, event["module"])
        if event["kind"] == "loss":
            return event.get("site") or ""
        return _optimizer_place(self.migrated, event)

    def _count(self, kind: str, summary: dict, bound: float) -> None:
        self.result.compared[kind] += 1
        top = abs(summary["stats"][2]) if summary.get("stats") else 0.0
        if top > 0 and bound > 0:
            floor = bound / top
            self.result.floors[kind] = min(self.result.floors.get(kind, math.inf), floor)

    def _kernel(self, want: dict, got: dict) -> None:
        self.result.compared["kernel"] += 1
        problems = []
        if abs(want["drop"] - got["drop"]) > DROP_TOLERANCE:
            problems.append(
                f"drops with probability {got['drop']:.6g}, the original's {want['op']} with {want['drop']:.6g}"
                + (" (keep_prob must be 1 - dropout_p)" if got["op"] == "npu_fusion_attention" else "")
            )
        if abs(want["scale"] - got["scale"]) > SCALE_TOLERANCE * abs(want["scale"]):
            problems.append(f"scales the scores by {got['scale']:.6g}, the original by {want['scale']:.6g}")
        if problems:
            self._diverge(
                Divergence(
                    want["step"],
                    "kernel",
                    call=want["call"],
                    what=f"attention call {want['call']} ({got['op']}) " + " and ".join(problems),
                    where=got.get("site") or "",
                )
            )

    def _device(self, want: dict, got: dict) -> None:
        expected = {"cuda": "npu"}.get(want.get("device"), want.get("device"))
        if expected and got.get("device") and got["device"] != expected:
            self._diverge(
                Divergence(
                    want["step"],
                    "device",
                    want["module"],
                    what=f"{want['module']} has its parameters on {got['device']}, the original put them on {want['device']}",
                    where=(self.migrated["modules"].get(want["module"]) or {}).get("built") or "",
                )
            )

    def _dtype(self, want: dict, got: dict) -> bool:
        """The policy mode: a module with float32 parameters that the original computed in low
        precision (autocast: the precision policy's business), computed otherwise. A model the script
        itself casts (``dtype=torch.float16`` when loading it) is the script's choice, kept as written."""
        if self.policy is None or want.get("parameters") != "float32":
            return False
        for a, b in zip(want["tensors"], got["tensors"]):
            if LOW_PRECISION.get(a["dtype"]) is None:
                continue
            expected = a["dtype"] if self.policy == "keep" else POLICY_DTYPE.get(self.policy)
            wrong = b["dtype"] == "float32" or (expected is not None and b["dtype"] != expected)
            if wrong:
                self._diverge(
                    Divergence(
                        want["step"],
                        "dtype",
                        want["module"],
                        what=f"{want['module']} computes in {b['dtype']}, the original in {a['dtype']}"
                        + (f" (the {self.policy} policy wants {expected})" if expected else " (autocast removed?)"),
                        where=self._autocast_place(),
                    )
                )
                return True
        return False

    def _fp8_region(self) -> None:
        """The policy mode: what the original ran in TransformerEngine FP8 regions (the stand-in computes
        them in float32) must compute in the policy's dtype on the migrated side; per region, not per
        module: under autocast a norm's output stays float32, as it would next to FP8 GEMMs."""
        expected = POLICY_DTYPE.get(self.policy or "")
        migrated = {_key(e): e for e in self.migrated["events"]}
        pairs = [
            (e, migrated[_key(e)])
            for e in self.original["events"]
            if e["kind"] == "forward" and e["step"] == 0 and e.get("fp8") and _key(e) in migrated
        ]
        if expected is None or not pairs:
            return
        dtypes = {t["dtype"] for _, got in pairs for t in got["tensors"]}
        wrong = sorted(dtypes & set(LOW_PRECISION) - {expected})
        if expected not in dtypes or wrong:
            self._diverge(
                Divergence(
                    0,
                    "dtype",
                    pairs[0][0]["module"],
                    what=f"what the original runs in FP8 computes in {', '.join(sorted(dtypes))} in the migrated run "
                    f"(the {self.policy} policy wants {expected}" + (")" if wrong else "; autocast removed?)"),
                    where=self._autocast_place(),
                )
            )

    def _autocast_place(self) -> str:
        """Where the migrated run enters autocast, else where the original does (in the migrated tree)."""
        for trace, place in ((self.migrated, lambda p: p), (self.original, self._original_place)):
            sites = self._sites(trace, "autocast", 0)
            if sites and sites[0]:
                return place(sites[0])
        return ""

    def _scales(self) -> None:
        scaled = [e for e in self.original["events"] if e["kind"] == "scale"]
        if not scaled or any(e["kind"] == "scale" for e in self.migrated["events"]):
            return
        in_fp16 = any(
            t["dtype"] == "float16" for e in self.migrated["events"] if e["kind"] == "forward" for t in e["tensors"]
        )
        if in_fp16 and self.policy is not None:
            self._diverge(
                Divergence(
                    scaled[0]["step"],
                    "scale",
                    what=f"the original scales its loss (x{scaled[0]['value']:g}); the migrated run computes in float16 "
                    "without a loss scaler (gradients underflow)",
                    where=(self._sites(self.migrated, "loss") or [""])[-1],
                )
            )
        elif self.policy is not None:
            self.result.notes.append(
                f"the original scales its loss (x{scaled[0]['value']:g}), the migrated run does not: "
                "not needed outside float16"
            )

    # -- probes ---------------------------------------------------------------------------------

    def _probes(self) -> None:
        migrated = {p["name"]: p for p in self.migrated.get("probes", [])}
        for want in self.original.get("probes", []):
            got = migrated.get(want["name"])
            if got is None:
                continue
            label = f"probe of {want['name']} ({want['class']}; migrated: {got['class']})"
            if "error" in want or "error" in got:
                errors = "; ".join(
                    f"{side}: {p['error']}" for side, p in (("original", want), ("migrated", got)) if "error" in p
                )
                self.result.notes.append(f"{label} not run: {errors}")
                continue
            if want.get("parameters") != got.get("parameters"):
                self.result.notes.append(f"{label} not compared: the parameters differ")
                continue
            worst = None
            for want_tensor, got_tensor in zip(want["tensors"], got["tensors"]):
                ok, error, bound, note = compare_summaries(want_tensor, got_tensor, PROBE_TOLERANCE, relative=True)
                self._count("probe", want_tensor, bound)
                if not ok and (worst is None or error / max(bound, 1e-300) > worst[0] / max(worst[1], 1e-300)):
                    worst = (error, bound, note)
            if len(want["tensors"]) != len(got["tensors"]):
                worst = worst or (math.inf, 0.0, f"{len(got['tensors'])} outputs, the original {len(want['tensors'])}")
            if worst is not None:
                self._diverge(
                    Divergence(
                        self.original["steps"],
                        "probe",
                        want["name"],
                        max_abs=worst[0],
                        bound=worst[1],
                        what=f"{label}: outputs differ, max abs error {worst[0]:.3g} > bound {worst[1]:.3g}"
                        + (f" ({worst[2]})" if worst[2] else ""),
                        where=got.get("where") or "",
                    )
                )

    def _modules_on_one_side(self) -> None:
        def called(trace: dict) -> set[str]:
            return {e["module"] for e in trace["events"] if e["kind"] == "forward"}

        want, got = called(self.original), called(self.migrated)
        self.result.only_original = sorted(p for p in want - got if p not in self.migrated["modules"])
        self.result.only_migrated = sorted(p for p in got - want if p not in self.original["modules"])


def _key(event: dict) -> tuple:
    return event["step"], event["kind"], "" if event["kind"] == "kernel" else event["module"], event["call"]


def canary(original: dict, migrated: dict, precision: str) -> dict[str, bool]:
    """For each kind of record compared, whether an error of ``CANARY_FACTOR`` times its detection
    floor, injected into the largest sampled element of its first record, is flagged."""
    tolerance = RUN_TOLERANCES[precision]
    flagged: dict[str, bool] = {}
    events = {_key(e): e for e in migrated["events"]}
    for event in original["events"]:
        kind = event["kind"]
        other = events.get(_key(event))
        if kind not in VALUE_KINDS or kind in flagged or other is None or not event["tensors"]:
            continue
        want, got = event["tensors"][0], dict(other["tensors"][0])
        if not want["sample"] or not want["stats"][2] or not all(map(math.isfinite, summary_values(want))):
            continue  # nothing shows in an empty, all-zero or non-finite record: try the next one
        compare = (lambda a, b: compare_update(a, b, None, tolerance)) if kind == "update" else None
        compare = compare or (lambda a, b: compare_summaries(a, b, tolerance))
        if not compare(want, got)[0]:
            continue
        position = max(range(len(want["sample"])), key=lambda i: abs(want["sample"][i]))
        rtol, atol = tolerance
        top = abs(want["stats"][2])
        allowed = atol * (top if kind == "update" else max(1.0, top)) + rtol * abs(want["sample"][position])
        got["sample"] = list(got["sample"])
        got["sample"][position] += CANARY_FACTOR * allowed
        flagged[kind] = not compare(want, got)[0]
    return flagged
