"""CUDA builds of PyTorch as dependency files and launch scripts ask for them (NPU702): a CUDA
build's package index (``download.pytorch.org/whl/cu121``) and its CPU counterpart, which
torch_npu runs on, a CUDA build's local version (``torch==2.1.0+cu118``; changed with the index:
the CPU index has no ``+cu118`` build), and the conda packages that select a CUDA build."""

from __future__ import annotations

import re

CUDA_INDEX = re.compile(r"(download\.pytorch\.org/whl/(?:nightly/)?)cu\d+")
TORCH_FAMILY = {"torch", "torchvision", "torchaudio"}
CUDA_LOCAL = re.compile(r"\+cu\d+")  # the local version of a CUDA build: `torch==2.1.0+cu118`
CUDA_WHEEL = re.compile(r"(?:\+|%2B)cu\d+", re.IGNORECASE)  # in a wheel's file name too: `torch-2.1.0%2Bcu118-...whl`


# a nightly build has no torch_npu to match (torch_npu is released for torch releases): the index is
# not rewritten to `/whl/nightly/cpu` (modded-nanogpt's Dockerfile upgraded the pinned torch, round 40)
NIGHTLY_NOTE = (
    "a nightly CUDA package index of PyTorch: torch_npu is released for torch releases only, so a nightly torch "
    "(`/whl/nightly/cpu` included) has no torch_npu to match; install the torch release your torch_npu pins, "
    "from `/whl/cpu`, instead"
)


def nightly(text: str) -> bool:
    """Whether a PyTorch CUDA index in ``text`` is a nightly one (``/whl/nightly/cu126``)."""
    match = CUDA_INDEX.search(text)
    return match is not None and "nightly/" in match.group(1)


def cpu_index(text: str) -> str:
    """``text`` with each PyTorch CUDA index URL turned into the CPU one."""
    return CUDA_INDEX.sub(r"\1cpu", text)


def cpu_build(requirement: str) -> str:
    """``torch==2.1.0+cu118`` → ``torch==2.1.0``: without its local version the pin matches the CPU
    build of that release (``2.1.0+cpu`` on the ``/whl/cpu`` index, PEP 440: a version without a local
    label matches every local version), which the CPU index serves and the CUDA pin cannot match."""
    return CUDA_LOCAL.sub("", requirement)


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
