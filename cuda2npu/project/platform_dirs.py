"""A project's directories of code for another accelerator: a project fact, so that their Python
files are left as written (``check``/``migrate`` skip them, saying why).

text-generation-inference keeps a server per platform under ``backends/`` (``backends/gaudi/`` for
Intel Gaudi, ``backends/neuron/`` for AWS Inferentia): an NPU host runs none of them, and migrating
their files to torch_npu changes nothing anyone runs there, and would break them on their own
platform (an ``import torch_npu`` added to Gaudi code). A directory counts by the platform its name
ends with (``gaudi``, ``backend-xpu``), as container files do (filekinds/platform_variants.py), not by
a word inside it (``rocm_utils``); never the project root or a directory above it. So does a directory
of NVIDIA TensorRT(-LLM) deployment code (``triton_trtllm``, ``tensorrt_llm``: :data:`TENSORRT_DIRECTORY`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from cuda2npu.filekinds.platform_variants import DIRECTORY

# why a file of such a directory is skipped (Python files: runner.py; the other kinds: project_files.py)
OTHER_PLATFORM_REASON = "in `{directory}/`, code for another accelerator or runtime: it never runs on an NPU host"

# NVIDIA's inference runtimes: a directory of TensorRT(-LLM) deployment code (CosyVoice's
# `runtime/triton_trtllm/`, Triton model repositories calling TensorRT engines: round 40, 44 edits)
TENSORRT_DIRECTORY = re.compile(r"(?:^|[-_.])(?:trtllm|tensorrt(?:[-_]?llm)?)$", re.I)


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
            if DIRECTORY["other"].search(part) or TENSORRT_DIRECTORY.search(part):
                directory = root.joinpath(*parts[:depth])
                found[os.path.realpath(directory)] = Path(*parts[:depth]).as_posix()
                break
    return tuple(sorted(found.items()))
