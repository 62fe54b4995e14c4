"""The JSON outputs (versioned: other tools depend on them) and the run summary."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from cuda2npu import __version__
from cuda2npu.diagnostics import FileResult, Finding, Tier
from cuda2npu.runner import PREFILTER_REASON

REPORT_VERSION = 1


@dataclass
class Summary:
    scanned: int = 0
    skipped_prefilter: int = 0
    skipped_other: int = 0
    changed: int = 0
    failed: int = 0
    edits: Counter = field(default_factory=Counter)  # (code, tier) -> count
    manual: Counter = field(default_factory=Counter)  # code -> count

    def add(self, result: FileResult) -> None:
        self.scanned += 1
        if result.status == "skipped":
            if result.reason == PREFILTER_REASON:
                self.skipped_prefilter += 1
            else:
                self.skipped_other += 1
        elif result.status == "changed":
            self.changed += 1
        elif result.status == "failed":
            self.failed += 1
        for finding in result.findings:
            if finding.applied:
                self.edits[(finding.code, str(finding.tier))] += 1
            elif finding.tier is Tier.MANUAL or not finding.fixable:
                self.manual[finding.code] += 1

    def to_json(self) -> dict:
        return {
            "files_scanned": self.scanned,
            "files_skipped_prefilter": self.skipped_prefilter,
            "files_skipped_other": self.skipped_other,
            "files_changed": self.changed,
            "files_failed": self.failed,
            "edits": [
                {"code": code, "tier": tier, "count": count} for (code, tier), count in sorted(self.edits.items())
            ],
            "manual": [{"code": code, "count": count} for code, count in sorted(self.manual.items())],
        }


def _edit(finding: Finding) -> dict:
    return {"code": finding.code, "line": finding.line, "tier": str(finding.tier), "message": finding.message}


def _manual(finding: Finding) -> dict:
    return {"code": finding.code, "line": finding.line, "message": finding.message}


def migration_report(results: list[FileResult], options: dict, summary: Summary, generated: list[dict],
                     markers: dict[str, list] | None = None) -> dict:
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
