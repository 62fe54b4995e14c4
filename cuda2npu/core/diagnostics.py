"""The data a run produces: tiers, findings, per-file results and the run's summary."""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field

PREFILTER_REASON = "no CUDA trigger (prefilter)"  # the skip reason of files without any trigger


class Tier(enum.IntEnum):
    """How safe a fix is; ordered so that ``tier <= max_tier`` selects fixes to apply."""

    EXACT = 1
    NUMERIC = 2
    REVIEW = 3
    MANUAL = 4

    @classmethod
    def parse(cls, text: str) -> "Tier":
        return cls[text.upper()]

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Finding:
    """One diagnostic at a source position (1-based line, 1-based column)."""

    path: str
    line: int
    column: int
    code: str
    name: str
    message: str
    tier: Tier
    fixable: bool
    applied: bool = False
    end_line: int | None = None  # where the reported range ends (exclusive column), when known
    end_column: int | None = None

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.code)

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "tier": str(self.tier),
            "fixable": self.fixable,
        }


@dataclass
class FileResult:
    """What happened to one file: findings plus, when rewritten, the new bytes."""

    path: str
    status: str  # "changed" | "unchanged" | "skipped" | "failed"
    reason: str = ""
    findings: list[Finding] = field(default_factory=list)
    new_source: bytes | None = None
    internal_error: str = ""
    companions: list[str] = field(default_factory=list)  # generated files to place next to this one
    # Python files and notebooks: the top-level modules the final text imports, and whether it imports
    # torch_npu unguarded at module level (the dependency files' pass reads these instead of the file)
    imports: list[str] | None = None
    imports_torch_npu: bool = False
    warnings: list[str] = field(default_factory=list)  # for stderr, as ruff's (malformed `# noqa` directives)


@dataclass
class Summary:
    scanned: int = 0
    skipped_prefilter: int = 0
    skipped_other: int = 0
    changed: int = 0
    failed: int = 0
    edits: Counter = field(default_factory=Counter)  # (code, tier) -> count

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
        }
