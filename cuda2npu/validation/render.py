"""Printing a validation result as a rich table."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from cuda2npu.validation.harness import ValidationResult
from cuda2npu.validation.script import ScriptResult


def render(result: ValidationResult, console: Console) -> None:
    title = f"{result.entry}: {result.status.upper()}"
    if result.backends:
        title += f"  (original on {result.backends['original']}, migrated on {result.backends['migrated']}, bounds {result.precision})"
    console.print(title)
    if result.rows:
        table = Table()
        for column in ("group", "tensor", "shape", "max abs err", "max rel err", "ok"):
            table.add_column(column, justify="right" if "err" in column else "left")
        for row in result.rows:
            mark = "[green]ok[/green]" if row.ok else "[red]MISMATCH[/red]"
            table.add_row(
                row.group,
                row.name,
                "×".join(map(str, row.shape)) or "scalar",
                f"{row.max_abs:.3g}",
                f"{row.max_rel:.3g}",
                mark + (f" {row.note}" if row.note else ""),
            )
        console.print(table)
    for key, reason in result.dropped_keys.items():
        console.print(f"  dropped key {key}: {reason}")
    for note in result.notes:
        console.print(f"  {note}")
    for problem in result.problems:
        console.print(f"[red]  {problem}[/red]")


def render_script(result: ScriptResult, console: Console, shown: int = 10) -> None:
    """One line when equivalent; the first divergence and a table of the first ``shown`` ones otherwise."""
    title = f"{result.command}: {result.status.upper()}"
    if result.backends:
        title += (
            f"  ({result.compared} tensors over {result.steps} steps; original on {result.backends['original']}, "
            f"migrated on {result.backends['migrated']}, bounds {result.precision})"
        )
    console.print(title)
    if result.divergences:
        console.print(f"[red]  first divergence: {result.divergences[0].describe()}[/red]")
        table = Table()
        for column in ("step", "event", "module", "call", "tensor", "max abs err", "bound"):
            table.add_column(column, justify="right" if column in ("max abs err", "bound") else "left")
        for row in result.divergences[:shown]:
            table.add_row(
                str(row.step),
                row.kind,
                row.module,
                str(row.call),
                str(row.tensor),
                f"{row.max_abs:.3g}",
                f"{row.bound:.3g}",
            )
        console.print(table)
        if len(result.divergences) > shown:
            console.print(f"  ... and {len(result.divergences) - shown} more")
    for label, paths in (
        ("only in the original", result.only_original),
        ("only in the migrated", result.only_migrated),
    ):
        if paths:
            console.print(
                f"  modules {label} (not compared): {', '.join(paths[:8])}" + (" ..." if len(paths) > 8 else "")
            )
    for problem in result.problems:
        console.print(f"[red]  {problem}[/red]")
