"""Running both sides in subprocesses and comparing them (the ``validate`` command's engine)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cuda2npu.validation.compare import TensorComparison, compare_dropout, compare_records
from cuda2npu.validation.side import MISSING_DEPENDENCY

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

    @property
    def exit_code(self) -> int:
        return {"equivalent": EXIT_EQUIVALENT, "mismatch": EXIT_MISMATCH}.get(self.status, EXIT_ERROR)

    def to_json(self) -> dict:
        return {
            "status": self.status,
            "entry": self.entry,
            "precision": self.precision,
            "backends": self.backends,
            "problems": self.problems,
            "dropped_keys": self.dropped_keys,
            "tensors": [row.to_json() for row in self.rows],
        }


def _run_side(role: str, tree: Path, entry: str, exchange: Path, seed: int, dropout_runs: int) -> tuple[str, str] | None:
    """Run one side; None on success, else (error kind, description)."""
    spec = {"role": role, "tree": str(tree.resolve()), "entry": entry, "exchange": str(exchange), "seed": seed, "dropout_runs": dropout_runs}
    spec_file = exchange / f"{role}.spec.json"
    spec_file.write_text(json.dumps(spec))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "cuda2npu.validation.side", str(spec_file)],
            cwd=tree, capture_output=True, text=True, timeout=SIDE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return "timeout", f"{role} side: timed out after {SIDE_TIMEOUT_S} s"
    error_file = exchange / f"{role}.error.json"
    if error_file.exists():
        error = json.loads(error_file.read_text())
        return error["error"], f"{role} side: {error['error']}: {error['message']}"
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return "exit", f"{role} side exited with {proc.returncode}: " + " | ".join(tail)
    return None


def validate(original: Path, migrated: Path, entry: str, precision: str | None = None, seed: int = 0, dropout_runs: int = 0) -> ValidationResult:
    """Run ``entry`` in both trees and compare; never raises for problems of the user's code."""
    import torch

    with tempfile.TemporaryDirectory(prefix="cuda2npu-validate-") as tmp:
        exchange = Path(tmp)
        for role, tree in (("original", original), ("migrated", migrated)):
            error = _run_side(role, tree, entry, exchange, seed, dropout_runs)
            if error is not None:
                kind, message = error
                # An optional package the original needs and this machine lacks proves nothing either way.
                status = "skipped" if kind == MISSING_DEPENDENCY else "error"
                return ValidationResult(status, entry, problems=[message])
        left = torch.load(exchange / "original.pt", weights_only=False)
        right = torch.load(exchange / "migrated.pt", weights_only=False)
    used, rows, problems = compare_records(left, right, precision)
    dropout = compare_dropout(left.get("dropout_variance"), right.get("dropout_variance"))
    if dropout:
        problems.append(dropout)
    status = "equivalent" if not problems and all(r.ok for r in rows) else "mismatch"
    backends = {"original": left["backend"], "migrated": right["backend"]}
    return ValidationResult(status, entry, used, rows, problems, backends, right.get("key_mapping", {}))
