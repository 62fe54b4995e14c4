"""Files the project has already ported to the NPU (``Options.for_path``'s ``npu_version``): a file
named for the NPU (``test_attn_npu.py``, ``run-npu.sh``) is its own NPU code, and a file with such a
twin next to it (``test_attn.py`` beside ``test_attn_npu.py``) is the CUDA original of a port: both
are skipped, with the reason, and left as written; a file without a twin is migrated."""

from __future__ import annotations

import json

from cli_helpers import cli, write

from cuda2npu.core.options import npu_version

CUDA_TEST = """\
import torch
from flash_attn import flash_attn_func


def test_attn():
    torch.cuda.set_device(0)
    q = torch.randn(1, 8, 2, 16, device="cuda", dtype=torch.bfloat16)
    assert flash_attn_func(q, q, q).shape == q.shape
"""

NPU_TEST = """\
import torch
import torch_npu
from torch_npu.contrib import transfer_to_npu


def test_attn():
    torch.cuda.set_device(0)
    q = torch.randn(1, 8, 2, 16, device="npu", dtype=torch.bfloat16)
    assert torch.cuda.max_memory_allocated() >= 0
"""


def test_npu_version_names_the_file_itself_or_its_twin(tmp_path):
    cuda = write(tmp_path / "test" / "test_attn.py", CUDA_TEST)
    npu = write(tmp_path / "test" / "test_attn_npu.py", NPU_TEST)
    script = write(tmp_path / "scripts" / "run-npu.sh", "torchrun train.py\n")
    lonely = write(tmp_path / "test" / "test_ring.py", CUDA_TEST)
    other = write(tmp_path / "te_npu_modules.py", "x = 1\n")  # a companion cuda2npu writes: not named for the NPU
    aware = write(tmp_path / "npu_aware.py", "x = 1\n")  # a prefix says nothing of what the file runs on
    assert npu_version(cuda) == "test_attn_npu.py"
    assert npu_version(npu) == "test_attn_npu.py"
    assert npu_version(script) == "run-npu.sh"
    assert npu_version(lonely) == "" and npu_version(other) == "" and npu_version(aware) == ""


def test_migrate_leaves_ported_files_and_their_cuda_originals(tmp_path):
    project = tmp_path / "project"
    write(project / "test" / "test_attn.py", CUDA_TEST)
    write(project / "test" / "test_attn_npu.py", NPU_TEST)
    write(project / "test" / "test_ring.py", CUDA_TEST)
    out = tmp_path / "out"
    result = cli("migrate", project, "--out", out, "--no-cache")
    assert result.exit_code == 0, result.output
    assert (out / "test" / "test_attn.py").read_text() == CUDA_TEST
    assert (out / "test" / "test_attn_npu.py").read_text() == NPU_TEST  # transfer_to_npu kept
    assert "torch.npu.set_device(0)" in (out / "test" / "test_ring.py").read_text()
    files = {f["path"]: f for f in json.loads((out / "cuda2npu_report.json").read_text())["files"]}
    assert files["test/test_attn.py"]["status"] == "skipped"
    assert "NPU version of it is test_attn_npu.py" in files["test/test_attn.py"]["reason"]
    assert "named for the NPU" in files["test/test_attn_npu.py"]["reason"]
