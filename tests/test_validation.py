"""The validation harness: passes correct migrations, fails broken ones with the cause.

Each case migrates an original CUDA fixture with the real CLI, then runs ``cuda2npu validate``
(original side on the CUDA stand-ins, migrated side on the emulated NPU) and also runs it
against deliberately broken copies of the migrated tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from cli_helpers import REPO, cuda2npu

from cuda2npu.validation.compare import (
    compare_dropout,
    compare_tensors,
    detect_precision,
)
from cuda2npu.validation.harness import validate
from cuda2npu.validation.keys import map_state_dict

pytestmark = pytest.mark.slow  # most tests here run validate or the harness in subprocesses

FIXTURES = REPO / "fixtures" / "validation"


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    out = tmp_path_factory.mktemp("mlp") / "migrated"
    assert cuda2npu("migrate", FIXTURES / "mlp", "--out", out).returncode == 0
    return FIXTURES / "mlp", out


def _break(migrated: Path, tmp_path: Path, old: str, new: str) -> Path:
    broken = tmp_path / "broken"
    shutil.copytree(migrated, broken)
    source = (broken / "model.py").read_text()
    assert old in source, f"mutation target {old!r} not in the migrated code"
    (broken / "model.py").write_text(source.replace(old, new))
    return broken


def test_correct_migration_is_equivalent(mlp, tmp_path):
    original, migrated = mlp
    report = tmp_path / "report.json"
    result = cuda2npu("validate", original, migrated, "--entry", "model:build", "--json", report)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(report.read_text())["results"][0]
    assert data["status"] == "equivalent" and data["precision"] == "fp32"
    groups = {row["group"] for row in data["tensors"]}
    assert groups == {"output", "grad", "after step", "optimizer probe", "device"}
    assert data["backends"]["migrated"].startswith("npu")


def test_cuda_call_left_behind_is_an_error(mlp, tmp_path):
    original, migrated = mlp
    broken = _break(migrated, tmp_path, "model = MLP().npu()", "model = MLP().cuda()")
    result = cuda2npu("validate", original, broken, "--entry", "model:build")
    assert result.returncode == 2
    assert "CUDA call on the migrated side" in result.stdout


def test_adamw_mapped_to_adam_is_a_mismatch(mlp, tmp_path):
    original, migrated = mlp
    broken = _break(migrated, tmp_path, "torch.optim.AdamW(", "torch.optim.Adam(")
    result = cuda2npu("validate", original, broken, "--entry", "model:build")
    assert result.returncode == 1
    assert "after step" in result.stdout and "MISMATCH" in result.stdout


def test_changed_dropout_is_caught_by_the_dropout_check(mlp, tmp_path):
    original, migrated = mlp
    broken = _break(migrated, tmp_path, "nn.Dropout(0.1)", "nn.Dropout(0.9)")
    assert cuda2npu("validate", original, broken, "--entry", "model:build").returncode == 0  # eval mode hides it
    result = cuda2npu("validate", original, broken, "--entry", "model:build", "--dropout-check")
    assert result.returncode == 1 and "keep_prob must be 1 - dropout_p" in result.stdout


def test_missing_entry_is_an_error(mlp):
    original, migrated = mlp
    result = cuda2npu("validate", original, migrated, "--entry", "model:nope")
    # a usage error, found before anything runs (tests/test_cli_contract.py has the typo cases)
    assert result.returncode == 2 and "model.py defines no 'nope'" in result.stderr and not result.stdout


def test_generated_validation_package_is_portable(tmp_path):
    """No path of this machine in the harness: both trees copied elsewhere side by side still
    validate, and so does the migrated tree alone with CUDA2NPU_ORIGINAL pointing at the original."""
    work = tmp_path / "here"
    shutil.copytree(FIXTURES / "mlp", work / "mlp")
    (work / "mlp" / "pyproject.toml").write_text('[tool.cuda2npu.validate]\nentries = ["model:build"]\n')
    assert cuda2npu("migrate", work / "mlp", "--out", work / "mlp_npu").returncode == 0
    test_file = work / "mlp_npu" / "npu_validation" / "test_npu_validation.py"
    text = test_file.read_text()
    assert "MODULE_CLASSES = ['model:MLP']" in text and str(tmp_path) not in text
    assert "MIGRATED / '../mlp'" in text
    moved = tmp_path / "elsewhere"
    shutil.move(work, moved)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "npu_validation"],
        cwd=moved / "mlp_npu",
        capture_output=True,
        text=True,
    )
    # the entry comparison and the smoke test of the entry and of MLP; MLP has no inputs
    # to compare with, and there are no fused sites
    assert run.returncode == 0 and "3 passed, 2 skipped" in run.stdout, run.stdout + run.stderr
    shutil.move(moved / "mlp", tmp_path / "original")
    env = {**os.environ, "CUDA2NPU_ORIGINAL": str(tmp_path / "original")}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "npu_validation"],
        cwd=moved / "mlp_npu",
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 0 and "3 passed, 2 skipped" in run.stdout, run.stdout + run.stderr
    del env["CUDA2NPU_ORIGINAL"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "npu_validation"],
        cwd=moved / "mlp_npu",
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 0 and "original tree not found" in run.stdout, run.stdout


def test_missing_optional_dependency_of_the_original_is_a_skip(tmp_path):
    original, migrated = tmp_path / "original", tmp_path / "migrated"
    for tree in (original, migrated):
        tree.mkdir()
        (tree / "model.py").write_text(
            "import torch\n\n\ndef build():\n    import gymnasium_absent_here  # noqa: F401\n"
            "    import sentencepiece_absent_here  # noqa: F401\n"
            "    return torch.nn.Linear(2, 2), (torch.ones(1, 2),)\n"
        )
    result = validate(original, migrated, "model:build")
    assert result.status == "skipped" and "gymnasium_absent_here" in result.problems[0]
    assert result.exit_code == 2  # the command line still says nothing was proven
    listed = "\n".join(result.problems[1:])  # every missing package at once, with who needs it and where
    assert "gymnasium_absent_here: needed by the original and migrated" in listed and "model.py:6" in listed


def test_tolerances_are_dtype_aware():
    expected = torch.linspace(-1, 1, 50)
    close = expected + 1e-7
    assert compare_tensors("output", "x", expected, close, "fp32").ok
    assert not compare_tensors("output", "x", expected, expected + 1e-3, "fp32").ok
    assert compare_tensors("output", "x", expected, expected + 1e-3, "bf16").ok
    shape = compare_tensors("output", "x", expected, expected[:10], "fp32")
    assert not shape.ok and "shape" in shape.note
    assert detect_precision([torch.zeros(1, dtype=torch.bfloat16), torch.zeros(1)]) == "bf16"


def test_dropout_comparison_band():
    assert compare_dropout(1.0, 1.2) is None
    assert "keep_prob" in compare_dropout(1.0, 9.0)


def test_te_extra_state_is_dropped_with_a_reason():
    state, dropped = map_state_dict({"w": 1, "layer._extra_state": 2}, {"w": 0})
    assert state == {"w": 1} and "layer._extra_state" in dropped


@pytest.fixture(scope="module")
def attention(tmp_path_factory):
    out = tmp_path_factory.mktemp("attention") / "migrated"
    assert cuda2npu("migrate", FIXTURES / "attention", "--out", out, "--fuse-sdpa").returncode == 0
    return FIXTURES / "attention", out


@pytest.mark.parametrize("entry", ["model:build_cross", "model:build_packed", "model:build_masked"])
def test_attention_migrations_are_equivalent(attention, entry):
    original, migrated = attention
    result = cuda2npu("validate", original, migrated, "--entry", entry)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "EQUIVALENT" in result.stdout


@pytest.mark.parametrize(
    ("entry", "old", "new", "expected_exit"),
    [
        pytest.param("model:build_cross", "scale=q.shape[-1] ** -0.5,", "", 1, id="scale-dropped"),
        pytest.param("model:build_cross", "sparse_mode=3", "sparse_mode=2", 1, id="causal-top-left-with-sq-ne-skv"),
        pytest.param("model:build_cross", '"BSND"', '"BSH"', 2, id="bsnd-passed-as-bsh"),
        pytest.param("model:build_masked", "atten_mask=~keep", "atten_mask=keep", 1, id="mask-polarity-not-inverted"),
    ],
)
def test_broken_attention_migrations_are_caught(attention, tmp_path, entry, old, new, expected_exit):
    original, migrated = attention
    broken = _break(migrated, tmp_path, old, new)
    result = cuda2npu("validate", original, broken, "--entry", entry)
    assert result.returncode == expected_exit, result.stdout + result.stderr
    assert ("MISMATCH" if expected_exit == 1 else "ERROR") in result.stdout


def test_entries_default_to_the_configuration(tmp_path):
    project = REPO / "fixtures" / "projects" / "ddp_train"  # [tool.cuda2npu.validate] entries in pyproject.toml
    out = tmp_path / "out"
    assert cuda2npu("migrate", project, "--out", out).returncode == 0
    result = cuda2npu("validate", project, out)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ddp_train.model:build_for_validation: EQUIVALENT" in result.stdout
    # TE TransformerLayer + LayerNormLinear (stand-ins) against the generated te_npu_modules.py (emulated NPU)
    assert "ddp_train.te_block:build_for_validation: EQUIVALENT" in result.stdout


def test_no_entry_anywhere_is_a_usage_error(mlp):
    original, migrated = mlp
    result = cuda2npu("validate", original, migrated)
    assert result.returncode == 2 and "no --entry or --run given" in result.stderr


DEEP_MODEL = """import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(48, 48) for _ in range(8))

    def forward(self, x):
        with {context}:
            for layer in self.layers:
                x = x + torch.tanh(layer(x){change}) * 3
        return x.float()


def build():
    torch.manual_seed(0)
    return Net().{device}(), (torch.randn(16, 48, device="{device}") * 3,)
"""


@pytest.fixture(scope="module")
def deep_bf16(tmp_path_factory):
    """A deep residual stack that amplifies bf16 rounding past the fixed bf16 bounds; the migrated
    copy differs only by its forward running under bf16 autocast, the broken one also by a 5% gain."""
    root = tmp_path_factory.mktemp("deep")
    trees = {
        "original": DEEP_MODEL.format(context="contextlib.nullcontext()", change="", device="cuda"),
        "migrated": DEEP_MODEL.format(context='torch.autocast("npu", dtype=torch.bfloat16)', change="", device="npu"),
        "broken": DEEP_MODEL.format(
            context='torch.autocast("npu", dtype=torch.bfloat16)', change=" * 1.05", device="npu"
        ),
    }
    for name, source in trees.items():
        (root / name).mkdir()
        imports = "import contextlib\n" + ("" if name == "original" else "import torch_npu  # noqa: F401\n")
        (root / name / "model.py").write_text(imports + source)
    return root


def test_bf16_bounds_are_calibrated_against_the_original_at_bf16(deep_bf16, tmp_path, monkeypatch):
    report = tmp_path / "report.json"
    result = cuda2npu(
        "validate",
        deep_bf16 / "original",
        deep_bf16 / "migrated",
        "--entry",
        "model:build",
        "--precision",
        "bf16",
        "--json",
        report,
    )
    assert result.returncode == 0, result.stdout
    assert "bounds calibrated" in result.stdout
    data = json.loads(report.read_text())["results"][0]
    assert any("from the original at bf16" in row["note"] for row in data["tensors"])
    from cuda2npu.validation import harness

    monkeypatch.setattr(harness, "_calibration", lambda *args: (None, []))
    uncalibrated = validate(deep_bf16 / "original", deep_bf16 / "migrated", "model:build", "bf16")
    assert uncalibrated.status == "mismatch"  # the fixed bf16 bounds alone reject a precision-only change


def test_calibrated_bounds_still_catch_a_changed_computation(deep_bf16):
    result = cuda2npu(
        "validate", deep_bf16 / "original", deep_bf16 / "broken", "--entry", "model:build", "--precision", "bf16"
    )
    assert result.returncode == 1 and "MISMATCH" in result.stdout


def test_a_model_left_on_the_cpu_is_a_mismatch_at_its_entry(mlp, tmp_path):
    original, migrated = mlp
    broken = _break(migrated, tmp_path, "model = MLP().npu()", "model = MLP()")
    source = (broken / "model.py").read_text().replace('device="npu"', 'device="cpu"')
    (broken / "model.py").write_text(source)  # model and inputs on the CPU: it runs, but not on the NPU
    result = validate(original, broken, "model:build")
    assert result.status == "mismatch"
    (row,) = [row for row in result.rows if not row.ok]
    assert row.group == "device" and "on cpu, the original's on cuda" in row.note
    assert (
        result.where.startswith("model.py:")
        and "def build" in source.splitlines()[int(result.where.split(":")[1].split("-")[0]) - 1]
    )


NESTED = """
import torch
{imports}from torch import nn


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return torch.tanh(self.linear(x)){change}


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(4, 4)
        self.inner = Inner()
        self.last = nn.Linear(4, 2)

    def forward(self, x):
        return self.last(self.inner(self.first(x)))


def build():
    torch.manual_seed(0)
    return Outer().{device}(), (torch.randn(3, 4, device="{device}"),)
"""


def test_a_mismatch_points_at_the_first_module_of_the_forward_that_differs(tmp_path):
    trees = {"original": ("", "cuda", ""), "migrated": ("import torch_npu  # noqa: F401\n", "npu", " * 1.01")}
    for name, (imports, device, change) in trees.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.py").write_text(NESTED.format(imports=imports, device=device, change=change))
    result = validate(tmp_path / "original", tmp_path / "migrated", "model:build")
    assert result.status == "mismatch"
    lines = (tmp_path / "migrated" / "model.py").read_text().splitlines()
    first = next(n for n, text in enumerate(lines, 1) if text.startswith("class Inner"))
    last = next(n for n, text in enumerate(lines, 1) if "torch.tanh" in text)
    assert result.where == f"model.py:{first}-{last}", result.where  # Inner, not Outer nor a grad's class


def test_the_smoke_test_runs_the_migrated_tree_alone_on_the_npu_host(mlp, tmp_path):
    from cuda2npu.validation.smoke import smoke

    _, migrated = mlp
    result = smoke(migrated, "model:build")
    assert result.status == "ok", result.report()
    assert "parameters on npu" in result.checks and any("outputs finite" in c for c in result.checks)
    assert smoke(migrated, "model:MLP").status == "ok"  # a class: moved to the device, no inputs to run
    on_cpu = _break(migrated, tmp_path, "model = MLP().npu()", "model = MLP()")
    (on_cpu / "model.py").write_text((on_cpu / "model.py").read_text().replace('device="npu"', 'device="cpu"'))
    assert "not npu" in smoke(on_cpu, "model:build").problem
    nan = tmp_path / "nan"
    shutil.copytree(migrated, nan)
    (nan / "model.py").write_text(
        (nan / "model.py").read_text().replace("return self.net(x)", "return self.net(x) * float('nan')")
    )
    failed = smoke(nan, "model:build")
    assert failed.status == "failed" and "outputs [0] are not finite" in failed.problem


DEVICE_ENTRY = """import torch
from torch import nn

DEVICE = "cuda"


def _inputs():
    return (torch.randn(3, 4).to(DEVICE),)


def build():
    torch.manual_seed(0)
    return nn.Linear(4, 2).to(DEVICE), _inputs()
"""


@pytest.mark.parametrize(
    ("old", "new", "status", "lines"),
    [
        # migrated lines (`import torch_npu` added at line 2): DEVICE, _inputs, build
        ('DEVICE = "npu"', 'DEVICE = "cpu"', "mismatch", "5, 8-9, 12-14"),
        ("torch.randn(3, 4).to(DEVICE)", "torch.randn(3, 4)", "error", "5, 8-9, 12-14"),
    ],
    ids=["device-name", "input-helper"],
)
def test_an_entry_device_problem_points_at_the_lines_that_decide_the_devices(tmp_path, old, new, status, lines):
    """The entry's function, the same module's functions it calls and the module-level names it
    reads: where a device left on the CPU is decided, although the error surfaces elsewhere."""
    original = tmp_path / "original"
    original.mkdir()
    (original / "model.py").write_text(DEVICE_ENTRY)
    assert cuda2npu("migrate", original, "--out", tmp_path / "migrated").returncode == 0
    broken = _break(tmp_path / "migrated", tmp_path, old, new)
    result = validate(original, broken, "model:build")
    assert result.status == status
    where = result.where if status == "mismatch" else " ".join(result.problems)
    assert f"model.py:{lines}" in where, where
