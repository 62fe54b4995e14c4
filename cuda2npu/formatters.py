"""Rendering findings for ``check``: text, concise, json and GitHub annotations."""

from __future__ import annotations

import json
from typing import Callable

from cuda2npu.diagnostics import Finding
from cuda2npu.report import Summary, check_report


def _fix_mark(finding: Finding) -> str:
    return " [*]" if finding.fixable else ""


def concise(findings: list[Finding], summary: Summary, sources: dict[str, list[str]]) -> str:
    lines = [f"{f.path}:{f.line}:{f.column}: {f.code}{_fix_mark(f)} {f.message}" for f in findings]
    return "\n".join(lines + [_closing(findings)])


def text(findings: list[Finding], summary: Summary, sources: dict[str, list[str]]) -> str:
    """ruff-like: header line, the source line and a caret under the column."""
    blocks = []
    for f in findings:
        block = [f"{f.path}:{f.line}:{f.column}: {f.code}{_fix_mark(f)} {f.message} ({f.name}, {f.tier})"]
        source_lines = sources.get(f.path, [])
        if 0 < f.line <= len(source_lines):
            line = source_lines[f.line - 1].rstrip("\r\n")
            gutter = f"{f.line:>5} | "
            block += [gutter + line, " " * (len(gutter) + f.column - 1) + "^"]
        blocks.append("\n".join(block))
    return "\n\n".join(blocks + [_closing(findings)])


def _closing(findings: list[Finding]) -> str:
    if not findings:
        return "All checks passed!"
    fixable = sum(f.fixable for f in findings)
    plural = "s" if len(findings) != 1 else ""
    return f"Found {len(findings)} finding{plural} ({fixable} fixable with `cuda2npu migrate`)."


def as_json(findings: list[Finding], summary: Summary, sources: dict[str, list[str]]) -> str:
    return json.dumps(check_report(findings, summary), indent=2)


def _escape(value: str, property_value: bool = False) -> str:
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if property_value:
        value = value.replace(":", "%3A").replace(",", "%2C")
    return value


def github(findings: list[Finding], summary: Summary, sources: dict[str, list[str]]) -> str:
    """GitHub Actions workflow commands (one ``::error`` annotation per finding)."""
    return "\n".join(
        f"::error title={_escape('cuda2npu ' + f.code, True)},file={_escape(f.path, True)},"
        f"line={f.line},col={f.column}::{_escape(f'{f.code} {f.message}')}"
        for f in findings
    )


FORMATTERS: dict[str, Callable[[list[Finding], Summary, dict], str]] = {
    "text": text,
    "concise": concise,
    "json": as_json,
    "github": github,
}
