"""The whole-script A/B: a training script run in both trees, traces compared, first divergence named.

The comparison itself is tested on small hand-made traces; the runs through child processes on
the fixtures (tests/test_validation_mutants.py runs the mutants the validation must catch)."""

from __future__ import annotations

import json
import shutil

import pytest
from cli_helpers import REPO, cuda2npu

from cuda2npu.validation.lines import LineMap
from cuda2npu.validation.script import validate_script
from cuda2npu.validation.trace_compare import TraceComparison, calibration_floors, canary, compare_update

pytestmark = pytest.mark.slow  # most tests here run validate or the harness in subprocesses

SCRIPT = REPO / "fixtures" / "validation" / "script"


def _summary(values, dtype="float32"):
    return {
        "shape": [len(values)],
        "dtype": dtype,
        "sample": list(values),
        "stats": [sum(values), sum(map(abs, values)) / len(values), max(map(abs, values)), 1.0],
    }


def _event(step, kind, module="", values=(1.0,), call=0, **extra):
    event = {"step": step, "kind": kind, "module": module, "call": call, **extra}
    if kind not in ("kernel", "step", "scale"):
        event["tensors"] = [_summary(values, extra.pop("dtype", "float32"))]
        event.pop("dtype", None)
    return event


def _trace(events, steps=1, modules=("norm",), counts=None, **extra):
    counted = counts or {}
    return {
        "steps": steps,
        "status": "steps reached",
        "dropped": 0,
        "events": events,
        "modules": {
            m: {"class": "X", "defined": f"model.py:{10 + i}-{20 + i}", "built": None} for i, m in enumerate(modules)
        },
        "counts": counted,
        "optimizers": [{"class": "AdamW", "built": "train.py:30"}],
        "probes": [],
        **extra,
    }


def _compare(original, migrated, precision="fp32", policy=None, exact=None, tmp_path=None):
    lines = LineMap(tmp_path or REPO, tmp_path or REPO)
    return TraceComparison(original, migrated, precision, lines, policy, exact).run()


def test_modules_on_one_side_only_are_listed_not_counted():
    original = _trace(
        [_event(0, "forward", "norm", [1.0, 2.0]), _event(0, "forward", "te_block.fc1", [3.0])],
        modules=("norm", "te_block", "te_block.fc1"),
    )
    migrated = _trace(
        [_event(0, "forward", "norm", [1.0, 2.0]), _event(0, "forward", "te_block.linear", [3.0])],
        modules=("norm", "te_block", "te_block.linear"),
    )
    result = _compare(original, migrated)
    assert not result.divergences and result.compared["forward"] == 1
    assert result.only_original == ["te_block.fc1"] and result.only_migrated == ["te_block.linear"]


def test_nan_on_one_side_diverges():
    nan = float("nan")
    assert _compare(_trace([_event(0, "loss", values=[nan])]), _trace([_event(0, "loss", values=[1.0])])).divergences
    assert not _compare(
        _trace([_event(0, "loss", values=[nan])]), _trace([_event(0, "loss", values=[nan])])
    ).divergences


def test_a_missing_optimizer_step_is_a_divergence_placed_where_the_original_stepped(tmp_path):
    for side, text in (
        ("original", "loss.backward()\nopt.step()\nprint()\n"),
        ("migrated", "loss.backward()\nprint()\n"),
    ):
        (tmp_path / side).mkdir()
        (tmp_path / side / "train.py").write_text(text)
    original = _trace([_event(0, "step", site="train.py:2")], steps=1, counts={"0": {"optimizer step": 1}})
    migrated = _trace([], steps=0, status="more backward passes than the original made")
    result = TraceComparison(original, migrated, "fp32", LineMap(tmp_path / "original", tmp_path / "migrated")).run()
    first = result.divergences[0]
    assert first.kind == "steps" and first.where == "train.py:2"
    assert "made 0 optimizer step(s), the original 1" in first.describe()
    assert "more backward passes" in first.describe()


def test_a_backward_or_module_call_on_one_side_only_is_a_divergence():
    counts = {"0": {"backward": 1, "loss": 1, "forward norm": 2}}
    original = _trace([_event(0, "loss", site="train.py:40")], counts=counts)
    migrated = _trace([], counts={"0": {"forward norm": 1}})
    described = [d.describe() for d in _compare(original, migrated).divergences]
    assert any("backward() ran 0 time(s) in the migrated run, 1 in the original" in d for d in described), described
    assert any("norm was called 1 time(s), in the original 2" in d and "model.py:10-20" in d for d in described)


def test_attention_kernel_arguments_are_compared_symbolically():
    original = _trace([_event(0, "kernel", op="flash_attn", drop=0.1, scale=0.25, site="model.py:5")])
    good = _trace([_event(0, "kernel", op="npu_fusion_attention", drop=0.1, scale=0.25, site="model.py:7")])
    assert not _compare(original, good).divergences
    bad = _trace([_event(0, "kernel", op="npu_fusion_attention", drop=0.9, scale=1.0, site="model.py:7")])
    (divergence,) = _compare(original, bad).divergences
    text = divergence.describe()
    assert "probability 0.9" in text and "keep_prob must be 1 - dropout_p" in text and "by 1," in text
    assert divergence.where == "model.py:7"


def test_updates_are_bounded_relative_to_their_own_size():
    grad = _summary([0.5, -0.25, 1e-9, 0.1])
    tolerance = (1e-4, 1e-5)
    lr = 3e-7  # a warm-up step: far below any absolute tolerance
    update = _summary([-lr, lr, lr, -lr])
    assert compare_update(update, _summary([-lr, lr, -lr, -lr]), grad, tolerance)[0]  # noise-level element: any sign
    ok, error, bound, note = compare_update(update, _summary([-lr / 2, lr / 2, lr / 2, -lr / 2]), grad, tolerance)
    assert not ok and error == pytest.approx(lr / 2) and error > bound and "noise level" in note


def test_the_policy_mode_checks_dtypes_and_loss_scaling():
    def forward(dtype, parameters="float32"):
        return _event(0, "forward", "norm", [1.0], dtype=dtype, parameters=parameters)

    low = _trace([forward("float16"), _event(0, "scale", value=65536.0)])
    removed = _trace([forward("float32"), _event(0, "loss", site="train.py:9")])
    described = [d.describe() for d in _compare(low, removed, "fp16", policy="bf16").divergences]
    assert "norm computes in float32, the original in float16 (the bf16 policy wants bfloat16)" in described[0]
    fp16 = _trace([forward("float16"), _event(0, "loss", site="train.py:9")])
    unscaled = _compare(low, fp16, "fp16", policy="fp16")
    assert [d.kind for d in unscaled.divergences] == ["scale"] and unscaled.divergences[0].where == "train.py:9"
    bf16 = _trace([forward("bfloat16")])
    policy = _compare(low, bf16, "bf16", policy="bf16")
    assert not policy.divergences and "not needed outside float16" in policy.notes[0]
    # a model the script itself loads in float16 is the script's choice, not autocast's
    halved = _trace([forward("float16", parameters="float16")])
    assert not _compare(_trace([forward("float16", parameters="float16")]), halved, "fp16", policy="bf16").divergences


def test_a_module_left_on_the_cpu_is_a_divergence():
    original = _trace([_event(0, "forward", "norm", [1.0], device="cuda")])
    migrated = _trace([_event(0, "forward", "norm", [1.0], device="cpu")])
    (divergence,) = _compare(original, migrated).divergences
    assert divergence.kind == "device" and "on cpu, the original put them on cuda" in divergence.describe()
    assert not _compare(original, _trace([_event(0, "forward", "norm", [1.0], device="npu")])).divergences


def test_probes_are_compared_where_both_sides_ran_them():
    def probe(values, parameters=(("weight", [4]),), **extra):
        return {
            "kind": "module",
            "name": "norm",
            "class": "LayerNorm",
            "where": "model.py:3",
            "parameters": [list(p) for p in parameters],
            "tensors": [_summary(values)],
            **extra,
        }

    original = _trace([], probes=[probe([1.0, 2.0])])
    assert not _compare(original, _trace([], probes=[probe([1.0, 2.0])])).divergences
    (divergence,) = _compare(original, _trace([], probes=[probe([1.0, 2.2])])).divergences
    assert divergence.kind == "probe" and divergence.where == "model.py:3"
    other = _compare(original, _trace([], probes=[probe([1.0, 2.2], parameters=(("scale", [4]),))]))
    assert not other.divergences and "parameters differ" in other.notes[0]


def test_calibration_floors_follow_how_far_each_side_moved_from_float32():
    low, full = _summary([1.0, 2.0]), _summary([1.5, 2.0])
    floors = calibration_floors([(low, full), (_summary([1.0, 2.1]), _summary([1.0, 2.0]))])
    assert floors[0] == pytest.approx(2 * 0.5) and floors[1] == pytest.approx(2 * 0.1)


def test_the_canary_is_flagged_for_every_kind_compared():
    events = [_event(0, "forward", "norm", [1.0, 2.0]), _event(0, "loss", values=[3.0])]
    assert canary(_trace(events), _trace(events), "fp32") == {"forward": True, "loss": True}


def test_a_missing_package_is_a_skip_naming_every_missing_package_at_once(tmp_path):
    for side in ("original", "migrated"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "train.py").write_text("import helpers\nimport gymnasium_absent_here\n")
        (tmp_path / side / "helpers.py").write_text(
            "import einops_absent_here\ntry:\n    import guarded_absent\nexcept ImportError:\n    pass\n"
        )
    result = validate_script(tmp_path / "original", tmp_path / "migrated", "train.py")
    text = "\n".join(result.problems)
    assert result.status == "skipped", text
    assert "gymnasium_absent_here: needed by the original and migrated" in text
    assert "einops_absent_here" in text and "helpers.py:1" in text and "guarded_absent" not in text


def test_a_cuda_only_import_left_in_the_migrated_tree_is_an_error_at_its_line(tmp_path):
    (tmp_path / "original").mkdir()
    (tmp_path / "original" / "train.py").write_text("import torch\nprint(torch.ones(1))\n")
    (tmp_path / "migrated").mkdir()
    (tmp_path / "migrated" / "train.py").write_text("import torch\nimport xformers.ops\nprint(torch.ones(1))\n")
    result = validate_script(tmp_path / "original", tmp_path / "migrated", "train.py")
    assert result.status == "error" and result.location == "train.py:2"
    assert "CUDA-only import" in result.problems[0]
    assert "xformers: imported by the migrated tree at train.py:2" in "\n".join(result.problems)


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
    assert result.steps == 2 and result.compared > 100 and result.modes == ["exact (fp32)"]
    assert result.backends == {"original": "cpu (emulated cuda)", "migrated": "npu (emulated)"}
    assert not result.only_original and not result.only_migrated
    assert {"forward", "loss", "grad", "update", "probe"} <= set(result.checked)
    assert all(result.canary.values()) and set(result.canary) == {"forward", "loss", "grad", "update"}


def test_first_divergence_names_the_module_path_and_its_class(gpt, tmp_path):
    original, migrated = gpt
    broken = tmp_path / "broken"
    shutil.copytree(migrated, broken)
    source = (broken / "train.py").read_text()
    (broken / "train.py").write_text(
        source.replace("self.ln2 = nn.LayerNorm(dim)", "self.ln2 = nn.LayerNorm(dim, eps=1e-2)")
    )
    result = validate_script(original, broken, "train.py --steps 1", steps=1)
    assert result.status == "mismatch" and result.exit_code == 1
    first = result.divergences[0]
    assert (first.step, first.kind, first.module, first.call) == (0, "forward", "blocks.0.ln2", 0)
    line = next(n for n, text in enumerate(source.splitlines(), 1) if text.startswith("class Block"))
    assert first.where.startswith(f"train.py:{line}-")
    assert any(d.kind == "probe" and d.module == "blocks.0.ln2" for d in result.divergences)


def test_run_through_the_command_line_and_from_configuration(gpt, tmp_path):
    original, migrated = gpt
    report = tmp_path / "run.json"
    result = cuda2npu("validate", original, migrated, "--run", "train.py --steps 1", "--steps", "1", "--json", report)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "train.py --steps 1: EQUIVALENT" in result.stdout and "checked: " in result.stdout
    data = json.loads(report.read_text())["results"][0]
    assert data["status"] == "equivalent" and data["steps"] == 1 and data["first_divergence"] is None
    assert data["canary"] and all(data["canary"].values()) and data["checked"]["forward"] > 10
    configured = tmp_path / "configured"
    shutil.copytree(original, configured)
    (configured / "pyproject.toml").write_text('[tool.cuda2npu.validate]\nrun = "train.py --steps 1"\n')
    result = cuda2npu("validate", configured, migrated, "--steps", "1")
    assert result.returncode == 0 and "train.py --steps 1: EQUIVALENT" in result.stdout, result.stdout


def test_an_error_of_the_model_code_names_its_migrated_line_and_traceback(gpt, tmp_path):
    original, migrated = gpt
    broken = tmp_path / "broken"
    shutil.copytree(migrated, broken)
    source = (broken / "train.py").read_text()
    (broken / "train.py").write_text(source.replace("return self.head(x)", "return self.head(x.t())"))
    line = next(n for n, text in enumerate(source.splitlines(), 1) if "return self.head(x)" in text)
    result = cuda2npu("validate", original, broken, "--run", "train.py --steps 1", "--steps", "1")
    assert result.returncode == 2
    assert f"(at train.py:{line})" in result.stdout and "return self.head(x.t())" in result.stdout
    verbose = cuda2npu("validate", original, broken, "--run", "train.py --steps 1", "--steps", "1", "-v")
    assert "Traceback (most recent call last)" in verbose.stdout


def test_what_the_original_runs_in_fp8_must_follow_the_policy_in_the_migrated_run():
    def forward(module, dtype, fp8=False):
        return _event(0, "forward", module, [1.0], dtype=dtype, parameters="float32", fp8=fp8)

    original = _trace([forward("ln", "float32", fp8=True), forward("fc", "float32", fp8=True)], modules=("ln", "fc"))
    good = _trace([forward("ln", "float32"), forward("fc", "bfloat16")], modules=("ln", "fc"))
    assert not _compare(original, good, "bf16", policy="bf16").divergences  # a norm stays float32 under autocast
    removed = _trace([forward("ln", "float32"), forward("fc", "float32")], modules=("ln", "fc"))
    (divergence,) = _compare(original, removed, "bf16", policy="bf16").divergences
    assert divergence.kind == "dtype" and "original runs in FP8 computes in float32" in divergence.describe()
    half = _trace([forward("ln", "float32"), forward("fc", "float16")], modules=("ln", "fc"))
    assert _compare(original, half, "bf16", policy="bf16").divergences[0].kind == "dtype"
