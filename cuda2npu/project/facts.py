"""What rules must know of the whole project before they look at one file."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from cuda2npu.core.options import Options
from cuda2npu.families.cuda_only_modules import declared_extensions, shadowing_modules


def with_project_facts(options: Options, files: list[Path]) -> Options:
    """``options`` with what rules must know of the whole project (NPU606): the CUDA extensions its
    setup.py builds, its own modules named like CUDA-only ones."""
    extensions = declared_extensions(files)
    local = shadowing_modules(files, extensions)
    return replace(options, cuda_extensions=extensions, local_modules=local) if extensions or local else options
