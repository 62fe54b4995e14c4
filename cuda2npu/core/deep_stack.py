"""Run a call on a thread with a deep stack and a high recursion limit.

libcst's parser and visitors recurse once per nesting level, and CPython accepts chains
(``a and b and ...``, ``a + b + ...``) deep enough to overflow the default 8 MB stack: a SIGSEGV
that would end the whole run. The engine therefore analyses each file on a thread with a large
stack; what is still too deep ends as a ``RecursionError`` the caller can report.

One such thread per process serves every call: starting a thread per file cost about 10% of a
whole ``check`` (measured on megatron-core: 24.6 s against 20.0 s of CPU time). A forked worker
process gets its own thread on first use (threads do not survive ``fork``).
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from concurrent.futures import Future
from typing import Callable, TypeVar

STACK_BYTES = 512 * 1024 * 1024  # address space; only the pages a deep file touches are used
RECURSION_LIMIT = 20_000

T = TypeVar("T")


class _DeepThread:
    """A daemon thread with a deep stack that runs the calls queued to it, one at a time."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.calls: queue.SimpleQueue = queue.SimpleQueue()
        previous = threading.stack_size(STACK_BYTES)
        try:
            threading.Thread(target=self._serve, name="cuda2npu-engine", daemon=True).start()
        finally:
            threading.stack_size(previous)

    def _serve(self) -> None:
        while True:
            future, call, args = self.calls.get()
            try:
                future.set_result(call(*args))
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                future.set_exception(exc)


_thread: _DeepThread | None = None


def run_deep(call: Callable[..., T], *args) -> T:
    """``call(*args)`` on the process's deep-stack thread; its exceptions are raised here."""
    global _thread
    if _thread is None or _thread.pid != os.getpid():
        _thread = _DeepThread()
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, RECURSION_LIMIT))
    try:
        future: Future = Future()
        _thread.calls.put((future, call, args))
        return future.result()
    finally:
        sys.setrecursionlimit(limit)
