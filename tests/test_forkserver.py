"""The validation's fork server (cuda2npu/validation/forkserver.py): a forked child runs a module as
``python -m MODULE SPEC`` would, in a process of its own; time limits, switches and environments."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cuda2npu.validation import forkserver

PROBE = """
import json, os, sys, torch
seen = getattr(torch, "_probe_mark", None)
torch._probe_mark = "set by an earlier child"
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "path0": sys.path[0], "name": __name__, "seen": seen}))
print("to stderr", file=sys.stderr)
sys.exit(int(os.environ.get("PROBE_EXIT", "3")))
"""


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "probe_child.py").write_text(PROBE)
    (tmp_path / "sleeper.py").write_text("import time\ntime.sleep(60)\n")
    return tmp_path


def test_a_forked_child_starts_as_python_m_would(tree):
    spec = tree / "side.spec.json"
    status, out, err = forkserver.run("probe_child", tree, spec, timeout=60)
    fresh = subprocess.run(
        [sys.executable, "-m", "probe_child", str(spec)], cwd=tree, capture_output=True, text=True, timeout=120
    )
    assert (status, err) == (fresh.returncode, "to stderr\n") and fresh.stderr.endswith(
        err
    )  # less torch's import warnings
    forked, started = json.loads(out), json.loads(fresh.stdout)
    assert forked == started == {**started, "cwd": str(tree), "path0": str(tree), "name": "__main__", "seen": None}
    assert forked["argv"][1:] == [str(spec)] and forked["argv"][0].endswith("probe_child.py")
    # a second child starts from the server's state, not from the first child's
    assert json.loads(forkserver.run("probe_child", tree, spec, timeout=60)[1])["seen"] is None


def test_a_child_past_its_time_is_killed_and_the_server_goes_on(tree):
    with pytest.raises(forkserver.Timeout):
        forkserver.run("sleeper", tree, tree / "s.spec.json", timeout=1)
    assert forkserver.run("probe_child", tree, tree / "p.spec.json", timeout=60)[0] == 3


def test_a_changed_environment_starts_another_server(tree, monkeypatch):
    monkeypatch.setenv("PROBE_EXIT", "0")
    assert forkserver.run("probe_child", tree, tree / "p.spec.json", timeout=60)[0] == 0
    monkeypatch.setenv("PROBE_EXIT", "5")
    assert forkserver.run("probe_child", tree, tree / "p.spec.json", timeout=60)[0] == 5
    assert len(forkserver._SERVERS) == 1


def test_the_switch_asks_for_fresh_interpreters(tree, monkeypatch):
    monkeypatch.setenv(forkserver.SWITCH, "0")
    with pytest.raises(forkserver.Unusable):
        forkserver.run("probe_child", tree, tree / "p.spec.json", timeout=60)
