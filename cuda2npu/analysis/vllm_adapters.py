"""A project's vendored adapters for vLLM releases that vllm-ascend does not support: a project fact
(paths only), so that their files are left as written (``check``/``migrate`` skip them, saying why).

verl and the RLHF projects built on it (PRIME, SkyThought, simpleRL-reason, TinyZero) carry one
adapter per vLLM release under ``verl/third_party/vllm/vllm_v_0_3_1`` … ``vllm_v_0_6_3``; the
package's ``__init__`` imports the one matching the installed vLLM and raises for any other. vLLM
runs on Ascend only through vllm-ascend, whose first release is made for vLLM 0.7.1
(rules/tables/npu_first_releases.toml, docs/reference/vllm.md §7): an adapter for an older vLLM
never runs on an NPU host, and migrating its files changes nothing anyone runs. The project's
dependency pin on such a vLLM is NPU705's.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from cuda2npu.analysis.python_files import PythonFiles
from cuda2npu.core.catalogue import table
from cuda2npu.core.pins import version_key

ADAPTER_DIR = re.compile(r"vllm_v_?(\d+)_(\d+)_(\d+)")  # `vllm_v_0_6_3`
VERSION = re.compile(rb"""^__version__\s*=\s*["']([^"']+)["']""", re.M)


def legacy_vllm_adapters(files: list[Path]) -> tuple[tuple[str, str], ...]:
    """``(real path of the directory, vLLM version)`` for each directory of the project's files named
    for a vLLM release older than vllm-ascend's first, sorted."""
    first = version_key(first_ascend_vllm())
    found: dict[str, str] = {}
    for directory in {path.parent for path in files if path.suffix == ".py"}:
        match = ADAPTER_DIR.fullmatch(directory.name)
        if match is None:
            continue
        version = ".".join(match.groups())
        if version_key(version) < first:
            found[os.path.realpath(directory)] = version
    return tuple(sorted(found.items()))


def refusing_adapter_packages(files: PythonFiles) -> dict[str, str]:
    """``{package module: what fails}`` for each package whose ``__init__.py`` picks one of the adapter
    directories beside it by the installed vLLM's version and raises for any other, where every adapter there
    is for a vLLM older than vllm-ascend's first (verl's ``third_party/vllm``: 0.3.1 to 0.6.3, RAGEN and
    Search-R1, round 55; rllm, round 46): importing it raises on an NPU host, and so do its importers."""
    first = version_key(first_ascend_vllm())
    found = {}
    for path in files:
        if path.name != "__init__.py" or b"raise" not in files[path] or b"vllm_v_" not in files[path]:
            continue
        versions = [
            ".".join(match.groups())
            for directory in {p.parent for p in files if p.parent.parent == path.parent}
            if (match := ADAPTER_DIR.fullmatch(directory.name)) is not None
        ]
        if versions and all(version_key(v) < first for v in versions):
            module = files.distinct_modules.get(path)
            if module:
                oldest, newest = min(versions, key=version_key), max(versions, key=version_key)
                found[module] = (
                    f"{module}, whose adapters for vLLM {oldest} to {newest} raise for the vLLM vllm-ascend runs "
                    "(a newer verl, or its own adapter for that vLLM)"
                )
    return found


def first_ascend_vllm() -> str:
    """The first vLLM release a vllm-ascend release is made for (rules/tables/npu_first_releases.toml)."""
    return table("npu_first_releases")["release"]["vllm"]["first"]


def own_vllm_release(files: PythonFiles) -> str:
    """The release of the project's own top-level ``vllm`` package (a fork of vLLM: hao-ai-lab's
    vllm-ltr is vLLM 0.4.1 with its own scheduler), from its ``__version__`` (``vllm/__init__.py`` or
    ``vllm/version.py``); "unknown" where neither says; "" where the project has no such package (a
    module ``vllm.py`` is none)."""
    owners = {module: path for path, module in files.modules.items() if module in ("vllm", "vllm.version")}
    if "vllm" not in owners or owners["vllm"].name != "__init__.py":
        return ""  # no package: a module `vllm.py` in a directory without `__init__.py` (lmms-eval's wrapper, round 37)
    for module in ("vllm", "vllm.version"):
        match = VERSION.search(files[owners[module]]) if module in owners else None
        if match is not None:
            return match.group(1).decode("ascii", "replace")
    return "unknown"
