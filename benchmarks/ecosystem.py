"""Ecosystem check (like ruff's): migrate and check real GPU projects, and count what went wrong.

    python benchmarks/corpus.py                 # once: fetch the pinned sdists
    python benchmarks/ecosystem.py              # every project; writes benchmarks/RESULTS.md and docs/performance.md's summary
    python benchmarks/ecosystem.py timm --jobs 2 --no-write

Per project, through the CLI (no result cache, so timings are cold):

1. ``cuda2npu migrate --out OUT --report R`` on the unpacked sdist;
2. crashes: files whose result is an internal error, or a non-documented exit code (must be 0);
3. outputs that do not parse: migrated files CPython rejects while their original parsed (must be 0);
4. second run: ``cuda2npu migrate --check`` on OUT; files it would change again (must be 0);
5. ``cuda2npu check --format json`` on OUT: fixable findings left after migrate (must be 0);
6. CUDA-only imports left: CUDA-touching files (changed, or with a manual item) whose migrated text
   still imports apex / amp_C / flash_attn / transformer_engine unconditionally at module level (not
   under a ``try:`` or an ``if``), so it fails at import on an NPU host;
7. manual items by rule (from the migrate report) and wall-clock times.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import PROJECTS, fetch, selected  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
DOCUMENTED_EXITS = {0, 1}


@dataclass
class ProjectResult:
    name: str
    version: str
    files: int = 0
    megabytes: float = 0.0
    parsed: int = 0
    changed: int = 0
    failed: int = 0
    crashes: list[str] = field(default_factory=list)
    unparsable_outputs: list[str] = field(default_factory=list)
    second_run_changes: list[str] = field(default_factory=list)
    fixable_left: list[str] = field(default_factory=list)
    cuda_touching: int = 0
    cuda_imports_left: list[str] = field(default_factory=list)
    manual: Counter = field(default_factory=Counter)
    failures: Counter = field(default_factory=Counter)
    migrate_s: float = 0.0
    check_s: float = 0.0
    exit_codes: dict[str, int] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not (self.crashes or self.unparsable_outputs or self.second_run_changes or self.fixable_left)


def cuda2npu(*args: str, cwd: Path | None = None) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "CUDA2NPU_NO_CACHE": "1"}
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "cuda2npu", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=3600
    )
    return result, time.perf_counter() - start


def parses(data: bytes) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


CUDA_ONLY_PACKAGES = {"apex", "amp_C", "flash_attn", "flash_attn_2_cuda", "transformer_engine"}


def unguarded_cuda_imports(data: bytes, own: tuple[str, ...] = ()) -> list[str]:
    """Unconditional module-level imports of CUDA-only packages in ``data`` (not the project's ``own``
    packages: flash-attn's files importing ``flash_attn``)."""
    packages = CUDA_ONLY_PACKAGES - set(own)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found = []
    for node in tree.body:  # unconditional statements only: a `try:` or an `if` is a guard
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in packages]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [node.module] if node.module.split(".")[0] in packages else []
    return found


def run_project(project, jobs: int, scratch: Path) -> ProjectResult:
    source = fetch(project)
    result = ProjectResult(project.name, project.version)
    py_files = [p for p in source.rglob("*.py") if p.is_file() and not p.is_symlink()]
    result.files = len(py_files)
    result.megabytes = sum(p.stat().st_size for p in py_files) / 1e6
    out = scratch / f"{project.name}-out"
    report_file = scratch / f"{project.name}-report.json"

    migrate, result.migrate_s = cuda2npu(
        "migrate", "--out", str(out), "--report", str(report_file), "--jobs", str(jobs), str(source)
    )
    result.exit_codes["migrate"] = migrate.returncode
    if migrate.returncode not in DOCUMENTED_EXITS or not report_file.exists():
        result.crashes.append(f"migrate exited {migrate.returncode}: {migrate.stderr.strip().splitlines()[-1:]}")
        return result
    report = json.loads(report_file.read_text())
    own = tuple(report["options"].get("local_modules", ()))  # the project's own packages
    for entry in report["files"]:
        status, reason = entry["status"], entry.get("reason", "")
        if status in ("changed", "unchanged", "failed") and reason != "no CUDA trigger (prefilter)":
            result.parsed += status != "skipped"
        if reason.startswith("internal error"):
            result.crashes.append(f"{entry['path']}: {reason}")
        elif status == "failed":
            result.failed += 1
            result.failures[next((m["code"] for m in entry["manual"] if m["code"].startswith("NPU00")), "?")] += 1
        if status == "changed":
            result.changed += 1
            new = (out / entry["path"]).read_bytes()
            if not parses(new) and parses((source / entry["path"]).read_bytes()):
                result.unparsable_outputs.append(entry["path"])
        if entry["path"].endswith(".py") and (status == "changed" or entry["manual"]):
            result.cuda_touching += 1
            migrated = out / entry["path"] if status == "changed" else source / entry["path"]
            if left := unguarded_cuda_imports(migrated.read_bytes(), own):
                result.cuda_imports_left.append(f"{entry['path']}: {', '.join(sorted(set(left)))}")
        for item in entry["manual"]:
            result.manual[item["code"]] += 1

    second_report = scratch / f"{project.name}-second.json"
    second, _ = cuda2npu("migrate", "--check", "--quiet", "--report", str(second_report), "--jobs", str(jobs), str(out))
    result.exit_codes["migrate --check (2nd run)"] = second.returncode
    if second.returncode not in DOCUMENTED_EXITS or not second_report.exists():
        result.crashes.append(f"second migrate exited {second.returncode}: {second.stderr.strip().splitlines()[-1:]}")
    else:
        again = json.loads(second_report.read_text())
        result.second_run_changes = [e["path"] for e in again["files"] if e["status"] == "changed"]
        result.crashes += [
            f"(2nd run) {e['path']}: {e['reason']}"
            for e in again["files"]
            if e.get("reason", "").startswith("internal error")
        ]

    check, result.check_s = cuda2npu("check", "--format", "json", "--jobs", str(jobs), str(out))
    result.exit_codes["check"] = check.returncode
    if check.returncode not in DOCUMENTED_EXITS:
        result.crashes.append(f"check exited {check.returncode}: {check.stderr.strip().splitlines()[-1:]}")
    else:
        diagnostics = json.loads(check.stdout)["diagnostics"]
        result.fixable_left = [
            f"{d['path']}:{d['line']}:{d['column']} {d['code']}" for d in diagnostics if d["fixable"]
        ]
    return result


def markdown(results: list[ProjectResult], jobs: int) -> str:
    lines = [
        "# Ecosystem check",
        "",
        f"Generated by `python benchmarks/ecosystem.py` (`--jobs {jobs}`, no result cache) on "
        f"{time.strftime('%Y-%m-%d')}; a shared 2-core machine, so times are indicative.",
        "",
        "| project | .py files | MB | parsed | changed | failed (NPU00x) | crashes | outputs not parsing | changed by 2nd run | fixable left "
        "| CUDA-touching | CUDA-only imports left | migrate s | check s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        failures = ", ".join(f"{c} {n}" for c, n in sorted(r.failures.items()))
        lines.append(
            f"| {r.name} {r.version} | {r.files} | {r.megabytes:.1f} | {r.parsed} | {r.changed} | {r.failed}"
            f"{f' ({failures})' if failures else ''} | {len(r.crashes)} | {len(r.unparsable_outputs)} | "
            f"{len(r.second_run_changes)} | {len(r.fixable_left)} | {r.cuda_touching} | "
            f"{len(r.cuda_imports_left)} | {r.migrate_s:.1f} | {r.check_s:.1f} |"
        )
    total = Counter()
    for r in results:
        total.update(r.manual)
    lines += ["", "Manual items (not rewritten; reported and marked `TODO(cuda2npu)`), all projects:", ""]
    lines += ["| rule | count |", "|---|---:|"] + [f"| {code} | {n} |" for code, n in sorted(total.items())]
    lines += ["", "Files that still import a CUDA-only package at module level outside a `try:` after migrate:", ""]
    lines += [f"- {r.name}: {item}" for r in results for item in r.cuda_imports_left] or ["None."]
    problems = [
        (r.name, kind, item)
        for r in results
        for kind in ("crashes", "unparsable_outputs", "second_run_changes", "fixable_left")
        for item in getattr(r, kind)
    ]
    lines += ["", "## Problems", ""]
    lines += [f"- {name}: {kind}: {item}" for name, kind, item in problems[:200]] or ["None: every project runs clean."]
    return "\n".join(lines) + "\n"


SUMMARY_PAGE = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
SUMMARY_START, SUMMARY_END = "<!-- ecosystem:start -->", "<!-- ecosystem:end -->"


def update_summary_page(text: str) -> None:
    """Replace docs/performance.md's ecosystem summary (between the two markers) by ``text``."""
    page = SUMMARY_PAGE.read_text(encoding="utf-8")
    start, end = page.index(SUMMARY_START) + len(SUMMARY_START), page.index(SUMMARY_END)
    body = text.split("\n", 1)[1].lstrip("\n")  # drop the "# Ecosystem check" title
    SUMMARY_PAGE.write_text(page[:start] + "\n" + body + page[end:], encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("projects", nargs="*", help=f"default: all of {', '.join(p.name for p in PROJECTS)}")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS.name}")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="cuda2npu-ecosystem-") as scratch:
        for project in selected(args.projects):
            result = run_project(project, args.jobs, Path(scratch))
            results.append(result)
            print(
                f"{result.name:15} files={result.files:5} changed={result.changed:4} failed={result.failed:3} "
                f"crashes={len(result.crashes)} unparsable={len(result.unparsable_outputs)} "
                f"second-run={len(result.second_run_changes)} fixable-left={len(result.fixable_left)} "
                f"cuda-imports-left={len(result.cuda_imports_left)}/{result.cuda_touching} "
                f"migrate={result.migrate_s:.1f}s check={result.check_s:.1f}s",
                flush=True,
            )
            for kind in ("crashes", "unparsable_outputs", "second_run_changes", "fixable_left"):
                for item in getattr(result, kind)[:10]:
                    print(f"    {kind}: {item}", flush=True)
    text = markdown(results, args.jobs)
    if not args.no_write:
        RESULTS.write_text(text, encoding="utf-8")
        update_summary_page(text)
        print(f"wrote {RESULTS} and the ecosystem section of {SUMMARY_PAGE}")
    return 0 if all(r.clean for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
