"""Which names of its own modules a project imports across files: a project fact (no libcst here).

A rule that removes an import nothing in its file reads (apex's NPU330, flash-attn's NPU405, TE's
NPU416, ColossalAI's NPU510) must not remove one that another file imports from
there: ``from apex.normalization import MixedFusedRMSNorm as RMSNorm`` in ``pkg/layers.py`` is what
``from pkg.layers import RMSNorm`` in two other modules reads. :func:`imported_names` finds the names
each such module gives to the others with a regex over the text of the project's Python files:

- ``from pkg.mod import X as Y`` / ``from .mod import (X, Z)`` / ``from ..sub.mod import X``:
  ``X``, ``Z`` of ``pkg.mod``; ``from pkg.mod import *``: every module-level name (``*``);
- ``import pkg.mod as m`` … ``m.X``, ``import pkg.mod`` … ``pkg.mod.X``, ``from pkg import mod`` …
  ``mod.X``: ``X`` of ``pkg.mod``.

A module's dotted name is its package chain (the directories above it with an ``__init__.py``
among the files). Only modules that may import a library those rules handle are looked for (the
files spelling one of ``REMOVABLE``): a package's ``__init__.py`` exports all its module-level
names anyway (``Options.for_path``). Text in strings may count too: that only keeps an import.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from cuda2npu.analysis.python_files import PythonFiles

# the libraries whose imports rules remove once nothing in the file reads them
REMOVABLE = (b"apex", b"amp_C", b"flash_attn", b"transformer_engine", b"colossalai")
FROM_IMPORT = re.compile(rb"[ \t]*from[ \t]+(\.*)[ \t]*([\w.]*)[ \t]+import[ \t]*(\([^)]*\)|[^\n]*(?:\\\r?\n[^\n]*)*)")
PLAIN_IMPORT = re.compile(rb"[ \t]*import[ \t]+([^\n#;]+)")
IMPORTED = re.compile(rb"([\w*]+)(?:[ \t]+as[ \t]+(\w+))?")
COMMENT = re.compile(rb"#[^\n]*")


def _imported(clause: bytes) -> list[tuple[str, str]]:
    """``(a, b as c,  # comment\\n d)`` → [(a, a), (b, c), (d, d)]: (name, the name it binds)."""
    clause = COMMENT.sub(b"", clause).replace(b"\\\n", b" ").strip(b"() \t\r\n")
    found = []
    for item in clause.split(b","):
        match = IMPORTED.fullmatch(item.strip())
        if match:
            name = match.group(1).decode("ascii", "replace")
            found.append((name, match.group(2).decode("ascii", "replace") if match.group(2) else name))
    return found


def absolute_module(importer: str, is_package: bool, level: int, module: str) -> str:
    """The absolute module of ``from <level dots><module> import ...`` in module ``importer`` (a
    package's ``__init__`` when ``is_package``)."""
    if not level:
        return module
    package = importer.split(".") if is_package else importer.split(".")[:-1]
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _import_lines(text: bytes) -> list[int]:
    """The starts of the lines where the word ``import`` occurs."""
    starts: list[int] = []
    position = text.find(b"import")
    while position >= 0:
        start = text.rfind(b"\n", 0, position) + 1
        if not starts or starts[-1] != start:
            starts.append(start)
        position = text.find(b"import", position + 6)
    return starts


def _attribute_names(text: bytes, bound: bytes) -> set[str]:
    """``X`` of every ``<bound>.X`` in ``text``."""
    uses = re.finditer(rb"(?<![\w.])" + re.escape(bound) + rb"\.(\w+)", text)
    return {use.group(1).decode("ascii", "replace") for use in uses}


def _imports(text: bytes, tops: set[bytes]) -> tuple[list[tuple[bytes, bytes, bytes | None]], bool]:
    """The imports of ``text`` that may name a project module (relative, or starting with one of
    ``tops``): ``(dots, module, names clause)``, the clause None for ``import a.b [as c], ...``;
    and whether one imports a library of ``REMOVABLE``."""
    found: list[tuple[bytes, bytes, bytes | None]] = []
    removable = False
    for start in _import_lines(text):
        match = FROM_IMPORT.match(text, start)
        if match is not None:
            dots, module = match.group(1), match.group(2)
            removable = removable or any(word in module for word in REMOVABLE)
            if dots or module.partition(b".")[0] in tops:
                found.append((dots, module, match.group(3)))
            continue
        match = PLAIN_IMPORT.match(text, start)
        if match is not None:
            removable = removable or any(word in match.group(1) for word in REMOVABLE)
            if any(item.strip().partition(b".")[0] in tops for item in match.group(1).split(b",")):
                found.append((b"", b"", match.group(1)))
    return found, removable


def _names_imported(path: Path, text: bytes, importer: str, imports, candidates: set[str]) -> dict[str, set[str]]:
    """The names the module ``importer`` (at ``path``, ``text``; ``imports``: of :func:`_imports`)
    imports from each of ``candidates`` (its text is searched for ``m.X`` after ``import pkg.mod as m``)."""
    found: dict[str, set[str]] = {}
    packages = {name.rpartition(".")[0] for name in candidates}
    is_package = path.name == "__init__.py"
    for dots, module, clause in imports:
        if module or dots:
            target = absolute_module(importer, is_package, len(dots), module.decode("ascii", "replace"))
            if target == importer or (target not in candidates and target not in packages):
                continue
            names = _imported(clause)
            if target in candidates:
                found.setdefault(target, set()).update(name for name, _ in names)
            for name, bound in names:  # `from pkg import mod` … `mod.X`
                if f"{target}.{name}" in candidates:
                    found.setdefault(f"{target}.{name}", set()).update(_attribute_names(text, bound.encode()))
            continue
        for item in clause.split(b","):  # `import pkg.mod as m` … `m.X`
            parts = item.split()
            target = parts[0].decode("ascii", "replace") if parts else ""
            if target in candidates:
                bound = parts[2] if len(parts) == 3 and parts[1] == b"as" else parts[0]
                found.setdefault(target, set()).update(_attribute_names(text, bound))
    return found


def imported_names(files: PythonFiles) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``(real path of a project module, names other project files import from it)`` for the
    modules (not packages' ``__init__.py``) that import a library of ``REMOVABLE`` and whose names
    another file imports (``*``: all of them), sorted; ``files``: the project's Python files."""
    modules = files.modules
    tops = {name.partition(".")[0].encode() for name in modules.values()}
    candidates: dict[str, list[Path]] = {}
    imports = {}
    for path, name in modules.items():  # the imports of each file that may name project modules
        imports[path], removable = _imports(files[path], tops)
        if removable and path.name != "__init__.py":
            candidates.setdefault(name, []).append(path)
    if not candidates:
        return ()
    wanted: dict[str, set[str]] = {}
    for path, importer in modules.items():
        if imports[path]:
            for target, names in _names_imported(path, files[path], importer, imports[path], set(candidates)).items():
                wanted.setdefault(target, set()).update(names)
    found: dict[str, set[str]] = {}
    real: dict[Path, str] = {}  # directory -> its real path (one resolution per directory)
    for target, names in wanted.items():
        for path in candidates[target] if names else ():
            if path.parent not in real:
                real[path.parent] = os.path.realpath(path.parent)
            found.setdefault(os.path.join(real[path.parent], path.name), set()).update(names)
    return tuple(sorted((path, tuple(sorted(names))) for path, names in found.items()))
