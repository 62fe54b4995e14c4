"""Run npu-emulator tests in one separate Python process.

``emulate_npu()`` registers torch's single private-use backend for the rest of the process,
so it must not run inside the pytest process (other tests would see an ``npu`` device, and
nothing could register another backend). Tests marked with :func:`in_npu_process` are
executed by a worker process that called ``emulate_npu()`` once at start-up; the pytest
process only sends "run function F of file P" and reports the worker's traceback on failure.
If the worker dies (e.g. a segfault), that test fails and the next one starts a new worker.

Inside the worker this decorator returns the test function unchanged, so test modules are
ordinary Python and may use module-level helpers (but must not install anything at import).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

WORKER_ENV = "CUDA2NPU_NPU_TEST_WORKER"
REPO = Path(__file__).resolve().parents[2]


def in_npu_process(fn):
    """Mark a zero-argument test to run in the emulated-npu worker process."""
    if os.environ.get(WORKER_ENV):
        return fn
    source_file = str(Path(fn.__code__.co_filename).resolve())
    name = fn.__name__

    def test(npu_process: NpuProcess) -> None:
        npu_process.run(source_file, name)

    test.__name__ = name
    test.__qualname__ = fn.__qualname__
    test.__doc__ = fn.__doc__
    test.__module__ = fn.__module__
    return test


class NpuProcess:
    """Client side: owns the worker process and talks JSON lines to it."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ)
        env[WORKER_ENV] = "1"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        proc = subprocess.Popen(
            [sys.executable, __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=str(REPO),
        )
        ready = proc.stdout.readline()
        if json.loads(ready or "{}").get("ready") is not True:
            raise RuntimeError(f"npu test worker failed to start (exit code {proc.poll()})")
        return proc

    def run(self, source_file: str, name: str) -> None:
        import pytest

        if self._proc is None or self._proc.poll() is not None:
            self._proc = self._start()
        self._proc.stdin.write(json.dumps([source_file, name]) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            code = self._proc.wait()
            self._proc = None
            pytest.fail(f"npu test worker died while running {name} (exit code {code})", pytrace=False)
        error = json.loads(line)["error"]
        if error:
            pytest.fail(f"in the npu worker process:\n{error}", pytrace=False)

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.stdin.close()
            self._proc.wait(timeout=60)
        self._proc = None


def _serve() -> None:
    """Worker side: install the emulator, then run requested test functions one by one."""
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything the tests print goes to stderr, not into the protocol
    sys.stdout = sys.stderr
    from cuda2npu.emulation import emulate_npu

    emulate_npu()
    protocol.write(json.dumps({"ready": True}) + "\n")
    protocol.flush()
    modules: dict = {}
    for line in sys.stdin:
        source_file, name = json.loads(line)
        try:
            module = modules.get(source_file)
            if module is None:
                spec = importlib.util.spec_from_file_location(f"npu_worker_{len(modules)}", source_file)
                module = importlib.util.module_from_spec(spec)
                sys.path.insert(0, str(Path(source_file).parent))
                spec.loader.exec_module(module)
                modules[source_file] = module
            getattr(module, name)()
            error = None
        except BaseException:  # noqa: BLE001 - report every failure to the client
            error = traceback.format_exc()
        protocol.write(json.dumps({"error": error}) + "\n")
        protocol.flush()


if __name__ == "__main__":
    _serve()
