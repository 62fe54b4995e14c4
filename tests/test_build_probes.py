"""The project's functions answering whether torch is a CUDA or ROCm build (a project fact,
cuda2npu/analysis/build_probes.py): ``torch.version.cuda`` and ``torch.version.hip`` are None on the CPU
build torch_npu runs on, so what ``if _is_cuda():`` guards never runs on an NPU host and is left as
written, in any file that calls the probe (xDiT's NVFP4 and ROCm paths)."""

from __future__ import annotations

from cli_helpers import cli, write

from cuda2npu.analysis.build_probes import build_constants, build_probes
from cuda2npu.analysis.python_files import PythonFiles

ENVS = """
import torch


def _is_hip():
    has_rocm = torch.version.hip is not None
    return has_rocm


def _is_cuda():
    return torch.version.cuda is not None


def _is_npu():
    return hasattr(torch, "npu") and torch.npu.is_available()
"""


def test_the_fact_names_functions_whose_every_answer_is_a_build_fact(tmp_path):
    texts = {
        tmp_path / "pkg" / "__init__.py": b"",
        tmp_path / "pkg" / "envs.py": ENVS.encode(),
        tmp_path / "other.py": b"import torch\n\n\ndef mixed(x):\n    if x:\n        return True\n"
        b"    return torch.version.cuda is not None\n",
    }
    assert build_probes(PythonFiles(texts)) == ("pkg.envs._is_cuda", "pkg.envs._is_hip")


def test_code_under_a_build_probe_is_left_in_every_file(tmp_path):
    write(tmp_path / "pkg" / "__init__.py", "")
    write(tmp_path / "pkg" / "envs.py", ENVS)
    model = write(
        tmp_path / "pkg" / "model.py",
        "import torch\nfrom pkg.envs import _is_cuda, _is_hip\n\n\ndef setup(x):\n"
        "    if _is_cuda():\n        torch.cuda.synchronize()\n        return x.cuda()\n"
        "    if torch.version.hip is not None:\n        return x.to('cuda')\n"
        "    torch.cuda.empty_cache()\n    return x\n",
    )
    cli("migrate", tmp_path)
    text = model.read_text()
    assert "        torch.cuda.synchronize()\n        return x.cuda()\n" in text
    assert "        return x.to('cuda')\n" in text
    assert "    torch.npu.empty_cache()\n" in text


IMPORT_UTILS = """
import torch

SYSTEM = None
if torch.version.hip is not None:
    SYSTEM = "rocm"
elif torch.version.cuda is not None and torch.cuda.is_available():
    SYSTEM = "cuda"
elif hasattr(torch, "xpu") and torch.xpu.is_available():
    SYSTEM = "xpu"
else:
    SYSTEM = "cpu"
MODE = "cuda" if torch.cuda.is_available() else "cpu"
"""


def test_r24_module_constants_set_on_a_cuda_build_alone(tmp_path):
    """text-generation-inference's `SYSTEM`: "cuda" and "rocm" only on those builds of torch; "cpu"
    and "xpu" elsewhere, and a conditional expression's values are no branch of a build test."""
    texts = {
        tmp_path / "tgi" / "__init__.py": b"",
        tmp_path / "tgi" / "import_utils.py": IMPORT_UTILS.encode(),
        tmp_path / "tgi" / "other.py": b"import torch\nSYSTEM = 'cuda'\nif torch.version.cuda is not None:\n"
        b"    SYSTEM = 'cuda'\n",  # also set outside a build test: not the build's alone
    }
    assert build_constants(PythonFiles(texts)) == ("tgi.import_utils.SYSTEM=cuda", "tgi.import_utils.SYSTEM=rocm")


def test_r24_code_under_a_build_constant_test_is_left_in_every_file(tmp_path):
    write(tmp_path / "tgi" / "__init__.py", "")
    write(tmp_path / "tgi" / "import_utils.py", IMPORT_UTILS)
    layer = write(
        tmp_path / "tgi" / "fp8.py",
        "import torch\nfrom tgi.import_utils import SYSTEM\n\n\ndef fp8_supported():\n"
        '    if SYSTEM == "cuda":\n        major, _ = torch.cuda.get_device_capability()\n        return major >= 9\n'
        '    if SYSTEM != "cuda":\n        torch.cuda.empty_cache()\n    return False\n',
    )
    cli("migrate", tmp_path)
    text = layer.read_text()
    assert "        major, _ = torch.cuda.get_device_capability()\n" in text
    assert "        torch.npu.empty_cache()\n" in text
