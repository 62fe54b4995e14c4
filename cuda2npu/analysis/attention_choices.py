"""How a project chooses its attention implementation, for NPU901 (project facts).

- :func:`attention_parameters`: its module-level functions (a module-level class, by its
  ``__init__``) taking ``attn_implementation`` (or ``attention_implementation``) positionally, so
  that ``train("flash_attention_2")`` in another file hands the value on as LLaVA's
  ``train(attn_implementation=...)`` does (VideoLLaMA2's ``train.py``);
- :func:`attention_switches`: the files on the way to code that reads ``"flash_attention_2"`` as the
  project's own switch (a comparison or membership test with the literal, ``.pop("flash_attention_2")``,
  in a function naming no ``"sdpa"``; not transformers' own ``config._attn_implementation``): VLM-R1's
  ``internvl_module.py`` pops it and passes InternVL's ``use_flash_attn=True``, which falls back to
  eager attention without flash-attn. A launch script's ``--attn_implementation flash_attention_2``
  on such a way is kept for review (cuda2npu/filekinds/launch_flags.py). ``words``: the words of the
  switch file's name the project tests a model name for (``"internvl" in model_name.lower()``), so a
  script naming another model still gets the rewrite.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Mapping
from pathlib import Path

from cuda2npu.analysis.failing_modules import ImportSites, failing_part
from cuda2npu.analysis.python_files import PythonFiles, parse

ATTENTION_NAMES = ("attn_implementation", "attention_implementation")
# a `def` whose parameter list (one level of nested brackets) names the attention implementation
DEF_WITH_ATTENTION = re.compile(
    rb"\bdef[ \t]+\w+[ \t]*\((?:[^()]|\([^()]*\))*?\b(?:attn|attention)_implementation\b", re.S
)


def attention_parameters(texts: Mapping[Path, bytes]) -> tuple[tuple[str, int], ...]:
    """``("train", 0)`` for each module-level function (module-level class, by its ``__init__``
    without ``self``) whose positional parameter at that index is named like transformers'
    ``attn_implementation``, sorted; a name defined elsewhere with another index is left out."""
    found: dict[str, set[int]] = {}
    for text in texts.values():
        if b"_implementation" not in text or not DEF_WITH_ATTENTION.search(text):
            continue
        tree = parse(text)
        for name, position in _attention_positions(tree) if tree is not None else ():
            found.setdefault(name, set()).add(position)
    return tuple(sorted((name, next(iter(at))) for name, at in found.items() if len(at) == 1))


def _attention_positions(tree: ast.Module) -> list[tuple[str, int]]:
    """(name, index) of the module's functions and classes taking the attention implementation positionally."""
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += [(node.name, index) for index in _attention_indexes(node.args, 0)]
        elif isinstance(node, ast.ClassDef):
            init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
            found += [(node.name, index) for index in _attention_indexes(init.args, 1)] if init else []
    return found


def _attention_indexes(args: ast.arguments, skip: int) -> list[int]:
    """The indexes, among a call's positional arguments, of the parameters named like the attention
    implementation (``skip``: the leading ``self``)."""
    positional = [*args.posonlyargs, *args.args][skip:]
    return [index for index, arg in enumerate(positional) if arg.arg in ATTENTION_NAMES]


FA2 = "flash_attention_2"
# the literal compared, tested for membership or popped: a file holding one is parsed
FA2_TESTED = re.compile(
    rb"""["']flash_attention_2["'][ \t]*(?:[=!]=|in\b|not[ \t]+in\b)"""
    rb"""|(?:[=!]=|\bin\b)[ \t]*(?:[(\[{][^)\]}]*)?["']flash_attention_2["']"""
    rb"""|\.(?:pop|remove|discard)\([ \t]*["']flash_attention_2["']"""
)
SWITCH_OPERATORS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot)
SEPARATORS = re.compile(r"[^a-z0-9]+")
# words of a file's name that say nothing of a model family
PLAIN_WORDS = frozenset(
    "module modules model models modeling modelling adapter adapters wrapper wrappers util utils helper helpers "
    "loader loaders load loading builder build train training trainer main run runner common base core init "
    "config configs configuration arguments args attention attn patch patches monkey factory registry api impl "
    "implementation flash sdpa eager transformers script scripts tools tool setup".split()
)


def attention_switches(texts: Mapping[Path, bytes], root: Path | None = None) -> tuple[tuple[str, str, str], ...]:
    """``(real path, "file:line", "word,word")`` for each project file on the way to code reading
    ``"flash_attention_2"`` as the project's own switch (module docstring), sorted; ``root``: the
    switches are shown relative to it."""
    switches = {}
    for path, text in texts.items():
        line = _own_switch(text) if b"flash_attention_2" in text and FA2_TESTED.search(text) else None
        if line is not None:
            switches[path] = line
    if not switches:
        return ()
    files = texts if isinstance(texts, PythonFiles) else PythonFiles(texts)
    sites = ImportSites(files)  # each file's imports, parsed once for every switch
    found = set()
    for path, line in switches.items():
        shown = path.relative_to(root).as_posix() if root is not None and path.is_relative_to(root) else path.name
        words = ",".join(_picked_by(path, files))
        for reacher in _importers(files, path, sites):
            found.add((os.path.realpath(reacher), f"{shown}:{line}", words))
    return tuple(sorted(found))


def _own_switch(text: bytes) -> int | None:
    """The line of the first test of ``"flash_attention_2"`` that is the file's own switch: a comparison or
    membership test with the literal (not of transformers' ``_attn_implementation``, which holds
    it once transformers accepted it), or its ``.pop`` / ``.remove``, in a function (else module)
    where no ``"sdpa"`` is written (code answering ``sdpa`` too handles what NPU901 writes)."""
    tree = parse(text)
    if tree is None:
        return None
    scopes: list[ast.AST] = [tree]
    scopes += [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    lines = []
    for scope in scopes:
        nodes = list(_own_nodes(scope))
        if any(isinstance(node, ast.Constant) and node.value == "sdpa" for node in nodes):
            continue
        lines += [node.lineno for node in nodes if _tests_fa2(node)]
    return min(lines, default=None)


def _own_nodes(scope: ast.AST):
    """The nodes of ``scope`` outside the functions nested in it."""
    for child in ast.iter_child_nodes(scope):
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield child
            yield from _own_nodes(child)


def _tests_fa2(node: ast.AST) -> bool:
    """``x == "flash_attention_2"``, ``"flash_attention_2" in x``, ``x in ("flash_attention_2", ...)``,
    ``x.pop("flash_attention_2")``."""
    if isinstance(node, ast.Call):
        called = node.func
        return (
            isinstance(called, ast.Attribute)
            and called.attr in ("pop", "remove", "discard")
            and bool(node.args)
            and _is_fa2(node.args[0])
        )
    if not isinstance(node, ast.Compare) or not all(isinstance(op, SWITCH_OPERATORS) for op in node.ops):
        return False
    operands = [node.left, *node.comparators]
    if any(isinstance(operand, ast.Attribute) and operand.attr == "_attn_implementation" for operand in operands):
        return False
    return any(
        _is_fa2(operand)
        or isinstance(operand, (ast.Tuple, ast.List, ast.Set))
        and any(_is_fa2(element) for element in operand.elts)
        for operand in operands
    )


def _is_fa2(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == FA2


def _picked_by(path: Path, files: Mapping[Path, bytes]) -> list[str]:
    """The words of the file's name (its package's for an ``__init__.py``) that the project tests
    a name for: a string literal holding the word before ``in`` (``"internvl" in model_id.lower()``,
    ``assert "InternVL" in model_id``), whatever the case: the code picks that file by the model's name."""
    stem = path.parent.name if path.name == "__init__.py" else path.stem
    words = [word for word in SEPARATORS.split(stem.lower()) if len(word) >= 3 and word not in PLAIN_WORDS]
    picked = []
    for word in words:
        test = re.compile(rb"""["'][^"'\n]*""" + re.escape(word.encode()) + rb"""[^"'\n]*["'][ \t]+in\b""", re.I)
        if any(test.search(text) for text in files.values()):
            picked.append(word)
    return picked


def _importers(files: PythonFiles, target: Path, sites: ImportSites) -> set[Path]:
    """``target`` and the project files importing it, also through other modules (a package's
    ``__init__.py`` importing it counts for the package), anywhere in their text."""
    modules = files.distinct_modules  # named as ImportSites names what a file imports
    if target not in modules:
        return {target}
    reached = {modules[target]: target}
    new = set(reached)
    while new:
        words = {module.rpartition(".")[2].encode() for module in new}
        new = set()
        for path, module in modules.items():
            if module in reached or not files.may_import(path, words):
                continue
            imported = (absolute for site in sites.of(path) for absolute, _ in site.imported)
            if any(failing_part(name, reached) for name in imported):
                reached[module] = path
                new.add(module)
    return set(reached.values())
