"""Monkey patches nothing applies (a project fact, cuda2npu/analysis/unapplied_patches.py): skipped with
the reason, left as written; a patch something installs, or whose other names another file imports, is
migrated."""

from __future__ import annotations

import json

from cli_helpers import cli, write

PATCH = """\
import torch
import transformers


def forward(self, hidden_states):
    return hidden_states.to("cuda")


def replace_llama_attn_with_flash_attn():
    transformers.models.llama.modeling_llama.LlamaAttention.forward = forward
"""


def test_a_patch_whose_installer_nothing_calls_is_skipped(tmp_path):
    """Mini-Monkey (round 52): `internvl/patch/__init__.py` re-exports `replace_llama_attn_with_flash_attn`,
    which no script calls. Near misses: a patch a script installs, one whose `forward` another file imports,
    and a FastChat module of the same name imported from outside the project."""
    unapplied = write(tmp_path / "internvl" / "patch" / "llama_flash_attn_monkey_patch.py", PATCH)
    write(
        tmp_path / "internvl" / "patch" / "__init__.py",
        "from .llama_flash_attn_monkey_patch import replace_llama_attn_with_flash_attn\n\n"
        "__all__ = ['replace_llama_attn_with_flash_attn']\n",
    )
    write(tmp_path / "internvl" / "other.py", "from fastchat.train.llama_flash_attn_monkey_patch import forward\n")
    applied = write(tmp_path / "llava" / "train" / "llama_xformers_attn_monkey_patch.py", PATCH)
    write(
        tmp_path / "llava" / "train" / "train_xformers.py",
        "from llava.train.llama_xformers_attn_monkey_patch import replace_llama_attn_with_flash_attn as patch\n\n"
        "patch()\n",
    )
    borrowed = write(tmp_path / "ferret" / "train" / "flash_patch.py", PATCH.replace("replace_llama", "swap_llama"))
    write(tmp_path / "ferret" / "train" / "model.py", "from ferret.train.flash_patch import forward\n")
    out = tmp_path.parent / f"{tmp_path.name}-out"
    cli("migrate", tmp_path, "--out", out)
    report = json.loads((out / "cuda2npu_report.json").read_text())
    skipped = {f["path"].rsplit("/", 1)[-1]: f.get("reason", "") for f in report["files"] if f["status"] == "skipped"}
    assert "`replace_llama_attn_with_flash_attn()` is called nowhere" in skipped["llama_flash_attn_monkey_patch.py"]
    assert (out / unapplied.relative_to(tmp_path)).read_text() == PATCH
    for migrated in (applied, borrowed):
        assert '"npu"' in (out / migrated.relative_to(tmp_path)).read_text(), migrated
