"""A fork server for the validation's child processes (one per side and mode).

``python -m cuda2npu.validation.forkserver`` imports torch and the child modules' dependencies once,
then forks one process per request, which runs the child module as ``python -m MODULE SPEC`` would:
as ``__main__`` (:func:`runpy.run_module`), with the side's tree as its working directory and
``sys.path[0]``, its stdout and stderr written to files. A fresh interpreter spends about 3 s
importing torch; a fork, milliseconds. Each side still runs in a process of its own, so one side's
patches, imports and emulation never reach the other.

Used only where a fork starts the child as a fresh interpreter would: a POSIX host, a CPU-only torch
build and no torch_npu (the emulated runs; a host with a device runtime starts fresh interpreters,
which is also what ``CUDA2NPU_FORKSERVER=0`` asks for), and the environment the server started
with (torch reads some variables at import: a changed environment starts a new server).
"""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

CHILD_MODULES = ("cuda2npu.validation.trace", "cuda2npu.validation.side", "cuda2npu.validation.smoke")
START_TIMEOUT_S = 120
SWITCH = "CUDA2NPU_FORKSERVER"  # "0": fresh interpreters only


class Timeout(Exception):
    """The child ran past its time and was killed."""


class Unusable(Exception):
    """No fork server here (see the module), or it died: start a fresh interpreter instead."""


def run(module: str, cwd: Path, spec_file: Path, timeout: float) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``python -m module spec_file`` run in ``cwd`` by a forked child.
    Raises :class:`Timeout`, or :class:`Unusable` where the caller must start the interpreter itself."""
    if os.environ.get(SWITCH) == "0" or not hasattr(os, "fork"):
        raise Unusable
    with _LOCK:
        server = _server()
        try:
            return server.run(module, cwd, spec_file, timeout)
        except Unusable:
            _SERVERS.pop(server.key, None)
            server.close()
            raise


class _Server:
    """The parent's handle of one fork server process, and its line protocol (JSON per line)."""

    def __init__(self, key: frozenset) -> None:
        self.key = key
        self.buffer = b""
        self.home = tempfile.TemporaryDirectory(prefix="cuda2npu-forkserver-")  # sys.path[0] while preloading
        self.proc = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=self.home.name,
        )
        self.ready = self._receive(START_TIMEOUT_S).get("ready", False)

    def run(self, module: str, cwd: Path, spec_file: Path, timeout: float) -> tuple[int, str, str]:
        if not self.ready:
            raise Unusable
        out, err = spec_file.with_suffix(".stdout"), spec_file.with_suffix(".stderr")
        request = {
            "module": module,
            "cwd": str(cwd.resolve()),
            "spec": str(spec_file),
            "out": str(out),
            "err": str(err),
        }
        self._send(request)
        pid = self._receive(START_TIMEOUT_S)["pid"]
        try:
            status = self._receive(timeout)["status"]
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            self._receive(START_TIMEOUT_S)
            raise Timeout from None
        return status, _read(out), _read(err)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.home.cleanup()

    def _send(self, message: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise Unusable from exc

    def _receive(self, timeout: float) -> dict:
        """The next line from the server, waiting at most ``timeout`` s (TimeoutError past it)."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(fd, 65536)
            if not chunk:
                raise Unusable
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


_LOCK = threading.Lock()
_SERVERS: dict[frozenset, _Server] = {}


def _server() -> _Server:
    """The server started with this environment (a new one when the environment changed)."""
    key = frozenset(os.environ.items())
    for other in [k for k in _SERVERS if k != key]:
        _SERVERS.pop(other).close()
    if key not in _SERVERS:
        try:
            _SERVERS[key] = _Server(key)
        except (OSError, TimeoutError) as exc:
            raise Unusable from exc
    return _SERVERS[key]


@atexit.register
def _close_all() -> None:
    for server in _SERVERS.values():
        server.close()


# --- the server process ----------------------------------------------------------------------


def serve() -> int:
    """Preload, say whether forks may be used, then fork one child per request line on stdin."""
    ready = _preload()
    _reply({"ready": ready})
    if not ready:
        return 0
    for line in sys.stdin.buffer:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        _reply({"pid": pid})
        _, status = os.waitpid(pid, 0)
        _reply({"status": os.waitstatus_to_exitcode(status)})
    return 0


def _preload() -> bool:
    """Import what every child imports first; False where a fork would not start like a fresh
    interpreter (a torch built for a device, or torch_npu installed)."""
    import torch

    if torch.version.cuda is not None or torch.version.hip is not None or importlib.util.find_spec("torch_npu"):
        return False
    for module in CHILD_MODULES:
        importlib.import_module(module)
        del sys.modules[module]  # run as __main__ by each child, as `python -m` does
    return True


def _reply(message: dict) -> None:
    sys.stdout.buffer.write(json.dumps(message).encode() + b"\n")
    sys.stdout.buffer.flush()


def _child(request: dict) -> None:
    """In the forked process: become ``python -m MODULE SPEC`` in the request's directory; never returns."""
    code = 1
    try:
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for fd, path in ((1, request["out"]), (2, request["err"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
        os.chdir(request["cwd"])
        sys.path[0] = request["cwd"]
        sys.argv = [request["module"], request["spec"]]
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - printed as the interpreter would
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    sys.exit(serve())
