"""Generated files that migrated code imports (``cuda2npu/templates``), placed next to the files needing them.

A rule's fix may make a file import a generated module (NPU418: ``te_npu_modules``; NPU301,
NPU302, NPU304, NPU306: ``apex_npu_optimizers``), reporting it with ``companion=<file name>``; the
engine lists it in ``FileResult.companions``. ``migrate`` writes each one once per directory,
before the migrated files that import it. An existing file of that name is never overwritten:
when it differs from the template (the user edited it) it is kept and reported.
"""

from __future__ import annotations

import functools
import posixpath
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from cuda2npu.core.diagnostics import FileResult

CREATE, SAME, DIFFERS = "created", "unchanged", "kept (differs from the generated version)"


@dataclass
class Companion:
    path: str  # display path, like FileResult.path
    target: Path  # where it is (or would be) written
    text: bytes
    status: str  # CREATE, SAME or DIFFERS
    needed_by: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"path": self.path, "status": self.status, "needed_by": self.needed_by}


@functools.lru_cache(maxsize=None)
def template(name: str) -> bytes:
    return resources.files("cuda2npu").joinpath("templates", name).read_bytes()


def plan(changed: list[tuple[FileResult, Path]]) -> list[Companion]:
    """The generated files the changed files need, one per directory, with what writing them would do."""
    by_target: dict[Path, Companion] = {}
    for result, target in changed:
        for name in result.companions:
            path = target.parent / name
            if path not in by_target:
                text = template(name)
                if not path.exists() and not path.is_symlink():
                    status = CREATE
                else:  # something else of that name (a directory, a link) is never replaced either
                    status = SAME if path.is_file() and path.read_bytes() == text else DIFFERS
                display = posixpath.join(posixpath.dirname(result.path), name)
                by_target[path] = Companion(display, path, text, status)
            by_target[path].needed_by.append(result.path)
    return sorted(by_target.values(), key=lambda c: c.path)
