"""The whole-script A/B: a training script run in both trees, traces compared, first divergence named."""

from __future__ import annotations

import json
import shutil

import pytest
from cli_helpers import REPO, cuda2npu

from cuda2npu.validation.script import compare_traces, validate_script

SCRIPT = REPO / "fixtures" / "validation" / "script"


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    out = tmp_path_factory.mktemp("script") / "migrated"
    assert cuda2npu("migrate", SCRIPT, "--out", out).returncode == 0
    assert 'device = "npu"' in (out / "train.py").read_text()
    return SCRIPT, out


def test_migrated_training_script_is_equivalent_step_by_step(gpt):
    original, migrated = gpt
    result = validate_script(original, migrated, "train.py --steps 2")
    assert result.status == "equivalent", [d.describe() for d in result.divergences[:3]] + result.problems
    assert result.steps == 2 and result.compared > 100
    assert result.backends == {"original": "cpu (emulated cuda)", "migrated": "npu (emulated)"}
    assert not result.only_original and not result.only_migrated


def test_first_divergence_names_the_module_path(gpt, tmp_path):
    original, migrated = gpt
    broken = tmp_path / "broken"
    shutil.copytree(migrated, broken)
    source = (broken / "train.py").read_text()
    (broken / "train.py").write_text(
        source.replace("self.ln2 = nn.LayerNorm(dim)", "self.ln2 = nn.LayerNorm(dim, eps=1e-2)")
    )
    result = validate_script(original, broken, "train.py --steps 1")
    assert result.status == "mismatch" and result.exit_code == 1
    first = result.divergences[0]
    assert (first.step, first.kind, first.module, first.call) == (0, "forward", "blocks.0.ln2", 0)
    assert "blocks.0.ln2" in first.describe()
    assert result.max_abs >= max(d.max_abs for d in result.divergences) > first.bound


def _summary(values, dtype="float32"):
    return {
        "shape": [len(values)],
        "dtype": dtype,
        "sample": list(values),
        "stats": [sum(values), sum(map(abs, values)) / len(values), max(map(abs, values)), 1.0],
    }


def _trace(events, steps=1):
    return {
        "steps": steps,
        "dropped": 0,
        "events": [
            {"step": step, "kind": kind, "module": module, "call": 0, "tensors": [_summary(values)]}
            for step, kind, module, values in events
        ],
    }


def test_modules_on_one_side_only_are_listed_not_counted():
    original = _trace([(0, "forward", "norm", [1.0, 2.0]), (0, "forward", "te_block.fc1", [3.0])])
    migrated = _trace([(0, "forward", "norm", [1.0, 2.0]), (0, "forward", "te_block.linear", [3.0])])
    result = compare_traces(original, migrated, None)
    assert result.status == "equivalent" and result.compared == 1
    assert result.only_original == ["te_block.fc1"] and result.only_migrated == ["te_block.linear"]


def test_nan_on_one_side_diverges_and_noise_level_gradients_are_not_compared():
    nan = float("nan")
    result = compare_traces(_trace([(0, "loss", "", [nan])]), _trace([(0, "loss", "", [1.0])]), "fp32")
    assert result.status == "mismatch"
    assert (
        compare_traces(_trace([(0, "loss", "", [nan])]), _trace([(0, "loss", "", [nan])]), "fp32").status
        == "equivalent"
    )
    # the second element's gradient is zero up to rounding: its Adam step has an arbitrary sign
    grads = [(0, "grad", "w", [0.5, 1e-9])]
    original = _trace(grads + [(0, "param", "w", [1.0, 0.003])])
    migrated = _trace(grads + [(0, "param", "w", [1.0, -0.003])])
    assert compare_traces(original, migrated, "fp32").status == "equivalent"
    migrated = _trace(grads + [(0, "param", "w", [1.1, -0.003])])
    assert compare_traces(original, migrated, "fp32").divergences[0].module == "w"


def test_a_missing_package_of_the_original_script_is_a_skip(tmp_path):
    for side in ("original", "migrated"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "train.py").write_text("import gymnasium_absent_here  # noqa: F401\n")
    result = validate_script(tmp_path / "original", tmp_path / "migrated", "train.py")
    assert result.status == "skipped" and "gymnasium_absent_here" in result.problems[0]


def test_run_through_the_command_line_and_from_configuration(gpt, tmp_path):
    original, migrated = gpt
    report = tmp_path / "run.json"
    result = cuda2npu("validate", original, migrated, "--run", "train.py --steps 1", "--steps", "1", "--json", report)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "train.py --steps 1: EQUIVALENT" in result.stdout
    data = json.loads(report.read_text())["results"][0]
    assert data["status"] == "equivalent" and data["steps"] == 1 and data["first_divergence"] is None
    configured = tmp_path / "configured"
    shutil.copytree(original, configured)
    (configured / "pyproject.toml").write_text('[tool.cuda2npu.validate]\nrun = "train.py --steps 1"\n')
    result = cuda2npu("validate", configured, migrated, "--steps", "1")
    assert result.returncode == 0 and "train.py --steps 1: EQUIVALENT" in result.stdout, result.stdout
