"""Finding the Python files of a project.

Inside a git work tree the files are ``git ls-files`` (tracked plus untracked-but-not-ignored);
elsewhere a directory walk. Virtualenvs, build output, ``node_modules`` and VCS folders are
skipped; each real file is returned once even when reached through symlinks, and files that
resolve outside the given root are skipped (nothing outside the root is ever written).
Explicit file arguments (as pre-commit passes them) are used as given. Files of a copy of a
library with its own way onto Ascend (a vendored apex, mmcv or flash-attn:
cuda2npu/analysis/vendored_libraries.py) and empty git submodules (project/submodules.py) are listed
as skipped, with the reason. Which configuration
excludes what is cuda2npu/project/settings.py's (each file's nearest configuration).
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from cuda2npu.analysis.vendored_libraries import vendored_library
from cuda2npu.project.submodules import EMPTY_SUBMODULE_REASON, empty_submodules

SKIP_DIRS = {
    ".git",
    ".hg",
    ".svn",
    ".tox",
    ".nox",
    ".venv",
    "venv",
    "env",
    ".env",
    "__pycache__",
    "node_modules",
    "build",
    "dist",
    ".eggs",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    "site-packages",
    ".cuda2npu_cache",
    ".ipynb_checkpoints",  # Jupyter's autosave copies of the notebooks next to them
}
PYTHON_SUFFIXES = (".py", ".pyi")


@dataclass
class Discovery:
    files: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)


def _git_files(root: Path) -> list[Path] | None:
    try:
        result = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return [root / name for name in result.stdout.decode("utf-8", "surrogateescape").split("\0") if name]


def _walk(root: Path) -> list[Path]:
    found = []
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        found += [Path(directory) / name for name in filenames]
    return found


def _wanted(path: Path) -> bool:
    """Python files, notebooks and the project files cuda2npu reads (cuda2npu/filekinds/depfiles.py)."""
    from cuda2npu.filekinds.depfiles import is_project_file

    return path.suffix in PYTHON_SUFFIXES or path.suffix == ".ipynb" or is_project_file(path)


def _excluded(relative: str, patterns: tuple[str, ...]) -> bool:
    parts = relative.split("/")
    return any(fnmatch.fnmatch(relative, p) or any(fnmatch.fnmatch(part, p) for part in parts) for p in patterns)


def discover(
    paths: list[Path], exclude: tuple[str, ...] = (), excluded: Callable[[Path], bool] | None = None
) -> Discovery:
    """Python files under ``paths`` (sorted, unique by real path); files found in a directory are
    left out when a glob of ``exclude`` matches a component of their path below it, or when
    ``excluded(path)`` says so (the configuration's excludes: cuda2npu/project/settings.py)."""
    result = Discovery()
    seen: set[Path] = set()
    for given in paths:
        if given.is_file() or given.is_symlink() and not given.is_dir():
            vendored = vendored_library(given.parent, None)
            if vendored is not None:
                result.skipped.append((given, vendored[1]))
                continue
            _add(given, given.parent, result, seen, explicit=True)
            continue
        root = given.resolve()
        in_git = (given / ".git").exists() or _inside_git(given)
        # a directory git ignores (a vendored tree, a downloaded corpus) was still asked for: walk it
        candidates = _git_files(given) if in_git and not _git_ignored(given) else None
        result.skipped += [(directory, EMPTY_SUBMODULE_REASON) for directory in empty_submodules(given)]
        for path in sorted(candidates if candidates is not None else _walk(given)):
            relative = path.relative_to(given).as_posix()
            if not _wanted(path) or _excluded(relative, exclude):
                continue
            if any(part in SKIP_DIRS for part in Path(relative).parts[:-1]):
                continue
            if excluded is not None and excluded(path):
                continue
            vendored = vendored_library(path.parent, given)
            if vendored is not None:  # a copy of a library with its own way onto Ascend: left as written
                result.skipped.append((path, vendored[1]))
                continue
            _add(path, root, result, seen, explicit=False, relative=relative)
    result.files.sort()
    return result


def _inside_git(path: Path) -> bool:
    try:
        out = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=path, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and out.stdout.strip() == b"true"


def _git_ignored(path: Path) -> bool:
    try:
        out = subprocess.run(["git", "check-ignore", "-q", "."], cwd=path, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0


def _add(
    path: Path, root: Path, result: Discovery, seen: set[Path], explicit: bool, relative: str | None = None
) -> None:
    try:
        if relative is not None and not path.is_symlink():
            # the walk and git ls-files never enter symlinked directories: no need for realpath()
            real = root / relative
        else:
            real = path.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        reason = (
            "symlink loop"
            if isinstance(exc, RuntimeError) or "loop" in str(exc).lower()
            else "dangling symlink or unreadable path"
        )
        result.skipped.append((path, reason))
        return
    if not real.is_file():
        result.skipped.append((path, "not a regular file"))
        return
    if not explicit and not real.is_relative_to(root):  # ``root`` is resolved by discover()
        result.skipped.append((path, "resolves outside the project root"))
        return
    if real in seen:
        return
    seen.add(real)
    result.files.append(path)
