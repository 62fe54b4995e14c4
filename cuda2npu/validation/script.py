"""The whole-script A/B (``cuda2npu validate ORIGINAL MIGRATED --run "train.py --steps 2"``).

The command runs in each tree under its backend (:mod:`cuda2npu.validation.trace` records it);
the two traces are compared event by event in the original's order, and the first event whose
tensors differ beyond the bounds is the *first divergence*: step, module path, call index, tensor,
error and bound. Events only one side has (modules the migration replaced by ones with other
children) are listed, not counted as divergences.
"""

from __future__ import annotations

import json
import shlex
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cuda2npu.validation.compare import TOLERANCES
from cuda2npu.validation.harness import run_child
from cuda2npu.validation.side import MISSING_DEPENDENCY

SCRIPT_TIMEOUT_S = 1800
LOW_PRECISION = {"bfloat16": "bf16", "float16": "fp16"}


@dataclass
class Divergence:
    step: int
    kind: str  # forward | loss | grad | param
    module: str
    call: int
    tensor: int
    max_abs: float
    bound: float
    note: str = ""

    def describe(self) -> str:
        where = {
            "forward": f"output of {self.module or '<root>'} (call {self.call})",
            "loss": f"loss {self.call}",
            "grad": f"gradient norm of {self.module}",
            "param": f"{self.module} after the optimizer step",
        }
        text = f"step {self.step}, {where[self.kind]}, tensor {self.tensor}: max abs error {self.max_abs:.3g} > bound {self.bound:.3g}"
        return f"{text} ({self.note})" if self.note else text


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
    backends: dict = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return {"equivalent": 0, "mismatch": 1}.get(self.status, 2)

    def to_json(self) -> dict:
        return {
            "status": self.status,
            "command": self.command,
            "precision": self.precision,
            "steps": self.steps,
            "compared": self.compared,
            "max_abs_error": self.max_abs,
            "backends": self.backends,
            "first_divergence": vars(self.divergences[0]) if self.divergences else None,
            "divergences": [vars(d) for d in self.divergences],
            "only_original": self.only_original,
            "only_migrated": self.only_migrated,
            "problems": self.problems,
        }


def _run(role: str, tree: Path, argv: list[str], steps: int, seed: int, exchange: Path) -> dict | tuple[str, str]:
    """A side's trace, or (error kind, description)."""
    out = exchange / f"{role}.trace.json"
    spec = {"role": role, "tree": str(tree.resolve()), "command": argv, "steps": steps, "seed": seed, "out": str(out)}
    error = run_child(
        "cuda2npu.validation.trace",
        role,
        tree,
        spec,
        exchange / f"{role}.trace-spec.json",
        out.with_suffix(".error.json"),
        SCRIPT_TIMEOUT_S,
    )
    if error is not None:
        return error
    if not out.exists():
        return "exit", f"{role} side wrote no trace"
    return json.loads(out.read_text())


def _key(event: dict) -> tuple:
    return event["step"], event["kind"], event["module"], event["call"]


def detect_precision(events: list[dict]) -> str:
    found = {LOW_PRECISION.get(t["dtype"]) for e in events if e["kind"] == "forward" for t in e["tensors"]}
    return "bf16" if "bf16" in found else "fp16" if "fp16" in found else "fp32"


def _noise_level(grad: dict | None, other: dict | None, precision: str) -> list[bool] | None:
    """Sampled gradient elements that are zero within tolerance or whose two values differ by half
    their size: Adam-type steps there have an arbitrary sign (see compare.py), so the parameters
    after the step are not compared at those elements."""
    if grad is None or other is None or len(grad["sample"]) != len(other["sample"]):
        return None
    _, atol = TOLERANCES[precision]
    tiny = atol * max(1.0, grad["stats"][2])
    return [abs(g) <= tiny or abs(g - h) * 2 >= abs(g) for g, h in zip(grad["sample"], other["sample"])]


def compare_summaries(
    expected: dict, actual: dict, precision: str, noise: list[bool] | None = None
) -> tuple[bool, float, float, str]:
    """(ok, max abs error, bound, note) of two tensor summaries: statistics and samples, or with a
    ``noise`` mask (parameters after a step) the sample elements outside it only."""
    if expected["shape"] != actual["shape"]:
        return False, float("inf"), 0.0, f"shape {actual['shape']} != original {expected['shape']}"
    rtol, atol = TOLERANCES[precision]
    scale = max(1.0, abs(expected["stats"][2]))
    worst, worst_bound = 0.0, atol * scale
    pairs = list(zip(expected["sample"], actual["sample"]))
    if noise is None:
        pairs += list(zip(expected["stats"][1:], actual["stats"][1:]))
    else:
        pairs = [pair for pair, skip in zip(pairs, noise) if not skip]
    ok = True
    for want, got in pairs:
        if want != want or got != got:  # NaN: fine only when both sides have it
            if (want != want) != (got != got):
                ok, worst, worst_bound = False, float("inf"), atol * scale
            continue
        error, bound = abs(got - want), atol * scale + rtol * abs(want)
        ok = ok and error <= bound
        if error > worst:
            worst, worst_bound = error, bound
    return ok, worst, worst_bound, ""


def compare_traces(original: dict, migrated: dict, precision: str | None) -> ScriptResult:
    events = {_key(e): e for e in migrated["events"]}
    original_events = {_key(e): e for e in original["events"]}
    precision = precision or detect_precision(migrated["events"])
    result = ScriptResult("equivalent", "", precision, min(original["steps"], migrated["steps"]))
    seen = set()
    for event in original["events"]:
        other = events.get(_key(event))
        if other is None:
            if event["kind"] == "forward":
                result.only_original.append(event["module"])
            continue
        seen.add(_key(event))
        noise = None
        if event["kind"] == "param":
            grad_key = (event["step"], "grad", event["module"], 0)
            grads = original_events.get(grad_key), events.get(grad_key)
            noise = _noise_level(*(g["tensors"][0] if g else None for g in grads), precision)
        for index, (want, got) in enumerate(zip(event["tensors"], other["tensors"])):
            ok, error, bound, note = compare_summaries(want, got, precision, noise)
            result.compared += 1
            result.max_abs = max(result.max_abs, error)
            if not ok:
                result.divergences.append(
                    Divergence(event["step"], event["kind"], event["module"], event["call"], index, error, bound, note)
                )
    result.only_migrated = sorted({e["module"] for k, e in events.items() if k not in seen and e["kind"] == "forward"})
    result.only_original = sorted(set(result.only_original))
    if result.divergences:
        result.status = "mismatch"
    elif not result.compared:
        result.status, result.problems = "error", ["the two runs recorded nothing in common to compare"]
    for side, trace in (("original", original), ("migrated", migrated)):
        if trace["dropped"]:
            result.problems.append(f"{side}: {trace['dropped']} events past the recording budget were not compared")
    return result


def validate_script(
    original: Path, migrated: Path, command: str, steps: int = 2, precision: str | None = None, seed: int = 0
) -> ScriptResult:
    """Run ``command`` (a script path relative to each tree, then its arguments) in both trees."""
    argv = shlex.split(command)
    traces = {}
    with tempfile.TemporaryDirectory(prefix="cuda2npu-run-") as tmp:
        for role, tree in (("original", original), ("migrated", migrated)):
            trace = _run(role, tree, argv, steps, seed, Path(tmp))
            if isinstance(trace, tuple):
                kind, message = trace
                return ScriptResult("skipped" if kind == MISSING_DEPENDENCY else "error", command, problems=[message])
            traces[role] = trace
    result = compare_traces(traces["original"], traces["migrated"], precision)
    result.command = command
    result.backends = {role: trace["backend"] for role, trace in traces.items()}
    return result
