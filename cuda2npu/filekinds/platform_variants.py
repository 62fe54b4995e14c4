"""Container files kept for another platform: a Dockerfile or Compose file named (or in a directory
named) for another accelerator (``docker-rocm/Dockerfile``, ``Dockerfile.xpu``), or the CUDA variant of
one the project also ships for the NPU (LLaMA-Factory's ``docker/docker-cuda/`` beside
``docker/docker-npu/``, ``Dockerfile.cuda`` beside ``Dockerfile.npu``). An Ascend user builds the NPU
one; the others are not migrated, as requirements files named for another accelerator are not. So are the
container files of a CI service's directory (``.circleci/docker/Dockerfile``): its runners build them.

A directory counts by the platform its name ends with (``docker-cuda``, ``rocm``), not by a word
inside it (``test_cuda_images_0``, ``cuda_kernels``)."""

from __future__ import annotations

import re
from pathlib import Path

from cuda2npu.filekinds.depfiles import OTHER_ACCELERATORS

OTHER = rf"(?:{OTHER_ACCELERATORS})\d*"
CUDA = r"(?:cuda|gpu|nvidia)[\d.]*"
NPU = re.compile(r"(?:^|[-_.])(?:npu|ascend|cann)[\d.]*(?=[-_.]|$)", re.I)
FILE = {
    "other": re.compile(rf"(?:^|[-_.]){OTHER}(?=[-_.]|$)", re.I),
    "cuda": re.compile(rf"(?:^|[-_.]){CUDA}(?=[-_.]|$)", re.I),
}
# a CI service's own directory: its images are built by its runners (mmpretrain's and mmocr's
# `.circleci/docker/Dockerfile`, built by CircleCI's GPU job: rounds 64 and 65)
CI_DIRS = frozenset({".circleci", ".github", ".gitlab", ".buildkite", ".jenkins"})
DIRECTORY = {"other": re.compile(rf"(?:^|[-_.]){OTHER}$", re.I), "cuda": re.compile(rf"(?:^|[-_.]){CUDA}$", re.I)}


def for_another_platform(path: Path) -> bool:
    """Whether the container file ``path`` is kept for another platform (see the module)."""
    if CI_DIRS.intersection(path.parts):
        return True
    for part, kind in ((path.name, FILE), (path.parent.name, DIRECTORY)):
        if kind["other"].search(part):
            return True
        if kind["cuda"].search(part) and _npu_sibling(path, part):
            return True
    return False


def _npu_sibling(path: Path, part: str) -> bool:
    """A file or directory beside the one named ``part`` whose name is the NPU variant of it."""
    holder = path.parent if part == path.name else path.parent.parent
    try:
        return any(NPU.search(other.name) for other in holder.iterdir() if other.name != part)
    except OSError:
        return False
