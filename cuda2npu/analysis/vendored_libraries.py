"""Copies of third-party libraries inside a project (rules/tables/vendored_libraries.toml): a
directory below the project root whose own setup.py or pyproject.toml names one of the table's
distributions, with the library's package next to it or in its ``src/`` (VisionLLMv2's ``apex/`` and
``mmcv/``, FlexLLMGen's ``benchmark/third_party/DeepSpeed`` and ``transformers``).
Discovery lists their files as skipped, with the table's reason (cuda2npu/project/discovery.py); not a
copy the table marks ``forks_checked`` whose modules import a compiled CUDA extension (a fork carrying
the project's own kernels, migrated as the project's)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import tomllib

from cuda2npu.core.catalogue import table

SETUP_CALL = re.compile(r"^[ \t]*(?:setuptools\.)?setup[ \t]*\(", re.M)
SETUP_NAME = re.compile(r"""\bname\s*=\s*["']([A-Za-z0-9_.-]+)["']""")  # mmcv: name='mmcv' if ... else 'mmcv-full'


def vendored_library(directory: Path, stop: Path | None) -> tuple[Path, str] | None:
    """(the copy's directory, why it is left as written) for the innermost copy of a table library
    holding ``directory``, looking no higher than below ``stop`` (the project root; None: below the
    nearest directory holding ``.git``)."""
    for candidate in (directory, *directory.parents):
        if candidate == stop or (stop is None and (candidate / ".git").exists()):
            return None
        reason = _library_reason(candidate)
        if reason is not None:
            return candidate, reason
    return None


@functools.lru_cache(maxsize=4096)
def _library_reason(directory: Path) -> str | None:
    name = _distribution(directory)
    if name is None:
        return None
    for library in table("vendored_libraries")["library"].values():
        package = library["package"]
        roots = [
            where / package for where in (directory, directory / "src") if (where / package / "__init__.py").is_file()
        ]
        if name in library["distributions"] and roots:
            if library.get("forks_checked") and _imports_cuda_extension(roots[0]):
                return (
                    None  # the project's fork of the library (KVQuant's transformers with `quant_cuda`): its own code
                )
            return library["reason"]
    return None


CUDA_EXTENSION_IMPORT = re.compile(rb"^[ \t]*(?:import|from)[ \t]+\w+_cuda\b", re.M)


def _imports_cuda_extension(package: Path) -> bool:
    """A module of ``package`` imports a compiled CUDA extension by its name (``import quant_cuda``):
    a fork carrying the project's kernels, which neither the library's releases nor their Ascend
    support know (KVQuant's transformers 4.38.0.dev0, round 30)."""
    for path in package.rglob("*.py"):
        try:
            if CUDA_EXTENSION_IMPORT.search(path.read_bytes()):
                return True
        except OSError:
            continue
    return False


def _distribution(directory: Path) -> str | None:
    """The distribution name the directory's setup.py (the first ``name=`` literal of its last
    ``setup(`` call: apex's extensions have names of their own above it) or pyproject.toml
    (``[project] name``) declares."""
    try:
        setup = (directory / "setup.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        setup = None
    if setup is not None:
        calls = list(SETUP_CALL.finditer(setup))
        match = SETUP_NAME.search(setup, calls[-1].end()) if calls else None
        return match.group(1) if match else None
    try:
        project = tomllib.loads((directory / "pyproject.toml").read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None
    name = project.get("project", {}).get("name")
    return name if isinstance(name, str) else None
