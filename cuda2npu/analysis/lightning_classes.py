"""The project's subclasses of Lightning's Fabric and LightningLite (``class Trainer(LightningLite)``
in RWKV-v4's ``src/trainer.py``): their constructors take Lightning's ``accelerator=`` (NPU951), in
whatever file builds them. A project fact, from a regex over the class lines of the Python files
that import Lightning (cuda2npu/project/facts.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

CLASS_LINE = re.compile(rb"^[ \t]*class[ \t]+(\w+)[ \t]*\(([^)]*)\)", re.M)
IMPORTS_LIGHTNING = re.compile(rb"^[ \t]*(?:from|import)[ \t]+(?:pytorch_lightning|lightning_fabric|lightning)\b", re.M)
BASES = frozenset({"LightningLite", "Fabric"})


def lightning_classes(texts: Mapping[Path, bytes]) -> tuple[str, ...]:
    """The names of the project's classes deriving from Fabric or LightningLite (directly, or from
    another such class of the project), sorted."""
    derived: dict[str, set[str]] = {}
    for text in texts.values():
        if b"Lite" not in text and b"Fabric" not in text or not IMPORTS_LIGHTNING.search(text):
            continue
        for match in CLASS_LINE.finditer(text):
            bases = {base.strip().rpartition(".")[2] for base in match.group(2).decode().split(",")}
            derived[match.group(1).decode()] = bases
    found = {name for name, bases in derived.items() if bases & BASES}
    while more := {name for name, bases in derived.items() if name not in found and bases & found}:
        found |= more
    return tuple(sorted(found))
