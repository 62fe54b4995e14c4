"""Tests asking whether flash-attn is installed (NPU408, NPU901): ``is_flash_attn_2_available()``,
``importlib.util.find_spec("flash_attn")``, lightning's ``RequirementCache("flash-attn>=2.0")`` and
module-level flags assigned from them. flash-attn cannot be installed on an NPU host, so such a
test is False there and the branch it guards never runs, even once its calls are rewritten.

The same holds for transformers 4.34–4.35's config flag ``_flash_attn_2_enabled``: only
``from_pretrained(..., use_flash_attention_2=True)`` sets it, after checking that flash-attn is
installed, and later releases never set it (docs/reference/kernel_libraries.md, its
``_flash_attn_2_enabled`` section). A class the file selects only under that flag
(:func:`flag_selected_classes`) never runs on an NPU host, unless the project sets the flag itself
(smollm's ``VMistralConfig.__init__(..., _flash_attn_2_enabled=True)``: :func:`flash2_flag_setters`);
nor does a statement of a ``try`` body that imports flash-attn before it, with a handler for the
ImportError (:func:`in_flash_import_try`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import libcst as cst

from cuda2npu.core.feature_words import implies
from cuda2npu.core.imports import catches_import_error
from cuda2npu.core.literals import literal, string_value
from cuda2npu.core.names import dotted_name, target_names
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes

PACKAGE = re.compile(r"^flash[-_]attn\b", re.IGNORECASE)  # "flash_attn", "flash-attn>=2.0.0.post1"
PROBE_FUNCTION = re.compile(r"is_flash_attn\w*_available")
FLASH2_FLAG = "_flash_attn_2_enabled"  # transformers 4.34–4.35: set on the config by use_flash_attention_2=True
# the flag set True by the project's own code: a parameter default or keyword (`_flash_attn_2_enabled=True`), an
# assignment (`config._flash_attn_2_enabled = True`), a dict entry or `setattr(config, "_flash_attn_2_enabled", True)`
FLASH2_FLAG_SET = re.compile(rb"^[^#\n]*\b_flash_attn_2_enabled\b['\"]?[ \t]*[=:,][ \t]*True\b", re.M)
# a flash-attn function replaced by the project's own (veScale's DTensor wrapper): `flash_attn.flash_attn_func = wrap`,
# `setattr(flash_attn, "flash_attn_func", wrap)`
FLASH_PATCH = re.compile(
    rb"^[ \t]*(flash_attn(?:\.\w+)+)[ \t]*=(?!=)|\bsetattr\([ \t]*(flash_attn(?:\.\w+)*)[ \t]*,[ \t]*['\"](\w+)['\"]",
    re.M,
)


def file_probe_flags(ctx) -> frozenset[str]:
    """Module-level names assigned from a probe (``FlashAttention2Available = RequirementCache(...)``)
    in the file of ``ctx`` (computed once per file)."""
    return ctx.file_state(_probe_flags)


def _probe_flags(ctx) -> frozenset[str]:
    flags: set[str] = set()
    for statement in ctx.module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None and find_probe(small.value):
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                flags.update(name for target in targets for name in target_names(target))
    return frozenset(flags)


def find_probe(test: cst.BaseExpression, flags: frozenset[str] = frozenset()) -> cst.CSTNode | None:
    """The probe call in ``test``, or the name of one of ``flags`` it reads (None: neither)."""
    for node in iter_nodes(test, (cst.Call, cst.Name)):
        if node.value in flags if isinstance(node, cst.Name) else _is_probe_call(node):
            return node
    return None


def requires_probe(test: cst.BaseExpression, flags: frozenset[str] = frozenset(), truth: bool = True) -> bool:
    """Whether ``test`` being ``truth`` means flash-attn is installed (through ``not``/``and``/``or``):
    ``is_flash_attn_2_available()``, ``find_spec("flash_attn") is not None``, a flag of :func:`file_probe_flags`,
    an ``and`` with one of them; not ``not is_flash_attn_2_available()``. A branch such a test takes
    never runs on an NPU host, where flash-attn cannot be installed."""
    return implies(test, truth, lambda leaf: _probe_leaf(leaf, flags))


def in_probed_branch(ctx, statement: cst.CSTNode | None, flags: frozenset[str]) -> bool:
    """``statement`` runs in the branch of an ``if`` taken only where flash-attn is installed
    (``if is_flash_attn_2_available():``, the ``else`` of ``if not ...:``): never on an NPU host."""
    return statement is not None and any(
        isinstance(owner, cst.If) and role in ("body", "orelse") and requires_probe(owner.test, flags, role == "body")
        for owner, role in TreeIndex.of(ctx).enclosing(statement)
    )


def in_probed_choice(ctx, node: cst.CSTNode, flags: frozenset[str]) -> bool:
    """``node`` is the branch of a conditional expression taken only where flash-attn is installed
    (Mantis' ``"flash_attention_2" if is_flash_attn_2_available() else None``, round 38)."""
    index = TreeIndex.of(ctx)
    child, parent = node, index.parents.get(node)
    while parent is not None and parent not in index.placement:
        if isinstance(parent, cst.IfExp) and child in (parent.body, parent.orelse):
            if requires_probe(parent.test, flags, child is parent.body):
                return True
        child, parent = parent, index.parents.get(parent)
    return False


def in_flash_import_try(ctx, statement: cst.CSTNode | None, imports_flash) -> bool:
    """``statement`` is in a ``try`` body that imports flash-attn (``imports_flash(import_node)``) and
    whose handler catches ImportError (``try: import flash_attn; impl = "flash_attention_2"``
    ``except ImportError: impl = "eager"``): on an NPU host the import fails and the handler runs."""
    if statement is None:
        return False
    return any(
        isinstance(owner, cst.Try)
        and role == "body"
        and any(map(catches_import_error, owner.handlers))
        and any(imports_flash(node) for node in iter_nodes(owner.body, (cst.Import, cst.ImportFrom)))
        for owner, role in TreeIndex.of(ctx).enclosing(statement)
    )


def _probe_leaf(test: cst.BaseExpression, flags: frozenset[str]) -> bool | None:
    """True: ``test`` is a probe; False: it is a probe's negation (``find_spec(...) is None``); None: neither."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if isinstance(target.comparator, cst.Name) and target.comparator.value == "None":
            if isinstance(test.left, cst.Call) and _is_probe_call(test.left):
                return isinstance(target.operator, (cst.IsNot, cst.NotEqual))
        return None
    if isinstance(test, cst.Name):
        return True if test.value in flags else None
    return True if isinstance(test, cst.Call) and _is_probe_call(test) else None


def _is_probe_call(call: cst.Call) -> bool:
    name = dotted_name(call.func) or ""
    if PROBE_FUNCTION.fullmatch(name.rsplit(".", 1)[-1]):
        return True
    return any(PACKAGE.match(string_value(arg.value) or "") for arg in call.args)


def flash2_flag_setters(texts: Mapping[Path, bytes], root: Path | None) -> tuple[str, ...]:
    """``"m4/configuration_vmistral.py: _flash_attn_2_enabled=True"`` for each line of the project's
    Python files that sets ``_flash_attn_2_enabled`` True (:data:`FLASH2_FLAG_SET`): a class selected
    under that flag may then run on an NPU host (NPU408)."""
    found = set()
    for path, text in texts.items():
        if FLASH2_FLAG.encode() in text:
            shown = path.relative_to(root).as_posix() if root is not None and path.is_relative_to(root) else path.name
            found.update(f"{shown}: {match.group().decode().strip()}" for match in FLASH2_FLAG_SET.finditer(text))
    return tuple(sorted(found))


def flash_attn_patches(texts: Mapping[Path, bytes], root: Path | None) -> tuple[str, ...]:
    """``"vescale/__init__.py: flash_attn.flash_attn_func"`` for each assignment in the project's Python
    files replacing a flash-attn function with the project's own (:data:`FLASH_PATCH`): the calls of
    that name run the project's wrapper, not flash-attn's kernel (NPU401/NPU402 leave them, review)."""
    found = set()
    for path, text in texts.items():
        if b"flash_attn" in text:
            shown = path.relative_to(root).as_posix() if root is not None and path.is_relative_to(root) else path.name
            found.update(f"{shown}: {name}" for name in patched_functions(text))
    return tuple(sorted(found))


def patched_functions(text: bytes) -> list[str]:
    """The flash-attn functions ``text`` replaces (``flash_attn.flash_attn_func``), in order."""
    found = []
    for match in FLASH_PATCH.finditer(text):
        name = match.group(1) or (match.group(2) + b"." + match.group(3))
        found.append(name.decode())
    return list(dict.fromkeys(found))


def patched_flash_functions(ctx) -> dict[str, str]:
    """The flash-attn functions the project (:func:`flash_attn_patches`) or this file replaces with its own
    → where (a project file, or "this file")."""
    found = {}
    for entry in ctx.options.project.flash_attn_patches:
        where, _, name = entry.rpartition(": ")
        found.setdefault(name, where)
    text = ctx.source
    found.update(dict.fromkeys(patched_functions(text), "this file"))
    return found


def project_sets_flag(options) -> bool:
    """Whether a file of the project sets ``_flash_attn_2_enabled`` True (:func:`flash2_flag_setters`)."""
    return bool(options.project.flash2_flag_setters)


def flag_selected_classes(ctx) -> dict[cst.ClassDef, list[cst.CSTNode]]:
    """Module-level classes that every reference outside their own body picks in a branch taken only
    when ``_flash_attn_2_enabled`` is set (``A(config) if not getattr(config, "_flash_attn_2_enabled",
    False) else B(config)``): class → those ``if`` statements / conditional expressions. Empty when the
    file or the project sets the flag itself (:func:`flash2_flag_setters`); a class no code of the file
    references is not one."""
    if FLASH2_FLAG not in ctx.code or _sets_flag(ctx.module) or project_sets_flag(ctx.options):
        return {}
    if FLASH2_FLAG_SET.search(ctx.source):
        return {}  # `Config(_flash_attn_2_enabled=True)`, a parameter default
    classes: dict[str, cst.ClassDef | None] = {}
    for statement in ctx.module.body:
        if isinstance(statement, cst.ClassDef):  # a name defined twice is no one class
            classes[statement.name.value] = None if statement.name.value in classes else statement
    parents = TreeIndex.of(ctx).parents
    sites: dict[cst.ClassDef, list[cst.CSTNode]] = {}
    unselected: set[cst.ClassDef] = set()
    for name in iter_nodes(ctx.module, cst.Name):
        cls = classes.get(name.value)
        parent = parents.get(name)
        if cls is None or getattr(parent, "attr", None) is name or getattr(parent, "keyword", None) is name:
            continue  # an attribute or keyword of that name is no reference
        chain = [name]
        while chain[-1] in parents and chain[-1] is not cls:
            chain.append(parents[chain[-1]])
        if chain[-1] is cls:
            continue  # the class's own code (its name, `super(Cls, self)`)
        branch = next(
            (
                owner
                for child, owner in zip(chain, chain[1:])
                if isinstance(owner, (cst.If, cst.IfExp))
                and child is not owner.test
                and _implies_flag(owner.test, child is owner.body)
            ),
            None,
        )
        if branch is None:
            unselected.add(cls)
        else:
            sites.setdefault(cls, []).append(branch)
    return {cls: list(dict.fromkeys(found)) for cls, found in sites.items() if cls not in unselected}


def _implies_flag(test: cst.BaseExpression, truth: bool) -> bool:
    """Whether ``test`` being ``truth`` means the flag is set (through ``not``/``and``/``or``)."""
    return implies(test, truth, lambda leaf: True if _reads_flag(leaf) else None)


def _reads_flag(test: cst.BaseExpression) -> bool:
    """``config._flash_attn_2_enabled`` or ``getattr(config, "_flash_attn_2_enabled"[, False])``."""
    if isinstance(test, cst.Attribute):
        return test.attr.value == FLASH2_FLAG
    if not (isinstance(test, cst.Call) and dotted_name(test.func) == "getattr" and len(test.args) in (2, 3)):
        return False
    default = literal(test.args[2].value) if len(test.args) == 3 else None
    return string_value(test.args[1].value) == FLASH2_FLAG and default in (None, False)


def _sets_flag(module: cst.Module) -> bool:
    """The file sets the flag itself (``config._flash_attn_2_enabled = True``, ``setattr(config, "...", x)``)."""
    for node in iter_nodes(module, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.Call)):
        if isinstance(node, cst.Call):
            if dotted_name(node.func) == "setattr" and len(node.args) > 1:
                if string_value(node.args[1].value) == FLASH2_FLAG:
                    return True
        elif isinstance(node.target, cst.Attribute) and node.target.attr.value == FLASH2_FLAG:
            return True
    return False
