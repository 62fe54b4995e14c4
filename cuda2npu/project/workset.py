"""Shared plumbing of the commands: display names and collecting results with progress."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Callable, Iterable, Iterator

from cuda2npu.core.diagnostics import FileResult, Summary

PROGRESS_MIN_FILES = 200  # roughly a few seconds of work: below it a bar is only noise


def display_name(path: Path) -> str:
    """The path as the user will recognise it: relative to the working directory when inside it."""
    try:
        return Path(os.path.relpath(path)).as_posix() if not os.path.relpath(path).startswith("..") else path.as_posix()
    except ValueError:
        return path.as_posix()


def collect_results(
    start: Callable[[Callable[[int], None]], Iterable[FileResult]], summary: Summary, total: int
) -> list[FileResult]:
    """Drain ``start(on_done)`` (the runner), updating the summary, with a progress bar on a terminal
    for big runs: the files done out of ``total``, counted as the workers finish them."""
    collected = []
    try:
        with _progress(total) as on_done:
            for result in start(on_done):
                summary.add(result)
                collected.append(result)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(
            f"while reading the files ({len(collected)} of {total} done); nothing was written"
        ) from None
    return collected


@contextlib.contextmanager
def _progress(total: int) -> Iterator[Callable[[int], None]]:
    """``on_done(files)`` advancing a progress bar on a terminal for big runs, else doing nothing."""
    if not (sys.stderr.isatty() and total >= PROGRESS_MIN_FILES):
        yield lambda done: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # 25 ms: lazily

    columns = (TextColumn("cuda2npu"), BarColumn(), MofNCompleteColumn(), TextColumn("files"), TimeElapsedColumn())
    with Progress(*columns, transient=True) as progress:
        task = progress.add_task("cuda2npu", total=total)
        yield lambda done: progress.advance(task, done)
