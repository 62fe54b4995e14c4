"""Triton on an NPU host: `import triton` works there (Triton, or Triton-Ascend under the same
name), so it is never marked; the kernels are (NPU603), unless the project pins triton-ascend."""

from __future__ import annotations

import json

from cli_helpers import cli, write

KERNEL = """
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, n):
    pid = tl.program_id(0)
"""


def _codes(root) -> list[tuple[str, str]]:
    data = json.loads(cli("check", root, "--format", "json", "--select", "NPU6").stdout)
    return sorted((d["path"].rsplit("/", 1)[-1], d["code"]) for d in data["diagnostics"])


def test_kernels_are_marked_and_imports_are_not(tmp_path):
    write(tmp_path / "pyproject.toml", '[project]\nname = "ops"\ndependencies = ["torch>=2.1", "triton>=3.0"]\n')
    write(tmp_path / "ops" / "add.py", KERNEL)
    write(tmp_path / "ops" / "launch.py", "import triton\n\nBLOCK = triton.next_power_of_2(100)\n")
    assert _codes(tmp_path) == [("add.py", "NPU603")]


def test_a_project_pinning_triton_ascend_has_ported_its_kernels(tmp_path):
    write(
        tmp_path / "pyproject.toml",
        '[project]\nname = "ops"\n[project.optional-dependencies]\n'
        'cuda = ["triton>=3.3"]\nnpu = ["torch_npu==2.7.1.post4", "triton-ascend==3.2.1"]\n',
    )
    write(tmp_path / "ops" / "add.py", KERNEL)
    assert _codes(tmp_path) == []
