"""Edits of a text file that is not parsed as Python (dependency files, run configs, shell
scripts): ``(start, end, replacement)`` offsets into the text."""

from __future__ import annotations


def apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    """Apply edits from the end; edits at one offset land in list order. An edit reaching into a
    later one (two neighbours removed from one inline list share a comma) is clipped at it."""
    limit = len(text)
    order = sorted(range(len(edits)), key=lambda i: (edits[i][0], edits[i][1], i), reverse=True)
    for start, end, replacement in (edits[i] for i in order):
        end = min(end, limit)
        text = text[:start] + replacement + text[end:]
        limit = start
    return text
