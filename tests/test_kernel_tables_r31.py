"""Rounds 31 and 33: SageAttention, SpargeAttn and fast-hadamard-transform (their packages import compiled CUDA
extensions), vLLM's flash-attention build, and the distribution names pins use for FlashInfer's
0.1.x wheels and Block-Sparse-Attention (built from source)."""

from __future__ import annotations

from helpers import dedent, migrate_text
from test_kernel_tables_r5 import _depfile

from cuda2npu.analysis.cuda_only_modules import cuda_module, cuda_only_distribution

RADIAL_MASK = dedent(
    """
    import torch
    from sageattention import sageattn
    from spas_sage_attn import block_sparse_sage2_attn_cuda


    def attend(q, k, v):
        return sageattn(q.cuda(), k.cuda(), v.cuda())
    """
)


def test_the_packages_fail_at_import():
    for module in ("sageattention", "spas_sage_attn.core", "vllm_flash_attn.flash_attn_interface"):
        assert cuda_module(module)[0] == "imports", module
    assert cuda_only_distribution("block_sparse_attn")[0] == ("block_sparse_attn",)
    assert cuda_only_distribution("flashinfer")[0] == ("flashinfer",)


def test_a_module_importing_sageattention_is_marked_at_the_import():
    """radial-attention's `attn_mask.py` (round 31): the imports were unmarked."""
    migrated, result = migrate_text(RADIAL_MASK)
    assert [f.code for f in result.findings if f.code == "NPU606"] == ["NPU606", "NPU606"]
    assert "`sageattention` cannot be imported on an NPU host" in migrated


def test_the_pins_of_round_31_are_marked():
    """x-attention's requirements: `block_sparse_attn==0.0.1`, `flashinfer==0.1.6+cu121torch2.4`,
    `vllm-flash-attn==2.6.1` were kept unmarked."""
    text = "block_sparse_attn==0.0.1\nflashinfer==0.1.6+cu121torch2.4\nvllm-flash-attn==2.6.1\nnumpy\n"
    findings, _ = _depfile(text, {})
    assert [(f.code, f.line) for f in findings] == [("NPU701", 1), ("NPU701", 2), ("NPU701", 3)]


def test_fast_hadamard_transform_fails_at_import():
    """QuaRot and SpinQuant (round 33): `import fast_hadamard_transform` at module level, unmarked; every
    entry point of SpinQuant imports `utils/utils.py`, which does."""
    assert cuda_module("fast_hadamard_transform")[0] == "imports"
    assert cuda_only_distribution("fast-hadamard-transform")[0] == (
        "fast_hadamard_transform",
        "fast_hadamard_transform_cuda",
    )
    migrated, result = migrate_text("import torch\nimport fast_hadamard_transform\n\nx = torch.ones(1).cuda()\n")
    assert "NPU606 `fast_hadamard_transform` cannot" in migrated
