"""``cuda2npu migrate``: rewrite in place, into a copy (``--out``), or only show (``--diff``/``--check``)."""

from __future__ import annotations

import difflib
import json
import re
import shutil
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import click

from cuda2npu.core.diagnostics import PREFILTER_REASON, FileResult, Summary
from cuda2npu.core.fileio import atomic_write, io_error
from cuda2npu.core.gitutil import dirty_files
from cuda2npu.core.options import Options
from cuda2npu.core.source import decode
from cuda2npu.core.transform import marker_lines
from cuda2npu.filekinds.depfiles import is_project_file
from cuda2npu.output.report import migration_report
from cuda2npu.project.cache import CACHE_DIR_NAME
from cuda2npu.project.companions import CREATE, DIFFERS, SAME, Companion, plan
from cuda2npu.project.discovery import FileSelection
from cuda2npu.project.facts import with_project_facts
from cuda2npu.project.project_files import finish_run
from cuda2npu.project.runner import default_jobs, run
from cuda2npu.project.workset import collect_results, display_name

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
DEFAULT_REPORT_NAME = "cuda2npu_report.json"


@dataclass
class MigrateRequest:
    paths: list[Path]
    options: Options
    out_dir: Path | None = None
    diff: bool = False
    check_only: bool = False
    report_file: Path | None = None
    allow_dirty: bool = False
    quiet: bool = False
    jobs: int | None = None
    files: FileSelection = field(default_factory=FileSelection)  # configured excludes (config.py)
    exit_non_zero_on_fix: bool = False  # pre-commit: exit 1 when files were changed


def _fail(message: str) -> int:
    click.echo(f"cuda2npu: error: {message}", err=True)
    return EXIT_USAGE


def _out_dir_problem(request: MigrateRequest) -> str | None:
    if len(request.paths) != 1 or not request.paths[0].is_dir():
        return "--out needs exactly one directory PATH"
    source, out = request.paths[0].resolve(), request.out_dir.resolve()
    if out == source or out.is_relative_to(source):
        return f"--out {request.out_dir} is inside {request.paths[0]}; choose a directory outside the project"
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        return f"--out {request.out_dir} exists and is not an empty directory"
    return None


NO_NEWLINE = "\\ No newline at end of file\n"


def _patch_lines(text: str) -> list[str]:
    """Lines as `patch` sees them: split after "\\n" only (not at form feeds or U+2028)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def unified_diff(path: str, old: bytes | None, new: bytes) -> str:
    """A unified diff that `patch`/`git apply` accept, with the "No newline at end of file" marker.

    ``old=None``: a new file (``--- /dev/null``).
    """
    name = path.lstrip("/")
    old_lines, old_name = ([], "/dev/null") if old is None else (_patch_lines(decode(old)), f"a/{name}")
    lines = difflib.unified_diff(old_lines, _patch_lines(decode(new)), old_name, f"b/{name}")
    return "".join(line if line.endswith("\n") else line + "\n" + NO_NEWLINE for line in lines)


MAX_LISTED_MARKERS = 10


def marker_locations(results: list[FileResult], by_name: dict[str, Path]) -> dict[str, list]:
    """Where the migrated files hold ``# TODO(cuda2npu)`` markers: path -> [12, ...] (notebooks: ["cell 3:2", ...]).

    Read from the migrated text, or for a file left as it is, from the file when it has open findings.
    """
    from cuda2npu.filekinds.notebooks import cell_lines, is_notebook

    locations: dict[str, list] = {}
    for result in results:
        if result.status not in ("changed", "unchanged") or result.path not in by_name:
            continue
        if result.new_source is None and all(f.applied for f in result.findings):
            continue
        try:
            data = result.new_source if result.new_source is not None else by_name[result.path].read_bytes()
            if is_notebook(by_name[result.path]):
                found = [
                    f"cell {cell}:{n}"
                    for cell, lines in cell_lines(data).items()
                    for n in marker_lines("\n".join(lines))
                ]
            elif result.path.endswith(".py"):
                found = marker_lines(decode(data))
            else:
                continue
        except Exception:  # noqa: BLE001 - unreadable or undecodable: nothing to list
            continue
        if found:
            locations[result.path] = found
    return locations


def _print_markers(locations: dict[str, list], report: Path | None) -> None:
    listed = [f"{path}:{where}" for path, lines in sorted(locations.items()) for where in lines]
    if not listed:
        return
    shown = ", ".join(listed[:MAX_LISTED_MARKERS])
    more = f" ... and {len(listed) - MAX_LISTED_MARKERS} more" if len(listed) > MAX_LISTED_MARKERS else ""
    details = (
        f"with their findings in {report}" if report is not None else "--report FILE lists them with their findings"
    )
    click.echo(f"  TODO(cuda2npu) markers ({len(listed)}): {shown}{more} ({details})", err=True)


def _print_summary(summary: Summary, wrote: bool) -> None:
    verb = "changed" if wrote else "would change"
    click.echo(
        f"cuda2npu: {summary.scanned} files scanned, {summary.skipped_prefilter} skipped by prefilter, "
        f"{summary.skipped_other} skipped, {summary.changed} {verb}, {summary.failed} failed",
        err=True,
    )
    if summary.edits:
        edits = ", ".join(f"{code} ({tier}) ×{n}" for (code, tier), n in sorted(summary.edits.items()))
        click.echo(f"  edits: {edits}", err=True)
    if summary.manual:
        manual = ", ".join(f"{code} ×{n}" for code, n in sorted(summary.manual.items()))
        click.echo(f"  need a human (see the report / TODO(cuda2npu) markers): {manual}", err=True)


def _print_failures(results: list[FileResult]) -> None:
    """Failed files with their position and reason, and files skipped for a reason worth knowing."""
    for result in results:
        if result.status == "failed":
            engine = [f for f in result.findings if f.code.startswith("NPU00")]  # the failure itself
            where = next((f"{f.path}:{f.line}:{f.column}" for f in engine or result.findings), result.path)
            click.echo(f"{where}: {result.reason}", err=True)
        elif result.status == "skipped" and result.reason != PREFILTER_REASON:
            click.echo(f"{result.path}: skipped ({result.reason})", err=True)


def _not_written(result: FileResult, failed: FileResult, summary: Summary) -> None:
    """Turn a changed result into a failed one (nothing of the file was written)."""
    result.status, result.reason = "failed", failed.reason
    for finding in result.findings:
        if finding.applied:
            summary.edits[(finding.code, str(finding.tier))] -= 1
    summary.edits += Counter()  # drops the zero counts
    result.findings = [*(replace(f, applied=False) for f in result.findings), *failed.findings]
    summary.changed -= 1
    summary.failed += 1


def _print_companions(companions: list[Companion], wrote: bool) -> None:
    for companion in companions:
        users = f"imported by {len(companion.needed_by)} migrated file{'s' * (len(companion.needed_by) > 1)}"
        if companion.status == DIFFERS:
            click.echo(
                f"{companion.path}: exists and differs from the generated version; kept as it is (delete it "
                f"to regenerate); {users}",
                err=True,
            )
        elif companion.status == CREATE:
            click.echo(f"cuda2npu: {'created' if wrote else 'would create'} {companion.path} ({users})", err=True)
        elif companion.status != SAME:
            click.echo(f"{companion.path}: {companion.status}", err=True)


def _write_all(changed: list[tuple[FileResult, Path]], summary: Summary, in_place: bool = False) -> None:
    """Write every changed file atomically; a file that cannot be written is reported, not fatal."""
    written = 0
    try:
        for result, target in changed:
            try:
                atomic_write(target, result.new_source, refuse_read_only=in_place)
                written += 1
            except OSError as exc:
                _not_written(result, io_error(result.path, exc, "write"), summary)
    except KeyboardInterrupt:
        click.echo(
            f"cuda2npu: interrupted after writing {written} of {len(changed)} files; every file is either old or new",
            err=True,
        )
        raise SystemExit(EXIT_INTERRUPTED)


def _write_companions(companions: list[Companion], changed: list[tuple[FileResult, Path]], summary: Summary):
    """Create the generated files first; the files importing one that cannot be written are not written either."""
    unwritable: dict[str, FileResult] = {}
    for companion in companions:
        if companion.status != CREATE:
            continue
        try:
            atomic_write(companion.target, companion.text)
        except OSError as exc:
            companion.status = f"not written: {exc.strerror or exc}"
            for path in companion.needed_by:
                unwritable[path] = io_error(path, exc, f"create {companion.path}, which the migrated file imports")
    for result, _ in changed:
        if result.path in unwritable:
            _not_written(result, unwritable[result.path], summary)
    return [(result, target) for result, target in changed if result.path not in unwritable]


def _real_relative(path: Path, real_root: Path, fallback: str) -> str:
    try:
        return path.resolve().relative_to(real_root).as_posix()
    except ValueError:
        return fallback


def run_migrate(request: MigrateRequest) -> int:
    if request.out_dir is not None:
        problem = _out_dir_problem(request)
        if problem:
            return _fail(problem)
    found = request.files.discover(request.paths)
    request.options = with_project_facts(request.options, found.files)
    root = request.paths[0] if request.out_dir is not None else None

    def name_of(path: Path) -> str:  # --out: relative to the project root, as in the copy
        return path.relative_to(root).as_posix() if root else display_name(path)

    names = {path: name_of(path) for path in found.files}
    sources = [(path, name) for path, name in names.items() if not is_project_file(path)]
    summary = Summary()
    results = collect_results(
        # --out leaves the source tree as it is: no result cache written into it
        run(sources, request.options, request.jobs or default_jobs(), cache=None if request.out_dir else "auto"),
        summary,
        len(sources),
    )
    results = finish_run(results, names, request.options, summary)  # dependency files, shell scripts
    for path, reason in found.skipped:
        skipped = FileResult(name_of(path), "skipped", reason)
        summary.add(skipped)
        results.append(skipped)
    by_name = {display: path for path, display in names.items()}
    changed = [r for r in results if r.status == "changed"]

    if request.diff or request.check_only:
        companions = plan([(r, by_name[r.path]) for r in changed])
        new_files = [c for c in companions if c.status == CREATE]
        if request.diff:
            for result in changed:
                click.echo(unified_diff(result.path, by_name[result.path].read_bytes(), result.new_source), nl=False)
            for companion in new_files:
                click.echo(unified_diff(companion.path, None, companion.text), nl=False)
        elif not request.quiet:
            for result in changed:
                click.echo(f"Would migrate: {result.path}")
            for companion in new_files:
                click.echo(f"Would create: {companion.path}")
        _finish(request, results, summary, wrote=False, companions=companions, by_name=by_name)
        return 1 if changed else 0

    if request.out_dir is not None:
        shutil.copytree(
            root,
            request.out_dir,
            symlinks=True,
            ignore=shutil.ignore_patterns(".git", CACHE_DIR_NAME),
            dirs_exist_ok=True,
        )
        real_root = root.resolve()  # a file reached through a symlink is written where it really is
        targets = [(r, request.out_dir / _real_relative(by_name[r.path], real_root, r.path)) for r in changed]
        request.report_file = request.report_file or request.out_dir / DEFAULT_REPORT_NAME
    else:
        if not request.allow_dirty:
            dirty = dirty_files(request.paths)
            blocked = [r.path for r in changed if by_name[r.path].resolve() in dirty]
            if blocked:
                listing = "\n  ".join(blocked)
                return _fail(
                    f"these files have uncommitted changes:\n  {listing}\n"
                    "commit or stash them first, or pass --allow-dirty"
                )
        targets = [(r, by_name[r.path].resolve()) for r in changed]  # through symlinks, keeping them
    companions = plan(targets)
    targets = _write_companions(companions, targets, summary)
    _write_all(targets, summary, in_place=request.out_dir is None)
    if request.out_dir is not None:
        _write_validation(request, results)
    _finish(request, results, summary, wrote=True, companions=companions, by_name=by_name)
    return 1 if summary.failed or (request.exit_non_zero_on_fix and summary.changed) else 0


AMP_CODES = ("NPU106", "NPU3")


def _write_validation(request: MigrateRequest, results: list[FileResult]) -> None:
    """The harness package for the copy; bf16/fp16 bounds when AMP code was rewritten."""
    from cuda2npu.validation.generate import write_validation_package

    changed = [r.path for r in results if r.status == "changed"]
    amp = any(f.applied and f.code.startswith(AMP_CODES) for r in results for f in r.findings)
    precision = request.options.precision if amp and request.options.precision != "keep" else None
    write_validation_package(request.paths[0], request.out_dir, changed, precision)


def _finish(
    request: MigrateRequest,
    results: list[FileResult],
    summary: Summary,
    wrote: bool,
    companions: list[Companion],
    by_name: dict[str, Path],
) -> None:
    results.sort(key=lambda r: r.path)
    markers = marker_locations(results, by_name)
    if request.report_file is not None:
        options = {
            **{k: v for k, v in asdict(request.options).items() if k != "in_package"},  # a per-file fact
            "max_tier": str(request.options.max_tier),
            "mode": "diff"
            if request.diff
            else "check"
            if request.check_only
            else "out"
            if request.out_dir
            else "in-place",
        }
        report = migration_report(results, options, summary, [c.to_json() for c in companions], markers)
        request.report_file.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if not request.quiet:
        _print_failures(results)
        _print_companions(companions, wrote)
        _print_summary(summary, wrote)
        _print_markers(markers, request.report_file)
