"""Per-site checks on the corpus: does every file with a numeric-tier rewrite get a real check?

    python benchmarks/corpus.py                       # once: fetch the pinned sdists
    python benchmarks/validate_sites.py               # every project
    python benchmarks/validate_sites.py timm fairseq -v
    python benchmarks/validate_sites.py diffusers --fuse-sdpa   # also the opt-in SDPA rewrites

Per project: ``cuda2npu migrate --out`` into a temporary directory, then pytest on the generated
``npu_validation/test_sites.py`` (junit XML read per site). It prints, per project, the migrated
files with a numeric-tier rewrite of a call (from ``cuda2npu_report.json``), those with at least one
passing site check, and the sites passed / skipped / failed, with every skip's and failure's reason
(``-v``: the whole message). Exit status 1 when a numeric-tier file has no passing check.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import PROJECTS, fetch, selected  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
# numeric-tier rules that rewrite a switch (TF32 flags, the autocast dtype), not a call a site check runs
SWITCHES = {"NPU105", "NPU340"}


@dataclass
class ProjectSites:
    name: str
    numeric_files: set[str] = field(default_factory=set)
    checked_files: set[str] = field(default_factory=set)
    outcomes: dict[str, tuple[str, str]] = field(default_factory=dict)  # site id -> (outcome, message)
    seconds: float = 0.0
    error: str = ""

    def count(self, outcome: str) -> int:
        return sum(o == outcome for o, _ in self.outcomes.values())

    @property
    def unchecked(self) -> set[str]:
        return self.numeric_files - self.checked_files


def numeric_files(report: dict) -> set[str]:
    """Files of a migrate report with a numeric-tier rewrite of a call."""
    return {
        f["path"]
        for f in report["files"]
        if any(e["tier"] == "numeric" and e["code"] not in SWITCHES for e in f["edits"])
    }


def junit_outcomes(path: Path) -> dict[str, tuple[str, str]]:
    """Site id → (passed | skipped | failure | error, message) from pytest's junit XML."""
    outcomes = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        site = name[name.index("[") + 1 : -1] if "[" in name else name
        if site == "NOTSET":
            continue  # pytest's placeholder when sites.json lists no site
        problem = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
        outcome = "passed" if problem is None else problem.tag
        outcomes[site] = (outcome, "" if problem is None else (problem.get("message") or problem.text or ""))
    return outcomes


def run(*command: str, cwd: Path, timeout: int = 3600) -> subprocess.CompletedProcess:
    env = {**os.environ, "CUDA2NPU_NO_CACHE": "1", "PYTHONPATH": str(REPO)}  # this checkout's cuda2npu
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout)


def check_project(source: Path, name: str, scratch: Path, jobs: int, options: tuple[str, ...] = ()) -> ProjectSites:
    """Migrate ``source`` into ``scratch`` (with the migrate ``options``) and run its generated site checks."""
    result, start, out = ProjectSites(name), time.perf_counter(), scratch / name
    migrate = run(sys.executable, "-m", "cuda2npu", "migrate", str(source), "--out", str(out), "--quiet",
                  "--jobs", str(jobs), *options, cwd=scratch)  # fmt: skip
    report = out / "cuda2npu_report.json"
    if migrate.returncode not in (0, 1) or not report.is_file():
        result.error = f"migrate exited {migrate.returncode}: {migrate.stderr.strip()[-300:]}"
        return result
    result.numeric_files = numeric_files(json.loads(report.read_text(encoding="utf-8")))
    tests = out / "npu_validation" / "test_sites.py"
    if tests.is_file():
        xml = scratch / f"{name}.xml"
        run(
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", str(tests), cwd=scratch
        )
        if xml.is_file():
            result.outcomes = junit_outcomes(xml)
        sites = json.loads((tests.parent / "sites.json").read_text(encoding="utf-8"))["sites"]
        file_of = {site["id"]: site["file"] for site in sites}
        result.checked_files = {file_of[s] for s, (o, _) in result.outcomes.items() if o == "passed" and s in file_of}
    result.seconds = time.perf_counter() - start
    return result


def table(results: list[ProjectSites]) -> str:
    lines = [
        "| project | numeric-tier files | with a passing check | sites passed | skipped | failed | s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        failed = r.count("failure") + r.count("error")
        lines.append(
            f"| {r.name} | {len(r.numeric_files)} | {len(r.numeric_files & r.checked_files)} | {r.count('passed')} "
            f"| {r.count('skipped')} | {failed} | {r.seconds:.0f} |"
        )
    return "\n".join(lines)


def details(result: ProjectSites, verbose: bool) -> list[str]:
    """The project's errors, skips, failures and numeric-tier files without a passing check."""
    lines = [f"  migrate failed: {result.error}"] if result.error else []
    for site, (outcome, message) in sorted(result.outcomes.items()):
        if outcome != "passed":
            text = message if verbose else " ".join(message.replace(f"{site}: ", "").split())[:300]
            lines.append(f"  {outcome.upper()} {site}: {text}")
    lines += [f"  NO PASSING CHECK: {path}" for path in sorted(result.unchecked)]
    return [f"{result.name}:", *lines] if lines else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("projects", nargs="*", help=f"default: all of {', '.join(p.name for p in PROJECTS)}")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("-v", "--verbose", action="store_true", help="print whole skip and failure messages")
    parser.add_argument("--fuse-sdpa", action="store_true", help="migrate with --fuse-sdpa (opt-in SDPA rewrites)")
    parser.add_argument("--keep", type=Path, help="migrate into KEEP/PROJECT and keep it (default: a temporary dir)")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="cuda2npu-sites-") as scratch:
        work = args.keep or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        for project in selected(args.projects):
            options = ("--fuse-sdpa",) if args.fuse_sdpa else ()
            results.append(check_project(fetch(project), project.name, work.resolve(), args.jobs, options))
            for line in details(results[-1], args.verbose):
                print(line, flush=True)
    print(table(results))
    return 1 if any(r.unchecked or r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
