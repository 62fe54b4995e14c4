"""The pure core: ``migrate_source(bytes) -> FileResult`` (no I/O, no global state).

Flow per file: decode check → parse → rules (one batched traversal) → fixes allowed by the tier
→ apply (bottom-up, composing) → re-parse and repeat until no fix remains (≤ MAX_ROUNDS)
→ inline markers for manual findings → ``import torch_npu`` where needed → verify the result parses.
"""

from __future__ import annotations

import io
import re
import tokenize

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from cuda2npu.catalogue import rule as rule_doc
from cuda2npu.diagnostics import FileResult, Finding, Tier
from cuda2npu.imports import ensure_torch_npu_import
from cuda2npu.options import Options
from cuda2npu.rulebase import Report, Rule, RuleContext, enabled_rules
from cuda2npu.transform import FixApplier, with_markers

MAX_ROUNDS = 4


class SourceError(Exception):
    """The file cannot be decoded or parsed; carries a 1-based position."""

    def __init__(self, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


def decode(source: bytes) -> str:
    """Text of a Python file, honouring a BOM and a PEP 263 coding cookie."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
        return source.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        raise SourceError(f"cannot decode: {exc}") from None


PARSER_POSITION = re.compile(r"^(?:parser error: )?error at (\d+):(\d+): ")


def _syntax_error(exc: cst.ParserSyntaxError) -> tuple[str, int, int]:
    """(message, line, column) from libcst's error, whose precise position is in its message."""
    match = PARSER_POSITION.match(exc.message)
    if match:
        detail = exc.message[match.end():]
        return f"cannot parse: {detail}", int(match.group(1)), int(match.group(2)) + 1
    return f"cannot parse: {exc.message}", exc.raw_line, exc.raw_column + 1


def parse(source: bytes) -> cst.Module:
    decode(source)
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise SourceError(*_syntax_error(exc)) from None
    except (RecursionError, MemoryError, ValueError, UnicodeError) as exc:
        raise SourceError(f"cannot parse: {type(exc).__name__}: {exc}") from None


def run_rules(module: cst.Module, options: Options, rules: list[type[Rule]]) -> list[Report]:
    ctx = RuleContext(module, options)
    cst.visit_batched(module, [ctx.resolver, ctx, *(cls(ctx) for cls in rules)])
    return ctx.reports


def _applicable(report: Report, options: Options) -> bool:
    return options.fix and report.fix is not None and report.tier <= options.max_tier


def _finding(path: str, report: Report, position, options: Options, applied: bool) -> Finding:
    doc = rule_doc(report.code)
    start = position.start
    return Finding(
        path=path,
        line=start.line,
        column=start.column + 1,
        code=report.code,
        name=doc.name,
        message=report.message,
        tier=report.tier,
        fixable=report.fix is not None and report.tier <= options.max_tier,
        applied=applied,
    )


def _engine_finding(path: str, code: str, message: str, line: int = 1, column: int = 1) -> Finding:
    doc = rule_doc(code)
    return Finding(path, line, column, code, doc.name, message, doc.tier, False)


def _apply_round(module: cst.Module, reports: list[Report], options: Options):
    fixes: dict[cst.CSTNode, list] = {}
    for index, report in enumerate(reports):
        if _applicable(report, options):
            fixes.setdefault(report.node, []).append((index, report.fix))
    applier = FixApplier(fixes)
    new_module = module.visit(applier)
    applied = {i for _, entries in fixes.items() for i, _ in entries} - applier.failed
    return new_module, applied


def _add_markers(module: cst.Module, reports: list[Report]) -> cst.Module:
    per_statement: dict[cst.CSTNode, list[tuple[str, str]]] = {}
    for report in reports:
        if report.tier is Tier.MANUAL and report.statement is not None:
            reason = report.message.splitlines()[0]
            per_statement.setdefault(report.statement, []).append((report.code, reason))
    if not per_statement:
        return module
    first = module.body[0] if module.body else None
    fixes = {
        stmt: [(0, lambda node, m=markers, s=stmt: with_markers(node, m, module.header if s is first else ()))]
        for stmt, markers in per_statement.items()
    }
    return module.visit(FixApplier(fixes))


def migrate_source(source: bytes, path: str, options: Options) -> FileResult:
    """Check (``options.fix=False``) or migrate one file's bytes."""
    try:
        module = parse(source)
    except SourceError as exc:
        finding = _engine_finding(path, "NPU001", str(exc), exc.line, exc.column)
        return FileResult(path, "failed", str(exc), [finding])

    rules = enabled_rules(options)
    findings: list[Finding] = []
    needs_torch_npu = False
    current = module
    reports: list[Report] = []
    for round_number in range(MAX_ROUNDS):
        reports = run_rules(current, options, rules)
        if not any(_applicable(r, options) for r in reports):
            if round_number == 0:
                findings += _positioned(path, current, reports, options, set())
            break
        candidate, applied = _apply_round(current, reports, options)
        if round_number == 0:
            findings += _positioned(path, current, reports, options, applied)
        else:  # later rounds only add what earlier rewrites made fixable
            later = [reports[i] for i in sorted(applied)]
            findings += _positioned(path, current, later, options, set(range(len(later))))
        needs_torch_npu |= any(reports[i].needs_torch_npu for i in applied)
        if candidate.code == current.code:
            break
        try:
            current = cst.parse_module(candidate.bytes)  # bytes keep the BOM and coding cookie
        except cst.ParserSyntaxError as exc:
            codes = sorted({reports[i].code for i in applied})
            message = f"rewrite by {', '.join(codes)} does not parse ({exc.message}); file left unchanged"
            findings.append(_engine_finding(path, "NPU002", message))
            return FileResult(path, "failed", message, sorted(findings, key=Finding.sort_key))
    else:
        findings.append(_engine_finding(path, "NPU003", f"fixes did not converge in {MAX_ROUNDS} rounds"))

    if options.fix:
        if options.markers:
            current = _add_markers(current, reports)
        if needs_torch_npu:
            current = ensure_torch_npu_import(current)
    new_source = current.bytes
    findings.sort(key=Finding.sort_key)
    if new_source == source:
        return FileResult(path, "unchanged", findings=findings)
    try:
        cst.parse_module(new_source)
    except cst.ParserSyntaxError as exc:  # pragma: no cover - defensive: markers/imports broke it
        message = f"migrated file does not parse ({exc.message}); file left unchanged"
        return FileResult(path, "failed", message, [*findings, _engine_finding(path, "NPU002", message)])
    return FileResult(path, "changed", findings=findings, new_source=new_source)


def _positioned(path: str, module: cst.Module, reports: list[Report], options: Options, applied: set[int]) -> list[Finding]:
    if not reports:
        return []
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    return [
        _finding(path, report, positions[report.node], options, index in applied)
        for index, report in enumerate(reports)
    ]
