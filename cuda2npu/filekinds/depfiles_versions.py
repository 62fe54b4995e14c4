"""Which torch_npu release fits a torch requirement (NPU703, NPU704).

Data: ``rules/tables/torch_npu_versions.toml`` (Ascend/pytorch COMPATIBILITY.en.md). Each torch_npu
wheel requires exactly one torch release, so a torch requirement allows a torch_npu only when it
allows that release. Specifiers are read with the PEP 440 subset dependency files use (``==``,
``==X.*``, ``!=``, ``~=``, ``<``, ``<=``, ``>``, ``>=``, ``===``); anything else is "not understood"
(None), and callers then pin nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from cuda2npu.core.catalogue import table
from cuda2npu.core.pins import allows, clauses, version_key


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
    return sorted(newest.values(), key=lambda r: version_key(r.torch))


def allowed(spec: str) -> list[Release] | None:
    """The table's torch releases a version specifier allows (None: the specifier is not understood)."""
    if clauses(spec) is None:
        return None
    found = []
    for release in releases():
        verdict = allows(spec, release.torch)
        if verdict is None:
            return None
        if verdict:
            found.append(release)
    return found


def exact_pin(spec: str) -> str | None:
    """The version of a ``==X`` (or ``===X``) specifier, else None."""
    found = clauses(spec)
    if found and len(found) == 1 and found[0][0] in ("==", "===") and not found[0][1].endswith(".*"):
        return found[0][1]
    return None


def nearest(spec: str) -> list[Release]:
    """The supported torch releases just below and above what ``spec`` asks for (one, when the
    request lies beyond either end of the table). Empty when the specifier names no version."""
    found = clauses(spec) or []
    lower = [v.removesuffix(".*") for op, v in found if op in ("==", "===", ">=", ">", "~=")]
    upper = [v for op, v in found if op in ("<", "<=")]
    point = version_key((lower or upper)[0]) if lower or upper else None
    if point is None:
        return []
    known = releases()
    below = [r for r in known if version_key(r.torch) < point]
    above = [r for r in known if version_key(r.torch) > point]
    return [*below[-1:], *above[:1]]
