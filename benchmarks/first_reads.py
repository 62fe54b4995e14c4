"""First reads (issue 32): the precision figure, from projects read before anything was fixed for them.

    python benchmarks/first_reads.py                   # the rounds' totals, from first_reads.toml
    python benchmarks/first_reads.py next -n 8         # the candidates not read yet
    python benchmarks/first_reads.py hunks SRC         # migrate SRC (a checkout), number its hunks
    python benchmarks/first_reads.py record SRC --project owner/name --commit C --round 4 [--tool T]
                                                      # tally SRC's verdicts, add them to first_reads.toml

``hunks`` runs this checkout's cuda2npu (``migrate SRC --out TMP --no-cache -j 1``) and writes,
next to SRC, ``<name>.hunks.md`` (every ``diff -U0`` hunk of every changed file, numbered) and
``<name>.verdicts.toml`` (``[hunk.N] verdict = ""``, ``note = ""``) for a reader to fill:
``correct`` | ``wrong`` (fails on an NPU host or changes what the program computes) | ``noise``
(harmless but pointless), plus ``import_failing`` / ``import_failing_unmarked`` counts at the top.
``record`` refuses a project that is read already: its re-reads are not first reads. The hunk
files hold third-party code: keep them out of this repository. What each reader is asked to do:
benchmarks/first_read_prompt.md.
"""

from __future__ import annotations

import argparse
import difflib
import subprocess
import sys
import tempfile
from collections import defaultdict
from datetime import date
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
REGISTRY = HERE / "first_reads.toml"
COUNTS = ("hunks", "wrong", "noise", "import_failing", "import_failing_unmarked")
SKIPPED = {"npu_validation", "cuda2npu_report.json"}


def load() -> dict:
    return tomllib.loads(REGISTRY.read_text())


def totals(reads: list[dict]) -> dict[str, dict[str, int]]:
    """round -> summed counts (and the number of projects) in the order the rounds first appear."""
    rounds: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(("projects", *COUNTS), 0))
    for read in reads:
        summed = rounds[read["round"]]
        summed["projects"] += 1
        for key in COUNTS:
            summed[key] += read[key]
    return dict(rounds)


def summary_table(registry: dict) -> str:
    lines = [
        "| round | projects | hunks | wrong | noise | import-failing files unmarked |",
        "|---|---|---|---|---|---|",
    ]
    for name, c in totals(registry["read"]).items():
        wrong = f"{c['wrong']} ({c['wrong'] / c['hunks']:.1%})" if c["hunks"] else "0"
        noise = f"{c['noise']} ({c['noise'] / c['hunks']:.1%})" if c["hunks"] else "0"
        unmarked = f"{c['import_failing_unmarked']} of {c['import_failing']}"
        lines.append(f"| {name} | {c['projects']} | {c['hunks']} | {wrong} | {noise} | {unmarked} |")
    return "\n".join(lines)


def unread(registry: dict) -> list[str]:
    read = {r["project"].lower() for r in registry["read"]}
    return [c for c in registry["candidates"] if c.lower() not in read]


def changed_hunks(original: Path, migrated: Path) -> list[tuple[str, str]]:
    """(relative path, hunk text) of every ``diff -U0`` hunk between the two trees."""
    hunks = []
    for new in sorted(p for p in migrated.rglob("*") if p.is_file()):
        relative = new.relative_to(migrated)
        if SKIPPED & set(relative.parts):
            continue
        old = original / relative
        before = old.read_text(errors="replace").splitlines(keepends=True) if old.is_file() else []
        after = new.read_text(errors="replace").splitlines(keepends=True)
        lines = list(difflib.unified_diff(before, after, f"a/{relative}", f"b/{relative}", n=0))
        current: list[str] = []
        for line in lines[2:]:
            if line.startswith("@@") and current:
                hunks.append((str(relative), "".join(current)))
                current = []
            current.append(line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n")
        if current:
            hunks.append((str(relative), "".join(current)))
    return hunks


def write_hunks(source: Path) -> tuple[Path, Path]:
    if not source.is_dir():
        raise SystemExit(f"{source}: no such project directory (nothing written)")
    with tempfile.TemporaryDirectory() as tmp:
        migrated = Path(tmp) / source.name
        command = [sys.executable, "-m", "cuda2npu", "migrate", str(source), "--out", str(migrated)]
        subprocess.run([*command, "--no-cache", "-j", "1", "-q"], cwd=HERE.parent, check=False)
        hunks = changed_hunks(source, migrated)
    text = [f"# {source.name}: {len(hunks)} hunks (cuda2npu at this checkout)\n"]
    verdicts = ["import_failing = 0\nimport_failing_unmarked = 0\n"]
    for number, (path, hunk) in enumerate(hunks, 1):
        text.append(f"\n## {number}. {path}\n\n```diff\n{hunk}```\n")
        verdicts.append(f'\n[hunk.{number}]\npath = "{path}"\nverdict = ""\nnote = ""\n')
    hunks_file = source.with_name(f"{source.name}.hunks.md")
    verdicts_file = source.with_name(f"{source.name}.verdicts.toml")
    hunks_file.write_text("".join(text))
    if not verdicts_file.exists() or not _filled(verdicts_file):  # never overwrite a reader's verdicts
        verdicts_file.write_text("".join(verdicts))
    return hunks_file, verdicts_file


def _filled(verdicts_file: Path) -> bool:
    """Whether a reader has given any hunk of ``verdicts_file`` a verdict."""
    hunks = tomllib.loads(verdicts_file.read_text()).get("hunk", {})
    return any(hunk.get("verdict") for hunk in hunks.values())


def tally(verdicts: dict) -> dict[str, int]:
    """The counts of a filled verdicts file; a hunk without a verdict is an error."""
    hunks = verdicts.get("hunk", {})
    missing = sorted((k for k, v in hunks.items() if v.get("verdict") not in ("correct", "wrong", "noise")), key=int)
    if missing:
        raise SystemExit(f"hunks without a verdict (correct, wrong or noise): {', '.join(missing)}")
    counts = {key: sum(v["verdict"] == key for v in hunks.values()) for key in ("wrong", "noise")}
    return {
        "hunks": len(hunks),
        **counts,
        "import_failing": verdicts["import_failing"],
        "import_failing_unmarked": verdicts["import_failing_unmarked"],
    }


def record(source: Path, project: str, commit: str, round_name: str, tool: str) -> str:
    registry = load()
    if any(r["project"].lower() == project.lower() for r in registry["read"]):
        raise SystemExit(f"{project} was read before: a re-read is not a first read")
    counts = tally(tomllib.loads(source.with_name(f"{source.name}.verdicts.toml").read_text()))
    entry = [
        "\n[[read]]",
        f'project = "{project}"',
        f'commit = "{commit}"',
        f'round = "{round_name}"',
        f'tool = "{tool}"',
        f'date = "{date.today().isoformat()}"',
        *(f"{key} = {counts[key]}" for key in COUNTS),
    ]
    with REGISTRY.open("a") as registry_file:
        registry_file.write("\n".join(entry) + "\n")
    return f"{project}: " + ", ".join(f"{key} {counts[key]}" for key in COUNTS)


def tool_commit() -> str:
    result = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command")
    following = commands.add_parser("next", help="the candidates not read yet")
    following.add_argument("-n", type=int, default=8)
    hunks = commands.add_parser("hunks", help="migrate a checkout and number its hunks for reading")
    hunks.add_argument("source", type=Path)
    recording = commands.add_parser("record", help="add a read project's tally to first_reads.toml")
    recording.add_argument("source", type=Path)
    recording.add_argument("--project", required=True, help="owner/name")
    recording.add_argument("--commit", required=True)
    recording.add_argument("--round", required=True, dest="round_name")
    recording.add_argument("--tool", help="the commit of the cuda2npu that was read (default: this checkout's)")
    args = parser.parse_args(argv)
    if args.command == "next":
        print("\n".join(unread(load())[: args.n]))
    elif args.command == "hunks":
        for path in write_hunks(args.source.resolve()):
            print(path)
    elif args.command == "record":
        tool = args.tool or tool_commit()
        print(record(args.source.resolve(), args.project, args.commit, args.round_name, tool))
    else:
        print(summary_table(load()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
