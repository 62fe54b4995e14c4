"""The data a run produces: tiers, findings and per-file results."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


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
