"""NPU418's generated file through the command line: where ``te_npu_modules.py`` is written, how it
is imported, what --diff/--check/--out/--report show, and that nothing the user has is overwritten."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import REPO, cuda2npu, tree_digest
from click.testing import CliRunner

from cuda2npu.commands import cli
from cuda2npu.commands import migrate as migrate_command
from cuda2npu.families.transformer_engine.generated import FUSED

TEMPLATE = REPO / "cuda2npu" / "templates" / "te_npu_modules.py"
MODEL = """import torch
import transformer_engine.pytorch as te


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = te.TransformerLayer(64, 256, 4, hidden_dropout=0.0, seq_length=128)
"""


def project(tmp_path: Path, package: bool = False) -> Path:
    root = tmp_path / "project"
    (root / "models").mkdir(parents=True)
    (root / "models" / "block.py").write_text(MODEL, encoding="utf-8")
    if package:
        (root / "models" / "__init__.py").write_text("", encoding="utf-8")
    return root


def test_in_place_writes_the_generated_file_next_to_the_migrated_one(tmp_path):
    root = project(tmp_path)
    done = cuda2npu("migrate", ".", cwd=root)
    assert done.returncode == 0, done.stderr
    assert "created models/te_npu_modules.py (imported by 1 migrated file)" in done.stderr
    migrated = (root / "models" / "block.py").read_text(encoding="utf-8")
    assert "\nimport te_npu_modules\n" in migrated
    assert "te_npu_modules.TransformerLayer(64, 256, 4, hidden_dropout=0.0)" in migrated
    assert (root / "models" / "te_npu_modules.py").read_bytes() == TEMPLATE.read_bytes()
    before = tree_digest(root)
    again = cuda2npu("migrate", ".", cwd=root)  # idempotent, and the generated file has nothing to migrate
    assert again.returncode == 0 and "0 changed, 0 failed" in again.stderr
    assert tree_digest(root) == before


def test_inside_a_package_the_import_is_relative(tmp_path):
    root = project(tmp_path, package=True)
    assert cuda2npu("migrate", ".", cwd=root).returncode == 0
    assert "\nfrom . import te_npu_modules\n" in (root / "models" / "block.py").read_text(encoding="utf-8")
    assert (root / "models" / "te_npu_modules.py").is_file()


def test_an_edited_generated_file_is_kept(tmp_path):
    root = project(tmp_path)
    mine = root / "models" / "te_npu_modules.py"
    mine.write_text("# my own version\n", encoding="utf-8")
    done = cuda2npu("migrate", ".", cwd=root)
    assert done.returncode == 0, done.stderr
    assert "models/te_npu_modules.py: exists and differs from the generated version; kept as it is" in done.stderr
    assert mine.read_text(encoding="utf-8") == "# my own version\n"
    assert "te_npu_modules.TransformerLayer" in (root / "models" / "block.py").read_text(encoding="utf-8")


def test_diff_shows_the_new_file_and_applies_with_git(tmp_path):
    root = project(tmp_path)
    before = tree_digest(root)
    done = cuda2npu("migrate", ".", "--diff", cwd=root)
    assert done.returncode == 1
    assert "--- /dev/null\n+++ b/models/te_npu_modules.py\n" in done.stdout
    assert tree_digest(root) == before
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    applied = subprocess.run(["git", "apply", "-"], input=done.stdout, cwd=copy, capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    assert (copy / "models" / "te_npu_modules.py").read_bytes() == TEMPLATE.read_bytes()


def test_check_lists_the_file_it_would_create(tmp_path):
    root = project(tmp_path)
    done = cuda2npu("migrate", ".", "--check", cwd=root)
    assert done.returncode == 1
    assert done.stdout.splitlines() == ["Would migrate: models/block.py", "Would create: models/te_npu_modules.py"]
    assert not (root / "models" / "te_npu_modules.py").exists()


def test_out_and_report(tmp_path):
    root = project(tmp_path)
    before = tree_digest(root)
    out = tmp_path / "out"
    done = cuda2npu("migrate", root, "--out", out)
    assert done.returncode == 0, done.stderr
    assert tree_digest(root) == before
    assert (out / "models" / "te_npu_modules.py").is_file()
    report = json.loads((out / "cuda2npu_report.json").read_text(encoding="utf-8"))
    assert report["generated_files"] == [
        {"path": "models/te_npu_modules.py", "status": "created", "needed_by": ["models/block.py"]}
    ]
    assert "in_package" not in report["options"]


def test_a_file_whose_generated_module_cannot_be_written_is_not_written(tmp_path, monkeypatch):
    root = project(tmp_path)
    real_write = migrate_command.atomic_write

    def refuse_generated(path, data, **kwargs):
        if Path(path).name == "te_npu_modules.py":
            raise PermissionError(13, "Permission denied")
        return real_write(path, data, **kwargs)

    monkeypatch.setattr(migrate_command, "atomic_write", refuse_generated)
    monkeypatch.chdir(root)
    result = CliRunner().invoke(cli.main, ["migrate", ".", "--jobs", "1", "--no-cache"])
    assert result.exit_code == 1
    assert (
        "models/block.py:1:1: cannot create models/te_npu_modules.py, which the migrated file imports" in result.output
    )
    assert (root / "models" / "block.py").read_text(encoding="utf-8") == MODEL


def test_generated_file_is_plain_pytorch_and_clean_for_the_linter(tmp_path):
    tree = ast.parse(TEMPLATE.read_text(encoding="utf-8"))
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported == {"math", "collections", "torch", "torch_npu"}
    copy = tmp_path / TEMPLATE.name  # a project of its own, not the repository
    copy.write_text(TEMPLATE.read_text(encoding="utf-8"), encoding="utf-8")
    done = cuda2npu("check", copy, "--format", "json")
    assert done.returncode == 0, done.stdout
    assert json.loads(done.stdout)["diagnostics"] == []


def _generated_signature(name: str) -> ast.arguments:
    """The parameters of a class's __init__ (self left out) or of a function in the generated file."""
    tree = ast.parse(TEMPLATE.read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name)
    if isinstance(node, ast.FunctionDef):
        return node.args
    init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    if init is None:  # inherits its __init__ (RMSNorm from LayerNorm)
        return _generated_signature(node.bases[0].id)
    return ast.arguments(
        posonlyargs=[],
        args=init.args.args[1:],
        vararg=None,
        kwonlyargs=init.args.kwonlyargs,
        kw_defaults=[],
        kwarg=None,
        defaults=[],
    )


@pytest.mark.parametrize("name", sorted(FUSED))
def test_every_rewrite_target_exists_in_the_generated_file(name):
    signature = _generated_signature(name)
    positional = [a.arg for a in signature.args]
    spec = FUSED[name]
    # TE's positional parameters, in TE's order, then every argument the rule keeps
    assert positional[: spec.positional] == list(spec.params[: spec.positional])
    assert set(spec.accepted) <= set(positional) | {a.arg for a in signature.kwonlyargs}


SPY = """
import sys
import torch
from cuda2npu.emulation import emulate_npu

emulate_npu()
import torch_npu

sys.path.insert(0, sys.argv[1])
import te_npu_modules

calls = []
real = torch_npu.npu_fusion_attention


def spy(*args, **kwargs):
    calls.append(kwargs)
    return real(*args, **kwargs)


te_npu_modules.torch_npu.npu_fusion_attention = spy
attention = te_npu_modules.DotProductAttention(4, 16, attention_dropout=0.25, qkv_format="bshd", attn_mask_type="no_mask")
q = torch.randn(2, 8, 4, 16, device="npu")
attention.train()
attention(q, q, q)
attention.eval()
attention(q, q, q)
print([(c["keep_prob"], round(c["scale"], 6)) for c in calls])
"""


def test_attention_dropout_becomes_keep_prob_in_training_only(tmp_path):
    """TE's attention_dropout is a drop probability; the NPU op takes keep_prob, and no dropout in eval."""
    spy = tmp_path / "spy.py"
    spy.write_text(SPY, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(spy), str(TEMPLATE.parent)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[(0.75, 0.25), (1.0, 0.25)]"  # scale 1/sqrt(kv_channels=16)
