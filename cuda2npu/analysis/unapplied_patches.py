"""The project's monkey patches that nothing applies: a project fact, so that those files are left as
written (``check``/``migrate`` skip them, saying why).

A patch module (its file name says ``patch``: ``llama_flash_attn_monkey_patch.py``) defines installers:
module-level functions that assign to an attribute of something the file imports
(``transformers.models.llama.modeling_llama.LlamaAttention.forward = forward``). When no installer is
called anywhere in the project (its name followed by ``(`` in no Python file, notebook, shell script,
Markdown or configuration file but in a ``def``), and no other file imports the module itself, another
name of it or an installer under another name, its functions never run: an edit there changes nothing
anyone runs. A package ``__init__.py`` re-exporting an installer does not apply it; the module-level
imports of a module so re-exported still run, and one failing on an NPU host is reported at that import
(NPU606). Mini-Monkey's ``replace_llama_attn_with_flash_attn`` (round 52: 10 edits), ml-fastvlm's and
LongVA's copies of LLaVA's patch (rounds 45 and 40: 7 each).
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

from cuda2npu.analysis.python_files import PythonFiles
from cuda2npu.analysis.uncalled_functions import SearchedTexts

PATCH_NAME = re.compile(r"patch", re.IGNORECASE)


def unapplied_patches(files: PythonFiles, searched: SearchedTexts) -> tuple[tuple[str, str], ...]:
    """(real path, first installer) of each patch module nothing applies (see the module), sorted;
    ``searched``: where the installers' calls are looked for."""
    candidates = {}
    for path in files:
        if PATCH_NAME.search(path.stem) and path.name != "__init__.py" and (tree := files.tree(path)) is not None:
            installers = _installers(tree)
            if installers:
                candidates[path] = installers
    if not candidates:
        return ()
    texts = searched.texts
    found = []
    for path, installers in candidates.items():
        names = b"|".join(re.escape(n.encode()) for n in installers)
        calls = re.compile(rb"\b(?:" + names + rb")\s*\(")
        definitions = re.compile(rb"\bdef\s+(?:" + names + rb")\s*\(")
        if sum(len(calls.findall(text)) - len(definitions.findall(text)) for text in texts) > 0:
            continue
        if _imported_otherwise(files, path, set(installers)):
            continue
        found.append((os.path.realpath(path), installers[0]))
    return tuple(sorted(found))


def _installers(tree: ast.Module) -> list[str]:
    """The module-level functions of ``tree`` assigning to an attribute of a name the file imports."""
    imported = {
        (alias.asname or alias.name).partition(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any(
            isinstance(target, ast.Attribute) and _root(target) in imported
            for assign in ast.walk(node)
            if isinstance(assign, ast.Assign)
            for target in assign.targets
        )
    ]


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _imported_otherwise(files: PythonFiles, path: Path, installers: set[str]) -> bool:
    """Whether another file imports the module ``path`` itself (``import pkg.patch``, ``from pkg import
    patch``) or a name of it other than its installers; an import of a module of the same name elsewhere
    (FastChat's ``fastchat.train.llama_flash_attn_monkey_patch``) does not count."""
    module = files.modules.get(path, path.stem)
    for other in files:
        if other == path:
            continue
        for statement in files.import_statements(other):
            if path.stem.encode() not in statement:
                continue
            text = re.sub(r"[()\\]", " ", statement.decode(errors="replace")).strip()
            if text.startswith("import "):
                names = text[len("import ") :]
                if any(_names(module, name.split()[0]) for name in names.split(",") if name.split()):
                    return True  # `import pkg.patch`
                continue
            head, _, names = text.partition(" import ")
            source = head.split()[1] if len(head.split()) > 1 else ""
            parts = [name.split() for name in names.split(",") if name.split()]
            imported = {part[0] for part in parts}
            if _names(module, source) and (imported - installers or any(len(part) > 1 for part in parts)):
                return True  # `from pkg.patch import forward`, `import replace_x as patch` (called as `patch()`)
            if any(_names(module, f"{source}.{name}" if source.strip(".") else source + name) for name in imported):
                return True  # `from pkg import patch`
    return False


def _names(module: str, imported: str) -> bool:
    """Whether the dotted name ``imported`` (relative with leading dots) can be ``module`` (a module
    outside a package is known by a shorter name: either may end with the other)."""
    bare = imported.lstrip(".")
    if not bare:
        return False
    return module == bare or module.endswith("." + bare) or bare.endswith("." + module)
