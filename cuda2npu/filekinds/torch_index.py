"""CUDA builds of PyTorch as dependency files and launch scripts ask for them (NPU702): a CUDA
build's package index (``download.pytorch.org/whl/cu121``) and its CPU counterpart, which
torch_npu runs on, and the conda packages that select a CUDA build."""

from __future__ import annotations

import re

CUDA_INDEX = re.compile(r"(download\.pytorch\.org/whl/(?:nightly/)?)cu\d+")


def cpu_index(text: str) -> str:
    """``text`` with each PyTorch CUDA index URL turned into the CPU one."""
    return CUDA_INDEX.sub(r"\1cpu", text)


# a conda package spec selecting CUDA: `pytorch-cuda=12.1`, `nvidia::cudatoolkit`, and a CUDA build
# string, `pytorch=1.9.0=py3.8_cuda11.1_cudnn8.0.5_0`
CONDA_CUDA = re.compile(
    r"(?:[\w.-]+::)?(pytorch-cuda\b|cudatoolkit\b|cuda-toolkit\b"
    r"|(?:pytorch|torchvision|torchaudio)=[^=\s#]+=[^\s#]*cuda[^\s#]*)"
)


def conda_cuda_note(package: str) -> str:
    """What NPU702 says of a conda package :data:`CONDA_CUDA` matched (its group 1)."""
    what = (
        "is a CUDA build (its build string names CUDA)"
        if "=" in package
        else "installs CUDA for a CUDA build of pytorch"
    )
    return f"{what}: torch_npu runs on the CPU build of torch (install torch and torch_npu with pip)"
