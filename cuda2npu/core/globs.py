"""Matching project paths against the configuration's globs (excludes, per-file-ignores)."""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path


def _relative(path: Path, base: str) -> str | None:
    absolute = path.resolve() if path.exists() or path.is_symlink() else path.absolute()
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
