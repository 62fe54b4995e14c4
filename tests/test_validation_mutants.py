"""Migration bugs the whole-script A/B must catch, each at its place, and correct migrations it must
pass: the flagship (apex O1 + FusedAdam + flash-attn with dropout 0.1, migrated to BF16 autocast,
torch.optim.AdamW and npu_fusion_attention) and CUDA AMP float16 with a GradScaler (migrated with
--precision fp16). ``benchmarks/mutants.py`` runs the whole catalogue on real projects."""

from __future__ import annotations

import re
import shutil

import pytest
from cli_helpers import REPO, cuda2npu

from cuda2npu.validation.script import validate_script

pytestmark = pytest.mark.slow
FIXTURES = REPO / "fixtures" / "validation"


def _migrate(name: str, tmp_path_factory, *options: str):
    out = tmp_path_factory.mktemp(name) / "migrated"
    result = cuda2npu("migrate", FIXTURES / name, "--out", out, "--quiet", *options)
    assert result.returncode == 0, result.stdout + result.stderr
    return FIXTURES / name, out


@pytest.fixture(scope="module")
def flagship(tmp_path_factory):
    return _migrate("apex_flash", tmp_path_factory)


@pytest.fixture(scope="module")
def scaler(tmp_path_factory):
    return _migrate("amp_scaler", tmp_path_factory, "--precision", "fp16")


def _mutant(migrated, tmp_path, pattern: str, replacement: str) -> tuple:
    """A copy of the migrated tree with the first match of ``pattern`` in train.py replaced; and the line."""
    tree = tmp_path / "mutant"
    shutil.copytree(migrated, tree)
    source = (tree / "train.py").read_text()
    match = re.search(pattern, source, re.MULTILINE)
    assert match, pattern
    (tree / "train.py").write_text(source[: match.start()] + match.expand(replacement) + source[match.end() :])
    return tree, source.count("\n", 0, match.start()) + 1


def _place(result) -> tuple[str, int, int]:
    where = result.divergences[0].where if result.divergences else result.location
    path, _, lines = where.rpartition(":")
    first, _, last = lines.partition("-")
    return path, int(first), int(last or first)


def test_correct_migrations_with_dropout_and_loss_scaling_are_equivalent(flagship, scaler):
    for original, migrated in (flagship, scaler):
        result = validate_script(original, migrated, "train.py --steps 2")
        assert result.status == "equivalent", [d.describe() for d in result.divergences[:3]] + result.problems
        assert len(result.modes) == 2 and result.checked["kernel"] >= 1 and all(result.canary.values())


FLAGSHIP_MUTANTS = [
    pytest.param(r"keep_prob=1\.0 - ", "keep_prob=", "kernel", id="keep_prob-not-inverted"),
    pytest.param(r"^\s*scale=q\.shape\[-1\] \*\* -0\.5,\n", "", "kernel", id="scale-dropped"),
    pytest.param(r"^(\s*)optimizer\.step\(\)", r"\1pass", "steps", id="step-removed"),
    pytest.param(r"^(\s*)loss\.backward\(\)", r"\1pass", "count", id="backward-removed"),
    pytest.param(
        r"^import torch_npu\n", "import torch_npu\nimport xformers.ops  # noqa\n", "error", id="cuda-only-import"
    ),
    pytest.param(
        r'torch\.autocast\("npu", dtype=torch\.bfloat16\)',
        'torch.autocast("npu", dtype=torch.bfloat16, enabled=False)',
        "dtype",
        id="autocast-off",
    ),
    pytest.param(r"betas=\(0\.9, 0\.95\)", "betas=(0.9, 0.999)", "update probe", id="betas"),
    pytest.param(
        r"self\.ln1 = nn\.LayerNorm\(dim\)", "self.ln1 = nn.LayerNorm(dim, eps=1e-3)", "forward", id="layernorm-eps"
    ),
]


@pytest.mark.parametrize(("pattern", "replacement", "kind"), FLAGSHIP_MUTANTS)
def test_flagship_mutants_are_caught_where_they_are(flagship, tmp_path, pattern, replacement, kind):
    original, migrated = flagship
    tree, line = _mutant(migrated, tmp_path, pattern, replacement)
    result = validate_script(original, tree, "train.py --steps 2")
    assert result.status == ("error" if kind == "error" else "mismatch"), result.problems
    if kind != "error":
        assert result.divergences[0].kind in kind.split(), [d.describe() for d in result.divergences[:3]]
    path, first, last = _place(result)
    assert path == "train.py" and first - 3 <= line <= last + 3, (line, result.divergences[:1] or result.location)


def test_a_float16_migration_that_drops_its_loss_scaler_is_caught(scaler, tmp_path):
    original, migrated = scaler
    tree, line = _mutant(migrated, tmp_path, r"scaler\.scale\(loss\)\.backward\(\)", "loss.backward()")
    source = (tree / "train.py").read_text()
    (tree / "train.py").write_text(
        source.replace("scaler.step(optimizer)", "optimizer.step()").replace("scaler.update()", "pass")
    )
    result = validate_script(original, tree, "train.py --steps 2")
    assert result.status == "mismatch"
    assert [d.kind for d in result.divergences] == ["scale"], [d.describe() for d in result.divergences]
    assert _place(result)[1] == line
