"""PyTorch's CUDA package indexes as pyproject.toml's tool tables name them (NPU702, as an
``--index-url https://download.pytorch.org/whl/cu121`` line of a requirements file): Poetry's
``[[tool.poetry.source]]``, uv's ``[[tool.uv.index]]`` (also inline in ``[tool.uv]``) and its
``index-url`` / ``extra-index-url`` / ``find-links`` settings (``[tool.uv]``, ``[tool.uv.pip]``),
and PDM's ``[[tool.pdm.source]]``. The index URL becomes ``/whl/cpu``; its name stays, and so do
the ``[tool.uv.sources]`` entries and Poetry dependencies that name it (``{ index = "pytorch-cu121" }``
then installs the CPU build).

Left alone: an index only the project's builds for another machine use, as their requirements are
(depfiles.py's extras and groups for another build): an explicit index (uv's ``explicit = true``,
Poetry's ``priority = "explicit"``) that only sources restricted to such an extra or group name
(``{ index = "pytorch-cu128", extra = "cu128" }``, a dependency of ``[tool.poetry.group.cu121.dependencies]``).
Facts: docs/reference/packaging.md §6.
"""

from __future__ import annotations

import re
from typing import Callable

# the tables whose strings name package indexes (header names as written, without brackets)
INDEX_TABLES = ("tool.poetry.source", "tool.uv.index", "tool.uv", "tool.uv.pip", "tool.pdm.source")
INDEX_ROOT = re.compile(r"https?://download\.pytorch\.org/whl/(?:nightly/)?cu\d+/?")
# a TOML comment or a one-line string (the comment first where it starts earlier: `# url = "..."`)
COMMENT_OR_STRING = re.compile(r"""#[^\n]*|"((?:[^"\\\n]|\\.)*)"|'([^'\n]*)'""")
HEADER = re.compile(r"(?m)^[ \t]*\[\[?[ \t]*([\w.-]+)[ \t]*\]\]?[ \t]*(?:#.*)?$")


def cuda_index_urls(text: str, data: dict, other_build: Callable[[str], bool]) -> list[tuple[int, int, str]]:
    """(start, end, table header) of the strings' contents that are PyTorch CUDA index URLs in the index
    tables of a pyproject.toml (``data``: its parsed TOML), but those of indexes only builds for
    another machine use (``other_build``: whether an extra or group name is for one)."""
    kept = _other_build_indexes(data, other_build)
    headers = list(HEADER.finditer(text))
    found = []
    for header, end in zip(headers, [h.start() for h in headers[1:]] + [len(text)]):
        if header.group(1) not in INDEX_TABLES:
            continue
        for match in COMMENT_OR_STRING.finditer(text, header.end(), end):
            group = 1 if match.group(1) is not None else 2
            value = match.group(group)
            if value is not None and INDEX_ROOT.fullmatch(value) and value not in kept:
                found.append((match.start(group), match.end(group), header.group().split("#")[0].strip()))
    return found


def _other_build_indexes(data: dict, other_build: Callable[[str], bool]) -> set[str]:
    """The URLs of the explicit indexes that only builds for another machine use."""
    tool = _table(data, "tool")
    uv, poetry, pdm = _table(tool, "uv"), _table(tool, "poetry"), _table(tool, "pdm")
    users: dict[str, list[bool]] = {}  # index name -> for each source naming it: restricted to another build
    for entries in _table(uv, "sources").values():
        for entry in entries if isinstance(entries, list) else [entries]:
            if isinstance(entry, dict) and isinstance(entry.get("index"), str):
                scope = entry.get("extra") or entry.get("group")
                users.setdefault(entry["index"], []).append(isinstance(scope, str) and other_build(scope))
    groups = [("", poetry.get("dependencies"))] + [
        (name, group.get("dependencies")) for name, group in _table(poetry, "group").items() if isinstance(group, dict)
    ]
    for group, dependencies in groups:
        for value in (dependencies or {}).values() if isinstance(dependencies, dict) else ():
            for entry in value if isinstance(value, list) else [value]:
                if isinstance(entry, dict) and isinstance(entry.get("source"), str):
                    users.setdefault(entry["source"], []).append(bool(group) and other_build(group))
    restricted, general = set(), set()
    for index in [
        *_tables(uv.get("index")),
        *_tables(poetry.get("source")),
        *_tables(pdm.get("source")),
    ]:
        explicit = index.get("explicit") is True or index.get("priority") == "explicit"
        named = users.get(index["name"]) if isinstance(index.get("name"), str) else None
        only_others = explicit and named and all(named)
        if isinstance(index.get("url"), str):
            (restricted if only_others else general).add(index["url"])
    return restricted - general


def _table(data: dict, key: str) -> dict:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _tables(value) -> list[dict]:
    return [entry for entry in value if isinstance(entry, dict)] if isinstance(value, list) else []
