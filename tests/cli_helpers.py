"""Running the real command line in a subprocess, as users and CI do."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def cuda2npu(*args, cwd: Path | None = None, **kwargs) -> subprocess.CompletedProcess:
    """``python -m cuda2npu ARGS``; ``kwargs`` go to ``subprocess.run`` (``env=``, ``input=``, ...)."""
    return subprocess.run(
        [sys.executable, "-m", "cuda2npu", *map(str, args)],
        cwd=cwd or REPO,
        capture_output=True,
        text=True,
        timeout=300,
        **kwargs,
    )


def tree_digest(root: Path) -> dict[str, str]:
    """relative path -> sha256 of every regular file (symlinks by their target text)."""
    digest = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_symlink():
            digest[relative] = "link:" + str(path.readlink())
        elif path.is_file():
            digest[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest
