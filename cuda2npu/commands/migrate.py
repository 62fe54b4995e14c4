"""``cuda2npu migrate``: rewrite in place, into a copy (``--out``), or only show (``--diff``/``--check``)."""

from __future__ import annotations

import json
import shlex
import shutil
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import click

from cuda2npu.commands.pipeline import run_rules
from cuda2npu.core.catalogue import all_rules
from cuda2npu.core.decoding import decode
from cuda2npu.core.diagnostics import PREFILTER_REASON, FileResult, Summary
from cuda2npu.core.fileio import atomic_write, io_error
from cuda2npu.core.gitutil import dirty_files, in_work_tree
from cuda2npu.core.markers import marker_lines
from cuda2npu.core.options import Options
from cuda2npu.output import style
from cuda2npu.output.diffs import color_diff, unified_diff
from cuda2npu.output.formatters import fixes, location
from cuda2npu.output.report import left_open, migration_report
from cuda2npu.project.cache import CACHE_DIR_NAME
from cuda2npu.project.companions import CREATE, DIFFERS, SAME, Companion, plan
from cuda2npu.project.runner import process_stdin
from cuda2npu.project.settings import RunSettings
from cuda2npu.project.workset import display_name

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
DEFAULT_REPORT_NAME = "cuda2npu_report.json"
# in an --out directory while it is being written: an interrupted run leaves it, and says so
INCOMPLETE_NOTE = "CUDA2NPU_INCOMPLETE"
INCOMPLETE_TEXT = (
    "cuda2npu migrate --out was interrupted while writing this copy: it is incomplete. Delete it and run again.\n"
)


@dataclass
class MigrateRequest:
    paths: list[Path]
    options: Options  # the run's (its common directory's; the report's): each file's come from settings
    settings: RunSettings  # each file's configuration, options and project facts
    out_dir: Path | None = None
    diff: bool = False
    check_only: bool = False
    report_file: Path | None = None
    allow_dirty: bool = False
    quiet: bool = False
    jobs: int | None = None
    exit_non_zero_on_fix: bool = False  # pre-commit: exit 1 when files were changed
    exit_non_zero_on_open: bool = False  # pre-commit: exit 1 while findings that need a human are left
    show_fixes: bool = False  # enumerate the fixes per file and rule (ruff's --show-fixes)
    stdin: bytes | None = None  # `migrate -`: the text of paths[0] (--stdin-filename); the result goes to stdout


def _fail(message: str) -> int:
    style.echo(f"cuda2npu: error: {message}", err=True)
    return EXIT_USAGE


def _say(line: str) -> None:
    """A summary line on stderr, wrapped at word boundaries on a terminal."""
    style.echo(style.wrap(line), err=True)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _named(code: str) -> str:
    """``NPU101 cuda-method-call``: a code with its rule's name, as ruff's statistics show them."""
    doc = all_rules().get(code)
    return f"{code} {doc.name}" if doc is not None else code


def _by_code(findings) -> str:
    return ", ".join(f"{_named(code)} ×{n}" for code, n in sorted(Counter(f.code for f in findings).items()))


def _out_dir_problem(request: MigrateRequest) -> str | None:
    if len(request.paths) != 1 or not request.paths[0].is_dir():
        return "--out needs exactly one directory PATH"
    source, out = request.paths[0].resolve(), request.out_dir.resolve()
    if out == source or out.is_relative_to(source):
        return f"--out {request.out_dir} is inside {request.paths[0]}; choose a directory outside the project"
    if (out / INCOMPLETE_NOTE).is_file():
        return f"--out {request.out_dir} is an incomplete copy left by an interrupted run; delete it and run again"
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        return f"--out {request.out_dir} exists and is not an empty directory (the copy is written into a new or empty one)"
    return None


MAX_LISTED_MARKERS = 10
MAX_SAME_REASON = 3  # files skipped for one reason listed one by one; more: the first and a count
MAX_LISTED_FILES = 20


def marker_locations(results: list[FileResult], by_name: dict[str, Path]) -> dict[str, list]:
    """Where the migrated files hold ``# TODO(cuda2npu)`` markers: path -> [12, ...] (notebooks: ["cell 3:2", ...];
    dependency files and run configs too).

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
            else:  # requirements, pyproject/setup.cfg, run configs: the same `#` comment markers
                found = marker_lines(data.decode("utf-8", "replace"))
        except Exception:  # noqa: BLE001 - unreadable or undecodable: nothing to list
            continue
        if found:
            locations[result.path] = found
    return locations


def _listing(items: list[str], limit: int = MAX_LISTED_MARKERS) -> str:
    more = f" ... and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def _print_markers(locations: dict[str, list], report: Path | None) -> None:
    listed = [f"{path}:{where}" for path, lines in sorted(locations.items()) for where in lines]
    if not listed:
        return
    details = (
        f"with their findings in {report}" if report is not None else "--report FILE lists them with their findings"
    )
    _say(f"  TODO(cuda2npu) markers ({len(listed)}): {_listing(listed)} ({details})")


def _print_left_open(results: list[FileResult], markers: dict[str, list], report: Path | None) -> None:
    """What the run leaves to a person, counted once per finding: the findings the markers are for
    (with where the markers are), those in files without markers, and the advisories (never marked)."""
    need_human, advisories = left_open(results)
    if need_human:
        _say(
            f"  {style.paint('need a human', style.enabled(True), fg='yellow', bold=True)}: "
            f"{_plural(len(need_human), 'finding')} ({_by_code(need_human)})"
        )
    _print_markers(markers, report)
    unmarked = [f for f in need_human if f.path not in markers]
    if unmarked:
        where = [f"{location(f)} {f.code}" for f in sorted(unmarked, key=lambda f: f.sort_key())]
        _say(f"  not marked in the code (file not written, or markers off): {_listing(where)}")
    if advisories:
        codes = sorted({f.code for f in advisories})
        select = "NPU8" if all(code.startswith("NPU8") for code in codes) else ",".join(codes)
        _say(
            f"  advisories, reported only (slower or different on NPU, not marked): {_by_code(advisories)}; "
            f"`cuda2npu check --select {select}` lists them"
        )


def _paths(request: MigrateRequest) -> str:
    return " ".join(shlex.quote(str(path)) for path in request.paths)


def _print_next(request: MigrateRequest, summary: Summary, markers: dict[str, list]) -> None:
    """Where the results went and what to run next."""
    review = "the TODO(cuda2npu) markers" if markers else "the changes"
    if request.out_dir is not None:
        out = shlex.quote(str(request.out_dir))
        _say(
            f"  wrote: the migrated copy {out}/ ({_plural(summary.changed, 'file')} changed), its report "
            f"{shlex.quote(str(request.report_file))} and the validation harness {out}/npu_validation/"
        )
        from cuda2npu.validation.generate import configured_entries

        entry = "" if configured_entries(request.paths[0]) else " --entry MODULE:FUNCTION"
        _say(
            f"  next: review {review} in {out}, then compare it with the original: "
            f"`cuda2npu validate {_paths(request)} {out}{entry}` or `python -m pytest {out}/npu_validation`"
        )
        return
    if request.report_file is not None:
        _say(f"  report: {request.report_file}")
    if request.diff or request.check_only:
        if summary.changed:
            _say(
                f"  next: `cuda2npu migrate {_paths(request)}` rewrites the files in place, "
                f"`--out DIR` writes a migrated copy (with a validation harness)"
            )
    elif summary.changed:
        shown_by = " (`git diff` shows the rewrite)" if in_work_tree(request.paths) else ""
        _say(f"  next: review {review}{shown_by}, then `cuda2npu check {_paths(request)}` lists what is left")


def _print_summary(summary: Summary, wrote: bool) -> None:
    verb = "changed" if wrote else "would change"
    _say(
        f"cuda2npu: {_plural(summary.scanned, 'file')} scanned, {summary.skipped_prefilter} skipped by prefilter, "
        f"{summary.skipped_other} skipped, {summary.changed} {verb}, {summary.failed} failed"
    )
    if summary.edits:
        edits = ", ".join(f"{_named(code)} ({tier}) ×{n}" for (code, tier), n in sorted(summary.edits.items()))
        _say(f"  edits: {edits}")


def _print_pins(options: Options) -> None:
    """What the project's version pins decided (the torch_npu release the rewrites target)."""
    if options.target.pin:
        _say(
            f"  target: torch_npu {options.target.text}, for the pin {options.target.pin} "
            f"({', '.join(options.project.pin_files)}); --target-torch-npu overrides it"
        )


def _print_changed(results: list[FileResult], verb: str) -> None:
    """``Migrated: path`` for the files written (what the pre-commit hook changed)."""
    changed = [r.path for r in results if r.status == "changed"]
    for path in changed[:MAX_LISTED_FILES]:
        style.echo(f"{verb}: {path}", err=True)
    if len(changed) > MAX_LISTED_FILES:
        style.echo(f"... and {len(changed) - MAX_LISTED_FILES} more (the report lists every file)", err=True)


def _print_failures(results: list[FileResult]) -> None:
    """Failed files with their position and reason, and files skipped for a reason worth knowing
    (a reason many files share, as those of a vendored library: once, with the first of them)."""
    on = style.enabled(True)
    skipped: dict[str, list[str]] = {}
    for result in results:
        if result.status == "failed":
            engine = [f for f in result.findings if f.code.startswith("NPU00")]  # the failure itself
            where = next((location(f) for f in engine), result.path)
            style.echo(f"{style.paint(where, on, bold=True)}: {style.paint(result.reason, on, fg='red')}", err=True)
        elif result.status == "skipped" and result.reason != PREFILTER_REASON:
            skipped.setdefault(result.reason, []).append(result.path)
    for reason, paths in skipped.items():
        shown = paths if len(paths) <= MAX_SAME_REASON else paths[:1]
        for path in shown:
            style.echo(f"{style.paint(path, on, bold=True)}: skipped ({reason})", err=True)
        if len(paths) > len(shown):
            style.echo(
                f"... and {len(paths) - 1} more files skipped for the same reason (the report lists them)", err=True
            )


def _not_written(result: FileResult, why: FileResult, summary: Summary) -> None:
    """Turn a changed result into ``why``'s status (nothing of the file was written): failed (it
    could not be written) or skipped (the user's uncommitted changes come first)."""
    result.status, result.reason = why.status, why.reason
    for finding in result.findings:
        if finding.applied:
            summary.edits[(finding.code, str(finding.tier))] -= 1
    summary.edits += Counter()  # drops the zero counts
    result.findings = [*(replace(f, applied=False) for f in result.findings), *why.findings]
    summary.changed -= 1
    if why.status == "failed":
        summary.failed += 1
    else:
        summary.skipped_other += 1


def _print_companions(companions: list[Companion], wrote: bool) -> None:
    for companion in companions:
        users = f"imported by {len(companion.needed_by)} migrated file{'s' * (len(companion.needed_by) > 1)}"
        if companion.status == DIFFERS:
            style.echo(
                f"{companion.path}: exists and differs from the generated version; kept as it is (delete it "
                f"to regenerate); {users}",
                err=True,
            )
        elif companion.status == CREATE:
            style.echo(f"cuda2npu: {'created' if wrote else 'would create'} {companion.path} ({users})", err=True)
        elif companion.status != SAME:
            style.echo(f"{companion.path}: {companion.status}", err=True)


@dataclass
class _Written:
    """The write phase's plan, for the message of an interrupted run: what is on disk is counted
    then (an interrupt can land between a file's rename and any counter)."""

    generated: list[tuple[Path, bytes]] = field(default_factory=list)
    migrated: list[tuple[Path, bytes]] = field(default_factory=list)

    def interrupted(self, out_dir: Path | None) -> str:
        generated, migrated = _on_disk(self.generated), _on_disk(self.migrated)
        total = len(self.generated) + len(self.migrated)
        parts = f" ({generated} generated, {migrated} migrated)" if self.generated else ""
        then = (
            f"; {out_dir} is an incomplete copy: delete it and run again"
            if out_dir is not None
            else "; run the same command again to finish (written files are not changed twice)"
        )
        return (
            f"cuda2npu: interrupted after writing {generated + migrated} of {total} files{parts}; "
            f"every file is either old or new{then}"
        )


def _on_disk(planned: list[tuple[Path, bytes]]) -> int:
    """How many of the planned files hold their new bytes."""
    count = 0
    for path, data in planned:
        try:
            count += path.read_bytes() == data
        except OSError:
            pass
    return count


def _write_all(changed: list[tuple[FileResult, Path]], summary: Summary, in_place: bool = False) -> None:
    """Write every changed file atomically; a file that cannot be written is reported, not fatal."""
    for result, target in changed:
        try:
            atomic_write(target, result.new_source, refuse_read_only=in_place)
        except OSError as exc:
            _not_written(result, io_error(result.path, exc, "write"), summary)


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


def migrate_stdin(request: MigrateRequest) -> int:
    """``migrate -``: the migrated text on stdout (``--diff``: the diff; ``--check``: nothing), the
    findings left open on stderr; exit codes as for a file. Generated companion files are not
    written: the message names them."""
    path = request.paths[0]
    result = process_stdin(request.stdin, path, display_name(path), request.settings.options_for(path))
    changed = result.status == "changed"
    if request.diff:
        if changed:
            style.echo(color_diff(unified_diff(result.path, request.stdin, result.new_source)), nl=False)
    elif not request.check_only:
        output = click.get_binary_stream("stdout")
        output.write(result.new_source if changed else request.stdin)
        output.flush()
    if not request.quiet:
        style.print_warnings([result])
        _print_failures([result])
        for name in result.companions if changed else []:
            _say(f"  needs the generated {name} next to it: `cuda2npu migrate` on the project writes it")
        markers = marker_lines(decode(result.new_source)) if changed and result.path.endswith((".py", ".pyi")) else []
        _print_left_open([result], {result.path: markers} if markers else {}, None)
    if result.status == "failed" or ((request.diff or request.check_only) and changed):
        return 1
    return 1 if (request.exit_non_zero_on_fix and changed) or _open(request, [result]) else 0


def run_migrate(request: MigrateRequest) -> int:
    if request.out_dir is not None:
        problem = _out_dir_problem(request)
        if problem:
            return _fail(problem)
    root = request.paths[0] if request.out_dir is not None else None

    def name_of(path: Path) -> str:  # --out: relative to the project root, as in the copy
        return path.relative_to(root).as_posix() if root else display_name(path)

    # --out leaves the source tree as it is: no result cache written into it
    done = run_rules(request.settings, request.paths, request.jobs, name_of, cache=None if request.out_dir else "auto")
    results, summary = done.results, done.summary
    for path, reason in done.skipped:
        skipped = FileResult(name_of(path), "skipped", reason)
        summary.add(skipped)
        results.append(skipped)
    by_name = done.by_name
    changed = [r for r in results if r.status == "changed"]

    if request.diff or request.check_only:
        companions = plan([(r, by_name[r.path]) for r in changed])
        new_files = [c for c in companions if c.status == CREATE]
        if request.diff:
            for result in changed:
                style.echo(
                    color_diff(unified_diff(result.path, by_name[result.path].read_bytes(), result.new_source)),
                    nl=False,
                )
            for companion in new_files:
                style.echo(color_diff(unified_diff(companion.path, None, companion.text)), nl=False)
        elif not request.quiet:
            for result in changed:
                style.echo(f"Would migrate: {result.path}")
            for companion in new_files:
                style.echo(f"Would create: {companion.path}")
        _finish(request, results, summary, wrote=False, companions=companions, by_name=by_name)
        return 1 if changed or summary.failed or _open(request, results) else 0

    written = _Written()
    try:
        if request.out_dir is not None:
            request.out_dir.mkdir(parents=True, exist_ok=True)
            (request.out_dir / INCOMPLETE_NOTE).write_text(INCOMPLETE_TEXT, encoding="utf-8")
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
                changed = _refuse_dirty(changed, by_name, request.paths, summary)
            targets = [(r, by_name[r.path].resolve()) for r in changed]  # through symlinks, keeping them
        companions = plan(targets)
        written.generated = [(c.target, c.text) for c in companions if c.status == CREATE]
        written.migrated = [(target, r.new_source) for r, target in targets]
        targets = _write_companions(companions, targets, summary)
        _write_all(targets, summary, in_place=request.out_dir is None)
        if request.out_dir is not None:
            _write_validation(request, results)
            (request.out_dir / INCOMPLETE_NOTE).unlink()
    except KeyboardInterrupt:
        style.echo(written.interrupted(request.out_dir), err=True)
        return EXIT_INTERRUPTED
    _finish(request, results, summary, wrote=True, companions=companions, by_name=by_name)
    incomplete = summary.failed or any(r.reason.endswith(DIRTY_HINT) for r in results)  # not everything migrated
    return 1 if incomplete or (request.exit_non_zero_on_fix and summary.changed) or _open(request, results) else 0


def _open(request: MigrateRequest, results: list[FileResult]) -> bool:
    """--exit-non-zero-on-open: whether findings that need a human are left (the summary's "need a
    human": manual and review items not fixed, marked or not; advisories do not count). They are
    found again on every run, so a second run over the marked files exits 1 too."""
    return request.exit_non_zero_on_open and bool(left_open(results)[0])


DIRTY_HINT = "commit it first, or pass --allow-dirty"


def _refuse_dirty(changed: list[FileResult], by_name: dict[str, Path], paths: list[Path], summary: Summary):
    """Leave the files that would change but have uncommitted git changes (or are untracked) as they
    are, reported as skipped (not an error: the run exits as if they were not there); the other
    files are still migrated."""
    dirty = dirty_files(paths)
    for result in changed:
        state = dirty.get(by_name[result.path].resolve())
        if state is not None:
            what = "untracked: git has no copy of it" if state == "untracked" else "it has uncommitted changes"
            reason = f"{what}; {DIRTY_HINT}"
            _not_written(result, FileResult(result.path, "skipped", reason), summary)
    return [r for r in changed if r.status == "changed"]


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
            **request.options.report(),
            "mode": "diff"
            if request.diff
            else "check"
            if request.check_only
            else "out"
            if request.out_dir
            else "in-place",
        }
        report = migration_report(results, options, summary, [c.to_json() for c in companions], markers)
        if (
            request.out_dir is not None and wrote
        ):  # the harness `--out` writes beside the copy (readers of rounds 45-46)
            from cuda2npu.validation.generate import PACKAGE

            report["validation_harness"] = f"{PACKAGE}/"
        request.report_file.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if request.quiet:  # errors only
        _print_failures([r for r in results if r.status == "failed"])
        return
    style.print_warnings(results)
    if wrote:
        _print_changed(results, "Migrated")
    _print_failures(results)
    _print_companions(companions, wrote)
    if request.show_fixes:
        applied = [f for r in results if r.status == "changed" for f in r.findings if f.applied]
        enumeration = fixes(applied, "Fixed" if wrote else "Would fix")
        if enumeration:
            style.echo(enumeration, err=True)
    _print_summary(summary, wrote)
    _print_pins(request.options)
    _print_left_open(results, markers, request.report_file)
    _print_next(request, summary, markers)
