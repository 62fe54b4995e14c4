"""The ``# TODO(cuda2npu): CODE reason`` markers left for a human: their text, and where they are.

Text only (no libcst): dependency files and the migrate command's summary use them too.
"""

from __future__ import annotations

import re

MARKER_PREFIX = "# TODO(cuda2npu): "


def marker_lines(text: str) -> list[int]:
    """1-based numbers of the ``# TODO(cuda2npu):`` marker lines of a source text (lines as Python counts them)."""
    lines = re.split(r"\r\n|\r|\n", text)
    return [number for number, line in enumerate(lines, start=1) if line.lstrip().startswith(MARKER_PREFIX)]


def marker_text(code: str, reason: str) -> str:
    return f"{MARKER_PREFIX}{code} {reason}"
