"""NPU advisories (NPU80x): reported by check at the right lines, never rewritten or marked, off with NPU8."""

from __future__ import annotations

import json

from cli_helpers import REPO, cuda2npu

CASE = REPO / "fixtures" / "rules" / "advisories" / "train_loop.py"


def _findings(*args):
    result = cuda2npu("check", "--format", "json", "--no-cache", *args)
    return {(d["code"], d["line"]) for d in json.loads(result.stdout)["diagnostics"] if d["code"].startswith("NPU8")}


def test_each_advisory_at_its_line():
    lines = CASE.read_text().splitlines()
    found = _findings(str(CASE))
    assert {code for code, _ in found} == {"NPU801", "NPU802", "NPU803", "NPU804", "NPU805", "NPU806"}
    by_code = {code: lines[line - 1] for code, line in found}
    assert "loss.item():.4f" in by_code["NPU804"]  # per step, not the per-epoch read below it
    assert len([code for code, _ in found if code == "NPU804"]) == 1
    assert ".double()" in by_code["NPU802"] and "np.float64" not in by_code["NPU802"]


def test_the_family_is_turned_off_by_its_prefix(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.cuda2npu]\nignore = ["NPU8"]\n')
    target = tmp_path / "train_loop.py"
    target.write_text(CASE.read_text())
    assert _findings(str(target)) == set()
