"""The project's functions reading GPUtil or NVML (a project fact, cuda2npu/analysis/gpu_monitors.py):
they find no GPU on an NPU host, so a CUDA test over a call of one stays CUDA's, in any file that
imports it (h2o-llmstudio's `if torch.cuda.is_available(): stats.append(get_gpu_usage())`)."""

from __future__ import annotations

from cli_helpers import cli, write

from cuda2npu.analysis.gpu_monitors import gpu_monitors
from cuda2npu.analysis.python_files import PythonFiles

UTILS = """\
import GPUtil
from pynvml import nvmlDeviceGetCount as count


def get_gpu_usage():
    gpus = GPUtil.getGPUs()
    return sum(g.load for g in gpus) / len(gpus)


def gpu_count():
    return count()


def cpu_usage():
    return 0.0
"""


def test_the_fact_names_functions_reading_gputil_or_nvml(tmp_path):
    texts = {
        tmp_path / "app" / "__init__.py": b"",
        tmp_path / "app" / "utils.py": UTILS.encode(),
        tmp_path / "other.py": b"def GPUtil_like():\n    return 1\n",  # the word alone imports nothing
    }
    assert gpu_monitors(PythonFiles(texts)) == ("app.utils.get_gpu_usage", "app.utils.gpu_count")


def test_r25_a_cuda_test_over_a_call_of_one_stays_cudas(tmp_path):
    write(tmp_path / "pyproject.toml", '[project]\nname = "app"\n')
    write(tmp_path / "app" / "__init__.py", "")
    write(tmp_path / "app" / "utils.py", UTILS)
    home = write(
        tmp_path / "app" / "home.py",
        "import torch\n\nfrom app.utils import get_gpu_usage\n\n\ndef stats():\n    out = []\n"
        "    if torch.cuda.is_available():\n        out.append(get_gpu_usage())\n"
        "    if torch.cuda.is_available():\n        torch.cuda.empty_cache()\n    return out\n",
    )
    cli("migrate", tmp_path)
    text = home.read_text()
    assert "    if torch.cuda.is_available():\n        out.append(get_gpu_usage())\n" in text
    assert "    if torch.npu.is_available():\n        torch.npu.empty_cache()\n" in text
