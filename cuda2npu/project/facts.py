"""What rules must know of the whole project before they look at one file."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from cuda2npu.core.options import Options
from cuda2npu.families.cuda_only_modules import declared_extensions, shadowing_modules

NPU_BACKEND_CLASS = re.compile(  # class NpuAccelerator(...), class NPU_Accelerator:, class NPUPlatform(...)
    rb"^class[ \t]+(\w*(?:npu|Npu|NPU)_?(?:accelerator|Accelerator|platform|Platform|backend|Backend)\w*)[ \t]*[(:]",
    re.MULTILINE,
)


def with_project_facts(options: Options, files: list[Path]) -> Options:
    """``options`` with what rules must know of the whole project: the CUDA extensions its setup.py
    builds and its own modules named like CUDA-only ones (NPU606; a loose module only for the files of
    its directory: ``Options.for_path``), its classes implementing an NPU backend (their CUDA
    counterparts in other files are left as written: npu_aware)."""
    extensions = declared_extensions(files)
    local, loose = shadowing_modules(files, extensions)
    backends = npu_backend_classes(files)
    if not (extensions or local or loose or backends):
        return options
    return replace(
        options,
        cuda_extensions=extensions,
        local_modules=local,
        loose_modules=loose,
        npu_backend_classes=backends,
    )


def npu_backend_classes(files: list[Path]) -> tuple[str, ...]:
    """The names of the module-level classes implementing an NPU backend in the project's Python files
    (ColossalAI's ``NpuAccelerator``, DeepSpeed's ``NPU_Accelerator``), from a regex over their text."""
    names: set[str] = set()
    for path in files:
        if path.suffix != ".py":
            continue
        try:
            text = path.read_bytes()
        except OSError:
            continue
        if b"ccelerator" in text or b"latform" in text or b"ackend" in text:
            names.update(match.group(1).decode() for match in NPU_BACKEND_CLASS.finditer(text))
    return tuple(sorted(names))
