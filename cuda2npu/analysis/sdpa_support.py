"""The project's model classes that support FlashAttention-2 but not SDPA: a project fact.

transformers' ``from_pretrained(..., attn_implementation="sdpa")`` raises ``ValueError`` for a model
class whose ``_supports_sdpa`` is false, ``PreTrainedModel``'s default (docs/reference/transformers.md
§2). A project that copies a model's code (Mantis' ``MFuyuForCausalLM``, its Idefics2 and Idefics3)
often declares ``_supports_flash_attn_2 = True`` and nothing for SDPA: ``flash_attention_2``, which
cannot run on an NPU host before transformers 4.51, must become ``"eager"`` for such a class, not
``"sdpa"`` (round 38: three training scripts stopped at load).

A class counts when it (or a project base, by name) declares ``_supports_flash_attn_2 = True``, no class
on that path declares ``_supports_sdpa`` (an assignment, or a property answering at run time), and
the path ends at transformers' ``PreTrainedModel`` or a project class deriving from it. A class
named the same in two files counts only if every one of them does.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass

from cuda2npu.analysis.python_files import PythonFiles

WORD = b"_supports_flash_attn_2"
FLASH_IMPORT = re.compile(rb"^[ \t]*(?:from[ \t]+flash_attn\b|import[ \t]+flash_attn\b)", re.M)
BASE = "PreTrainedModel"  # transformers' base class: `_supports_sdpa = False`


@dataclass(frozen=True)
class _Declared:
    fa2: bool | None  # `_supports_flash_attn_2` as declared in the class body (None: not declared)
    sdpa: bool | None  # `_supports_sdpa` likewise (a property: True, it may answer yes)
    bases: tuple[str, ...]  # the last names of its bases
    flash: bool = False  # its file imports flash-attn


def fa2_only_classes(files: PythonFiles) -> tuple[str, ...]:
    """The names of the project's model classes that support FlashAttention-2 but not SDPA, sorted."""
    classes = _model_classes(files)
    resolved = _resolver(classes)
    return tuple(sorted(name for name in classes if resolved(name, "fa2") and resolved(name, "sdpa") is False))


def own_flash_classes(files: PythonFiles) -> tuple[str, ...]:
    """The names of the project's model classes supporting FlashAttention-2 whose every definition is in a
    file importing flash-attn itself (yarn's copied ``modeling_mistral_yarn.py``), sorted: their
    FlashAttention-2 code is the project's, which calls flash-attn on any transformers release (NPU902)."""
    classes = _model_classes(files)
    resolved = _resolver(classes)
    return tuple(sorted(name for name in classes if resolved(name, "fa2") and all(d.flash for d in classes[name])))


def _model_classes(files: PythonFiles) -> dict[str, list[_Declared]]:
    """Class name -> what each of its definitions declares, in the files naming ``_supports_flash_attn_2``."""
    classes: dict[str, list[_Declared]] = {}
    for path, text in files.items():
        if WORD not in text or (tree := files.tree(path)) is None:
            continue
        flash = FLASH_IMPORT.search(text) is not None
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, []).append(_declared(node, flash))
    return classes


def _resolver(classes: dict[str, list[_Declared]]):
    """``resolved(name, attribute)``: a class attribute's value through the project's ``classes``."""

    @functools.cache
    def resolved(name: str, attribute: str, seen: frozenset[str] = frozenset()) -> bool | None:
        """The attribute's value for the class ``name``: declared, else inherited through project
        classes; False at ``PreTrainedModel``; None where it cannot be told (a base outside the project)."""
        if name == BASE:
            return False
        if name not in classes or name in seen:
            return None
        values = set()
        for declared in classes[name]:
            value = getattr(declared, attribute)
            if value is None:
                inherited = [resolved(base, attribute, seen | {name}) for base in declared.bases]
                value = next((v for v in inherited if v is not None), None)
            values.add(value)
        return values.pop() if len(values) == 1 else None

    return resolved


def _declared(node: ast.ClassDef, flash: bool) -> _Declared:
    fa2 = sdpa = None
    for statement in node.body:
        if isinstance(statement, (ast.Assign, ast.AnnAssign)) and isinstance(statement.value, ast.Constant):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id == "_supports_flash_attn_2":
                    fa2 = bool(statement.value.value)
                elif isinstance(target, ast.Name) and target.id == "_supports_sdpa":
                    sdpa = bool(statement.value.value)
        elif isinstance(statement, ast.FunctionDef) and statement.name == "_supports_sdpa":
            sdpa = True  # a property (Mantis' MLlava: the language model's answer)
    bases = tuple(base.id if isinstance(base, ast.Name) else getattr(base, "attr", "") for base in node.bases)
    return _Declared(fa2, sdpa, bases, flash)
