"""The validation harness on the apex and TransformerEngine families (NPU3xx, NPU4xx).

As in ``test_validation.py``: each original CUDA fixture is migrated once with the real CLI,
the migration must validate (original on the CUDA stand-ins, migrated on the emulated NPU), and
deliberately broken copies of the migrated tree must fail with the right exit code, in the right
place. Every mutation here really changes the numbers (or the run) beyond the bounds in use:
precision-only changes that bf16 bounds accept by design (autocast removed, an output ``.float()``
dropped) are not asserted as failures.

About 10 ``validate`` runs (two subprocesses each).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from cli_helpers import REPO, cuda2npu

pytestmark = pytest.mark.slow  # most tests here run validate or the harness in subprocesses

FIXTURES = REPO / "fixtures" / "validation"
EXTRA_STATE_NOTE = "TransformerEngine FP8 metadata"


def _migrate(tmp_path_factory, name: str) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp(name) / "migrated"
    result = cuda2npu("migrate", FIXTURES / name, "--out", out)
    assert result.returncode == 0, result.stdout + result.stderr
    return FIXTURES / name, out


@pytest.fixture(scope="module")
def apex(tmp_path_factory):
    return _migrate(tmp_path_factory, "apex")


@pytest.fixture(scope="module")
def te(tmp_path_factory):
    return _migrate(tmp_path_factory, "te")


def _break(migrated: Path, tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the migrated tree with every ``old`` in model.py replaced by ``new``."""
    broken = tmp_path / "broken"
    shutil.copytree(migrated, broken)
    source = (broken / "model.py").read_text()
    assert old in source, f"mutation target {old!r} not in the migrated code"
    (broken / "model.py").write_text(source.replace(old, new))
    return broken


def _validate(original: Path, migrated: Path, tmp_path: Path, *args) -> tuple[int, str, list[dict]]:
    """(exit code, console output, JSON results) of one ``cuda2npu validate`` run."""
    report = tmp_path / "report.json"
    result = cuda2npu("validate", original, migrated, *args, "--json", report)
    assert report.exists(), result.stdout + result.stderr
    return result.returncode, result.stdout + result.stderr, json.loads(report.read_text())["results"]


def _failing(data: dict) -> set[str]:
    return {row["group"] for row in data["tensors"] if not row["ok"]}


# --- apex: FusedLayerNorm, FusedAdam (AdamW mode), FusedLAMB, CUDA autocast --------------------


def test_apex_migration_rewrites(apex):
    _, migrated = apex
    source = (migrated / "model.py").read_text()
    assert not re.search(r"^\s*(from|import) apex\b", source, re.MULTILINE)
    assert "torch.nn.LayerNorm(hidden, eps=1e-3)" in source
    assert "torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)" in source
    assert "\nimport apex_npu_optimizers\n" in source and "apex_npu_optimizers.FusedLAMB(" in source
    assert 'with torch.autocast("npu", dtype=torch.bfloat16):\n            logits = self.body(x)' in source
    # the amp O1 loop of train(): no amp.initialize, the forward region autocast, plain backward
    train = source[source.index("def train(") :]
    assert not re.search(r"\bamp\.", train) and "scaled_loss" not in train
    assert 'with torch.autocast("npu", dtype=torch.bfloat16):\n                outputs = model(inputs.npu())' in train
    assert "loss.backward()" in train


def test_apex_migration_is_equivalent_in_float32(apex, tmp_path):
    original, migrated = apex
    code, output, results = _validate(original, migrated, tmp_path, "--entry", "model:build")
    assert code == 0, output
    data = results[0]
    assert data["status"] == "equivalent" and data["precision"] == "fp32"
    assert {row["group"] for row in data["tensors"]} == {"output", "grad", "after step", "optimizer probe", "device"}


@pytest.mark.parametrize(
    ("old", "new", "failing"),
    [
        # FusedAdam defaults to adam_w_mode=True: decoupled decay, not L2 added to the gradient
        pytest.param("torch.optim.AdamW(", "torch.optim.Adam(", {"after step"}, id="adamw-mapped-to-adam"),
        # torch.optim.AdamW's own default weight_decay is 1e-2, apex's 0.1 here
        pytest.param(", weight_decay=0.1)", ")", {"after step"}, id="weight-decay-dropped"),
        pytest.param(
            "LayerNorm(hidden, eps=1e-3)", "LayerNorm(hidden, eps=1e-5)", {"output", "grad"}, id="layernorm-eps-changed"
        ),
    ],
)
def test_broken_apex_migrations_are_mismatches(apex, tmp_path, old, new, failing):
    original, migrated = apex
    broken = _break(migrated, tmp_path, old, new)
    code, output, results = _validate(original, broken, tmp_path, "--entry", "model:build")
    assert code == 1, output
    assert "MISMATCH" in output
    assert failing <= _failing(results[0]), results[0]["tensors"]
    if failing == {"after step"}:  # the optimizer alone differs: forward and backward still match
        assert _failing(results[0]) <= {"after step", "optimizer probe"}


def test_fused_lamb_in_the_generated_file_is_equivalent_to_apex(apex, tmp_path):
    """apex's FusedLAMB (the CUDA stand-in) against the generated apex_npu_optimizers.FusedLAMB on the NPU."""
    original, migrated = apex
    assert (migrated / "apex_npu_optimizers.py").is_file()
    code, output, results = _validate(original, migrated, tmp_path, "--entry", "model:build_lamb")
    assert code == 0, output
    assert results[0]["status"] == "equivalent" and results[0]["precision"] == "fp32"


LAMB = "apex_npu_optimizers.FusedLAMB(model.parameters(), lr=1e-2, eps=1e-3, weight_decay=0.1, max_grad_norm=0.05)"


@pytest.mark.parametrize(
    "new",
    [
        pytest.param(LAMB.replace(", max_grad_norm=0.05", ""), id="max-grad-norm-dropped"),
        pytest.param(LAMB.replace(" weight_decay=0.1,", ""), id="weight-decay-dropped"),  # apex's default 0.01
        pytest.param(
            "apex_npu_optimizers.FusedAdam(model.parameters(), lr=1e-2, eps=1e-3, weight_decay=0.1)", id="adam-not-lamb"
        ),
    ],
)
def test_broken_fused_lamb_migrations_are_mismatches(apex, tmp_path, new):
    original, migrated = apex
    broken = _break(migrated, tmp_path, LAMB, new)
    code, output, results = _validate(original, broken, tmp_path, "--entry", "model:build_lamb")
    assert code == 1, output
    assert {"after step"} <= _failing(results[0]) <= {"after step", "optimizer probe"}, results[0]["tensors"]


def test_autocast_migration_is_equivalent_under_bf16_bounds(apex, tmp_path):
    original, migrated = apex
    code, output, results = _validate(
        original, migrated, tmp_path, "--entry", "model:build_autocast", "--precision", "bf16"
    )
    assert code == 0, output
    data = results[0]
    assert data["status"] == "equivalent" and data["precision"] == "bf16"
    # float16 (original) and bfloat16 (migrated) really differ: float32 bounds would reject this
    output_row = next(row for row in data["tensors"] if row["group"] == "output")
    assert output_row["max_abs_error"] > 1e-4


def test_bf16_model_with_npu_fused_optimizer_is_an_error(apex, tmp_path):
    """A hand port to torch_npu's NpuFusedAdamW (what --apex ascend writes) with the model cast to
    bfloat16 (NPU342's advice for .half()) breaks: those optimizers take float32/float16 only."""
    original, migrated = apex
    ported = _break(migrated, tmp_path / "ported", "torch.optim.AdamW(", "torch_npu.optim.NpuFusedAdamW(")
    broken = _break(
        ported,
        tmp_path,
        "model = AutocastClassifier().npu()",
        "model = AutocastClassifier().npu().to(torch.bfloat16)",
    )
    code, output, results = _validate(
        original, broken, tmp_path, "--entry", "model:build_autocast", "--precision", "bf16"
    )
    assert code == 2, output
    assert results[0]["status"] == "error"
    assert "parameters must be either float32 or float16" in results[0]["problems"][0]


# --- TransformerEngine: te.Linear, te.LayerNorm, te.RMSNorm, fp8_autocast ------------------------


def test_te_migration_rewrites(te):
    _, migrated = te
    source = (migrated / "model.py").read_text()
    assert "transformer_engine" not in source and not re.search(r"\bte\.", source)
    assert 'torch.nn.RMSNorm(dim, eps=1e-3, dtype=dtype, device="npu")' in source
    assert 'torch.autocast("npu", dtype=torch.bfloat16) if self.fp8 else contextlib.nullcontext()' in source


def test_te_migration_is_equivalent_and_drops_extra_state(te, tmp_path):
    original, migrated = te
    code, output, results = _validate(
        original, migrated, tmp_path, "--entry", "model:build", "--entry", "model:build_fp8"
    )
    assert code == 0, output
    by_entry = {data["entry"]: data for data in results}
    assert by_entry["model:build"]["precision"] == "fp32"
    assert by_entry["model:build_fp8"]["precision"] == "bf16"  # bfloat16 outputs, detected
    modules = {"norm", "fc1", "fc2", "out_norm"}
    for data in results:
        assert data["status"] == "equivalent"
        assert set(data["dropped_keys"]) == {f"{m}._extra_state" for m in modules}
        assert all(EXTRA_STATE_NOTE in reason for reason in data["dropped_keys"].values())
        assert {row["name"] for row in data["tensors"] if row["group"] == "grad"} == {
            "norm.weight",
            "norm.bias",
            "fc1.weight",
            "fc1.bias",
            "fc2.weight",
            "out_norm.weight",
        }
    assert "dropped key fc1._extra_state" in output


@pytest.mark.parametrize(
    ("old", "new", "failing"),
    [
        pytest.param(
            "LayerNorm(dim, eps=1e-3,", "LayerNorm(dim, eps=1e-5,", {"output", "grad"}, id="layernorm-eps-changed"
        ),
        # bias=False keeps the checkpoint loadable, so only the numbers can tell
        pytest.param(
            "torch.nn.RMSNorm(dim, eps=1e-3,",
            "torch.nn.LayerNorm(dim, eps=1e-3, bias=False,",
            {"output", "grad"},
            id="rmsnorm-mapped-to-layernorm",
        ),
        # params_dtype mapped to the wrong dtype: a bfloat16 gain in a float32 block
        pytest.param(
            "RMSNorm(dim, eps=1e-3, dtype=dtype,",
            "RMSNorm(dim, eps=1e-3, dtype=torch.bfloat16,",
            {"grad", "after step"},
            id="params-dtype-changed",
        ),
    ],
)
def test_broken_te_migrations_are_mismatches(te, tmp_path, old, new, failing):
    original, migrated = te
    broken = _break(migrated, tmp_path, old, new)
    code, output, results = _validate(original, broken, tmp_path, "--entry", "model:build")
    assert code == 1, output
    assert "MISMATCH" in output
    assert failing <= _failing(results[0]), results[0]["tensors"]
