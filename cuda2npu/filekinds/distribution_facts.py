"""What the tables say of a distribution on an NPU host, shared by dependency files and the
``pip install`` commands of scripts and Dockerfiles: the distribution to install instead of a
CUDA-only one (rules/tables/cuda_only_packages.toml ``replacement``), and whether a requirement
allows a release that runs on an NPU (rules/tables/npu_first_releases.toml, NPU705)."""

from __future__ import annotations

import functools
import re

from cuda2npu.analysis.cuda_only_modules import PACKAGES, normalize_distribution
from cuda2npu.core.catalogue import table
from cuda2npu.core.pins import base_release, clauses, excludes_from, version_key
from cuda2npu.filekinds.requirement_urls import COMMIT, TAG_VERSION


def predates_npu(name: str, requirement: str, spec: str, importers=None) -> str | None:
    """NPU705's message when ``requirement`` (of distribution ``name``, version specifier ``spec``)
    allows no release of its library that runs on an NPU (rules/tables/npu_first_releases.toml) and
    the project uses what that release brings (an entry's ``used_as``: a module the project's files
    import, asked of ``importers``; an entry with one is never reported without them), or allows it but
    none of the later releases bringing what the project uses (an entry's ``features``), else None."""
    release = table("npu_first_releases")["release"].get(name)
    if release is None or not spec:
        return None
    if not excludes_from(spec, release["first"]):
        return _unpaired(name, requirement, spec, release) or _feature_predates_npu(
            name, requirement, spec, release, importers
        )
    if "used_as" in release and (importers is None or not importers((release["used_as"],))):
        return None
    advice = release.get("advice", f"raise the requirement to >={release['first']}")
    return (
        f"`{requirement}` allows no {name} release from {release['first']} on, {release['what']}: "
        f"{advice} (and check what the newer release changes)"
    )


def _feature_predates_npu(name: str, requirement: str, spec: str, release: dict, importers) -> str | None:
    """NPU705's message for a requirement allowing the release that runs on an NPU, but none of the later
    ones that brought what the project uses to it (an entry's ``features``: DeepSpeed's NPU FusedAdam, 0.11.2)."""
    for feature in release.get("features", ()):
        if not excludes_from(spec, feature["first"]) or importers is None:
            continue
        if users := importers((feature["used_as"],)):
            return (
                f"`{requirement}` allows no {name} release from {feature['first']} on, {feature['what']} "
                f"(`{feature['used_as']}` used in {', '.join(users[:3])}{', ...' if len(users) > 3 else ''}): "
                f"raise the requirement to >={feature['first']} (and check what the newer release changes)"
            )
    return None


def feature_uses(text: str, modules: set[str]) -> set[str]:
    """The ``features``' uses (``"deepspeed.ops.adam.FusedAdam"``) a Python file's ``text`` makes, where it
    imports their top-level modules (``modules``): it names the module and the name."""
    return {
        use
        for use, (top, module, name) in _feature_patterns().items()
        if top in modules and module.search(text) and name.search(text)
    }


@functools.cache
def _feature_patterns() -> dict[str, tuple[str, re.Pattern, re.Pattern]]:
    """``used_as`` of each entry's ``features`` -> (its top-level module, the module's and the name's patterns)."""
    uses = (f["used_as"] for r in table("npu_first_releases")["release"].values() for f in r.get("features", ()))
    patterns = {}
    for use in uses:
        module, _, name = use.rpartition(".")
        patterns[use] = (module.partition(".")[0], re.compile(rf"\b{re.escape(module)}\b"), re.compile(rf"\b{name}\b"))
    return patterns


def commit_predates_npu(name: str, requirement: str, ref: str, importers=None) -> str | None:
    """NPU705's message for a VCS requirement of a library of rules/tables/npu_first_releases.toml
    that checks out a tag naming a release older than its first on an NPU (``@v4.28.0``), or a commit,
    whose release cuda2npu cannot tell (Chinese-Vicuna's transformers at ``@0dcb46e7``); None for a
    branch (``@main``), a newer tag, or a project that does not use what that release brings."""
    tag = TAG_VERSION.fullmatch(ref)
    if tag is not None:
        return predates_npu(name, requirement, f"=={tag.group(1)}", importers)
    release = table("npu_first_releases")["release"].get(name)
    if release is None or COMMIT.fullmatch(ref) is None:
        return None
    if "used_as" in release and (importers is None or not importers((release["used_as"],))):
        return None
    return (
        f"`{requirement}` installs {name} at commit `{ref}`, whose release cuda2npu cannot tell; {name} "
        f"runs on an NPU host from {release['first']} on, {release['what']}: check that the commit is newer, "
        f"or require a release >= {release['first']}"
    )


def _unpaired(name: str, requirement: str, spec: str, release: dict) -> str | None:
    """NPU705's message for an exact pin (``vllm==0.7.2``) of a release its NPU plugin skipped: the
    entry's ``paired`` releases are the only ones its ``plugin`` has a release for, up to the last."""
    paired = release.get("paired")
    found = clauses(spec) or []
    if not paired or len(found) != 1 or found[0][0] not in ("==", "===") or found[0][1].endswith(".*"):
        return None
    version = base_release(found[0][1])
    key = version_key(version) if version else None
    if key is None or key > version_key(paired[-1]) or version in paired:
        return None
    above = next((p for p in paired if version_key(p) > key), paired[-1])
    return (
        f"`{requirement}`: {release['plugin']} has no release for {name} {version} (its releases are made for "
        f"{name} {', '.join(paired[:3])}, ..., {paired[-1]}): move to {above} or "
        f"another of them and install the {release['plugin']} of the same version (and check what the newer release changes)"
    )


def replacement(name: str) -> str | None:
    """The distribution installing the same modules that runs on an NPU host, for a CUDA-only one
    rules/tables/cuda_only_packages.toml gives one (``onnxruntime-gpu`` → ``onnxruntime``), else None."""
    name = normalize_distribution(name)
    entries = table(PACKAGES)["package"].values()
    return next((p["replacement"] for p in entries if "replacement" in p and name in p.get("distributions", ())), None)
