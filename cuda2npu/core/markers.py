"""The ``# TODO(cuda2npu): CODE reason`` markers left for a human: their text, and where they are.

Text only (no libcst): dependency files, shell scripts and the migrate command's summary use them too.
"""

from __future__ import annotations

import re

from cuda2npu.core.catalogue import rule as rule_doc
from cuda2npu.core.catalogue import table
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.options import Options

MARKER_PREFIX = "# TODO(cuda2npu): "


def marker_lines(text: str) -> list[int]:
    """1-based numbers of the ``# TODO(cuda2npu):`` marker lines of a source text (lines as Python counts them)."""
    lines = re.split(r"\r\n|\r|\n", text)
    return [number for number, line in enumerate(lines, start=1) if line.lstrip().startswith(MARKER_PREFIX)]


def comments_above(text: str, start: int) -> list[str]:
    """The comment lines just above the line at offset ``start`` of ``text``, stripped, nearest first."""
    comments = []
    for line in reversed(text[:start].splitlines()):
        if not line.strip().startswith("#"):
            break
        comments.append(line.strip())
    return comments


def marked_above(text: str, start: int, code: str) -> bool:
    """Whether the comment lines just above the line at offset ``start`` carry a marker for ``code``
    (a line-oriented file kind's marker, written above what it marks: Dockerfiles, Compose and Cog files)."""
    return any(line.startswith(f"{MARKER_PREFIX}{code}") for line in comments_above(text, start))


def marker_text(code: str, reason: str) -> str:
    return f"{MARKER_PREFIX}{code} {reason}"


def marker_reason(code: str, tier: Tier, message: str, options: Options, applied: bool) -> str | None:
    """The reason a finding's ``# TODO(cuda2npu)`` marker gives (None: no marker), see rules/tables/markers.toml."""
    if not options.markers:
        return None
    reason = " ".join(message.split())  # one line: a message quoting multi-line code stays whole
    if tier is Tier.MANUAL and not applied:
        return reason
    if not options.review_markers:
        return None
    policy = table("markers")
    if applied:
        check = tier >= Tier.REVIEW and (tier > rule_doc(code).tier or code in policy["applied"])
        return f"review: {reason}" if check else None
    return None if code in policy["unmarked"] else f"review: {reason}"
