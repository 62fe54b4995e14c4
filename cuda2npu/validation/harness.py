"""Running both sides in subprocesses and comparing them (the ``validate`` command's engine)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cuda2npu.validation import forkserver
from cuda2npu.validation.compare import (
    CALIBRATION_MARGIN,
    TensorComparison,
    compare_dropout,
    compare_records,
    detect_precision,
    first_module_divergence,
)
from cuda2npu.validation.failures import CUDA_ONLY_IMPORT, MISSING_DEPENDENCY
from cuda2npu.validation.missing import missing_report, start_file

EXIT_EQUIVALENT, EXIT_MISMATCH, EXIT_ERROR = 0, 1, 2
SIDE_TIMEOUT_S = 600


@dataclass
class ValidationResult:
    status: str  # "equivalent" | "mismatch" | "error" | "skipped" (nothing could be compared)
    entry: str
    precision: str = ""
    rows: list[TensorComparison] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    backends: dict = field(default_factory=dict)
    dropped_keys: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    first_module: str = ""  # the place of the first module of the forward whose outputs differ

    @property
    def exit_code(self) -> int:
        return {"equivalent": EXIT_EQUIVALENT, "mismatch": EXIT_MISMATCH}.get(self.status, EXIT_ERROR)

    @property
    def where(self) -> str:
        """The place to look at first: parameters on the wrong device or an attention call whose
        arguments differ, else the first module of the forward whose outputs differ (or the
        narrowest place the model's tensors out of bounds name), else the optimizer's."""
        failing = {row.group: row.where for row in reversed(self.rows) if not row.ok and row.where}
        for groups in (("device", "attention call"), ("output", "grad"), ("after step", "optimizer probe")):
            places = {failing[group] for group in groups if group in failing}
            if groups[0] == "output" and places and self.first_module:
                return self.first_module
            if places:
                return min(places, key=_span)
        return ""

    def to_json(self) -> dict:
        return {
            "status": self.status,
            "entry": self.entry,
            "precision": self.precision,
            "backends": self.backends,
            "problems": self.problems,
            "dropped_keys": self.dropped_keys,
            "notes": self.notes,
            "where": self.where,
            "tensors": [row.to_json() for row in self.rows],
        }


def _span(place: str) -> int:
    """How many lines ``path:first-last`` covers (1 for ``path:line``)."""
    lines = place.rpartition(":")[2].split("-")
    try:
        return int(lines[-1]) - int(lines[0]) + 1
    except ValueError:
        return 1 << 30


def run_child(
    module: str, role: str, tree: Path, spec: dict, spec_file: Path, error_file: Path, timeout: int
) -> tuple[str, str] | None:
    """Run ``python -m module spec_file`` in ``tree`` for one side (forked from the warm fork server
    where it can be, cuda2npu/validation/forkserver.py); None on success, else (error kind,
    description) from the child's error file, a timeout or its exit status."""
    spec_file.write_text(json.dumps(spec))
    try:
        returncode, stdout, stderr = _child_process(module, tree, spec_file, timeout)
    except (subprocess.TimeoutExpired, forkserver.Timeout):
        return "timeout", f"{role} side: timed out after {timeout} s"
    if error_file.exists():
        error = json.loads(error_file.read_text())
        where = f" (at {error['location']})" if error.get("location") else ""
        return error["error"], f"{role} side: {error['error']}: {error['message']}{where}"
    if returncode != 0:
        tail = (stderr or stdout).strip().splitlines()[-5:]
        return "exit", f"{role} side exited with {returncode}: " + " | ".join(tail)
    return None


def _child_process(module: str, tree: Path, spec_file: Path, timeout: int) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``python -m module spec_file`` in ``tree``."""
    try:
        return forkserver.run(module, tree, spec_file, timeout)
    except forkserver.Unusable:
        proc = subprocess.run(
            [sys.executable, "-m", module, str(spec_file)], cwd=tree, capture_output=True, text=True, timeout=timeout
        )
        return proc.returncode, proc.stdout, proc.stderr


def _run_side(
    role: str,
    tree: Path,
    entry: str,
    exchange: Path,
    seed: int,
    dropout_runs: int,
    autocast: str | None = None,
    autoload: bool = False,
) -> tuple[str, str] | None:
    """Run one side (``autocast``: the original's forward at that precision, recorded apart);
    None on success, else (error kind, description)."""
    record = f"{role}_at_{autocast}" if autocast else role
    spec = {
        "role": role,
        "record": record,
        "tree": str(tree.resolve()),
        "entry": entry,
        "exchange": str(exchange),
        "seed": seed,
        "dropout_runs": dropout_runs,
        "autocast": autocast,
        "autoload": autoload,
    }
    return run_child(
        "cuda2npu.validation.side",
        role,
        tree,
        spec,
        exchange / f"{record}.spec.json",
        exchange / f"{record}.error.json",
        SIDE_TIMEOUT_S,
    )


def validate(
    original: Path,
    migrated: Path,
    entry: str,
    precision: str | None = None,
    seed: int = 0,
    dropout_runs: int = 0,
    autoload: bool = False,
) -> ValidationResult:
    """Run ``entry`` in both trees and compare; never raises for problems of the user's code."""
    import torch

    with tempfile.TemporaryDirectory(prefix="cuda2npu-validate-") as tmp:
        exchange = Path(tmp)
        for role, tree in (("original", original), ("migrated", migrated)):
            error = _run_side(role, tree, entry, exchange, seed, dropout_runs, autoload=autoload)
            if error is not None:
                kind, message = error
                problems, skipped = [message], False
                if kind in (MISSING_DEPENDENCY, CUDA_ONLY_IMPORT):  # every missing package, at once
                    module = entry.partition(":")[0]
                    lines, skipped = missing_report(original, migrated, start_file(original, module), kind)
                    problems += lines
                return ValidationResult("skipped" if skipped else "error", entry, problems=problems)
        left = torch.load(exchange / "original.pt", weights_only=False)
        right = torch.load(exchange / "migrated.pt", weights_only=False)
        used = precision or detect_precision(right["outputs"])
        calibration, notes = _calibration(original, entry, exchange, seed, used)
    used, rows, problems = compare_records(left, right, used, calibration)
    dropout = compare_dropout(left.get("dropout_variance"), right.get("dropout_variance"))
    if dropout:
        problems.append(dropout)
    status = "equivalent" if not problems and all(r.ok for r in rows) else "mismatch"
    backends = {"original": left["backend"], "migrated": right["backend"]}
    result = ValidationResult(status, entry, used, rows, problems, backends, right.get("key_mapping", {}), notes)
    if status == "mismatch":
        result.first_module = first_module_divergence(left, right, used)
    return result


def _calibration(
    original: Path, entry: str, exchange: Path, seed: int, precision: str
) -> tuple[dict | None, list[str]]:
    """The original run again at a lower target precision, and a note saying what it is for."""
    import torch

    if precision == "fp32":
        return None, []
    error = _run_side("original", original, entry, exchange, seed, 0, autocast=precision)
    if error is not None:
        return None, [f"bounds not calibrated (the original at {precision} did not run: {error[1]})"]
    record = torch.load(exchange / f"original_at_{precision}.pt", weights_only=False)
    return record, [
        f"bounds calibrated: each tensor may differ from the original up to {CALIBRATION_MARGIN:g}x as much "
        f"as the original differs from itself when its forward runs under {precision} autocast"
    ]
