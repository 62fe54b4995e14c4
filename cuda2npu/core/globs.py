"""Matching project paths against the configuration's globs (excludes, per-file-ignores)."""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path


def _relative(path: Path, base: str) -> str | None:
    return _relative_to(_absolute(path), base)


def _absolute(path: Path) -> Path:
    return path.resolve() if path.exists() or path.is_symlink() else path.absolute()


def _relative_to(absolute: Path, base: str) -> str | None:
    if not base:
        return Path(os.path.relpath(absolute)).as_posix()
    try:
        return absolute.relative_to(base).as_posix()
    except ValueError:
        return None


def path_matches(base: str, pattern: str, path: Path) -> bool:
    """Whether ``path`` matches ``pattern``, a glob relative to directory ``base`` ("": the cwd).

    A glob with ``/`` is matched against the path relative to ``base`` (a glob naming a directory
    matches every file below it); a glob without ``/`` against each component of that path.
    """
    relative = _relative(path, base)
    if relative is None:
        return False
    return _relative_matches(relative, pattern)


def matches_any(anchored: tuple[tuple[str, str], ...], path: Path) -> bool:
    """Whether ``path`` matches one of the ``(base directory, glob)`` pairs (the path resolved once)."""
    if not anchored:
        return False
    absolute = _absolute(path)
    for base, pattern in anchored:
        relative = _relative_to(absolute, base)
        if relative is not None and _relative_matches(relative, pattern):
            return True
    return False


def _relative_matches(relative: str, pattern: str) -> bool:
    pattern = pattern.strip().removeprefix("./").rstrip("/")
    parts = relative.split("/")
    if "/" not in pattern:
        return any(fnmatch.fnmatchcase(part, pattern) for part in parts)
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes)


def matching_ignores(per_file_ignores: tuple[tuple[str, str, tuple[str, ...]], ...], path) -> tuple[str, ...]:
    """Codes ignored for ``path`` by per-file-ignores entries ``(base directory, glob, codes)``."""
    path = Path(path)
    return tuple(
        code for base, pattern, codes in per_file_ignores if path_matches(base, pattern, path) for code in codes
    )
