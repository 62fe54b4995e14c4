"""``cuda2npu check``: run the rules without fixing and print the findings.

Also ``--add-noqa`` (write ``# noqa`` directives for the current findings) and ``--baseline``
(report only findings not recorded in a baseline file; ``--write-baseline`` records them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cuda2npu.commands.pipeline import run_rules
from cuda2npu.core.diagnostics import FileResult, Summary
from cuda2npu.core.options import Options
from cuda2npu.output import baseline as baselines
from cuda2npu.output import style
from cuda2npu.output.formatters import FORMATTERS, NEEDS_SOURCES, TERMINAL, fixes, statistics
from cuda2npu.project.runner import process_stdin
from cuda2npu.project.settings import RunSettings
from cuda2npu.project.workset import display_name

EXIT_USAGE = 2


@dataclass
class CheckRequest:
    paths: list[Path]
    options: Options  # the run's (its common directory's): each file's come from settings
    settings: RunSettings  # each file's configuration, options and project facts
    output_format: str = "text"
    exit_zero: bool = False
    output_file: Path | None = None
    jobs: int | None = None
    add_noqa: bool = False
    baseline: Path | None = None
    write_baseline: bool = False
    statistics: bool = False  # counts per rule instead of the findings
    quiet: bool = False  # the findings only, no closing line
    show_fixes: bool = False  # after the findings, the fixes `migrate` would apply, per file and rule
    stdin: bytes | None = None  # `check -`: the text of paths[0] (--stdin-filename), read from stdin


def source_lines(paths: set[str], files: dict[str, Path], stdin: bytes | None = None) -> dict[str, object]:
    """Lines of each file with findings: a list, or for notebooks a dict cell -> lines (``stdin``:
    the text of the one file named, read from stdin)."""
    from cuda2npu.filekinds.notebooks import cell_lines, is_notebook

    lines: dict[str, object] = {}
    for path in paths:
        try:
            real = files[path]
            data = stdin if stdin is not None else real.read_bytes()
            if is_notebook(real):
                lines[path] = cell_lines(data)
            else:
                from cuda2npu.core.decoding import decode

                lines[path] = decode(data).splitlines()
        except Exception:  # noqa: BLE001 - unreadable or undecodable: no source context
            lines[path] = []
    return lines


def check_files(request: CheckRequest) -> tuple[list[FileResult], Summary, dict[str, Path]]:
    """Run the rules over the selected files: (results, summary, display name -> path)."""
    if request.stdin is not None:
        path = request.paths[0]
        summary = Summary()
        result = process_stdin(request.stdin, path, display_name(path), request.settings.options_for(path))
        summary.add(result)
        return [result], summary, {result.path: path}
    done = run_rules(request.settings, request.paths, request.jobs)
    return done.results, done.summary, done.by_name


def run_check(request: CheckRequest) -> int:
    results, summary, by_name = check_files(request)
    if not request.quiet:
        style.print_warnings(results)
    findings = sorted((f for r in results for f in r.findings), key=lambda f: f.sort_key())
    internal = [r for r in results if r.internal_error]

    if request.add_noqa:
        from cuda2npu.core.noqa import write_noqa

        added, files = write_noqa(findings, by_name)
        style.echo(
            f"Added {added} noqa directive{'s' if added != 1 else ''} in {files} file{'s' if files != 1 else ''}.",
            err=True,
        )
        return _internal(internal) if internal else 0

    needs_sources = request.output_format in NEEDS_SOURCES or request.baseline is not None
    sources = source_lines({f.path for f in findings}, by_name, request.stdin) if needs_sources else {}
    baselined = 0
    if request.baseline is not None:
        if request.write_baseline:
            count = baselines.write(request.baseline, findings, sources)
            style.echo(
                f"cuda2npu: wrote {count} finding{'s' if count != 1 else ''} to the baseline {request.baseline}",
                err=True,
            )
            return _internal(internal) if internal else 0
        try:
            recorded = baselines.read(request.baseline)
        except baselines.BaselineError as exc:
            style.echo(f"cuda2npu: error: {exc}", err=True)
            return EXIT_USAGE
        findings, baselined = baselines.new_findings(findings, sources, recorded, request.baseline)

    to_terminal = request.output_file is None
    if request.statistics:
        output = statistics(findings, request.output_format)
    elif request.output_format in TERMINAL:
        output = FORMATTERS[request.output_format](
            findings, summary, sources, color=to_terminal and style.enabled(), closing=not request.quiet
        )
    else:
        output = FORMATTERS[request.output_format](findings, summary, sources)
    if request.show_fixes and request.output_format in TERMINAL:
        output = "\n\n".join(filter(None, (output, fixes([f for f in findings if f.fixable], "Would fix"))))
    if not to_terminal:
        request.output_file.write_text(output + "\n", encoding="utf-8")
    elif output:
        style.echo(output)
    if baselined and request.output_format in TERMINAL and not request.quiet:
        style.echo(f"cuda2npu: {baselined} finding{'s' if baselined != 1 else ''} in the baseline not shown", err=True)
    if internal:
        return _internal(internal)
    return 0 if request.exit_zero or not findings else 1


def _internal(internal: list[FileResult]) -> int:
    from cuda2npu.commands.crash import internal_error

    return internal_error(
        RuntimeError(f"{len(internal)} file(s) crashed a rule, first: {internal[0].path}\n{internal[0].internal_error}")
    )
