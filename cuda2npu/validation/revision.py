"""The original tree of an in-place migration, taken from git: ``validate git:REV MIGRATED``."""

from __future__ import annotations

import io
import subprocess
import tarfile
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

PREFIX = "git:"


class RevisionError(Exception):
    """The revision cannot be read (not a git work tree, unknown revision)."""


def is_revision(original: str | Path) -> bool:
    return isinstance(original, str) and original.startswith(PREFIX)


def _git(directory: Path, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", "-C", str(directory), *args], capture_output=True)
    except OSError as exc:
        raise RevisionError(f"cannot run git: {exc}") from None


@contextmanager
def original_tree(original: str | Path, migrated: Path) -> Iterator[Path]:
    """``original`` as a directory: itself, or for ``git:REV`` the files of ``migrated`` at revision
    REV of its git repository, extracted into a temporary directory for the duration."""
    if not is_revision(original):
        yield Path(original)
        return
    revision = str(original)[len(PREFIX) :] or "HEAD"
    top = _git(migrated, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise RevisionError(f"{migrated} is not in a git work tree, so {original} has no meaning")
    root = Path(top.stdout.decode().strip())
    inside = migrated.resolve().relative_to(root.resolve()).as_posix()
    archive = _git(root, "archive", "--format=tar", revision, "--", inside if inside != "." else ":/")
    if archive.returncode != 0:
        message = archive.stderr.decode(errors="replace").strip().splitlines()
        raise RevisionError(f"cannot read revision {revision!r}: {message[-1] if message else 'git archive failed'}")
    with tempfile.TemporaryDirectory(prefix="cuda2npu-original-") as directory:
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(directory, filter="data")
            else:  # pragma: no cover - Python without extraction filters; git archive holds no links out
                tar.extractall(directory)
        yield Path(directory) / inside
