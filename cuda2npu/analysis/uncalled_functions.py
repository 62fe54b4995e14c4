"""Functions of the project's scripts that nothing calls: a project fact, so that their bodies stay
as written (analysis/never_run.py): an edit there changes nothing anyone runs (MedicalGPT's
``check_and_optimize_memory``, defined in ``supervised_finetuning.py`` and never called).

A script is a Python file with an ``if __name__ == "__main__":`` block; its module-level functions
without decorators are candidates, but ``test*`` ones: pytest finds those by name (lightllm's unit tests
end in ``pytest.main()``, round 28). One is uncalled when its name occurs nowhere in the project's
Python files, notebooks, shell scripts, Markdown and configuration files but in its own ``def``. Not a script that reaches
its functions by name (``globals()``, ``fire.Fire()`` without arguments, ``getattr(sys.modules...)``).
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
# where a script's function may be called or named too (Hydra's `_target_: train.build_model`); a file
# larger than READ_LIMIT is data (a JSON dataset), not read
READ_ALSO = (".ipynb", ".sh", ".md", ".yaml", ".yml", ".json", ".toml", ".cfg")
READ_LIMIT = 1 << 20


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
    for path in files:
        text = files[path]
        if not MAIN_GUARD.search(text) or BY_NAME.search(text) or (tree := files.tree(path)) is None:
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.decorator_list:
                if not node.name.startswith("test"):  # pytest collects `test*` functions by name
                    candidates.setdefault(node.name, set()).add(path)
    if not candidates:
        return ()
    names = re.compile(rb"\b(" + b"|".join(re.escape(n.encode()) for n in sorted(candidates)) + rb")\b")
    counts: dict[str, int] = dict.fromkeys(candidates, 0)
    for text in searched.texts:
        for match in names.finditer(text):
            counts[match.group(1).decode()] += 1
    return tuple(
        sorted(
            (os.path.realpath(path), name)
            for name, count in counts.items()
            if count == 1 and len(candidates[name]) == 1
            for path in candidates[name]
        )
    )


def read_small(path: Path) -> bytes:
    """The bytes of ``path``, empty where it is larger than READ_LIMIT (data, not code) or unreadable."""
    try:
        return path.read_bytes() if path.stat().st_size <= READ_LIMIT else b""
    except OSError:
        return b""
