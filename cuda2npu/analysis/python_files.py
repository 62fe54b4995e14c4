"""The project's Python files as the project facts read them: each file's bytes read once, its dotted
module name, and its ``ast`` tree parsed at most once, on the first fact that asks (no libcst here)."""

from __future__ import annotations

import ast
import functools
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

# the text of an import statement (`from a.b import (c,\n d)`, `import a.b as c`), for a cheap word test
IMPORT_STATEMENT = re.compile(
    rb"^[ \t]*(?:from[ \t]+[\w. \t]+import[ \t]*(?:\([^)]*\)|(?:[^\n]*\\\r?\n)*[^\n]*)|import[ \t]+(?:[^\n]*\\\r?\n)*[^\n]*)",
    re.M,
)


def parse(text: bytes) -> ast.Module | None:
    """``ast.parse``, None where the text does not parse (the run reports those files)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


class PythonFiles(Mapping[Path, bytes]):
    """Path -> bytes of the project's Python files, with :meth:`tree` and :attr:`modules` shared by the
    facts (several parse the same kernel files). A tree costs about 30 times its text in memory: a fact
    that may read much of the project (``failing_modules``' import graph) parses with :func:`parse` and
    keeps nothing. :meth:`import_statements` finds the import statements before anything is parsed."""

    def __init__(self, texts: Mapping[Path, bytes], root: Path | None = None) -> None:
        self._texts = dict(texts)
        self.root = root  # the project root, where known (namespace_names)
        self._trees: dict[Path, ast.Module | None] = {}
        self._imports: dict[Path, list[bytes]] = {}

    @classmethod
    def read(cls, files: list[Path], root: Path | None = None) -> PythonFiles:
        """The ``.py`` files among ``files`` (unreadable ones skipped) of the project at ``root``."""
        texts = {}
        for path in files:
            if path.suffix == ".py":
                try:
                    texts[path] = path.read_bytes()
                except OSError:
                    continue
        return cls(texts, root)

    def __getitem__(self, path: Path) -> bytes:
        return self._texts[path]

    def __iter__(self) -> Iterator[Path]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)

    def tree(self, path: Path) -> ast.Module | None:
        """The file's ``ast`` tree (kept for the next fact), None where it does not parse."""
        if path not in self._trees:
            self._trees[path] = parse(self._texts[path])
        return self._trees[path]

    def may_import(self, path: Path, words: set[bytes]) -> bool:
        """Whether an import statement of the file names one of ``words`` (the last names of modules),
        or is relative (``from .sub import x`` names no package): only then need it be parsed."""
        return any(
            statement.lstrip().startswith(b"from .") or any(word in statement for word in words)
            for statement in self.import_statements(path)
        )

    def import_statements(self, path: Path) -> list[bytes]:
        """The text of each import statement of the file (:data:`IMPORT_STATEMENT`; kept for the next fact)."""
        if path not in self._imports:
            self._imports[path] = [match.group(0) for match in IMPORT_STATEMENT.finditer(self._texts[path])]
        return self._imports[path]

    @functools.cached_property
    def modules(self) -> dict[Path, str]:
        """Each file's dotted module name (:func:`module_names`)."""
        return module_names(list(self._texts))

    @functools.cached_property
    def bundled_copies(self) -> dict[str, dict[Path, str]]:
        """Top-level module names that several directories' files take (GuidedQuant bundles QTIP's
        ``qtip/lib`` and its own ``inference/lib``, each imported as ``lib`` by the scripts run above it;
        its ``inference/model.py`` and QTIP's ``qtip/model/``, a directory without ``__init__.py``):
        name -> {the directory its copy is imported from: the copy's distinct name}, where the copy at the
        project root keeps its name and another is named by its path (``inference.lib``, ``qtip.model``)."""
        top = self.top
        if top is None:
            return {}
        roots: dict[str, set[Path]] = {}
        for path, module in self.modules.items():
            roots.setdefault(module.split(".")[0], set()).add(_import_root(path, module))
        for folder in {path.parent for path in self._texts} - {top}:  # directories without `__init__.py`
            if folder / "__init__.py" not in self._texts and folder.parent / "__init__.py" not in self._texts:
                roots.setdefault(folder.name, set()).add(folder.parent)
        return {
            name: {
                where: ".".join([*where.relative_to(top).parts, name]) if where.is_relative_to(top) else name
                for where in found
            }
            for name, found in roots.items()
            if len(found) > 1
        }

    @functools.cached_property
    def top(self) -> Path | None:
        """The project root (else the directory holding all the files), None without files."""
        if not self._texts:
            return None
        return self.root or Path(os.path.commonpath([str(path.parent) for path in self._texts]))

    @functools.cached_property
    def rooted_names(self) -> dict[Path, str]:
        """The dotted path from the project root of each file a script there imports through directories
        without ``__init__.py`` (hart's ``hart/modules/networks/basic_hart.py``, imported as
        ``hart.modules.networks.basic_hart`` by ``sample.py``), also where packages lie on the way
        (LivePortrait's ``src.utils.dependencies.XPose.models.UniPose.ops.functions.ms_deform_attn_func``:
        ``src/utils`` and ``XPose/models`` are packages, ``src`` and ``ops`` are not, round 56), where its
        module name differs."""
        top, found = self.top, {}
        if top is None or top / "__init__.py" in self._texts:
            return found
        for path, module in self.modules.items():
            where = _import_root(path, module)
            if where == top or not where.is_relative_to(top):
                continue
            parts = where.relative_to(top).parts
            if all(part.isidentifier() for part in parts):
                found[path] = ".".join([*parts, module])
        return found

    @functools.cached_property
    def distinct_modules(self) -> dict[Path, str]:
        """:attr:`modules`, with a copy of a top-level module bundled more than once named distinctly
        (:attr:`bundled_copies`)."""
        return {path: self._distinct(path, module) for path, module in self.modules.items()}

    @functools.cached_property
    def distinct_namespace_names(self) -> dict[Path, str]:
        """:attr:`namespace_names`, named distinctly as :attr:`distinct_modules` are."""
        return {path: self._distinct(path, name) for path, name in self.namespace_names.items()}

    def _distinct(self, path: Path, name: str) -> str:
        head, _, rest = name.partition(".")
        copies = self.bundled_copies.get(head)
        if copies is not None:
            head = copies.get(_import_root(path, name), head)
        return f"{head}.{rest}" if rest else head

    @functools.cached_property
    def namespace_names(self) -> dict[Path, str]:
        """The package-qualified name of each file in a directory without ``__init__.py`` inside a
        package (:func:`namespace_names`)."""
        return namespace_names(self.modules, self.top)


def _import_root(path: Path, name: str) -> Path:
    """The directory the file ``path`` is imported from by the dotted ``name``."""
    return path.parents[name.count(".") + (path.name == "__init__.py")]


def module_names(files: list[Path]) -> dict[Path, str]:
    """The dotted module name of each Python file: ``pkg/sub/mod.py`` → ``pkg.sub.mod`` when ``pkg``
    and ``pkg/sub`` hold an ``__init__.py`` among ``files``; ``pkg/__init__.py`` → ``pkg``."""
    packages = {os.path.dirname(path) for path in map(str, files) if path.endswith(f"{os.sep}__init__.py")}
    names: dict[Path, str] = {}
    for path in files:
        text = str(path)
        if not text.endswith(".py"):
            continue
        directory, _, file_name = text.rpartition(os.sep)
        parts = [] if file_name == "__init__.py" else [file_name[:-3]]
        while directory in packages:
            directory, _, package = directory.rpartition(os.sep)
            parts.append(package)
        if parts:
            names[path] = ".".join(reversed(parts))
    return names


def namespace_names(names: dict[Path, str], top: Path | None) -> dict[Path, str]:
    """The name a module in a directory without an ``__init__.py`` below a package is also imported
    by (a PEP 420 namespace portion): ``pkg/sub/mod.py`` with only ``pkg/__init__.py`` →
    ``pkg.sub.mod`` (Video-ChatGPT's ``video_chatgpt/train/``), where :func:`module_names` says
    ``mod``, the name a script beside it imports it by. In a directory without an ``__init__.py`` and
    no package above it, the name a script in the directory above imports it by: ``pyramidkv/llama_model.py``
    → ``pyramidkv.llama_model`` (PyramidKV's ``pyramidkv/`` is such a portion at the project root); not
    for the files of ``top``, the project root (else the directory holding them all), whose name is the
    checkout's (marlin cloned into ``marlin/``). A package in such a directory below a package is named
    through it too (Mask2Former's ``pixel_decoder/ops/modules/`` → ``...pixel_decoder.ops.modules``).
    ``names``: each file's :func:`module_names`."""
    packages = {os.path.dirname(str(path)): name for path, name in names.items() if path.name == "__init__.py"}
    found: dict[Path, str] = {}
    for path in names:
        directory = os.path.dirname(str(path))
        packaged = directory in packages
        if packaged:  # a package in such a directory: Mask2Former's `pixel_decoder/ops/modules/` (round 37)
            module = names[path]
            directory = str(_import_root(path, module))
            parts = list(reversed(module.split(".")))
        else:
            parts = [path.stem] if path.name != "__init__.py" else []
        start = directory
        while directory and directory not in packages and os.path.dirname(directory) != directory:
            directory, _, name = directory.rpartition(os.sep)
            parts.append(name)
        if directory in packages and parts and (not packaged or directory != start):
            found[path] = ".".join([packages[directory], *reversed(parts)])
        elif (
            not packaged and path.name != "__init__.py" and path.parent != top
        ):  # `from pyramidkv.llama_model import ...`
            found[path] = f"{path.parent.name}.{path.stem}"
    return found


def import_nodes(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The import statements of ``tree`` in file order, also inside functions, classes and blocks:
    statements only, not every expression node (an import is a statement)."""
    found: list[ast.Import | ast.ImportFrom] = []
    blocks = [tree.body]
    while blocks:
        for statement in blocks.pop():
            if isinstance(statement, (ast.Import, ast.ImportFrom)):
                found.append(statement)
                continue
            for field in ("body", "orelse", "finalbody"):
                block = getattr(statement, field, None)
                if isinstance(block, list):
                    blocks.append(block)
            blocks.extend(handler.body for handler in getattr(statement, "handlers", ()))
            blocks.extend(case.body for case in getattr(statement, "cases", ()))
    return sorted(found, key=lambda node: (node.lineno, node.col_offset))
