"""The pure core: ``migrate_source(bytes) -> FileResult`` (no I/O, no global state).

Flow per file: decode check → parse → rules (one batched traversal) → fixes allowed by the tier
→ apply (bottom-up, composing) → re-parse and repeat until no fix remains (≤ MAX_ROUNDS)
→ inline markers for what is left to a human → ``import torch_npu`` where needed → verify the result parses.

Markers (``rules/tables/markers.toml``): manual findings, findings left unfixed, and applied fixes
that still need a check at their line get a ``# TODO(cuda2npu): CODE [review: ]reason`` comment
above their statement. The findings reported are the ones still there at the end: a finding whose
code a later rewrite removed (an import that became unused) is not listed. A report that says the
file cannot run on an NPU host at all (``Report.sole``: a module nothing ports imported unguarded,
NPU606) is kept alone: every other edit and marker would be pointless, so the file stays as written.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
from collections import Counter
from pathlib import Path

import libcst as cst

from cuda2npu.core import large_files, noqa, prefilter
from cuda2npu.core.catalogue import rule as rule_doc
from cuda2npu.core.decoding import SourceError, decode, position
from cuda2npu.core.deep_stack import run_deep
from cuda2npu.core.diagnostics import PREFILTER_REASON, FileResult, Finding
from cuda2npu.core.imports import add_imports, ensure_torch_npu_import, is_import_line
from cuda2npu.core.markers import marker_reason
from cuda2npu.core.options import Options
from cuda2npu.core.positions import positions_for, positions_of
from cuda2npu.core.prefilter import trigger
from cuda2npu.core.rulebase import COMPOUND_STATEMENTS, Report, Rule, RuleContext
from cuda2npu.core.source import parse, parse_module
from cuda2npu.core.transform import FixApplier
from cuda2npu.core.traversal import release, walk_batched
from cuda2npu.families import enabled_rules
from cuda2npu.filekinds.unparsed import engine_finding, skipped

MAX_ROUNDS = 6


def triggered(rules: list[type[Rule]], text: bytes, options: Options) -> list[type[Rule]]:
    """The rules whose own triggers occur in ``text`` (the per-rule prefilter).

    A rule can only report what its triggers announce, so a file that matched the prefilter for
    ``cuda`` does not pay for the pre-passes of the apex, attention or ColossalAI rules. Each trigger
    is searched once per file however many rules share it (a dozen ColossalAI rules share one).
    """
    found: dict[str, bool] = {}

    def occurs(pattern: str) -> bool:
        if pattern not in found:
            found[pattern] = trigger(pattern).search(text) is not None
        return found[pattern]

    return [
        cls
        for cls in rules
        if any(occurs(trigger) for trigger in cls.triggers_for(options))
        and all(occurs(r) for r in cls.requires_for(options))
    ]


def run_rules(module: cst.Module, options: Options, rules: list[type[Rule]], text: bytes | None = None) -> list[Report]:
    """Reports of ``rules`` in one batched traversal; ``text``: the bytes ``module`` was parsed from,
    for the rules' cheap regex prechecks (the caller keeps to the rules :func:`triggered` there)."""
    if not rules:
        return []
    try:
        ctx = RuleContext(module, options, text)
        walk_batched(module, [ctx.resolver, ctx, *(cls(ctx) for cls in rules)])
    finally:
        release()  # the pre-passes and the traversal are done with the module's flat tree
    return ctx.reports


def _applicable(report: Report, options: Options) -> bool:
    return options.fix and report.fix is not None and report.tier <= options.max_tier


def _finding(path: str, report: Report, position, options: Options, applied: bool) -> Finding:
    doc = rule_doc(report.code)
    start, end = position.start, position.end
    return Finding(
        path=path,
        line=start.line,
        column=start.column + 1,
        end_line=end.line,
        end_column=end.column + 1,
        code=report.code,
        name=doc.name,
        message=report.message,
        tier=report.tier,
        fixable=report.fix is not None and report.tier <= options.max_tier,
        applied=applied,
    )


def _apply_round(module: cst.Module, reports: list[Report], options: Options):
    """The module with the applicable fixes (and the markers of applied fixes that need a check),
    and the imports the applied fixes need."""
    fixes: dict[cst.CSTNode, list] = {}
    for index, report in enumerate(reports):
        if _applicable(report, options):
            fixes.setdefault(report.node, []).append((index, report.fix))
    checks = [r for r in reports if _applicable(r, options)]
    applier = FixApplier(fixes, *_markers_of(module, checks, options, applied=True))
    new_module = module.visit(applier)
    applied = {i for _, entries in fixes.items() for i, _ in entries} - applier.failed
    needs = [need for i in sorted(applied) for need in reports[i].imports]
    return add_imports(new_module, needs), applied


def _markers_of(module: cst.Module, reports: list[Report], options: Options, applied: bool, extra=()):
    """(statement -> [(code, reason)], statement -> comment lines above it) for FixApplier;
    ``extra``: more (statement, code, reason)."""
    per_statement: dict[cst.CSTNode, list[tuple[str, str]]] = {}
    for report in reports:
        reason = marker_reason(report.code, report.tier, report.message, options, applied)
        if reason is not None and report.statement is not None:
            per_statement.setdefault(report.statement, []).append((report.code, reason))
    for statement, code, reason in extra:
        per_statement.setdefault(statement, []).append((code, reason))
    # libcst keeps the comments above the first statement in the module's header
    above = {module.body[0]: module.header} if module.body and per_statement else {}
    return per_statement, above


def _add_markers(module: cst.Module, reports: list[Report], options: Options, extra=()) -> cst.Module:
    """Markers for the findings left in the code: the final round's (none of which is applicable), and ``extra``."""
    open_reports = [r for r in reports if not _applicable(r, options)]
    markers, above = _markers_of(module, open_reports, options, applied=False, extra=extra)
    return module.visit(FixApplier({}, markers, above)) if markers else module


def _line_map(old: str, new: str) -> dict[int, int]:
    """1-based line of ``old`` -> the line of ``new`` it became (lines a rewrite deleted are absent)."""
    a, b = old.splitlines(), new.splitlines()
    mapping = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "replace" and i2 - i1 != j2 - j1 and (i2 - i1) * (j2 - j1) <= 4096:
            mapping.update(_closest_lines(a, b, range(i1, i2), j1, j2))
        elif tag in ("equal", "replace"):
            for i in range(i1, i2):
                mapping[i + 1] = j1 + min(i - i1, j2 - j1 - 1) + 1
    return mapping


def _closest_lines(a: list[str], b: list[str], old: range, j1: int, j2: int) -> dict[int, int]:
    """A block of lines replaced by one of another length (a call grown into a 5-line dispatch next
    to a changed line): each old line -> the most similar new line, in order."""
    mapping, start = {}, j1
    for i in old:
        start = max(range(start, j2), key=lambda j: (difflib.SequenceMatcher(None, a[i], b[j]).ratio(), -j))
        mapping[i + 1] = start + 1
    return mapping


def _innermost_statements(module: cst.Module, lines: set[int]) -> dict[int, cst.CSTNode]:
    """line -> the innermost statement of ``module`` that spans it."""
    best: dict[int, tuple[int, cst.CSTNode]] = {}
    for node, where in positions_of(module).items():
        if isinstance(node, (cst.SimpleStatementLine, *COMPOUND_STATEMENTS)):
            for line in lines:
                size = where.end.line - where.start.line
                if where.start.line <= line <= where.end.line and (line not in best or size < best[line][0]):
                    best[line] = (size, node)
    return {line: node for line, (_, node) in best.items()}


def _orphans(module: cst.Module, orphans: list[_Placed], options: Options):
    """Markers for unfixed findings that the last round no longer reports (a rewrite hid the
    construct from its rule: ``dtype=amp_dtype`` once the autocast says "npu"), each positioned in
    the text it was found in (the original file's, or a later round's), found through a line diff:
    ([(statement, code, reason)], the findings whose line was deleted)."""
    mappings: dict[bytes, dict[int, int]] = {}
    for placed in orphans:
        if placed.text not in mappings:
            mappings[placed.text] = _line_map(decode(placed.text), module.code)
    lines = {mappings[p.text].get(p.finding.line, 0) for p in orphans} - {0}
    statements = _innermost_statements(module, lines)
    extra, gone = [], []
    for placed in orphans:
        finding = placed.finding
        statement = statements.get(mappings[placed.text].get(finding.line, 0))
        reason = marker_reason(finding.code, finding.tier, finding.message, options, applied=False)
        if statement is None:
            gone.append(placed)
        elif reason is not None:
            extra.append((statement, finding.code, reason))
    return extra, gone


def _take(pool: list[_Placed], match) -> _Placed | None:
    """Remove and return the first finding of ``pool`` that ``match`` accepts."""
    found = next((f for f in pool if match(f)), None)
    if found is not None:
        pool.remove(found)
    return found


def _still_open(
    path: str, module: cst.Module, placed: list[_Placed], reports: list[Report], options: Options
) -> tuple[list[_Placed], list[_Placed]]:
    """(findings, orphans): the unfixed findings matched to what the last round (``reports`` on
    ``module``) reports.

    An earlier unfixed finding is matched by code and message, else by code (its message quoted
    code a rewrite changed: the line stays the original one, the message becomes the new one).
    One that nothing matches is dropped if it was at an import, which a rewrite then removed as
    unused. Elsewhere it stays, an orphan: a rewrite may hide the construct from its rule without
    settling it; if a later round reported the same code anew (a rewrite changed the construct's
    message), the two are one finding, at the original line. A finding only the last round
    reports is added at its position there.
    """
    kept = [p for p in placed if p.finding.applied]
    earlier = [p for p in placed if not p.finding.applied]
    open_reports = [r for r in reports if not _applicable(r, options)]
    matched, unmatched = [], []
    for report in open_reports:
        same = _take(earlier, lambda p: (p.finding.code, p.finding.message) == (report.code, report.message))
        (matched.append(same) if same is not None else unmatched.append(report))
    new = []
    for report in unmatched:
        same = _take(earlier, lambda p: p.finding.code == report.code and p.first) or _take(
            earlier, lambda p: p.finding.code == report.code
        )
        if same is None:
            new.append(report)
            continue
        same.finding = dataclasses.replace(same.finding, message=report.message)
        matched.append(same)
    orphans = []
    for orphan in (p for p in earlier if not p.at_import):
        later = orphan.first and _take(matched, lambda p: p.finding.code == orphan.finding.code and not p.first)
        if later:
            orphan.finding = dataclasses.replace(orphan.finding, message=later.finding.message)
            matched.append(orphan)
        else:
            orphans.append(orphan)
    fresh = [_Placed(f, None) for f in _positioned(path, module, new, options, set())]
    return kept + matched + orphans + fresh, orphans


def migrate_source(source: bytes, path: str, options: Options) -> FileResult:
    """Check (``options.fix=False``) or migrate one file's bytes.

    Runs on the deep-stack thread (``core/deep_stack.py``): libcst recurses once per nesting level.
    What is still too deep ends as a RecursionError, reported as NPU001.
    """
    return run_deep(_migrate_guarded, source, path, options)


def _migrate_guarded(source: bytes, path: str, options: Options) -> FileResult:
    try:
        return _migrate_source(source, path, options)
    except RecursionError:
        message = "cannot analyse: too deeply nested (recursion limit); file left unchanged"
        return FileResult(path, "failed", message, [engine_finding(path, "NPU001", message)])


def _migrate_source(source: bytes, path: str, options: Options) -> FileResult:
    reason = prefilter.other_framework(source)
    if reason is not None:  # PyTorch rules do not apply (a JAX file's side-effect imports are deliberate)
        return skipped(source, path, reason)
    rules = enabled_rules(options)
    active = triggered(rules, source, options)
    if not active:  # the prefilter's one pattern cannot say a rule's `requires` (a parse is the cost)
        return skipped(source, path, PREFILTER_REASON)
    if len(source) > large_files.LARGE_FILE_BYTES:
        return _migrate_large(source, path, options, rules, active)
    return _migrate_whole(source, path, options, rules, active)


def _migrate_whole(source: bytes, path: str, options: Options, rules, active) -> FileResult:
    try:
        module = parse(source)
    except SourceError as exc:
        finding = engine_finding(path, "NPU001", str(exc), exc.line, exc.column, exc.end)
        return FileResult(path, "failed", str(exc), [finding])
    return _migrate_module(module, source, path, options, rules, active)


def _migrate_large(source: bytes, path: str, options: Options, rules, active) -> FileResult:
    """A file above LARGE_FILE_BYTES, statement by statement (core/large_files.py): the pipeline runs
    on the reduced text, its findings go back to their lines and the elided statements back in
    place. Where the statements cannot be told apart, or the reduced text does not parse (a syntax
    error in a kept statement, or the scan misjudged one), the whole file up to MAX_PARSED_BYTES."""
    reduction = large_files.reduce(source, prefilter.rule_triggers(rules, options))
    parsed = len(source if reduction is None else reduction.text)
    if parsed <= large_files.MAX_PARSED_BYTES and reduction is not None and reduction.elided:
        try:
            module = parse(reduction.text)
        except SourceError as exc:
            if len(source) > large_files.MAX_PARSED_BYTES:  # too large to parse whole: the error as found
                where = reduction.line(exc.line), exc.column
                return FileResult(path, "failed", str(exc), [engine_finding(path, "NPU001", str(exc), *where)])
            return _migrate_whole(source, path, options, rules, active)
        result = _migrate_module(
            module, reduction.text, path, options, rules, triggered(rules, reduction.text, options)
        )
        return _restored(result, reduction, path)
    if parsed > large_files.MAX_PARSED_BYTES:
        message = large_files.too_large(parsed, reduction is not None)
        return FileResult(path, "failed", message, [engine_finding(path, "NPU001", message)])
    return _migrate_whole(source, path, options, rules, active)


def _restored(result: FileResult, reduction: large_files.Reduction, path: str) -> FileResult:
    """``result`` of a reduced text made the whole file's: findings at the file's lines, the elided
    statements spliced back into the migrated text."""
    findings = [
        dataclasses.replace(f, line=reduction.line(f.line), end_line=f.end_line and reduction.line(f.end_line))
        for f in result.findings
    ]
    warnings = [*result.warnings, reduction.warning(path)]
    new_source = result.new_source and reduction.splice(result.new_source)
    if result.new_source is not None and new_source is None:
        message = "large file: a rewrite moved statements around elided code; file left unchanged"
        kept = [dataclasses.replace(f, applied=False) for f in findings]
        return FileResult(path, "failed", message, [*kept, engine_finding(path, "NPU002", message)], warnings=warnings)
    return dataclasses.replace(result, findings=findings, new_source=new_source, warnings=warnings)


def _migrate_module(module: cst.Module, source: bytes, path: str, options: Options, rules, active) -> FileResult:
    has_noqa = not options.ignore_noqa and noqa.may_concern_us(source)
    placed: list[_Placed] = []
    unused_noqa: list[Finding] = []
    needs_torch_npu = False
    companions: set[str] = set()
    current = module
    reports: list[Report] = []
    text = source
    rounds_applied = 0  # rounds whose fixes changed the code
    for round_number in range(MAX_ROUNDS):
        if round_number:  # a rewrite may bring a rule's trigger or take one away
            active = triggered(rules, text, options)
        reports = run_rules(current, options, active, text)
        known: dict = {}  # positions already computed for this round's reports
        if has_noqa and (reports or (round_number == 0 and noqa.unused_enabled(options))):
            # suppressed findings are neither reported nor fixed (cuda2npu/core/noqa.py)
            known = positions_for(current, [report.node for report in reports])
            reports, unused = noqa.suppress(decode(text), known, reports, options, path, round_number == 0)
            unused_noqa += unused
        reports = [r for r in reports if r.sole] or reports  # the file cannot run on an NPU host: left as written
        if not any(_applicable(r, options) for r in reports):
            if round_number == 0:
                placed += _place(_positioned(path, current, reports, options, set(), known), reports, text, True)
            break
        candidate, applied = _apply_round(current, reports, options)
        if round_number == 0:
            placed += _place(_positioned(path, current, reports, options, applied, known), reports, text, True)
        else:  # later rounds add what earlier rewrites made fixable, and new unfixed findings
            placed += _later_round_findings(path, current, reports, applied, placed, options, text)
        needs_torch_npu |= any(reports[i].needs_torch_npu for i in applied)
        companions.update(reports[i].companion for i in applied if reports[i].companion)
        if candidate.code == current.code:
            break
        rounds_applied = round_number + 1
        try:
            text = candidate.bytes  # bytes keep the BOM and coding cookie
            current = parse_module(text)
        except cst.ParserSyntaxError as exc:
            codes = sorted({reports[i].code for i in applied})
            message = f"rewrite by {', '.join(codes)} does not parse ({exc.message}); file left unchanged"
            findings = [p.finding for p in placed] + [engine_finding(path, "NPU002", message)]
            return FileResult(path, "failed", message, sorted(findings + unused_noqa, key=Finding.sort_key))
    else:
        placed.append(_Placed(engine_finding(path, "NPU003", f"fixes did not converge in {MAX_ROUNDS} rounds"), None))
        rounds_applied = 0  # the last reports are not of the final code: keep every finding

    orphans: list[_Placed] = []
    if rounds_applied:
        placed, orphans = _still_open(path, current, placed, reports, options)
    extra: list = []
    if orphans:
        extra, gone = _orphans(current, [p for p in orphans if p.text is not None], options)
        placed = [p for p in placed if p not in gone]
    findings = [p.finding for p in placed]
    findings += unused_noqa
    if options.fix:
        if options.markers:
            current = _add_markers(current, reports, options, extra)
        if (
            needs_torch_npu and Path(path).name != "setup.py"
        ):  # an isolated build has no torch_npu (torch >= 2.5 loads it)
            current = ensure_torch_npu_import(current, guarded=options.portable)
    findings.sort(key=Finding.sort_key)
    if not options.fix:  # check: nothing to write, so no code generation
        return FileResult(path, "unchanged", findings=findings)
    new_source = current.bytes
    if new_source == source:
        return FileResult(path, "unchanged", findings=findings)
    lost = _round_trip_loss(module, source)
    if lost is not None:
        message = (
            "libcst does not reproduce this file byte for byte (a form feed before a statement or a "
            "final lone carriage return); file left unchanged, migrate the findings by hand"
        )
        kept = [dataclasses.replace(f, applied=False) for f in findings]
        return FileResult(path, "failed", message, [*kept, engine_finding(path, "NPU001", message, *lost)])
    problem = _output_problem(source, new_source)
    if problem is not None:
        message = f"migrated file {problem}; file left unchanged"
        kept = [dataclasses.replace(f, applied=False) for f in findings]
        return FileResult(path, "failed", message, [*kept, engine_finding(path, "NPU002", message)])
    return FileResult(path, "changed", findings=findings, new_source=new_source, companions=sorted(companions))


def _output_problem(source: bytes, new_source: bytes) -> str | None:
    """Why the rewritten bytes must not be written (None: they are fine).

    libcst's grammar accepts newer syntax than the running Python (3.12 f-strings on 3.11), so an
    original that CPython accepts must still be accepted by CPython after the rewrite.
    """
    try:
        parse_module(new_source)
    except cst.ParserSyntaxError as exc:
        return f"does not parse ({exc.message})"
    try:
        ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # CPython never accepted the original: libcst's verdict is all there is
    try:
        ast.parse(new_source)
    except (SyntaxError, ValueError) as exc:
        return f"is rejected by this Python ({exc})"
    return None


def _later_round_findings(path, module, reports, applied, earlier: list[_Placed], options, text) -> list[_Placed]:
    """Findings of a round after the first (positioned in its ``text``): every applied fix, plus
    unfixed findings that were not reported before (matched by code and message, since positions moved)."""
    seen = Counter((p.finding.code, p.finding.message) for p in earlier if not p.finding.applied)
    chosen, flags = [], set()
    for index, report in enumerate(reports):
        if index in applied:
            flags.add(len(chosen))
            chosen.append(report)
        elif seen[(report.code, report.message)]:
            seen[(report.code, report.message)] -= 1
        else:
            chosen.append(report)
    return _place(_positioned(path, module, chosen, options, flags), chosen, text, False)


def _round_trip_loss(module: cst.Module, source: bytes) -> tuple[int, int] | None:
    """Where the parsed file's own code differs from its bytes (None: a lossless round trip)."""
    regenerated = module.bytes
    if regenerated == source:
        return None
    offset = next(
        (i for i, (a, b) in enumerate(zip(source, regenerated)) if a != b), min(len(source), len(regenerated))
    )
    return position(source, offset)


def _positioned(
    path: str,
    module: cst.Module,
    reports: list[Report],
    options: Options,
    applied: set[int],
    known: dict | None = None,
) -> list[Finding]:
    """Findings of ``reports`` (``applied``: the indexes of those whose fix was applied); ``known``:
    positions computed before for (some of) these nodes in ``module``."""
    if not reports:
        return []
    nodes = [report.node for report in reports]
    positions = known if known and all(node in known for node in nodes) else positions_for(module, nodes)
    return [
        _finding(path, report, positions[report.node], options, index in applied)
        for index, report in enumerate(reports)
    ]


@dataclasses.dataclass(eq=False)
class _Placed:
    """A finding while the rounds run: ``text``, the bytes its position refers to (the original
    file's, or the later round's that found it; None: an engine finding); ``first``: found in the
    first round; ``at_import``: unfixed, at an import statement (a rewrite may remove the import as
    unused, and the finding with it: :func:`_still_open`)."""

    finding: Finding
    text: bytes | None
    first: bool = False
    at_import: bool = False


def _place(findings: list[Finding], reports: list[Report], text: bytes, first: bool) -> list[_Placed]:
    """``findings`` (one per report of ``reports``, in order) as found in ``text``."""
    return [
        _Placed(finding, text, first, not finding.applied and is_import_line(report.statement))
        for finding, report in zip(findings, reports)
    ]
