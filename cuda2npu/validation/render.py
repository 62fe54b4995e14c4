"""Printing a validation result as a rich table."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from cuda2npu.validation.harness import ValidationResult


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
            table.add_row(row.group, row.name, "×".join(map(str, row.shape)) or "scalar", f"{row.max_abs:.3g}", f"{row.max_rel:.3g}", mark + (f" {row.note}" if row.note else ""))
        console.print(table)
    for key, reason in result.dropped_keys.items():
        console.print(f"  dropped key {key}: {reason}")
    for problem in result.problems:
        console.print(f"[red]  {problem}[/red]")
