"""Precision review: sample the changed hunks of the pinned real projects per rule family.

    python benchmarks/corpus.py                      # once: fetch the pinned sdists
    python benchmarks/review.py                      # migrate every project, write the review files
    python benchmarks/review.py timm --per-family 40
    python benchmarks/review.py --summary            # counts only, from the last run's hunks

Per project, ``cuda2npu migrate DIR --diff --report R`` (no cache); every hunk of the diff is
attributed to the rule families whose edits or marked findings fall on its original lines
(findings ``rules/tables/markers.toml`` leaves unmarked, such as the NPU8xx advisories, change
nothing in the code and attribute nothing). Per family, up to
``--per-family`` hunks (chosen by a hash of their text, so the sample is stable) are written to
``benchmarks/review/<family>.md`` (git-ignored: the hunks are third-party code).

A person reads them and records a verdict per hunk id in ``benchmarks/verdicts/<family>.toml``
(committed; ``[hunk.<id>] verdict = "..." note = "..."``): ``correct`` | ``wrong`` (crashes or changes what the program computes) | ``noise``
(harmless but pointless) | ``missed`` (the hunk is right, but the tool missed a related change).
Every ``wrong`` one becomes a golden case under ``fixtures/rules/``. A hunk whose text changed since
its verdict (the rule was fixed) gets a new id and is unreviewed again; old verdicts are "stale".
The counts per family are printed and written to docs/precision.md between its markers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import fetch, selected  # noqa: E402

HERE = Path(__file__).resolve().parent
REVIEW_DIR = HERE / "review"
VERDICTS_DIR = HERE / "verdicts"
HUNKS = REVIEW_DIR / "hunks.json"
PRECISION_DOC = HERE.parent / "docs" / "precision.md"
BEGIN, END = "<!-- review-counts:begin -->", "<!-- review-counts:end -->"
VERDICT_KINDS = ("correct", "wrong", "noise", "missed")
HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")


@dataclass
class Hunk:
    project: str
    path: str
    start: int
    length: int
    text: str
    codes: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        digest = hashlib.sha1(f"{self.project}\0{self.path}\0{self.text}".encode()).hexdigest()
        return digest[:12]


def split_diff(diff: str) -> list[tuple[str, int, int, str]]:
    """(path, old start, old length, text) of every hunk of a unified diff."""
    hunks: list[tuple[str, int, int, str]] = []
    path = ""
    current: list[str] | None = None
    start = length = 0
    for line in diff.splitlines(keepends=True):
        if line.startswith("--- "):
            _flush(hunks, path, start, length, current)
            current = None
            path = line[4:].strip().removeprefix("a/")
        elif line.startswith("+++ "):
            continue
        elif match := HUNK_HEADER.match(line):
            _flush(hunks, path, start, length, current)
            start, length = int(match[1]), int(match[2] or 1)
            current = [line]
        elif current is not None:
            current.append(line)
    _flush(hunks, path, start, length, current)
    return hunks


def _flush(hunks: list, path: str, start: int, length: int, current: list[str] | None) -> None:
    if current:
        hunks.append((path, start, length, "".join(current)))


def family_of(code: str) -> str:
    from cuda2npu.core.catalogue import all_rules

    doc = all_rules().get(code)
    return doc.family if doc else "engine"


def project_hunks(name: str, tree: Path, jobs: int) -> list[Hunk]:
    with tempfile.TemporaryDirectory() as tmp:
        report_path = Path(tmp) / "report.json"
        env = {**os.environ, "CUDA2NPU_NO_CACHE": "1"}
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "cuda2npu",
                "migrate",
                tree.name,
                "--diff",
                "--allow-dirty",
                "-q",
                "--report",
                str(report_path),
                "--jobs",
                str(jobs),
            ],
            cwd=tree.parent,
            capture_output=True,
            text=True,
            env=env,
        )
        if result.returncode not in (0, 1):
            raise SystemExit(f"{name}: migrate exited {result.returncode}\n{result.stderr[-2000:]}")
        report = json.loads(report_path.read_text(encoding="utf-8"))
    from cuda2npu.core.catalogue import table

    unmarked = set(table("markers")["unmarked"])
    by_path: dict[str, list[dict]] = defaultdict(list)
    for entry in report["files"]:
        for item in entry["edits"] + [m for m in entry["manual"] if m["code"] not in unmarked]:
            by_path[entry["path"]].append(item)
    hunks = []
    for path, start, length, text in split_diff(result.stdout):
        hunk = Hunk(name, path, start, length, text)
        for item in by_path.get(path, ()):
            if start <= item["line"] < start + max(length, 1):
                hunk.codes.append(item["code"])
                hunk.messages.append(f"{item['code']} line {item['line']}: {item['message'].splitlines()[0]}")
        hunks.append(hunk)
    return hunks


def load_verdicts() -> dict[str, dict]:
    verdicts: dict[str, dict] = {}
    for path in sorted(VERDICTS_DIR.glob("*.toml")):
        verdicts.update(tomllib.loads(path.read_text(encoding="utf-8")).get("hunk", {}))
    return verdicts


def sample(hunks: list[dict], per_family: int) -> dict[str, list[dict]]:
    """Per family, the ``per_family`` hunks with the smallest ids (a stable pseudo-random pick)."""
    families: dict[str, list[dict]] = defaultdict(list)
    for hunk in hunks:
        for family in sorted({family_of(c) for c in hunk["codes"]} or {"engine"}):
            families[family].append(hunk)
    return {f: sorted(h, key=lambda h: h["id"])[:per_family] for f, h in sorted(families.items())}


def write_review_files(picked: dict[str, list[dict]], verdicts: dict[str, dict]) -> None:
    for family, hunks in picked.items():
        lines = [
            f"# {family}: {len(hunks)} sampled hunks\n\n",
            f"Record a verdict per id in benchmarks/verdicts/{family}.toml: correct | wrong | noise | missed.\n\n",
        ]
        for hunk in hunks:
            verdict = verdicts.get(hunk["id"], {})
            lines.append(
                f"## {hunk['id']} · {hunk['project']} · {hunk['path']}:{hunk['start']}"
                f" · verdict: {verdict.get('verdict', 'unreviewed')}\n\n"
            )
            lines += [f"- {m}\n" for m in hunk["messages"]]
            lines.append(f"\n```diff\n{hunk['text']}```\n\n")
        (REVIEW_DIR / f"{family}.md").write_text("".join(lines), encoding="utf-8")


def counts_table(picked: dict[str, list[dict]], verdicts: dict[str, dict]) -> str:
    rows = [
        "| family | sampled | correct | wrong | noise | missed | unreviewed |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    total: Counter = Counter()
    for family, hunks in picked.items():
        counts = Counter(verdicts.get(h["id"], {}).get("verdict", "unreviewed") for h in hunks)
        counts["sampled"] = len(hunks)
        total.update(counts)
        rows.append(
            f"| {family} | " + " | ".join(str(counts[k]) for k in ("sampled", *VERDICT_KINDS, "unreviewed")) + " |"
        )
    rows.append("| **all** | " + " | ".join(str(total[k]) for k in ("sampled", *VERDICT_KINDS, "unreviewed")) + " |")
    sampled_ids = {h["id"] for hunks in picked.values() for h in hunks}
    stale = sorted(set(verdicts) - sampled_ids)
    rows.append("")
    rows.append(f"Verdicts whose hunk is no longer in the sample (rule changed since): {len(stale)}.")
    return "\n".join(rows) + "\n"


def update_doc(table: str) -> None:
    text = PRECISION_DOC.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    PRECISION_DOC.write_text(f"{head}{BEGIN}\n{table}{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("projects", nargs="*", help="project names (default: all)")
    parser.add_argument("--per-family", type=int, default=60, help="hunks sampled per family")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--summary", action="store_true", help="re-count from the last run's hunks")
    parser.add_argument("--no-write", action="store_true", help="do not update docs/precision.md")
    args = parser.parse_args(argv)
    REVIEW_DIR.mkdir(exist_ok=True)
    if args.summary:
        hunks = json.loads(HUNKS.read_text(encoding="utf-8"))
    else:
        hunks = []
        for project in selected(args.projects):
            found = project_hunks(project.name, fetch(project), args.jobs)
            print(f"{project.name}: {len(found)} changed hunks", file=sys.stderr)
            hunks += [{**vars(h), "id": h.id} for h in found]
        HUNKS.write_text(json.dumps(hunks, indent=1), encoding="utf-8")
    verdicts = load_verdicts()
    picked = sample(hunks, args.per_family)
    write_review_files(picked, verdicts)
    table = counts_table(picked, verdicts)
    print(table)
    if not args.no_write and not args.projects:
        update_doc(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
