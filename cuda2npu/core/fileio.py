"""Reading files and writing them back atomically, keeping their mode; the result of a failed read or write."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import tempfile
import threading
from pathlib import Path

from cuda2npu.core.catalogue import rule as rule_doc
from cuda2npu.core.diagnostics import FileResult, Finding


def atomic_write(path: Path, data: bytes, *, refuse_read_only: bool = False) -> None:
    """Replace ``path`` by ``data`` via a temporary file in the same directory and a rename.

    Readers see either the old or the new file, never a partial one; the file mode is kept.
    With ``refuse_read_only`` a file without any write permission bit is not replaced (the rename
    would succeed in a writable directory, and for root anyway): PermissionError.
    """
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644
    if refuse_read_only and path.exists() and not mode & 0o222:
        raise PermissionError(errno.EACCES, "file is read-only (no write permission bit)", str(path))
    with _signals_held():  # Ctrl-C / SIGTERM wait for the file to be whole: no temporary file left behind
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".cuda2npu.tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


@contextlib.contextmanager
def _signals_held():
    """Delay SIGINT and SIGTERM until the block is done (where the platform allows it)."""
    held = {signal.SIGINT, signal.SIGTERM}
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def io_error(display: str, exc: OSError, verb: str = "read") -> FileResult:
    doc = rule_doc("NPU004")
    message = f"cannot {verb}: {exc.strerror or exc}"
    finding = Finding(display, 1, 1, "NPU004", doc.name, message, doc.tier, False)
    return FileResult(display, "failed", message, [finding])
