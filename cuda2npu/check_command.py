"""``cuda2npu check``: run the rules without fixing and print the findings."""

from __future__ import annotations

from pathlib import Path

import click

from cuda2npu.diagnostics import FileResult, Finding
from cuda2npu.discovery import discover
from cuda2npu.formatters import FORMATTERS
from cuda2npu.options import Options
from cuda2npu.report import Summary
from cuda2npu.runner import default_jobs, run
from cuda2npu.workset import collect_results, display_name


def _source_lines(findings: list[Finding], files: dict[str, Path]) -> dict[str, list[str]]:
    lines: dict[str, list[str]] = {}
    for path in {f.path for f in findings}:
        try:
            lines[path] = files[path].read_text(encoding="utf-8", errors="replace").splitlines()
        except (OSError, KeyError):
            lines[path] = []
    return lines


def run_check(paths: list[Path], options: Options, output_format: str, exit_zero: bool, output_file: Path | None, jobs: int | None) -> int:
    found = discover(paths)
    files = [(path, display_name(path)) for path in found.files]
    summary = Summary()
    results: list[FileResult] = collect_results(run(files, options, jobs or default_jobs()), summary, len(files))
    findings = sorted((f for r in results for f in r.findings), key=Finding.sort_key)
    sources = _source_lines(findings, {display: path for path, display in files}) if output_format == "text" else {}
    output = FORMATTERS[output_format](findings, summary, sources)
    if output_file is not None:
        output_file.write_text(output + "\n", encoding="utf-8")
    elif output:
        click.echo(output)
    internal = [r for r in results if r.internal_error]
    if internal:
        from cuda2npu.cli import internal_error

        return internal_error(RuntimeError(f"{len(internal)} file(s) crashed a rule, first: {internal[0].path}\n{internal[0].internal_error}"))
    return 0 if exit_zero or not findings else 1
