"""Version pins: the PEP 440 specifiers dependency files write, and what a pin guarantees.

The subset dependency files use: ``==``, ``==X.*``, ``!=``, ``~=``, ``<``, ``<=``, ``>``, ``>=``,
``===``, joined by commas. Anything else is "not understood" (None), and callers then decide
nothing from the pin. A project's pins are project facts (cuda2npu/project/facts.py,
``options.project.pins``); rules ask :func:`at_least` whether the pinned range has an API.
"""

from __future__ import annotations

import re

_VERSION = re.compile(
    r"v?(\d+(?:\.\d+)*)((?:[.-]?(?:post|rc|alpha|beta|preview|pre|a|b|c|dev)[.-]?\d*)*)(?:\+[\w.]+)?", re.I
)
_SPECIFIER = re.compile(r"\s*(===|==|!=|~=|<=|>=|<|>)\s*(\S+?)\s*")
_WIDTH = 6
# The distributions whose pins decide something (ProjectFacts.pins keeps only these: a uv.lock names hundreds).
CONSULTED = (
    "accelerate",
    "colossalai",
    "deepspeed",
    "liger-kernel",
    "pytorch-lightning",  # before 1.5 `accelerator` names the distributed backend, not the device (NPU951)
    "ray",
    "torch",
    "torch-npu",
    "torchaudio",
    "torchvision",
    "transformers",
    "triton-ascend",
    "vllm",
    "xfuser",
)
_LOWER_BOUNDS = ("==", "===", ">=", ">", "~=")


def version_key(text: str) -> tuple | None:
    """A comparable key: (release padded with zeros, phase -1 pre/dev | 0 final | 1 post, number)."""
    match = _VERSION.fullmatch(text.strip())
    if match is None:
        return None
    parts = tuple(int(p) for p in match.group(1).split("."))
    if len(parts) > _WIDTH:
        return None
    suffix = match.group(2).lower()
    phase = 1 if "post" in suffix else -1 if suffix else 0
    number = int(re.sub(r"\D", "", suffix) or 0)
    return (parts + (0,) * (_WIDTH - len(parts)), phase, number)


def base_release(version: str) -> str | None:
    """``2.7.1.post8`` → ``2.7.1``: the release part of a version."""
    match = _VERSION.fullmatch(version.strip())
    return match.group(1) if match else None


def clauses(spec: str) -> list[tuple[str, str]] | None:
    """``">=4.40, <5"`` → ``[(">=", "4.40"), ("<", "5")]``; None when not understood."""
    spec = spec.strip()
    if spec.startswith("(") and spec.endswith(")"):
        spec = spec[1:-1]
    if not spec.strip():
        return []
    found = []
    for part in spec.split(","):
        match = _SPECIFIER.fullmatch(part)
        if match is None:
            return None
        found.append((match.group(1), match.group(2)))
    return found


def allows(spec: str, version: str) -> bool | None:
    """Whether ``spec`` allows ``version`` (None: not understood)."""
    found = clauses(spec)
    if found is None:
        return None
    verdicts = [_allows_one(op, value, version) for op, value in found]
    return None if None in verdicts else all(verdicts)


def at_least(spec: str, version: str) -> bool | None:
    """Whether every version ``spec`` allows is ``version`` or newer: True when one clause bounds
    it from below at ``version`` or above, False when it allows an older one (an empty specifier
    allows every version), None when the specifier is not understood."""
    found = clauses(spec)
    wanted = version_key(version)
    if found is None or wanted is None:
        return None
    exact = _exact_alternatives(found)
    if exact:  # `==4.52.4,==4.51.3,==4.50.0`: several files' pins, any of which may be the one installed
        keys = [version_key(value) for value in exact]
        return None if None in keys else all(key >= wanted for key in keys)
    for op, value in found:
        if op in _LOWER_BOUNDS:
            bound = version_key(value.removesuffix(".*"))
            if bound is None:
                return None
            if bound >= wanted:
                return True
    return False


def excludes_from(spec: str, version: str) -> bool:
    """Whether a clause of ``spec`` excludes ``version`` and every later release (``==2.6.3``,
    ``<2.9``, ``~=2.6.0``, ``==2.8.*``): the pin allows nothing from ``version`` on. False when it
    allows a later release or is not understood."""
    wanted = version_key(version)
    exact = _exact_alternatives(clauses(spec) or [])
    if exact:  # several files' exact pins: each must exclude it
        keys = [version_key(value) for value in exact]
        return None not in keys and all(key < wanted for key in keys)
    for op, value in clauses(spec) or []:
        if op in ("==", "!=") and value.endswith(".*"):
            prefix = version_key(value[:-2])
            width = value[:-2].count(".") + 1
            if op == "==" and prefix is not None and prefix[0][:width] < wanted[0][:width]:
                return True
            continue
        if op == "~=":  # `~=2.6.3` is `>=2.6.3, <2.7`
            release = (base_release(value) or "").split(".")
            if len(release) < 2:
                continue
            op, value = "<", ".".join([*release[:-2], str(int(release[-2]) + 1)])
        bound = version_key(value)
        if bound is not None and ((op in ("==", "===", "<=") and bound < wanted) or (op == "<" and bound <= wanted)):
            return True
    return False


def _exact_alternatives(found: list[tuple[str, str]]) -> list[str]:
    """The values of two or more different exact pins (``==4.52.4,==4.50.0``): the project's pins merge
    every file's, and no release satisfies both, so they are alternatives (streaming-vlm's four
    requirement files, round 29); [] for anything else."""
    values = {value for op, value in found if op in ("==", "===") and not value.endswith(".*")}
    return sorted(values) if len(values) > 1 else []


def pinned(pins: tuple[tuple[str, str], ...], distribution: str) -> str | None:
    """The specifier the project pins ``distribution`` with ("" when named without one), else None."""
    return dict(pins).get(distribution)


def pinned_torch(pins: tuple[tuple[str, str], ...]) -> tuple[str, str] | None:
    """(torch specifier, the pin it comes from): the torch pin, else the torch minor release an exact
    torchvision or torchaudio pin builds against (PandaGPT's ``torchvision==0.14.1`` → ``torch==1.13.*``:
    each of their releases requires one torch release, pytorch/vision's and pytorch/audio's compatibility
    tables); None when neither says."""
    torch = pinned(pins, "torch")
    if torch:
        return torch, f"torch{torch}"
    for companion in ("torchvision", "torchaudio"):
        spec = pinned(pins, companion)
        releases = {_minor_release(value) for op, value in clauses(spec or "") or () if op in ("==", "===")}
        if len(releases) == 1 and None not in releases:
            minor = _companion_torch(companion, *releases.pop())
            if minor is not None:
                return f"=={minor}.*", f"{companion}{spec.strip()}"
    return None


def _minor_release(version: str) -> tuple[int, int] | None:
    """(major, minor) of ``0.14.1``; None for anything else."""
    match = re.match(r"v?(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _companion_torch(companion: str, major: int, minor: int) -> str | None:
    """The torch minor release a torchvision / torchaudio release builds against."""
    if companion == "torchvision" and major == 0:
        return f"2.{minor - 15}" if minor >= 15 else f"1.{minor - 1}" if minor >= 2 else None
    if companion == "torchaudio":
        return f"1.{minor}" if major == 0 else f"{major}.{minor}"
    return None


def pin_at_least(pins: tuple[tuple[str, str], ...], distribution: str, version: str) -> bool | None:
    """Whether the project's pin of ``distribution`` guarantees ``version`` or newer (None: not pinned
    or not understood; False: the pin allows an older release)."""
    spec = pinned(pins, distribution)
    return None if spec is None else at_least(spec, version)


def pin_predates(pins: tuple[tuple[str, str], ...], distribution: str, version: str) -> str | None:
    """The project's specifier of ``distribution`` when it allows no release from ``version`` on
    (``ray==2.6.3`` for 2.9.0), else None (not pinned, not understood, or a newer release allowed)."""
    spec = pinned(pins, distribution)
    return spec if spec and excludes_from(spec, version) else None


def _allows_one(op: str, value: str, version: str) -> bool | None:
    key = version_key(version)
    if op == "===":
        return version == value
    if op in ("==", "!=") and value.endswith(".*"):
        prefix = version_key(value[:-2])
        if prefix is None or key is None:
            return None
        width = value[:-2].count(".") + 1
        same = key[0][:width] == prefix[0][:width]
        return same if op == "==" else not same
    bound = version_key(value)
    if bound is None or key is None:
        return None
    if op == "~=":
        width = base_release(value).count(".")
        return width > 0 and key >= bound and key[0][:width] == bound[0][:width]
    return {
        "==": key == bound,
        "!=": key != bound,
        "<": key < bound,
        "<=": key <= bound,
        ">": key > bound,
        ">=": key >= bound,
    }[op]
