"""Git submodules that are empty in the checkout (``git clone`` without ``--recursive``).

LLaVA-pp keeps its LLaVA code in a submodule, pythia its GPT-NeoX; cloned without
``--recurse-submodules``, the directory is empty and the run sees none of that code: nothing in it
is migrated or checked, although the project runs it. Such a directory is listed as skipped, with
what to do, so that a clean run does not read as a migrated project.
"""

from __future__ import annotations

import re
from pathlib import Path

SUBMODULE_PATH = re.compile(r"^[ \t]*path[ \t]*=[ \t]*(.+?)[ \t]*$", re.MULTILINE)
EMPTY_SUBMODULE_REASON = (
    "an empty git submodule: its code was neither migrated nor checked "
    "(`git submodule update --init --recursive`, then run cuda2npu again)"
)


def empty_submodules(root: Path) -> list[Path]:
    """The directories ``root``'s ``.gitmodules`` declares that are missing or empty."""
    try:
        text = (root / ".gitmodules").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    found = []
    for declared in SUBMODULE_PATH.findall(text):
        directory = root / declared.strip("\"'")
        if directory.resolve().is_relative_to(root.resolve()) and not _has_files(directory):
            found.append(directory)
    return found


def _has_files(directory: Path) -> bool:
    try:
        return any(directory.iterdir())
    except OSError:  # missing, or not a directory
        return False
