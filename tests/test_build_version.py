"""NPU115 (cuda2npu/families/device/build_version.py): ``torch.version.cuda`` read as a version string,
None on the CPU torch torch_npu runs on. The golden `device/build_version_r35_cuda_version` holds the
reported and the tested reads; here, the build script NPU602 already asks to port."""

from __future__ import annotations

from cli_helpers import cli, write


def test_a_build_script_of_cuda_extensions_is_not_reported(tmp_path):
    setup = write(
        tmp_path / "setup.py",
        "import torch\nfrom torch.utils.cpp_extension import CUDAExtension\n\n"
        'major = int(torch.version.cuda.split(".")[0])\next = CUDAExtension("x_cuda", ["x.cu"])\n',
    )
    tool = write(tmp_path / "env.py", 'import torch\n\nmajor = int(torch.version.cuda.split(".")[0])\n')
    cli("migrate", tmp_path)
    assert "NPU115" not in setup.read_text() and "NPU602" in setup.read_text()
    assert "NPU115 `torch.version.cuda` is None on an NPU host" in tool.read_text()
