"""The JSON outputs (versioned: other tools depend on them)."""

from __future__ import annotations

from cuda2npu import __version__
from cuda2npu.core.diagnostics import FileResult, Finding, Summary

REPORT_VERSION = 1


def _edit(finding: Finding) -> dict:
    return {"code": finding.code, "line": finding.line, "tier": str(finding.tier), "message": finding.message}


def _manual(finding: Finding) -> dict:
    return {"code": finding.code, "line": finding.line, "message": finding.message}


def migration_report(
    results: list[FileResult],
    options: dict,
    summary: Summary,
    generated: list[dict],
    markers: dict[str, list] | None = None,
) -> dict:
    """``migrate --report``: one entry per file with its edits, manual items and the lines of its
    ``# TODO(cuda2npu)`` markers in the migrated file, and the generated files."""
    markers = markers or {}
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
                **({"markers": markers[r.path]} if r.path in markers else {}),
            }
            for r in results
        ],
        "generated_files": generated,
        "summary": summary.to_json(),
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
        },
    }
