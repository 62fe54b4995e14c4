"""Record what cuda2npu outputs on the corpus, to prove an engine change leaves outputs byte-identical.

    python benchmarks/record_outputs.py /tmp/before                  # with the current checkout
    # ... change the engine ...
    python benchmarks/record_outputs.py /tmp/after
    diff -r /tmp/before /tmp/after && echo identical

For each pinned project (``benchmarks/corpus.py``): ``migrate --diff --report`` (the diff and the
JSON report, with the run's timing fields removed) and ``check --format json``, all without the
result cache, through the real CLI of the checkout this script belongs to. Prints seconds per step.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import CORPUS_DIR, fetch, selected  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VOLATILE = ("seconds", "duration", "elapsed", "started", "generated_at", "timestamp")


def _cli(*args: str) -> subprocess.CompletedProcess:
    """The CLI of this checkout, run in the corpus directory (so that paths in outputs are relative)."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA2NPU_NO_CACHE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "cuda2npu", *args], capture_output=True, env=environment, cwd=CORPUS_DIR
    )


def _stable(value):
    """The report without fields that change from run to run."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if not any(word in k for word in VOLATILE)}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def record(project: Path, out: Path, jobs: str) -> list[float]:
    times = []
    report = (out / f"{project.name}.report.json").resolve()
    start = time.perf_counter()
    done = _cli("migrate", str(project), "--diff", "--report", str(report), "--jobs", jobs, "--isolated")
    times.append(time.perf_counter() - start)
    (out / f"{project.name}.diff").write_bytes(done.stdout)
    if report.exists():
        report.write_text(json.dumps(_stable(json.loads(report.read_text())), indent=1, sort_keys=True))
    start = time.perf_counter()
    done = _cli("check", str(project), "--format", "json", "--exit-zero", "--jobs", jobs, "--isolated")
    times.append(time.perf_counter() - start)
    (out / f"{project.name}.check.json").write_bytes(done.stdout)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("projects", nargs="*", help="names from benchmarks/corpus.py (default: all)")
    parser.add_argument("--jobs", default="2")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for project in selected(args.projects):
        fetch(project)
        migrate_s, check_s = record(Path(project.directory.name), args.out.resolve(), args.jobs)
        print(f"{project.directory.name:28} migrate {migrate_s:7.1f}s  check {check_s:7.1f}s", flush=True)


if __name__ == "__main__":
    main()
