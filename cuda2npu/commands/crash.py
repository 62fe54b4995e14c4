"""What an unexpected exception becomes: a crash log with versions, and exit code 3."""

from __future__ import annotations

import platform
import sys
import tempfile
import traceback
from pathlib import Path

import click

from cuda2npu import __version__

EXIT_INTERNAL = 3


def internal_error(exc: BaseException) -> int:
    """Write a crash log with version information and say where it is."""
    import libcst

    log = Path(tempfile.gettempdir()) / f"cuda2npu-crash-{__version__}.log"
    log.write_text(
        f"cuda2npu {__version__}\npython {sys.version}\nlibcst {libcst.__version__ if hasattr(libcst, '__version__') else '?'}\n"
        f"platform {platform.platform()}\nargv {sys.argv}\n\n{''.join(traceback.format_exception(exc))}",
        encoding="utf-8",
    )
    click.echo(f"cuda2npu: internal error: {exc}. Details (with versions) in {log}; please report it.", err=True)
    return EXIT_INTERNAL
