"""The project's classes and functions whose parameter named like a device defaults to a CUDA
device (lingua's ``class GPUMemoryMonitor: def __init__(self, device: str = "cuda:0")``): a project
fact (cuda2npu/project/facts.py), so that ``GPUMemoryMonitor("cuda")`` in another file is rewritten
as that default is (NPU104). Read from the text of the files that name a CUDA default: module-level
``def`` lines and the ``__init__`` of module-level classes, signatures without nested parentheses."""

from __future__ import annotations

import re
from pathlib import Path

DEFINITION = re.compile(
    rb"^(?:class[ \t]+(?P<cls>\w+)|(?:def[ \t]+(?P<function>\w+)|(?P<indent>[ \t]+)def[ \t]+__init__)[ \t]*\((?P<params>[^()]*)\))",
    re.M,
)
PARAMETER = re.compile(r"^\s*(\w+)\s*(?::[^=]+)?(?:=\s*(.+?))?\s*$", re.S)
CUDA_DEFAULT = re.compile(r"""^["']cuda(?::\d+)?["']$""")
DEVICE_PARAM = re.compile(r"(^|_)device$|^device(_|$)")


def device_parameters(texts: dict[Path, bytes]) -> tuple[tuple[str, int, str], ...]:
    """``("GPUMemoryMonitor", 0, "device")``: (callable, position of the parameter among the positional
    arguments of a call, its name) for each parameter named like a device whose default is a
    ``"cuda"`` string. A name the project defines twice is left out (which one a call means is not known)."""
    found: dict[str, tuple[str, int, str] | None] = {}
    for text in texts.values():
        if b"cuda" not in text:
            continue
        owner = None
        for match in DEFINITION.finditer(text):
            cls, function, method_indent, params = match.group("cls", "function", "indent", "params")
            if cls is not None:
                owner = cls.decode()
                continue
            name = function.decode() if function is not None else owner
            if name is None:
                continue
            entry = _device_parameter(name, params.decode("utf-8", "replace"), skip_first=method_indent is not None)
            if entry is not None:
                found[name] = None if name in found and found[name] != entry else entry
    return tuple(sorted(entry for entry in found.values() if entry is not None))


def _device_parameter(name: str, params: str, skip_first: bool) -> tuple[str, int, str] | None:
    """The first device parameter with a CUDA default of the parameter list ``params``."""
    positional = [part for part in params.split(",") if part.strip()]
    if skip_first:
        positional = positional[1:]  # self
    for position, part in enumerate(positional):
        if part.strip().startswith("*"):
            return None
        parsed = PARAMETER.match(part)
        if parsed and DEVICE_PARAM.search(parsed.group(1)) and CUDA_DEFAULT.match(parsed.group(2) or ""):
            return name, position, parsed.group(1)
    return None
