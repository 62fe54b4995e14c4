"""The whole-script A/B (``cuda2npu validate ORIGINAL MIGRATED --run "train.py --steps 2"``).

The command runs in each tree, each side in its own child process on its strict host
(:mod:`cuda2npu.validation.trace`), first in the ``exact`` mode (float32, dropout off: compared at
float32 bounds, with the probes), then, when either side asked for reduced precision (autocast, a
float16 or bfloat16 module), in the ``policy`` mode (the script's own precision, dropout off:
compared at that precision's bounds, for the dtype each module computes in and for loss scaling).
The migrated run is stopped once it makes more backward passes or model calls than the original's
whole run did, so a migration that lost its optimizer step still ends.

:mod:`cuda2npu.validation.trace_compare` finds the divergences; the first one is what the user sees
first. No run is called equivalent without saying what it compared, how small an error each kind
of record could have shown, and that the canary was flagged.
"""

from __future__ import annotations

import json
import math
import shlex
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from cuda2npu.validation.failures import CUDA_ONLY_IMPORT, MISSING_DEPENDENCY
from cuda2npu.validation.harness import run_child
from cuda2npu.validation.lines import LineMap
from cuda2npu.validation.missing import missing_report
from cuda2npu.validation.trace_compare import LOW_PRECISION, Divergence, TraceComparison, canary

SCRIPT_TIMEOUT_S = 1800
KIND_LABELS = {
    "forward": "module outputs",
    "loss": "losses",
    "grad": "gradients",
    "update": "updates",
    "kernel": "attention calls",
    "probe": "probe outputs",
}


@dataclass
class ScriptResult:
    status: str  # equivalent | mismatch | error | skipped
    command: str
    precision: str = ""
    steps: int = 0
    compared: int = 0
    max_abs: float = 0.0  # the largest error over the compared tensors (statistics and samples)
    divergences: list[Divergence] = field(default_factory=list)
    only_original: list[str] = field(default_factory=list)
    only_migrated: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    backends: dict = field(default_factory=dict)
    modes: list[str] = field(default_factory=list)
    checked: dict = field(default_factory=dict)  # kind -> records compared
    floors: dict = field(default_factory=dict)  # kind -> smallest relative error it could show
    canary: dict = field(default_factory=dict)  # kind -> flagged
    location: str = ""  # the failing line of an error, path:line in its tree
    traceback: str = ""  # the child's traceback (short form; the full one with -v)
    full_traceback: str = ""

    @property
    def exit_code(self) -> int:
        return {"equivalent": 0, "mismatch": 1}.get(self.status, 2)

    def checked_summary(self) -> str:
        """What was compared, per kind, with its detection floor."""
        parts = []
        for kind, label in KIND_LABELS.items():
            if self.checked.get(kind):
                floor = self.floors.get(kind)
                parts.append(f"{self.checked[kind]} {label}" + (f" (>= {floor:.1g} relative)" if floor else ""))
        return ", ".join(parts)

    def to_json(self) -> dict:
        return {
            "status": self.status,
            "command": self.command,
            "precision": self.precision,
            "modes": self.modes,
            "steps": self.steps,
            "compared": self.compared,
            "checked": self.checked,
            "detection_floor": self.floors,
            "canary": self.canary,
            "max_abs_error": self.max_abs,
            "backends": self.backends,
            "first_divergence": vars(self.divergences[0]) if self.divergences else None,
            "divergences": [vars(d) for d in self.divergences],
            "only_original": self.only_original,
            "only_migrated": self.only_migrated,
            "problems": self.problems,
            "notes": self.notes,
            "location": self.location,
            "traceback": self.full_traceback,
        }


class SideFailed(Exception):
    def __init__(self, role: str, error: dict) -> None:
        super().__init__(error.get("message", ""))
        self.role = role
        self.error = error


def _run(role: str, tree: Path, spec: dict, exchange: Path) -> dict:
    """A side's trace; SideFailed with the child's error description otherwise."""
    name = f"{role}-{spec['mode']}"
    out = exchange / f"{name}.trace.json"
    error_file = out.with_suffix(".error.json")
    spec = {**spec, "role": role, "tree": str(tree.resolve()), "out": str(out)}
    failure = run_child(
        "cuda2npu.validation.trace", role, tree, spec, exchange / f"{name}.spec.json", error_file, SCRIPT_TIMEOUT_S
    )
    if failure is not None:
        error = (
            json.loads(error_file.read_text()) if error_file.exists() else {"error": failure[0], "message": failure[1]}
        )
        raise SideFailed(role, error)
    if not out.exists():
        raise SideFailed(role, {"error": "exit", "message": f"{role} side wrote no trace"})
    return json.loads(out.read_text())


def _limits(trace: dict) -> dict | None:
    """How far the migrated run may go: no further than the original's whole run (when it was stopped)."""
    if trace["status"] != "steps reached":
        return None
    return {"backward": trace["totals"].get("backward", 0), "root calls": trace["totals"].get("root calls", 0)}


def _pair(original: Path, migrated: Path, spec: dict, exchange: Path) -> tuple[dict, dict]:
    first = _run("original", original, spec, exchange)
    second = _run("migrated", migrated, {**spec, "limits": _limits(first)}, exchange)
    return first, second


def detect_precision(events: list[dict]) -> str:
    found = {LOW_PRECISION.get(t["dtype"]) for e in events if e["kind"] == "forward" for t in e["tensors"]}
    return "bf16" if "bf16" in found else "fp16" if "fp16" in found else "fp32"


def migration_policy(migrated: Path) -> str:
    """The precision policy the migration used (its report says), else any low precision."""
    try:
        report = json.loads((migrated / "cuda2npu_report.json").read_text())
        return report["options"]["precision"]
    except (OSError, ValueError, KeyError, TypeError):
        return "any"


def _failure_result(command: str, failure: SideFailed, original: Path, migrated: Path, start: str) -> ScriptResult:
    error = failure.error
    location = error.get("location", "")
    message = f"{failure.role} side: {error['error']}: {error['message']}" + (f" (at {location})" if location else "")
    result = ScriptResult(
        "error",
        command,
        problems=[message],
        location=location,
        traceback=error.get("short_traceback", ""),
        full_traceback=error.get("traceback", ""),
    )
    if error.get("module") or error["error"] in (MISSING_DEPENDENCY, CUDA_ONLY_IMPORT):
        lines, skipped = missing_report(original, migrated, start, error["error"])
        result.problems += lines
        result.status = "skipped" if skipped else result.status
    return result


def validate_script(
    original: Path,
    migrated: Path,
    command: str,
    steps: int = 2,
    precision: str | None = None,
    seed: int = 0,
    autoload: bool = False,
) -> ScriptResult:
    """Run ``command`` (a script path relative to each tree, then its arguments) in both trees."""
    argv = shlex.split(command)
    lines = LineMap(original, migrated)
    spec = {"command": argv, "steps": steps, "seed": seed, "autoload": autoload}
    with tempfile.TemporaryDirectory(prefix="cuda2npu-run-") as tmp:
        try:
            exact = _pair(original, migrated, {**spec, "mode": "exact"}, Path(tmp))
            low = exact[0]["low_precision"] or exact[1]["low_precision"]
            policy = _pair(original, migrated, {**spec, "mode": "policy"}, Path(tmp)) if low else None
        except SideFailed as failure:
            return _failure_result(command, failure, original, migrated, argv[0])
    result = ScriptResult(
        "equivalent", command, backends={role: t["backend"] for role, t in zip(("original", "migrated"), exact)}
    )
    _merge(result, exact, detect_precision(exact[1]["events"]), lines)
    if policy is not None:
        used = precision or detect_precision(policy[1]["events"])
        _merge(result, policy, used, lines, migration_policy(migrated), exact)
        result.precision = used
    _conclude(result, exact)
    return result


def _merge(
    result: ScriptResult,
    traces: tuple[dict, dict],
    precision: str,
    lines: LineMap,
    policy: str | None = None,
    exact: tuple[dict, dict] | None = None,
) -> None:
    original, migrated = traces
    mode = "policy" if policy is not None else "exact"
    comparison = TraceComparison(original, migrated, precision, lines, policy, exact).run()
    for divergence in comparison.divergences:
        if mode == "policy":
            divergence.note = "; ".join(filter(None, [divergence.note, f"at the script's precision ({precision})"]))
        result.divergences.append(divergence)
    result.modes.append(f"{mode} ({precision})")
    result.compared += sum(comparison.compared.values())
    result.max_abs = max(result.max_abs, comparison.max_abs)
    result.steps = max(result.steps, min(original["steps"], migrated["steps"]))
    result.only_original = sorted(set(result.only_original) | set(comparison.only_original))
    result.only_migrated = sorted(set(result.only_migrated) | set(comparison.only_migrated))
    result.notes += [note for note in comparison.notes if note not in result.notes]
    if mode == "exact":
        result.checked = dict(comparison.compared)
        result.floors = comparison.floors
        result.canary = canary(original, migrated, precision)
        result.precision = precision
    for side, trace in (("original", original), ("migrated", migrated)):
        if trace["dropped"]:
            result.problems.append(
                f"{side} ({mode}): {trace['dropped']} events past the recording budget were not compared"
            )


def _conclude(result: ScriptResult, exact: tuple[dict, dict]) -> None:
    original, migrated = exact
    if result.divergences:
        result.status = "mismatch"
    elif not result.checked.get("forward"):
        result.status = "error"
        result.problems.append("the two runs recorded no module output in common: nothing was compared")
    if original["steps"] == 0:
        result.notes.append("the original made no optimizer step: gradients and updates were not compared")
    losses = [e for e in original["events"] if e["kind"] == "loss"]
    if losses and not any(math.isfinite(e["tensors"][0]["stats"][0]) for e in losses):
        result.notes.append("every loss of the original is NaN or infinite: nothing could show in the losses")
    missed = sorted(kind for kind, flagged in result.canary.items() if not flagged)
    if missed:
        result.problems.append(f"the canary was not flagged for: {', '.join(missed)} (report this as a bug)")
        result.status = "error" if result.status == "equivalent" else result.status
    counts = Counter(p["kind"] for p in original.get("probes", []) if "tensors" in p)
    if counts:
        result.notes.append(
            "probes: " + ", ".join(f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in sorted(counts.items()))
        )
