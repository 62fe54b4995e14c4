"""Which torch_npu release fits a torch requirement (NPU703, NPU704).

Data: ``rules/tables/torch_npu_versions.toml`` (Ascend/pytorch COMPATIBILITY.en.md). Each torch_npu
wheel requires exactly one torch release, so a torch requirement allows a torch_npu only when it
allows that release. Specifiers are read with the PEP 440 subset dependency files use (``==``,
``==X.*``, ``!=``, ``~=``, ``<``, ``<=``, ``>``, ``>=``, ``===``); anything else is "not understood"
(None), and callers then pin nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cuda2npu.core.catalogue import table

_VERSION = re.compile(
    r"v?(\d+(?:\.\d+)*)((?:[.-]?(?:post|rc|alpha|beta|preview|pre|a|b|c|dev)[.-]?\d*)*)(?:\+[\w.]+)?", re.I
)
_SPECIFIER = re.compile(r"\s*(===|==|!=|~=|<=|>=|<|>)\s*(\S+?)\s*")
_WIDTH = 6


@dataclass(frozen=True)
class Release:
    """The newest torch_npu for one torch release (the first row of that torch in the table)."""

    torch: str
    torch_npu: str
    cann: str
    eol: bool

    def label(self) -> str:
        return f"{self.torch} (EOL)" if self.eol else self.torch


def releases() -> list[Release]:
    """One per torch release that has a torch_npu, oldest torch first."""
    data = table("torch_npu_versions")
    newest: dict[str, Release] = {}
    for package, _, torch, cann in data["releases"]:
        newest.setdefault(torch, Release(torch, package, cann, torch in data["eol"]))
    return sorted(newest.values(), key=lambda r: _key(r.torch))


def _key(text: str) -> tuple | None:
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


def base_release(package: str) -> str | None:
    """``2.7.1.post8`` → ``2.7.1``: the torch a torch_npu package version is built for."""
    match = _VERSION.fullmatch(package.strip())
    return match.group(1) if match else None


def _allows_one(op: str, value: str, version: str) -> bool | None:
    key = _key(version)
    if op == "===":
        return version == value
    if op in ("==", "!=") and value.endswith(".*"):
        prefix = _key(value[:-2])
        if prefix is None:
            return None
        width = value[:-2].count(".") + 1
        same = key[0][:width] == prefix[0][:width]
        return same if op == "==" else not same
    bound = _key(value)
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


def _clauses(spec: str) -> list[tuple[str, str]] | None:
    spec = spec.strip()
    if spec.startswith("(") and spec.endswith(")"):
        spec = spec[1:-1]
    if not spec.strip():
        return []
    clauses = []
    for part in spec.split(","):
        match = _SPECIFIER.fullmatch(part)
        if match is None:
            return None
        clauses.append((match.group(1), match.group(2)))
    return clauses


def allowed(spec: str) -> list[Release] | None:
    """The table's torch releases a version specifier allows (None: the specifier is not understood)."""
    clauses = _clauses(spec)
    if clauses is None:
        return None
    found = []
    for release in releases():
        verdicts = [_allows_one(op, value, release.torch) for op, value in clauses]
        if None in verdicts:
            return None
        if all(verdicts):
            found.append(release)
    return found


def exact_pin(spec: str) -> str | None:
    """The version of a ``==X`` (or ``===X``) specifier, else None."""
    clauses = _clauses(spec)
    if clauses and len(clauses) == 1 and clauses[0][0] in ("==", "===") and not clauses[0][1].endswith(".*"):
        return clauses[0][1]
    return None


def nearest(spec: str) -> list[Release]:
    """The supported torch releases just below and above what ``spec`` asks for (one, when the
    request lies beyond either end of the table). Empty when the specifier names no version."""
    clauses = _clauses(spec) or []
    lower = [v.removesuffix(".*") for op, v in clauses if op in ("==", "===", ">=", ">", "~=")]
    upper = [v for op, v in clauses if op in ("<", "<=")]
    point = _key((lower or upper)[0]) if lower or upper else None
    if point is None:
        return []
    known = releases()
    below = [r for r in known if _key(r.torch) < point]
    above = [r for r in known if _key(r.torch) > point]
    return [*below[-1:], *above[:1]]
