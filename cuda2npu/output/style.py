"""Terminal output: colour as ruff and uv decide it, and wrapping at the terminal's width.

Colour is on when the stream is a terminal, off when it is not (pipes, files, CI logs). The
``NO_COLOR`` environment variable (https://no-color.org) turns it off, ``FORCE_COLOR`` (or
``CLICOLOR_FORCE``) on; ``--color always|never`` overrides both.
"""

from __future__ import annotations

import os
import select
import shutil
import sys
import textwrap

import click

CHOICES = ("auto", "always", "never")
_choice = "auto"


def set_choice(value: str | None) -> None:
    """``--color``: auto (the default), always or never."""
    global _choice
    _choice = value or "auto"


def enabled(err: bool = False) -> bool:
    """Whether output to stdout (``err``: stderr) is coloured."""
    if _choice != "auto":
        return _choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR") or os.environ.get("CLICOLOR_FORCE", "0") not in ("", "0"):
        return True
    stream = sys.stderr if err else sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)()) and os.environ.get("TERM") != "dumb"


def paint(text: str, on: bool, **style) -> str:
    """``text`` in ``style`` (click.style keywords) when ``on``."""
    return click.style(text, **style) if on and text else text


def echo(text: str, err: bool = False, nl: bool = True) -> None:
    """click.echo that keeps the colour codes exactly when colour is enabled for the stream.

    When the reader has closed the pipe (``| head``), the rest of the output is dropped and the
    command goes on to its normal exit code, as ruff does.
    """
    try:
        click.echo(text, err=err, nl=nl, color=enabled(err))
    except BrokenPipeError:
        _to_devnull(sys.stderr if err else sys.stdout)


def _closed(stream) -> bool:
    """Whether ``stream`` is a pipe whose reader is gone (poll reports an error on the write end)."""
    try:
        poller = select.poll()
        poller.register(stream.fileno(), select.POLLOUT)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows), or not a real file
        return False


def output_closed() -> bool:
    return _closed(sys.stdout) or _closed(sys.stderr)


def discard_output() -> None:
    """Point the closed stdout/stderr at os.devnull, so that later writes and the flush at exit succeed."""
    for stream in (sys.stdout, sys.stderr):
        if _closed(stream):
            _to_devnull(stream)


def _to_devnull(stream) -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass


def width(err: bool = True) -> int | None:
    """Columns to wrap summary lines at on a terminal (``COLUMNS`` or its size); None (never wrap:
    logs and pipes keep one line per item) off a terminal."""
    stream = sys.stderr if err else sys.stdout
    if getattr(stream, "isatty", lambda: False)():
        return shutil.get_terminal_size().columns
    return None


def wrap(line: str, indent: str = "    ") -> str:
    """``line`` wrapped at word boundaries to the terminal width (paths and codes are never split)."""
    columns = width()
    if columns is None or len(line) <= columns:
        return line
    first = line[: len(line) - len(line.lstrip())]
    return textwrap.fill(
        line,
        width=max(columns, 40),
        initial_indent="",
        subsequent_indent=first + indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def warn_if_empty(files) -> None:
    """A path that holds nothing to look at is probably mistyped: say so on stderr, as ruff does."""
    if not files:
        echo("warning: No Python files found under the given path(s)", err=True)


def print_warnings(results) -> None:
    """The files' warnings (malformed ``# noqa`` directives, ...) on stderr, once each, as ruff's."""
    for warning in sorted({w for result in results for w in result.warnings}):
        echo(f"warning: {warning}", err=True)
