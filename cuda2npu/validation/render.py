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
        header = ["", "group", "tensor", "shape", "max abs err", "max rel err", "note"]
        cells = [
            [
                ("ok" if row.ok else "MISMATCH"),
                row.group,
                row.name,
                "×".join(map(str, row.shape)) or "scalar",
                f"{row.max_abs:.3g}",
                f"{row.max_rel:.3g}",
                row.note,
            ]
            for row in shown
        ]
        for number, line in enumerate(_columns([header, *cells])):
            mismatch = number and not shown[number - 1].ok
            console.print("  " + (f"[red]{escape(line)}[/]" if mismatch else escape(line)))
        if not verbose and len(shown) < len(result.rows):
            console.print(f"  ({len(result.rows) - len(shown)} other tensors within bounds; --verbose lists them)")
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


def render_script(result: ScriptResult, console: Console, shown: int = 10) -> None:
    """One line when equivalent; the first divergence and a table of the first ``shown`` ones otherwise."""
    title = f"{escape(result.command)}: {_status(result.status)}"
    if result.backends:
        title += escape(
            f"  ({result.compared} tensors over {result.steps} steps; original on {result.backends['original']}, "
            f"migrated on {result.backends['migrated']}, bounds {result.precision})"
        )
    console.print(title)
    if result.divergences:
        console.print(f"[red]  first divergence: {escape(result.divergences[0].describe())}[/red]")
        header = ["step", "event", "module", "call", "tensor", "max abs err", "bound"]
        cells = [
            [
                str(row.step),
                row.kind,
                row.module,
                str(row.call),
                str(row.tensor),
                f"{row.max_abs:.3g}",
                f"{row.bound:.3g}",
            ]
            for row in result.divergences[:shown]
        ]
        for line in _columns([header, *cells]):
            console.print("  " + escape(line))
        if len(result.divergences) > shown:
            console.print(f"  ... and {len(result.divergences) - shown} more")
    for label, paths in (
        ("only in the original", result.only_original),
        ("only in the migrated", result.only_migrated),
    ):
        if paths:
            console.print(
                escape(f"  modules {label} (not compared): {', '.join(paths[:8])}" + (" ..." if len(paths) > 8 else ""))
            )
    for problem in result.problems:
        console.print(f"[red]  {escape(problem)}[/red]")
