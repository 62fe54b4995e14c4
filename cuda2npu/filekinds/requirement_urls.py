"""The distribution a URL requirement installs, for NPU701 in dependency files and ``pip install``
commands (docs/reference/packaging.md §4).

A requirement may give a place instead of a name: a VCS URL
(``git+https://github.com/<owner>/<repo>.git@<ref>#egg=<name>``), an archive or a wheel file. The
distribution is the ``#egg=`` name where one is given, else the wheel's file name (PEP 427), else
the repository's name (``megablocks``, ``vllm``, ``apex``), or, for a repository whose distribution
is named otherwise (``Dao-AILab/flash-attention`` builds ``flash-attn``), the name the
``[repositories]`` table of rules/tables/cuda_only_packages.toml gives it.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from cuda2npu.analysis.cuda_only_modules import PACKAGES, normalize_distribution
from cuda2npu.core.catalogue import table

URL = re.compile(r"(?:(?:git|hg|svn|bzr)\+)?[A-Za-z][\w+.-]*://\S+")
VCS = re.compile(r"(?:git|hg|svn|bzr)\+")
EGG = re.compile(r"(?:^|&)egg=([A-Za-z0-9][A-Za-z0-9._-]*)")
# name-version(-build)-python-abi-platform.whl: the name holds no `-` (PEP 427 escapes it to `_`)
WHEEL = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.]*)-[^-/]+(?:-[^-/]+)?-[^-/]+-[^-/]+-[^-/]+\.whl", re.I)
ARCHIVE = re.compile(r"(.+)-\d[^-/]*\.(?:tar\.gz|tgz|tar\.bz2|zip)", re.I)
NAMED_URL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\s*(?:\[[^\]]*\])?\s*@\s*(\S+)")


REF = re.compile(r"@([^/@#?\s]+)$")  # the `@<ref>` ending a VCS URL's location
TAG_VERSION = re.compile(r"v?(\d+\.\d+(?:\.\d+)?)")  # `v4.28.0`, `4.28.1`
COMMIT = re.compile(r"[0-9a-f]{7,40}")


def vcs_ref(requirement: str) -> str | None:
    """The ``@ref`` a VCS URL requirement checks out (``git+https://github.com/o/r.git@0dcb46e7``),
    None for another requirement or a URL without one."""
    url = requirement.strip()
    if VCS.match(url) is None or URL.fullmatch(url) is None:
        return None
    match = REF.search(url.partition("#")[0].split("?", 1)[0])
    return match.group(1) if match else None


class UrlRequirement(NamedTuple):
    name: str  # the distribution, normalized ("" when the URL does not tell)
    source: bool  # built from source (a VCS checkout or an archive), not a wheel


def url_requirement(requirement: str) -> UrlRequirement | None:
    """What a bare URL requirement (``git+https://github.com/o/megablocks.git``,
    ``https://host/flash_attn-2.7.4+cu12-cp311-cp311-linux_x86_64.whl``) installs; None for a
    requirement that is not a URL (a name, PEP 508's ``name @ url``, a local path)."""
    url = requirement.strip()
    if URL.fullmatch(url) is None:
        return None
    location, _, fragment = url.partition("#")
    location = location.split("?", 1)[0]
    path = location.split("://", 1)[1].partition("/")[2]  # after the host
    vcs = VCS.match(url) is not None
    if vcs:
        path = path.split("@", 1)[0]  # without the `@ref`
    parts = [part for part in path.split("/") if part]
    egg = EGG.search(fragment)
    wheel = WHEEL.fullmatch(parts[-1]) if parts else None
    if egg:
        name = egg.group(1)
    elif wheel:
        return UrlRequirement(normalize_distribution(wheel.group(1)), False)
    elif vcs and parts:
        name = _repository_distribution(parts[-2:])
    elif len(parts) >= 3 and parts[2] == "archive":  # GitHub's `<owner>/<repo>/archive/<ref>.zip`
        name = _repository_distribution(parts[:2])
    else:
        archive = ARCHIVE.fullmatch(parts[-1]) if parts else None
        name = archive.group(1) if archive else ""
    return UrlRequirement(normalize_distribution(name) if name else "", True)


def built_from_source(requirement: str) -> bool:
    """Whether a requirement installs a VCS checkout or an archive: a bare URL, or PEP 508's
    ``name @ url`` pointing at one (not at a wheel)."""
    named = NAMED_URL.fullmatch(requirement.split(";", 1)[0].strip())
    found = url_requirement(named.group(1) if named else requirement)
    return found is not None and found.source


def source_build(name: str) -> dict | None:
    """The ``[source_build]`` entry of a distribution whose releases run on an NPU host but whose
    source build targets CUDA (vllm), else None."""
    return table(PACKAGES).get("source_build", {}).get(name)


def _repository_distribution(owner_repo: list[str]) -> str:
    """The distribution a repository's source builds: its name, or the table's for it."""
    repo = owner_repo[-1].removesuffix(".git")
    key = "/".join([*owner_repo[:-1], repo]).lower()
    return table(PACKAGES).get("repositories", {}).get(key, repo)
