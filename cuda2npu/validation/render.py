"""Printing validation results: one line per entry that passes, the detail of what does not, and a
final summary line. Lines are never cut at the console width (names can be long)."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.markup import escape

from cuda2npu.validation.harness import ValidationResult
from cuda2npu.validation.script import ScriptResult

STATUS_STYLE = {"equivalent": "green", "mismatch": "bold red", "error": "bold red", "skipped": "yellow"}


def _status(status: str) -> str:
    return f"[{STATUS_STYLE.get(status, 'bold')}]{status.upper()}[/]"


def _columns(rows: list[list[str]]) -> list[str]:
    """Rows of cells as aligned lines, every cell whole."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]


def render(result: ValidationResult, console: Console, verbose: bool = False) -> None:
    """``entry: STATUS (what was compared, where, the bounds)``; the mismatching tensors (every one
    with ``verbose``), dropped keys, notes and problems below it."""
    detail = []
    if result.rows:
        groups = ", ".join(f"{group} ×{n}" for group, n in Counter(row.group for row in result.rows).items())
        detail.append(f"{len(result.rows)} tensors: {groups}")
    if result.backends:
        detail.append(
            f"original on {result.backends['original']}, migrated on {result.backends['migrated']}, "
            f"bounds {result.precision}"
        )
    console.print(
        f"{escape(result.entry)}: {_status(result.status)}" + (f"  ({escape('; '.join(detail))})" if detail else "")
    )
    shown = [row for row in result.rows if verbose or not row.ok]
    if shown:
        header = ["", "group", "tensor", "shape", "max abs err", "max rel err", "note", "at"]
        cells = [
            [
                ("ok" if row.ok else "MISMATCH"),
                row.group,
                row.name,
                "×".join(map(str, row.shape)) or "scalar",
                f"{row.max_abs:.3g}",
                f"{row.max_rel:.3g}",
                row.note,
                row.where,
            ]
            for row in shown
        ]
        for number, line in enumerate(_columns([header, *cells])):
            mismatch = number and not shown[number - 1].ok
            console.print("  " + (f"[red]{escape(line)}[/]" if mismatch else escape(line)))
        if not verbose and len(shown) < len(result.rows):
            console.print(f"  ({len(result.rows) - len(shown)} other tensors within bounds; --verbose lists them)")
    if result.where:
        console.print(f"  look first at: {escape(result.where)}")
    for key, reason in result.dropped_keys.items():
        console.print(f"  dropped key {escape(key)}: {escape(reason)}")
    for note in result.notes:
        console.print(f"  {escape(note)}")
    for problem in result.problems:
        console.print(f"[red]  {escape(problem)}[/red]")


def render_summary(results: list, console: Console) -> None:
    """The closing line: how many entries, and how many of each outcome."""
    counts = Counter(result.status for result in results)
    order = ["equivalent", "mismatch", "error", "skipped"]
    parts = ", ".join(f"{counts[status]} {status}" for status in order if counts[status])
    plural = "entry" if len(results) == 1 else "entries"
    console.print(f"cuda2npu validate: {len(results)} {plural}: {parts}")


def render_script(result: ScriptResult, console: Console, shown: int = 10, verbose: bool = False) -> None:
    """The status and what was compared; the first divergence and a table of the first ``shown`` (all
    with ``verbose``); an error's place and traceback (whole with ``verbose``); notes and problems."""
    title = f"{escape(result.command)}: {_status(result.status)}"
    if result.backends:
        title += escape(
            f"  ({result.compared} records over {result.steps} steps; original on {result.backends['original']}, "
            f"migrated on {result.backends['migrated']}; modes: {', '.join(result.modes)})"
        )
    console.print(title)
    if result.checked:
        console.print(escape(f"  checked: {result.checked_summary()}"))
        if result.canary:
            flagged = sum(result.canary.values())
            console.print(
                escape(
                    f"  canary: an error of 10x the floor injected into one record of each kind was flagged for "
                    f"{flagged} of {len(result.canary)} kinds"
                )
            )
    if result.divergences:
        console.print(f"[red]  first divergence: {escape(result.divergences[0].describe())}[/red]")
        rows = result.divergences if verbose else result.divergences[:shown]
        for divergence in rows[1:]:
            console.print("  " + escape(divergence.describe()))
        if len(result.divergences) > len(rows):
            console.print(f"  ... and {len(result.divergences) - len(rows)} more (--verbose lists them)")
    for label, paths in (
        ("only in the original", result.only_original),
        ("only in the migrated", result.only_migrated),
    ):
        if paths:
            console.print(
                escape(f"  modules {label} (not compared): {', '.join(paths[:8])}" + (" ..." if len(paths) > 8 else ""))
            )
    for note in result.notes:
        console.print(f"  {escape(note)}")
    for problem in result.problems:
        console.print(f"[red]  {escape(problem)}[/red]")
    trace = result.full_traceback if verbose else result.traceback
    if trace:
        console.print(
            escape(
                ("  traceback:\n" if verbose else "  traceback (the tree's own frames; -v: whole):\n") + trace.rstrip()
            )
        )
