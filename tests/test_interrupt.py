"""Ctrl-C / SIGTERM during an in-place ``migrate``: every file is either old or new, exit 130.

Writes are atomic (a temporary file and a rename), the CLI maps SIGTERM to KeyboardInterrupt, and
the worker pool is torn down without waiting for queued files.
"""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda2npu.core.options import Options
from cuda2npu.filekinds.python import migrate_source
from cuda2npu.project.cache import CACHE_DIR_NAME, ENV_DISABLE

FILES = 300
BODY = b"import torch\n\n" + b"".join(
    b'def f%d(x):\n    return x.cuda() + torch.zeros(2, device="cuda")\n' % j
    for j in range(16)  # analysis must outlast 1.5 s
)


def header(i: int) -> bytes:
    return b"# module %d\n" % i


def make_project(root: Path) -> tuple[dict[Path, bytes], dict[Path, bytes]]:
    root.mkdir()
    migrated = migrate_source(header(0) + BODY, "m.py", Options()).new_source
    assert migrated is not None and migrated.startswith(header(0))
    old, new = {}, {}
    for i in range(FILES):
        path = root / f"m{i:03d}.py"
        path.write_bytes(header(i) + BODY)
        old[path] = header(i) + BODY
        new[path] = header(i) + migrated[len(header(0)) :]
    return old, new


def start(root: Path, cache: bool = False) -> subprocess.Popen:
    env = {key: value for key, value in os.environ.items() if key != ENV_DISABLE or not cache}
    return subprocess.Popen(
        [sys.executable, "-m", "cuda2npu", "migrate", "--jobs", "2", "."],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_terminal_signals,
    )


def _terminal_signals() -> None:
    """Ctrl-C at its default, as for a terminal's foreground job: a run started in the background
    by a shell without job control (``cmd &`` in a script, as CI may do) inherits SIGINT ignored,
    and a program keeps an ignored SIGINT ignored (Python installs no KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def finish(process: subprocess.Popen) -> tuple[int, str]:
    _, stderr = process.communicate(timeout=60)
    return process.returncode, stderr.decode()


def assert_old_or_new(root: Path, old: dict, new: dict) -> tuple[int, int]:
    counts = [0, 0]
    for path in old:
        data = path.read_bytes()
        assert data in (old[path], new[path]), f"{path.name} is neither the original nor the migrated file"
        ast.parse(data)
        counts[data == new[path]] += 1
    leftovers = [p.name for p in root.iterdir() if p.name.endswith(".cuda2npu.tmp")]
    assert not leftovers, leftovers
    return counts[0], counts[1]


def assert_no_processes_left(process: subprocess.Popen) -> None:
    """Nothing of the run's process group (its pool workers) outlives it."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    pytest.fail("worker processes survived the interrupted run")


def test_sigterm_while_writing_leaves_every_file_old_or_new(tmp_path):
    root = tmp_path / "p"
    old, new = make_project(root)
    first = root / "m000.py"
    process = start(root)
    deadline = time.monotonic() + 120
    while first.read_bytes() == old[first]:  # the write phase has begun
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no file was written in time"
        time.sleep(0.001)
    process.send_signal(signal.SIGTERM)
    code, stderr = finish(process)
    unchanged, migrated = assert_old_or_new(root, old, new)
    if code == 0:  # the run finished before the signal landed: nothing to conclude
        assert migrated == FILES
        pytest.skip("the write phase ended before SIGTERM arrived")
    assert code == 130, stderr
    assert "Traceback" not in stderr, stderr
    count = re.search(
        r"interrupted after writing (\d+) of 300 files; every file is either old or new; run the same", stderr
    )
    assert count, stderr
    assert migrated >= 1 and unchanged >= 1, (migrated, unchanged)
    assert int(count.group(1)) == migrated  # the count is the files written
    assert_no_processes_left(process)


def wait_for_analysis(root: Path, process: subprocess.Popen) -> None:
    """Until the workers have analysed a first file (its result is in the cache): a fixed sleep can
    land in the start-up, where an import's bare ``except`` may swallow the KeyboardInterrupt."""
    cache = root / CACHE_DIR_NAME
    deadline = time.monotonic() + 120
    while not any(entry.parent.name != "facts" for entry in cache.rglob("*.json")):  # a result, not the facts
        assert process.poll() is None, "the run ended before it could be interrupted"
        assert time.monotonic() < deadline, "no file was analysed in time"
        time.sleep(0.01)


def test_ctrl_c_while_analysing_changes_nothing_and_stops_the_pool(tmp_path):
    root = tmp_path / "p"
    old, new = make_project(root)
    process = start(root, cache=True)  # the cache shows when files are being analysed
    wait_for_analysis(root, process)
    os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole group
    stopped = time.monotonic()
    code, stderr = finish(process)
    assert code == 130, stderr
    assert time.monotonic() - stopped < 15, "the pool kept working after Ctrl-C"
    assert "Traceback" not in stderr, stderr
    assert re.search(r"interrupted while reading the files \(\d+ of 300 done\); nothing was written", stderr), stderr
    unchanged, migrated = assert_old_or_new(root, old, new)
    assert migrated == 0 and unchanged == FILES
    assert_no_processes_left(process)
