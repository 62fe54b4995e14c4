"""NPU111 through the command line: legacy tensor type strings (``'torch.cuda.FloatTensor'``) in
``.type()`` tests are rewritten by ``migrate`` (once: a second run changes nothing), reported by
``check``, and left alone in text. Golden cases: fixtures/rules/device/tensor_type_strings*.py."""

from __future__ import annotations

import json

from cli_helpers import cuda2npu
from helpers import dedent

SOURCE = dedent(
    """
    import torch


    def forward(logits, mask):
        \"\"\"logits: a torch.cuda.FloatTensor\"\"\"
        assert logits.type() == 'torch.cuda.FloatTensor', "expected torch.cuda.FloatTensor"
        if mask.type() in ("torch.cuda.HalfTensor", "torch.cuda.BFloat16Tensor"):
            mask = mask.type("torch.cuda.FloatTensor")
        print("torch.cuda.FloatTensor")
        return logits * mask


    KEEP_AS = "torch.cuda.HalfTensor"
    """
)


def test_check_reports_and_migrate_rewrites_type_tests_once(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(SOURCE)
    checked = json.loads(cuda2npu("check", path, "--format", "json", "--exit-zero", "--select", "NPU111").stdout)
    found = sorted((d["line"], d["tier"], d["fixable"]) for d in checked["diagnostics"])
    assert found == [
        (6, "exact", True),
        (7, "exact", True),
        (7, "exact", True),
        (8, "exact", True),
        (13, "review", False),
    ]
    assert cuda2npu("migrate", path).returncode == 0
    migrated = path.read_text()
    assert "assert logits.type() == 'torch.npu.FloatTensor', \"expected torch.cuda.FloatTensor\"" in migrated
    assert 'if mask.type() in ("torch.npu.HalfTensor", "torch.npu.BFloat16Tensor"):' in migrated
    assert 'mask = mask.type("torch.npu.FloatTensor")' in migrated
    assert '"""logits: a torch.cuda.FloatTensor"""' in migrated and 'print("torch.cuda.FloatTensor")' in migrated
    assert "# TODO(cuda2npu): NPU111 review: 'torch.cuda.HalfTensor' outside a `.type()` test" in migrated
    assert 'KEEP_AS = "torch.cuda.HalfTensor"' in migrated
    cuda2npu("migrate", path)
    assert path.read_text() == migrated
    left = json.loads(cuda2npu("check", path, "--format", "json", "--exit-zero", "--select", "NPU111").stdout)
    assert [d["line"] for d in left["diagnostics"]] == [15]  # the review item, marked
