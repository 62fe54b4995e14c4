"""PyTorch's package indexes: a CUDA build's index (``download.pytorch.org/whl/cu121``) and its
CPU counterpart, which torch_npu runs on (NPU702 in dependency files and launch scripts)."""

from __future__ import annotations

import re

CUDA_INDEX = re.compile(r"(download\.pytorch\.org/whl/(?:nightly/)?)cu\d+")


def cpu_index(text: str) -> str:
    """``text`` with each PyTorch CUDA index URL turned into the CPU one."""
    return CUDA_INDEX.sub(r"\1cpu", text)
