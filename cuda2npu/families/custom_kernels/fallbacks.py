"""How a file falls back where a CUDA-only import fails: availability probes guarding it, handlers
that re-raise, ``except`` arms that bind nothing (a hollow fallback) or bind None to a name called
unguarded, and imports read only for their classes."""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.analysis.cuda_only_modules import (
    MIGRATED,
)
from cuda2npu.analysis.never_run import in_never_run_code
from cuda2npu.core.feature_words import name_tokens
from cuda2npu.core.imports import bound_name
from cuda2npu.core.names import dotted_name
from cuda2npu.core.nodes import code_of
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes


def hollow_fallback(ctx, node: cst.Try) -> bool:
    """``try: import quant_cuda`` / ``except: print("CUDA extension not installed.")``, then
    ``quant_cuda.vecquant4matmul(...)`` elsewhere in the file (BELLE's GPTQ ``quant.py``): the
    handlers bind nothing (no flag, no stand-in), nor does the try set a flag beside the import, and
    a name the try imports is read outside it, not
    under an ``if`` whose test names the feature (``if self.use_xformers:`` before ``xops.…``)."""
    imported = imported_names(node)
    binds = (cst.Assign, cst.AnnAssign, cst.Import, cst.ImportFrom, cst.Return, cst.Raise)
    if not imported or any(True for handler in node.handlers for _ in iter_nodes(handler.body, binds)):
        return False
    if any(True for _ in iter_nodes(node.body, (cst.Assign, cst.AnnAssign))):
        return False  # `HAVE_TE = True` after the import: a flag the later uses test (Megatron's fp8_utils)
    index = TreeIndex.of(ctx)
    return any(
        name.value in imported
        and isinstance(parent := index.parents.get(name), cst.Attribute)
        and parent.value is name
        and not index.within(name, node)
        and not _feature_tested(index, name)
        and not in_never_run_code(ctx, name)  # GroundingDINO's `_C` calls, reached only under a kept CUDA test
        for name in iter_nodes(ctx.module, cst.Name)
    )


def none_called(ctx, node: cst.Try) -> str | None:
    """``try: from block_sparse_attn import block_streaming_attn_func`` / ``except ImportError:
    block_streaming_attn_func = None``, then ``block_streaming_attn_func(...)`` in a function no test
    of the name (or of the feature) guards (DuoAttention's default streaming attention, round 27): on
    an NPU host the fallback is None, and the call raises TypeError. The name called, else None."""
    imported = imported_names(node, skip=MIGRATED)  # flash-attn's calls are rewritten, not left to fail
    assigned = [
        statement
        for handler in node.handlers
        for line in handler.body.body
        for statement in (line.body if isinstance(line, cst.SimpleStatementLine) else [line])
        if not isinstance(statement, cst.Pass)
    ]
    if not imported or not assigned or not all(_sets_none(statement, imported) for statement in assigned):
        return None
    index = TreeIndex.of(ctx)
    for call in iter_nodes(ctx.module, cst.Call):
        func = call.func
        if isinstance(func, cst.Name) and func.value in imported and not index.within(func, node):
            if not _name_tested(index, func) and not _feature_tested(index, func):
                return func.value
    return None


def imported_names(node: cst.Try, skip: tuple[str, ...] = ()) -> set[str]:
    """The names the import statements of the ``try`` body bind (not from the top-level packages ``skip``)."""
    names = set()
    for line in node.body.body:
        for statement in line.body if isinstance(line, cst.SimpleStatementLine) else ():
            if not isinstance(statement, (cst.Import, cst.ImportFrom)) or isinstance(statement.names, cst.ImportStar):
                continue
            for alias in statement.names:
                module = (statement.module if isinstance(statement, cst.ImportFrom) else None) or alias.name
                if (dotted_name(module) or "").split(".")[0] not in skip:
                    names.add(bound_name(alias, statement))
    return names


def _sets_none(statement: cst.CSTNode, names: set[str]) -> bool:
    """``name = None`` (also ``a = b = None``) for names of ``names``."""
    return (
        isinstance(statement, cst.Assign)
        and isinstance(statement.value, cst.Name)
        and statement.value.value == "None"
        and all(isinstance(t.target, cst.Name) and t.target.value in names for t in statement.targets)
    )


def _name_tested(index: TreeIndex, name: cst.Name) -> bool:
    """An ``if``, ``while`` or conditional expression around ``name`` tests that name itself
    (``if fn is not None:``, ``fn(x) if fn else y``)."""
    node = index.parents.get(name)
    while node is not None:
        test = node.test if isinstance(node, (cst.If, cst.IfExp, cst.While)) else None
        if test is not None and any(n.value == name.value for n in iter_nodes(test, cst.Name)):
            return True
        node = index.parents.get(node)
    return False


def _feature_tested(index: TreeIndex, name: cst.Name) -> bool:
    """An ``if`` around ``name`` tests a word of it (``use_xformers`` around ``xformers.ops…``)."""
    words = set(name_tokens(name.value)) - {"cuda", "ops", "lib", "ext", "c"}
    return any(
        isinstance(owner, cst.If) and words & set(name_tokens(code_of(owner.test)))
        for owner in index.ancestors(index.statement_of(name))
    )


PROBES = frozenset({"hasattr", "getattr", "isinstance", "issubclass"})  # calls that only read what they are given


def class_read(index: TreeIndex, name: cst.Name, called: set[str]) -> bool:
    """``name`` starts an attribute chain ending in a class name that is neither called nor assigned
    to a name the scope calls (``called``): ``bnb.nn.Linear4bit``, not ``opt = bnb.optim.Adam8bit``
    followed by ``opt(params)``."""
    top: cst.CSTNode = name
    while isinstance(parent := index.parents.get(top), cst.Attribute) and parent.value is top:
        top = parent
    if isinstance(top, cst.Attribute) and top.attr.value.startswith("__"):
        return True  # `bnb.__version__`
    probe = index.call_of(top)
    if probe is not None and probe.func is not top and isinstance(probe.func, cst.Name) and probe.func.value in PROBES:
        return True  # `hasattr(bnb.nn, "Linear4bit")`, `isinstance(m, bnb.nn.Linear8bitLt)`
    if not isinstance(top, cst.Attribute) or not top.attr.value[:1].isupper():
        return False
    if isinstance(parent, cst.Call) and parent.func is top:
        return False
    targets = parent.targets if isinstance(parent, cst.Assign) and parent.value is top else ()
    return not any(isinstance(t.target, cst.Name) and t.target.value in called for t in targets)


AVAILABILITY = re.compile(r"(?i)\w+_available|has_\w+|have_\w+|\w+_installed|find_spec")


def guards_import(test: cst.BaseExpression) -> bool:
    """``if TYPE_CHECKING:`` or an availability probe (``if is_xformers_available():``, ``if HAVE_TE:``);
    ``torch.cuda.is_available()`` is a device check, true on NPU once migrated."""
    names = [node.value for node in iter_nodes(test, cst.Name)]
    return any(name == "TYPE_CHECKING" or (name != "is_available" and AVAILABILITY.fullmatch(name)) for name in names)


def means_missing(test: cst.BaseExpression) -> bool:
    """A probe's test true when the package is missing: ``not is_x_available()``, ``find_spec(x) is None``."""
    if isinstance(test, cst.UnaryOperation):
        return isinstance(test.operator, cst.Not)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        none = isinstance(target.comparator, cst.Name) and target.comparator.value == "None"
        return none and isinstance(target.operator, (cst.Is, cst.Equal))
    return False


def type_checking(test: cst.BaseExpression) -> bool:
    return any(node.value == "TYPE_CHECKING" for node in iter_nodes(test, cst.Name))
