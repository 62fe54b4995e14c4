"""Functions of the project's scripts that nothing calls: a project fact, so that their bodies stay
as written (analysis/never_run.py): an edit there changes nothing anyone runs (MedicalGPT's
``check_and_optimize_memory``, defined in ``supervised_finetuning.py`` and never called).

A script is a Python file with an ``if __name__ == "__main__":`` block; its module-level functions
without decorators are candidates, but ``test*`` ones: pytest finds those by name (lightllm's unit tests
end in ``pytest.main()``, round 28). One is uncalled when its name occurs nowhere in the project's
Python files, notebooks, shell scripts, Markdown and configuration files but in its own ``def`` (an attribute of
a library module, ``torch.load``, is no mention of a ``load``). Not a script that reaches
its functions by name (``globals()``, ``fire.Fire()`` without arguments, ``getattr(sys.modules...)``).

In an application (a project root without ``setup.py``, ``setup.cfg`` or a ``pyproject.toml`` declaring a
package, with a script of its own: nothing outside it imports its modules) every module's module-level
functions are candidates, found by a regex over the text (a ``def`` at the first column whose line above is
no decorator): LivePortrait vendors DETR's ``util/misc.py``, whose ``init_distributed_mode`` nothing calls
(round 56). A function named only in its own body or in the bodies of uncalled functions is uncalled too
(``all_gather``, called by the uncalled ``reduce_dict`` alone). Not the functions tools call by name:
``conftest.py``'s and ``pytest_*`` hooks, ``hubconf.py``'s entry points, a Sphinx ``conf.py``, dunders (a
module's ``__getattr__``).
"""

from __future__ import annotations

import ast
import functools
import os
import re
from pathlib import Path

from cuda2npu.analysis.python_files import PythonFiles

MAIN_GUARD = re.compile(rb"""^if[ \t]+__name__[ \t]*==[ \t]*["']__main__["']""", re.M)
BY_NAME = re.compile(rb"\bglobals\(\)|\bfire\.Fire\(\s*\)|\bsys\.modules\b|\blocals\(\)")
MODULE_FUNCTION = re.compile(rb"^(?:async[ \t]+)?def[ \t]+(\w+)", re.M)  # a `def` at the first column
NEXT_TOP_LEVEL = re.compile(rb"^[^ \t\r\n#)\]}]", re.M)  # a line of code at the first column
CALLED_BY_NAME = ("conftest.py", "hubconf.py", "conf.py", "setup.py")  # pytest, torch.hub, Sphinx, setuptools
INSTALLABLE = re.compile(rb"^\[(?:project|tool\.poetry|metadata)\]", re.M)  # pyproject.toml's, setup.cfg's
# where a script's function may be called or named too (Hydra's `_target_: train.build_model`); a file
# larger than READ_LIMIT is data (a JSON dataset), not read
READ_ALSO = (".ipynb", ".sh", ".md", ".yaml", ".yml", ".json", ".toml", ".cfg")
READ_LIMIT = 1 << 20
# modules whose attributes are never a project's function: `torch.load(...)` does not call the vendored CLIP's
# `load` (imaginaire, round 64)
LIBRARY_PREFIXES = (
    "torch",
    "json",
    "pickle",
    "yaml",
    "np",
    "numpy",
    "os",
    "path",
    "sys",
    "math",
    "re",
    "time",
    "random",
)


class SearchedTexts:
    """The texts a project's function names are looked for in: its Python files, and its ``others`` (files of
    other kinds) of the kinds of :data:`READ_ALSO` up to :data:`READ_LIMIT`; read when first asked, once for
    every fact asking (uncalled functions, unapplied patches)."""

    def __init__(self, files: PythonFiles, others: list[Path]) -> None:
        self._files = files
        self._others = others

    @functools.cached_property
    def texts(self) -> list[bytes]:
        return [self._files[path] for path in self._files] + [
            read_small(path) for path in self._others if path.suffix in READ_ALSO
        ]


def uncalled_functions(files: PythonFiles, searched: SearchedTexts) -> tuple[tuple[str, str], ...]:
    """(real path of the script, function name) for each uncalled function (see the module), sorted;
    ``searched``: where the names are looked for."""
    candidates: dict[str, set[Path]] = {}
    application = _application(files)
    for path in files:
        text = files[path]
        if BY_NAME.search(text) or path.name in CALLED_BY_NAME:
            continue
        if MAIN_GUARD.search(text) and (tree := files.tree(path)) is not None:
            names = [
                node.name
                for node in tree.body
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.decorator_list
            ]
        elif application:
            names = _undecorated_functions(text)
        else:
            continue
        for name in names:
            if not name.startswith(("test", "pytest_", "__")):  # pytest collects `test*` functions by name
                candidates.setdefault(name, set()).add(path)
    if not candidates:
        return ()
    library = b"".join(rb"(?<!\b%b\.)" % re.escape(prefix.encode()) for prefix in LIBRARY_PREFIXES)
    names = re.compile(library + rb"\b(" + b"|".join(re.escape(n.encode()) for n in sorted(candidates)) + rb")\b")
    paths = list(files)  # the searched texts begin with the Python files', in this order
    mentions: dict[str, list[tuple[Path | None, int]]] = {name: [] for name in candidates}
    for index, text in enumerate(searched.texts):
        for match in names.finditer(text):
            mentions[match.group(1).decode()].append((paths[index] if index < len(paths) else None, match.start()))
    single = {name: next(iter(where)) for name, where in candidates.items() if len(where) == 1}
    bodies = {path: _bodies(files[path]) for path in set(single.values())}
    uncalled: set[str] = set()
    while True:  # a function mentioned only in its own body or in uncalled functions' is uncalled too
        found = {
            name
            for name, path in single.items()
            if name not in uncalled
            and sum(not _inside(bodies, where, at, uncalled | {name}) for where, at in mentions[name]) == 1
        }
        if not found:
            break
        uncalled |= found
    return tuple(sorted((os.path.realpath(single[name]), name) for name in uncalled))


def _bodies(text: bytes) -> dict[str, tuple[int, int]]:
    """name -> (start, end) of each module-level function of ``text``: its ``def`` line past its header,
    to the next line of code at the first column (a string's first-column line ends it early: a mention
    after it counts as outside, the safe side)."""
    found = {}
    for match in MODULE_FUNCTION.finditer(text):
        header_end = text.find(b"\n", match.end())
        after = NEXT_TOP_LEVEL.search(text, header_end + 1) if header_end != -1 else None
        found[match.group(1).decode()] = (match.end(), after.start() if after else len(text))
    return found


def _inside(bodies: dict[Path, dict[str, tuple[int, int]]], path: Path | None, at: int, names: set[str]) -> bool:
    """Whether the mention at ``at`` of ``path`` lies in the body of one of the functions ``names`` there."""
    spans = bodies.get(path, {}) if path is not None else {}
    return any(start <= at < end for name, (start, end) in spans.items() if name in names)


def read_small(path: Path) -> bytes:
    """The bytes of ``path``, empty where it is larger than READ_LIMIT (data, not code) or unreadable."""
    try:
        return path.read_bytes() if path.stat().st_size <= READ_LIMIT else b""
    except OSError:
        return b""


def _undecorated_functions(text: bytes) -> list[str]:
    """The names of the module-level functions of ``text`` without a decorator, by a regex: the first line at
    the first column above each ``def`` (past blank, indented and comment lines, and a decorator's continued
    arguments) is no ``@`` line."""
    names = []
    for match in MODULE_FUNCTION.finditer(text):
        end = match.start()  # walk up the lines above, from the end of each to its start
        while end > 0:
            start = text.rfind(b"\n", 0, end - 1) + 1
            line = text[start : end - 1].rstrip(b"\r")
            if line[:1] not in (b"", b" ", b"\t", b"#", b")"):
                break
            end = start
        if not (end > 0 and line.startswith(b"@")):
            names.append(match.group(1).decode())
    return names


def _application(files: PythonFiles) -> bool:
    """Whether the project is run, not imported: no package metadata at its root (:func:`_installable`), and
    a script there (``inference.py`` with an ``if __name__ == "__main__":`` block)."""
    root = files.root
    if root is None or _installable(root):
        return False
    return any(path.parent == root and MAIN_GUARD.search(files[path]) for path in files)


def _installable(root: Path) -> bool:
    """Whether the project at ``root`` declares a package others may install and import: a ``setup.py``, or a
    ``pyproject.toml`` / ``setup.cfg`` with its metadata."""
    if (root / "setup.py").exists():
        return True
    return any(INSTALLABLE.search(read_small(root / name)) for name in ("pyproject.toml", "setup.cfg"))
