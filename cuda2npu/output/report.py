"""The JSON outputs (versioned: other tools depend on them)."""

from __future__ import annotations

from collections import Counter

from cuda2npu import __version__
from cuda2npu.core.catalogue import is_advisory_code
from cuda2npu.core.diagnostics import FileResult, Finding, Summary, Tier

REPORT_VERSION = 1


def is_advisory(finding: Finding) -> bool:
    return is_advisory_code(finding.code)


def needs_manual_work(finding: Finding) -> bool:
    """Not fixed, and no fix exists (a manual-tier or unfixable finding); advisories are not manual work."""
    return not finding.applied and (finding.tier is Tier.MANUAL or not finding.fixable) and not is_advisory(finding)


def left_open(results: list[FileResult]) -> tuple[list[Finding], list[Finding]]:
    """The findings a migration leaves for a person: (need a human, advisories). Every finding not
    applied counts once; the first group is what the ``# TODO(cuda2npu)`` markers are written for.
    Of a failed file only the failure (NPU00x) counts: its other findings wait for the file to be
    readable, parsable or writable; a skipped file's (uncommitted changes) wait for the next run."""
    open_findings = [
        f
        for r in results
        for f in r.findings
        if not f.applied and (r.status in ("changed", "unchanged") or f.code.startswith("NPU00"))
    ]
    return [f for f in open_findings if not is_advisory(f)], [f for f in open_findings if is_advisory(f)]


def counts(findings: list[Finding]) -> list[dict]:
    return [{"code": code, "count": n} for code, n in sorted(Counter(f.code for f in findings).items())]


def _edit(finding: Finding) -> dict:
    return {"code": finding.code, "line": finding.line, "tier": str(finding.tier), "message": finding.message}


def _manual(finding: Finding) -> dict:
    return {"code": finding.code, "line": finding.line, "message": finding.message, "advisory": is_advisory(finding)}


def migration_report(
    results: list[FileResult],
    options: dict,
    summary: Summary,
    generated: list[dict],
    markers: dict[str, list] | None = None,
) -> dict:
    """``migrate --report``: one entry per file with its edits, manual items and the lines of its
    ``# TODO(cuda2npu)`` markers in the migrated file, and the generated files.

    The summary's ``need_a_human`` and ``advisories`` split the files' ``manual`` entries (every
    finding not applied) the way the command's summary does; ``markers`` counts the marker lines.
    """
    markers = markers or {}
    need_human, advisories = left_open(results)
    return {
        "version": REPORT_VERSION,
        "tool_version": __version__,
        "options": options,
        "files": [
            {
                "path": r.path,
                "status": r.status,
                "reason": r.reason,
                "edits": [_edit(f) for f in r.findings if f.applied],
                "manual": [_manual(f) for f in r.findings if not f.applied],
                "markers": markers.get(r.path, []),
            }
            for r in results
        ],
        "generated_files": generated,
        "summary": {
            **summary.to_json(),
            "manual": counts([f for f in need_human if needs_manual_work(f)]),
            "need_a_human": counts(need_human),
            "advisories": counts(advisories),
            "markers": sum(len(lines) for lines in markers.values()),
        },
    }


def check_report(findings: list[Finding], summary: Summary) -> dict:
    """``check --format json``."""
    return {
        "version": REPORT_VERSION,
        "diagnostics": [f.to_json() for f in findings],
        "summary": {
            "findings": len(findings),
            "fixable": sum(f.fixable for f in findings),
            **summary.to_json(),
            "manual": counts([f for f in findings if needs_manual_work(f)]),
            "advisories": counts([f for f in findings if is_advisory(f)]),
        },
    }
