"""The project's version pins, and the default they decide (the torch_npu release a migration targets).

Read, never written: the dependency files the run discovers (requirements*.txt/.in, pyproject.toml,
setup.cfg, setup.py, *environment*.yml, conda-env*.yml), the lock files at the project root (``uv.lock``,
``poetry.lock``, ``Pipfile.lock``) and the ``__version__`` of a copy of a consulted package the
project carries (``src/transformers/__init__.py``). A distribution named in several places gets every specifier
at once (``>=2.1`` in setup.py and ``==2.4.0`` in a lock file: ``>=2.1,==2.4.0``), except in a
sub-project with dependency files of its own, whose files get its pins first (:func:`project_pins`).
"""

from __future__ import annotations

import ast
import json
import os
import re
from dataclasses import replace
from pathlib import Path

import tomllib

from cuda2npu.analysis.cuda_only_modules import normalize_distribution
from cuda2npu.core.options import Options
from cuda2npu.core.pins import CONSULTED, pinned, pinned_torch
from cuda2npu.core.torch_npu_target import parse_target
from cuda2npu.filekinds import depfiles_versions
from cuda2npu.filekinds.depfiles import Dep, dependencies, is_dependency_file

LOCK_FILES = ("uv.lock", "poetry.lock", "Pipfile.lock")
# packages a project may carry a copy of (LoRA's examples/NLU/src/transformers 4.4.2): the copy's
# `__version__` pins the release its programs run on
VENDORED = frozenset(name.replace("-", "_") for name in CONSULTED if name not in ("torch", "torch-npu"))
VERSION_LINE = re.compile(r"""^__version__\s*(?::\s*str\s*)?=\s*["']([0-9][\w.+-]*)["']""", re.M)


Pins = tuple[tuple[str, str], ...]


def project_pins(files: list[Path], root: Path | None) -> tuple[Pins, tuple[str, ...], tuple[tuple[str, Pins], ...]]:
    """(pins as ``(distribution, specifier)`` sorted by name, the files they were read from, the pins
    of each sub-project), for the distributions whose pins decide something (``CONSULTED``).

    The pins merge every file's (a distribution named in several places gets every specifier). A
    sub-project is a directory below the root whose own dependency files pin something (LMFlow's
    ``contrib/text2image/requirements.txt``); where there is one, each scope (the sub-projects and the
    root) is listed as ``(real directory, its own pins)``, and
    :meth:`Options.for_path <cuda2npu.core.options.Options.for_path>` gives a file, per distribution,
    the pin of the nearest scope above it that names it (the merged pin where none does). A dependency file in a directory with no Python file
    below it (``requirements/``, ``docker/``) belongs to the directory above; lock files and vendored
    copies belong to the root. A Cog ``cog.yaml`` is read for its ``python_packages`` (not edited)."""
    per_file: list[tuple[Path, list[tuple[str, str]]]] = []
    sources = [path for path in files if is_dependency_file(path) or path.name in ("setup.py", "cog.yaml")]
    if root is not None:
        sources += [root / name for name in LOCK_FILES if (root / name).is_file()]
    sources += [path for path in files if path.name == "__init__.py" and path.parent.name in VENDORED]
    for path in sources:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
            if path.name == "__init__.py":
                found = _vendored_pin(path.parent.name, text)
            elif path.name in LOCK_FILES:
                found = _lock_pins(path.name, text)
            else:
                found = _requirement_pins(path.name, text)
        except (OSError, ValueError, SyntaxError):  # unreadable or malformed: pins nothing
            continue
        found = [(name, spec) for name, spec in found if name in CONSULTED]
        if found:
            per_file.append((path, found))
    read = tuple(sorted(_display(path, root) for path, _ in per_file))
    scopes: dict[Path, list[tuple[str, str]]] = {}
    if root is not None:
        code_directories = {parent for path in files if path.suffix == ".py" for parent in path.parents}
        for path, found in per_file:
            scope = root if path.name in LOCK_FILES or path.name == "__init__.py" else path.parent
            while scope != root and scope not in code_directories and root in scope.parents:
                scope = scope.parent
            scopes.setdefault(scope if root in scope.parents else root, []).extend(found)
    if set(scopes) <= {root}:  # one scope: the merged pins are its pins
        scopes = {}
    nested = tuple(sorted((os.path.realpath(scope), _merged(found)) for scope, found in scopes.items()))
    return _merged([pin for _, found in per_file for pin in found]), read, nested


def _merged(found: list[tuple[str, str]]) -> Pins:
    """``[("torch", ">=2.1"), ("torch", "==2.4.0")]`` → ``(("torch", ">=2.1,==2.4.0"),)``."""
    specs: dict[str, list[str]] = {}
    for name, spec in found:
        if spec not in specs.setdefault(name, []):
            specs[name].append(spec)
    return tuple((name, ",".join(spec for spec in parts if spec)) for name, parts in sorted(specs.items()))


def _vendored_pin(package: str, text: str) -> list[tuple[str, str]]:
    """``[("transformers", "==4.4.2")]`` for a copy of transformers whose ``__init__.py`` says so."""
    match = VERSION_LINE.search(text)
    return [(normalize_distribution(package), f"=={match.group(1)}")] if match else []


def _requirement_pins(name: str, text: str) -> list[tuple[str, str]]:
    found = []
    for dep in [*dependencies(name, text), *(_requirement_table(text) if name == "setup.py" else ())]:
        spec = dep.spec.split(";", 1)[0].strip()
        if dep.name and not spec.startswith("@"):  # a direct URL pins no version we can read
            found.append((dep.name, spec))
    return found


def _requirement_table(text: str) -> list[Dep]:
    """The requirements of a module-level list of requirement strings in setup.py that
    ``install_requires`` reads through a lookup (Hugging Face's ``_deps = ["transformers==4.52.3",
    ...]`` and ``deps["transformers"]``), which the setup() call does not show as literals. Read for
    the pins only: such a table is never edited."""
    tree = ast.parse(text)
    found = []
    for node in tree.body:
        value = node.value if isinstance(node, ast.Assign) else None
        if not isinstance(value, (ast.List, ast.Tuple)) or len(value.elts) < 2:
            continue
        strings = [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        deps = [Dep(string, 0, 0, 0, 0, literal=True) for string in strings]
        if len(strings) == len(value.elts) and all(dep.name for dep in deps):
            found += deps
    return found


def _lock_pins(name: str, text: str) -> list[tuple[str, str]]:
    if name == "Pipfile.lock":
        data = json.loads(text)
        return [
            (normalize_distribution(package), entry["version"])
            for section in ("default", "develop")
            for package, entry in data.get(section, {}).items()
            if isinstance(entry, dict) and isinstance(entry.get("version"), str)
        ]
    return [
        (normalize_distribution(package["name"]), f"=={package['version']}")
        for package in tomllib.loads(text).get("package", [])
        if isinstance(package.get("name"), str) and isinstance(package.get("version"), str)
    ]


def _display(path: Path, root: Path | None) -> str:
    try:
        return path.relative_to(root).as_posix() if root is not None else path.as_posix()
    except ValueError:
        return path.as_posix()


def target_from_pins(pins: tuple[tuple[str, str], ...]) -> tuple[str, str] | None:
    """(the torch_npu version to target, the pin that says so) when the pins rule out the newest
    documented release: an exact torch_npu pin, else the newest torch_npu whose torch the torch pin
    allows (``torch==2.4.0`` → ``2.4.0.post4``; a torchvision or torchaudio pin stands for the torch
    it requires: :func:`~cuda2npu.core.pins.pinned_torch`). None: nothing pinned, not understood, or no
    documented torch_npu fits (NPU703/NPU704 say so in the dependency file)."""
    npu = pinned(pins, "torch-npu")
    exact = depfiles_versions.exact_pin(npu) if npu else None
    if exact:
        return exact, f"torch_npu{npu}"
    torch = pinned_torch(pins)
    if not torch:
        return None
    fits = depfiles_versions.allowed(torch[0])
    if not fits or fits[-1] == depfiles_versions.releases()[-1]:
        return None
    return fits[-1].torch_npu, torch[1]


def with_pinned_target(options: Options) -> Options:
    """``options`` with the target chosen by the pins when the user chose none."""
    if options.target.chosen is not None:
        return options
    decided = target_from_pins(options.project.pins)
    if decided is None:
        return options
    return replace(options, target=replace(parse_target(decided[0]), pin=decided[1]))
