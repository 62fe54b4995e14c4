"""Asking git which files have uncommitted changes (in-place migrate leaves those it would change as
they are), and whether a path is in a work tree at all."""

from __future__ import annotations

import subprocess
from pathlib import Path


def _git(args: list[str], cwd: Path) -> bytes | None:
    try:
        result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode == 0 else None


def in_work_tree(paths: list[Path]) -> bool:
    """Whether the first path is inside a git work tree (where `git diff` shows a rewrite)."""
    first = paths[0] if paths else Path(".")
    return _git(["rev-parse", "--is-inside-work-tree"], first if first.is_dir() else first.parent) == b"true\n"


def dirty_files(paths: list[Path]) -> dict[Path, str]:
    """Resolved paths of files with staged, unstaged or untracked changes under git -> "untracked" or
    "uncommitted changes"."""
    dirty: dict[Path, str] = {}
    directories = {p if p.is_dir() else p.parent for p in paths}
    for directory in directories:
        top = _git(["rev-parse", "--show-toplevel"], directory)
        if top is None:
            continue
        root = Path(top.decode().strip())
        status = _git(["status", "--porcelain", "-z", "--untracked-files=all"], root) or b""
        entries = status.decode("utf-8", "surrogateescape").split("\0")
        skip_next = False
        for entry in entries:
            if skip_next or len(entry) < 4:
                skip_next = False
                continue
            code, name = entry[:2], entry[3:]
            skip_next = "R" in code or "C" in code  # renames carry the old name in the next entry
            dirty[(root / name).resolve()] = "untracked" if code == "??" else "uncommitted changes"
    return dirty
