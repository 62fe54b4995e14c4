"""Where a line of the original tree is in the migrated tree: ``train.py:60`` -> ``train.py:66``.

A divergence found where the original did something the migrated run did not (a ``backward()``
it never called) can only be placed from the original's side; the migrated file's line is what a
user opens. Each file pair is aligned once with :class:`difflib.SequenceMatcher`; a line the
migration replaced or removed maps to the start of what stands in its place.
"""

from __future__ import annotations

import difflib
from functools import lru_cache
from pathlib import Path


class LineMap:
    def __init__(self, original: Path, migrated: Path) -> None:
        self.original = original
        self.migrated = migrated

    @lru_cache(maxsize=None)
    def _opcodes(self, path: str) -> list[tuple]:
        try:
            before = (self.original / path).read_text(errors="replace").splitlines()
            after = (self.migrated / path).read_text(errors="replace").splitlines()
        except OSError:
            return []
        return difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()

    def migrated_place(self, place: str | None) -> str | None:
        """``path:line`` of the original -> the same place in the migrated file (as it is, if unknown)."""
        if not place or ":" not in place:
            return place
        path, _, line = place.rpartition(":")
        if not line.isdigit():
            return place
        index = int(line) - 1
        for tag, i1, i2, j1, _ in self._opcodes(path):
            if i1 <= index < i2:
                return f"{path}:{j1 + (index - i1 if tag == 'equal' else 0) + 1}"
        return place
