"""A project's directories of code for another accelerator: a project fact, so that their Python
files are left as written (``check``/``migrate`` skip them, saying why).

text-generation-inference keeps a server per platform under ``backends/`` (``backends/gaudi/`` for
Intel Gaudi, ``backends/neuron/`` for AWS Inferentia): an NPU host runs none of them, and migrating
their files to torch_npu changes nothing anyone runs there, and would break them on their own
platform (an ``import torch_npu`` added to Gaudi code). A directory counts by the platform its name
ends with (``gaudi``, ``backend-xpu``), as container files do (filekinds/platform_variants.py), not by
a word inside it (``rocm_utils``); never the project root or a directory above it.
"""

from __future__ import annotations

import os
from pathlib import Path

from cuda2npu.filekinds.platform_variants import DIRECTORY


def other_platform_dirs(files: list[Path], root: Path | None) -> tuple[tuple[str, str], ...]:
    """``(real path, path shown from the root)`` of each outermost directory below ``root`` named for
    another accelerator that holds Python files, sorted."""
    if root is None:
        return ()
    found: dict[str, str] = {}
    for path in files:
        if path.suffix != ".py" or not path.is_relative_to(root):
            continue
        parts = path.relative_to(root).parts[:-1]
        for depth, part in enumerate(parts, start=1):
            if DIRECTORY["other"].search(part):
                directory = root.joinpath(*parts[:depth])
                found[os.path.realpath(directory)] = Path(*parts[:depth]).as_posix()
                break
    return tuple(sorted(found.items()))
