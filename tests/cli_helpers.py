"""Running the real command line in a subprocess, as users and CI do."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

from click.testing import CliRunner

from cuda2npu.commands.cli import main

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


def cli(*args):
    """The command line in this process (click's runner): quicker than :func:`cuda2npu`."""
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def write(path: Path, text: str, newline: str = "\n") -> Path:
    """Write ``text`` (dedented, leading newline dropped, lines ending in ``newline``) to ``path``,
    creating its directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(textwrap.dedent(text).lstrip("\n").replace("\n", newline).encode("utf-8"))
    return path


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
