"""Benchmark ``cuda2npu check`` on the corpus and print files/s, MB/s and the issue's ratios.

    python benchmarks/corpus.py                       # once
    python benchmarks/bench_check.py                  # every project in the corpus
    python benchmarks/bench_check.py timm flash-attn --peers /tmp/peers/bin

Every number comes from one run of this script, side by side, through the real CLI (interpreter
start-up included, as users see it). cuda2npu's bytecode is compiled first, as ``pip install``
does: an editable install under ``PYTHONDONTWRITEBYTECODE`` would otherwise compile every module
on every run (0.15 s of start-up), which no installed user pays.

* floor: read every file + prefilter (the triggers, and each rule's ``requires``) + parse the
  matching files (decode check, nesting guard and ``libcst.parse_module``: what any libcst tool
  must pay), one process;
* cold ``check --jobs 1 --no-cache`` and ``--jobs 2 --no-cache``;
* warm ``check --jobs 1`` on an unchanged tree (the pre-commit case; a first run fills the cache);
* with ``--peers DIR`` holding ``ruff`` and ``torchfix`` (``pip install ruff torchfix`` into a
  separate virtualenv): ruff cold (``--no-cache``) and warm, and TorchFix on a sample of files
  (it is slow), compared per file with cuda2npu on the same sample: each tool's time on the
  sample less its start-up (its time on one trivial file, which loads its rules and libcst), so
  that the sample's size does not decide the ratio; the whole runs' ratio is printed too. Each of
  these four timings is the best of ``--repeat`` runs (3).
* a generated 5 MB file with one ``.cuda()`` (``--large MB``; ``--large-only``: that row alone):
  seconds and peak resident memory of ``check --jobs 1 --no-cache`` on it, against issue 30's
  target of 15 s and 1 GB (a file above 1 MB goes statement by statement: docs/performance.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import fetch, selected  # noqa: E402

PACKAGE = Path(__file__).resolve().parent.parent / "cuda2npu"

FLOOR = r"""
import sys
from pathlib import Path
from cuda2npu.project.discovery import discover
from cuda2npu.core.source import SourceError, parse
from cuda2npu.core.options import Options
from cuda2npu.core.prefilter import skip_reason
from cuda2npu.families import enabled_rules
from cuda2npu.filekinds.python import triggered
from cuda2npu.project.runner import _pattern
options = Options(fix=False)
pattern, rules = _pattern(options), enabled_rules(options)
parsed = 0
for path in discover([Path(p) for p in sys.argv[1:]]).files:
    data = path.read_bytes()
    if skip_reason(data) is None and pattern.search(data) and triggered(rules, data, options):
        parsed += 1
        try:
            parse(data)
        except SourceError:
            pass
print(parsed)
"""


@dataclass
class Row:
    name: str
    files: int
    megabytes: float
    seconds: float

    def line(self) -> str:
        return (
            f"| {self.name} | {self.files} | {self.megabytes:.1f} | {self.seconds:.2f} | "
            f"{self.files / self.seconds:.0f} | {self.megabytes / self.seconds:.2f} |"
        )


def timed(
    command: list[str], env: dict | None = None, cwd: Path | None = None
) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **(env or {})}, cwd=cwd)
    elapsed = time.perf_counter() - start
    if result.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command[:4])}... exited {result.returncode}:\n{result.stderr[-2000:]}")
    return elapsed, result


def best_of(repeat: int, command: list[str]) -> float:
    """The shortest of ``repeat`` timed runs (as ``timeit`` reports): the per-file ratio subtracts
    two start-ups from two runs, so one run's noise on this shared machine moved it by ±1."""
    return min(timed(command)[0] for _ in range(repeat))


def check(paths: list[str], jobs: int, cache: bool) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "cuda2npu",
        "check",
        "--format",
        "concise",
        "--output-file",
        os.devnull,
        "--jobs",
        str(jobs),
    ]
    return command + ([] if cache else ["--no-cache"]) + paths


def generated_large_file(megabytes: float) -> str:
    """A module of about ``megabytes`` MB: helper functions and tables, one ``.cuda()`` call."""
    parts = ['"""A generated module."""\n\nimport torch\n\n\n']
    size, index = len(parts[0]), 0
    while size < megabytes * (1 << 20):
        part = (
            f"@staticmethod\ndef helper_{index}(x, y=({index}, [1, 2])):\n"
            f'    """Helper {index}: a \'string\' and a # in a docstring."""\n'
            f"    z = x * {index} + y[0]  # a comment\n"
            f"    return {{'k': z, 's': 'a # b'}}\n\n\n"
            f"TABLE_{index} = [\n    {index},\n    {index + 1},\n]\n\n"
        )
        if index == 500:
            part += "model = torch.nn.Linear(4, 4).cuda()\n\n"
        parts.append(part)
        size += len(part)
        index += 1
    return "".join(parts)


def measured(command: list[str]) -> tuple[float, float]:
    """(seconds, peak resident MB) of one run of ``command``."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{' '.join(command[:4])}... exited {os.waitstatus_to_exitcode(status)}")
    return elapsed, usage.ru_maxrss / 1024  # kB on Linux


def large_file(megabytes: float) -> str:
    """The table row of ``check --jobs 1 --no-cache`` on a generated file of ``megabytes`` MB."""
    source = generated_large_file(megabytes)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory, "big.py")
        path.write_text(source)
        seconds, resident = measured(check([str(path)], 1, cache=False))
    return (
        "| run | MB | s (target ≤ 15) | peak resident MB (target ≤ 1024) |\n|---|---:|---:|---:|\n"
        "| cuda2npu check, --jobs 1 --no-cache, one generated file with one `.cuda()` | "
        f"{len(source) / (1 << 20):.1f} | {seconds:.2f} | {resident:.0f} |"
    )


def python_files(paths: list[str]) -> list[Path]:
    from cuda2npu.project.discovery import discover

    return discover([Path(p) for p in paths]).files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("projects", nargs="*")
    parser.add_argument("--peers", type=Path, help="directory with ruff and torchfix executables")
    parser.add_argument("--sample", type=int, default=60, help="files in the TorchFix comparison sample")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each TorchFix comparison timing (the best counts)"
    )
    parser.add_argument("--large", type=float, default=5, help="MB of the generated one-file run (0: none)")
    parser.add_argument("--large-only", action="store_true", help="only the generated one-file run")
    args = parser.parse_args(argv)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(PACKAGE)], check=True)
    large = large_file(args.large) if args.large else ""
    if args.large_only:
        print(large)
        return 0

    paths = [str(fetch(p)) for p in selected(args.projects)]
    files = python_files(paths)
    megabytes = sum(f.stat().st_size for f in files) / 1e6
    n = len(files)
    rows: list[Row] = []
    ratios: list[tuple[str, str, float, str]] = []
    subprocess.run([sys.executable, "-m", "cuda2npu", "clean", *paths], capture_output=True)

    floor_s, floor = timed([sys.executable, "-c", FLOOR, *paths])
    rows.append(Row(f"floor: read + prefilter + parse {floor.stdout.strip()} matching files", n, megabytes, floor_s))
    cold1_s, _ = timed(check(paths, 1, cache=False))
    rows.append(Row("cuda2npu check, cold, --jobs 1", n, megabytes, cold1_s))
    cold2_s, _ = timed(check(paths, 2, cache=False))
    rows.append(Row("cuda2npu check, cold, --jobs 2", n, megabytes, cold2_s))
    fill_s, _ = timed(check(paths, 1, cache=True))
    rows.append(Row("cuda2npu check, cold, --jobs 1, filling the cache", n, megabytes, fill_s))
    warm_s, _ = timed(check(paths, 1, cache=True))
    rows.append(Row("cuda2npu check, warm (cache), --jobs 1", n, megabytes, warm_s))
    subprocess.run([sys.executable, "-m", "cuda2npu", "clean", *paths], capture_output=True)

    ratios.append(("cold check / floor", "≤ 1.5 (≤ 2.0 done)", cold1_s / floor_s, "same files, one process each"))
    ratios.append(("--jobs 1 / --jobs 2 (speed-up)", "≥ 1.8", cold1_s / cold2_s, "2 cores shared with other work"))
    ratios.append(("cold / warm (speed-up of the cache)", "", cold1_s / warm_s, ""))

    if args.peers is not None:
        ruff = str(args.peers / "ruff")
        cache_dir = tempfile.mkdtemp(prefix="ruff-cache-")
        ruff_cmd = [ruff, "check", "--isolated", "--exit-zero", "--quiet", "--cache-dir", cache_dir, *paths]
        ruff_cold_s, _ = timed([*ruff_cmd, "--no-cache"])
        rows.append(Row("ruff check --isolated (default rules), cold, --no-cache", n, megabytes, ruff_cold_s))
        timed(ruff_cmd)
        ruff_warm_s, _ = timed(ruff_cmd)
        rows.append(Row("ruff check --isolated (default rules), warm", n, megabytes, ruff_warm_s))
        shutil.rmtree(cache_dir, ignore_errors=True)
        ratios.append(("cuda2npu warm / ruff warm", "≤ 1.5", warm_s / ruff_warm_s, ""))

        step = max(1, n // args.sample)
        sample = [str(f) for f in files[::step][: args.sample]]
        sample_mb = sum(Path(f).stat().st_size for f in sample) / 1e6
        torchfix = [str(args.peers / "torchfix"), "--jobs", "1"]
        best = f"best of {args.repeat}"
        torchfix_s = best_of(args.repeat, [*torchfix, *sample])
        rows.append(Row(f"TorchFix, {len(sample)}-file sample, --jobs 1, {best}", len(sample), sample_mb, torchfix_s))
        ours_s = best_of(args.repeat, check(sample, 1, cache=False))
        rows.append(Row(f"cuda2npu check, same sample, cold, --jobs 1, {best}", len(sample), sample_mb, ours_s))
        with tempfile.TemporaryDirectory() as empty:
            trivial = Path(empty, "trivial.py")
            trivial.write_text("x = 1\n")
            torchfix_start_s = best_of(args.repeat, [*torchfix, str(trivial)])
            ours_start_s = best_of(args.repeat, check([str(trivial)], 1, cache=False))
        rows.append(Row(f"TorchFix start-up (one trivial file), {best}", 1, 0, torchfix_start_s))
        rows.append(Row(f"cuda2npu check start-up (one trivial file), {best}", 1, 0, ours_start_s))
        ratios.append(("TorchFix / cuda2npu, whole runs (same sample)", "", torchfix_s / ours_s, "start-up included"))
        per_file = (torchfix_s - torchfix_start_s) / (ours_s - ours_start_s)
        ratios.append(
            ("TorchFix / cuda2npu per file (same sample)", "≥ 15", per_file, "each tool's start-up subtracted")
        )

    print(f"corpus: {', '.join(Path(p).name for p in paths)}: {n} files, {megabytes:.1f} MB; {os.cpu_count()} CPUs\n")
    print("| run | files | MB | s | files/s | MB/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print(row.line())
    print("\n| ratio | target | measured | note |")
    print("|---|---|---:|---|")
    for name, target, value, note in ratios:
        print(f"| {name} | {target} | {value:.2f} | {note} |")
    if large:
        print(f"\n{large}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
