"""The project facts the flash-attn rules read (flash_probes.py): where the project sets
`_flash_attn_2_enabled` True (NPU408) and where it replaces a flash-attn function (NPU401–NPU403),
and what the rule does with them."""

from __future__ import annotations

from pathlib import Path

from helpers import dedent, migrate_text

from cuda2npu.analysis.flash_probes import flash2_flag_setters, flash_attn_patches
from cuda2npu.core.options import Options, ProjectFacts

ROOT = Path("/project")


def test_flag_setters():
    texts = {
        ROOT / "m4/configuration.py": b"class C:\n    def __init__(self, _flash_attn_2_enabled=True, **kw):\n"
        b"        self._flash_attn_2_enabled = _flash_attn_2_enabled\n",
        ROOT
        / "m4/tiny.py": b"cfg = C(hidden=8, _flash_attn_2_enabled = True)\nsetattr(cfg, '_flash_attn_2_enabled', True)\n",
        ROOT / "m4/dicts.py": b'kwargs = {"_flash_attn_2_enabled": True}\nconfig._flash_attn_2_enabled = True\n',
        ROOT / "off.py": b"cfg = C(_flash_attn_2_enabled=False)\nif config._flash_attn_2_enabled == True:\n    pass\n"
        b"# C(_flash_attn_2_enabled=True)\nx = getattr(config, '_flash_attn_2_enabled', False)\n",
    }
    assert flash2_flag_setters(texts, ROOT) == (
        "m4/configuration.py: def __init__(self, _flash_attn_2_enabled=True",
        "m4/dicts.py: config._flash_attn_2_enabled = True",
        'm4/dicts.py: kwargs = {"_flash_attn_2_enabled": True',
        "m4/tiny.py: cfg = C(hidden=8, _flash_attn_2_enabled = True",
        "m4/tiny.py: setattr(cfg, '_flash_attn_2_enabled', True",
    )


def test_flash_attn_patches():
    texts = {
        ROOT / "vescale/__init__.py": b"import flash_attn\n\nif ok:\n    flash_attn.flash_attn_func = wrap\n"
        b"    flash_attn.flash_attn_interface.flash_attn_varlen_func = wrap_varlen\n",
        ROOT / "other.py": b'setattr(flash_attn, "flash_attn_qkvpacked_func", w)\n'
        b"if flash_attn.flash_attn_func == w:\n    pass\nx = flash_attn.flash_attn_func\n",
    }
    assert flash_attn_patches(texts, ROOT) == (
        "other.py: flash_attn.flash_attn_qkvpacked_func",
        "vescale/__init__.py: flash_attn.flash_attn_func",
        "vescale/__init__.py: flash_attn.flash_attn_interface.flash_attn_varlen_func",
    )


FLAG_SELECTED = dedent(
    """
    from torch import nn
    from transformers.utils import is_flash_attn_2_available

    if is_flash_attn_2_available():
        from flash_attn import flash_attn_func


    class Attention(nn.Module):
        def forward(self, q, k, v):
            return (q @ k.transpose(-1, -2)).softmax(-1) @ v


    class FlashAttention2(Attention):
        def forward(self, q, k, v):
            return flash_attn_func(q, k, v, 0.0, causal=True)


    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.attn = Attention() if not getattr(config, "_flash_attn_2_enabled", False) else FlashAttention2()
    """
)


def test_project_setting_the_flag_migrates_the_class():
    """smollm's VMistralConfig defaults `_flash_attn_2_enabled=True` in another file: the class runs."""
    facts = ProjectFacts(flash2_flag_setters=("m4/configuration.py: def __init__(self, _flash_attn_2_enabled=True",))
    migrated, result = migrate_text(FLAG_SELECTED, Options(project=facts))
    assert "torch_npu.npu_fusion_attention(" in migrated and "flash_attn_func" not in migrated
    assert "NPU408" not in {f.code for f in result.findings}
    left, result = migrate_text(FLAG_SELECTED, Options(project=ProjectFacts()))
    assert "flash_attn_func(q, k, v, 0.0, causal=True)" in left
    assert "NPU408" in {f.code for f in result.findings}


PATCHED_ELSEWHERE = dedent(
    """
    import torch
    from flash_attn import flash_attn_func, flash_attn_varlen_func


    def attend(dq, dk, dv):
        return flash_attn_func(dq, dk, dv)


    def attend_packed(q, k, v, cu, m):
        return flash_attn_varlen_func(q, k, v, cu, cu, m, m)
    """
)


def test_project_patch_leaves_calls_of_that_name():
    """veScale replaces `flash_attn.flash_attn_func` in its `__init__.py`: a test calling it on DTensors."""
    facts = ProjectFacts(flash_attn_patches=("vescale/__init__.py: flash_attn.flash_attn_func",))
    migrated, result = migrate_text(PATCHED_ELSEWHERE, Options(project=facts))
    assert "return flash_attn_func(dq, dk, dv)" in migrated
    assert "from flash_attn import flash_attn_func\n" in migrated  # still used; varlen's name goes
    marker = next(f for f in result.findings if f.code == "NPU401")
    assert str(marker.tier) == "review" and "(vescale/__init__.py)" in marker.message
    assert migrated.count("torch_npu.npu_fusion_attention(") == 1  # the varlen call is not replaced
