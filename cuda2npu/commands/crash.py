"""What an unexpected exception becomes: a crash log with versions, and exit code 3."""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import traceback
from pathlib import Path

from cuda2npu import __version__
from cuda2npu.output import style

EXIT_INTERNAL = 3


def _version(distribution: str) -> str:
    import importlib.metadata  # 30 ms: only when crashing

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def internal_error(exc: BaseException) -> int:
    """Write a crash log with version information and say where it is (one file per crash, so that
    a second crash never overwrites the log of the first)."""
    handle, name = tempfile.mkstemp(prefix=f"cuda2npu-crash-{__version__}-", suffix=".log")
    os.close(handle)
    log = Path(name)
    log.write_text(
        f"cuda2npu {__version__}\npython {sys.version}\nlibcst {_version('libcst')}\nclick {_version('click')}\n"
        f"rich {_version('rich')}\nplatform {platform.platform()}\nargv {sys.argv}\n\n"
        f"{''.join(traceback.format_exception(exc))}",
        encoding="utf-8",
    )
    style.echo(f"cuda2npu: internal error: {exc}. Details (with versions) in {log}; please report it.", err=True)
    return EXIT_INTERNAL
