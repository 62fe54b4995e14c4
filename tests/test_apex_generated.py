"""The generated ``apex_npu_optimizers.py`` through the command line: written next to a migrated file
that used apex's optimizers or amp_C kernels, imported relatively inside a package, idempotent, and
the migrated code runs without apex (no apex or amp_C import is left)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import REPO, cuda2npu, tree_digest

from cuda2npu.families.apex.generated import KERNELS, OPTIMIZERS

TEMPLATE = REPO / "cuda2npu" / "templates" / "apex_npu_optimizers.py"
TRAIN = """import torch
import amp_C
from apex.multi_tensor_apply import multi_tensor_applier
from apex.optimizers import FusedAdam, FusedLAMB


def build(params, kind):
    if kind == "lamb":
        return FusedLAMB(params, lr=1e-2, weight_decay=0.01, max_grad_norm=1.0)
    return FusedAdam(params, lr=1e-2, bias_correction=False)


def clip_grad_norm(grads, max_norm):
    overflow_buf = torch.zeros(1, dtype=torch.int)
    norm, _ = multi_tensor_applier(amp_C.multi_tensor_l2norm, overflow_buf, [grads], False)
    clip_coeff = max_norm / (norm.item() + 1e-6)
    if clip_coeff < 1.0:
        multi_tensor_applier(amp_C.multi_tensor_scale, overflow_buf, [grads, grads], clip_coeff)
    return norm.item()
"""
RUN = """
import torch
from models import train

torch.manual_seed(0)
grads = [torch.randn(7, 5), torch.randn(13)]
expected = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])).item()
clipped = [g * (0.5 / (expected + 1e-6)) for g in grads]
assert abs(train.clip_grad_norm(grads, 0.5) - expected) < 1e-5 * expected
assert all(torch.allclose(g, c) for g, c in zip(grads, clipped))
for kind in ("lamb", "adam"):
    param = torch.nn.Parameter(torch.randn(4, 4))
    before = param.detach().clone()
    optimizer = train.build([param], kind)
    param.grad = torch.randn(4, 4)
    optimizer.step()
    assert not torch.equal(param.detach(), before) and optimizer.param_groups[0]["step"] == 1
print("ok")
"""


def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "models").mkdir(parents=True)
    (root / "models" / "__init__.py").write_text("", encoding="utf-8")
    (root / "models" / "train.py").write_text(TRAIN, encoding="utf-8")
    return root


def test_migrated_package_imports_the_generated_file_and_runs_without_apex(tmp_path):
    root = project(tmp_path)
    done = cuda2npu("migrate", ".", cwd=root)
    assert done.returncode == 0, done.stderr
    assert "created models/apex_npu_optimizers.py (imported by 1 migrated file)" in done.stderr
    assert (root / "models" / "apex_npu_optimizers.py").read_bytes() == TEMPLATE.read_bytes()
    migrated = (root / "models" / "train.py").read_text(encoding="utf-8")
    assert "\nfrom . import apex_npu_optimizers\n" in migrated
    assert "apex_npu_optimizers.FusedLAMB(params, lr=1e-2, weight_decay=0.01, max_grad_norm=1.0)" in migrated
    assert "apex_npu_optimizers.FusedAdam(params, lr=1e-2, bias_correction=False)" in migrated
    assert "amp_C" not in migrated and "from apex" not in migrated and "TODO(cuda2npu)" not in migrated
    before = tree_digest(root)
    again = cuda2npu("migrate", ".", cwd=root)  # idempotent: the relative import is found again
    assert again.returncode == 0 and "0 changed, 0 failed" in again.stderr
    assert tree_digest(root) == before
    ran = subprocess.run([sys.executable, "-c", RUN], cwd=root, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and ran.stdout.strip() == "ok", ran.stderr


def test_generated_file_is_plain_pytorch_and_clean_for_the_linter(tmp_path):
    tree = ast.parse(TEMPLATE.read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert imported == {"copy", "math", "torch"} and not any(isinstance(n, ast.ImportFrom) for n in ast.walk(tree))
    copy = tmp_path / TEMPLATE.name  # a project of its own, not the repository
    copy.write_text(TEMPLATE.read_text(encoding="utf-8"), encoding="utf-8")
    done = cuda2npu("check", copy, "--format", "json")
    assert done.returncode == 0, done.stdout
    assert json.loads(done.stdout)["diagnostics"] == []


@pytest.mark.parametrize("name", sorted({*KERNELS.values(), *(n.rsplit(".", 1)[1] for n in OPTIMIZERS), "FusedAdam"}))
def test_every_rewrite_target_exists_in_the_generated_file(name):
    tree = ast.parse(TEMPLATE.read_text(encoding="utf-8"))
    exported = next(n for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "__all__")
    assert name in ast.literal_eval(exported.value)
    defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    assert name in defined
