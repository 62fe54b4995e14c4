"""Reading and editing import statements.

* reading: what an alias binds, which handlers catch a failed import and which fall back (on
  either tree: libcst's for rules, ``ast``'s for project facts);
* :func:`add_imports`: the one way imports are added. A rule does not edit imports itself: its
  report names the imports its fix needs (``Report.imports``), and the engine adds those of the
  fixes it applied, once, with libcst's ``AddImportsVisitor``;
* :func:`remove_import_names`: the fix that drops aliases a rewrite left unused;
* :func:`ensure_torch_npu_import`: ``import torch_npu`` right after the file's first torch import,
  exactly once (guarded by ``try``/``except ImportError`` in portable output, which must import on
  CUDA hosts too).
"""

from __future__ import annotations

import ast
import re
from typing import Iterable, NamedTuple, Sequence

import libcst as cst

from cuda2npu.core.names import dotted_name
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes

IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
# calls that end the process: a handler ending in one falls back to nothing, as one ending in `raise`
EXIT_CALLS = ("sys.exit", "exit", "quit")


def catches_import_error(handler: cst.ExceptHandler | ast.ExceptHandler) -> bool:
    """A bare ``except`` or one catching ImportError (or a base class of it)."""
    return catches(handler, IMPORT_ERRORS)


def catches(handler: cst.ExceptHandler | ast.ExceptHandler, names: frozenset[str]) -> bool:
    """A bare ``except`` or one catching an exception class named one of ``names``."""
    if handler.type is None:
        return True
    if isinstance(handler, ast.ExceptHandler):
        kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        return any(ast.unparse(kind).rsplit(".", 1)[-1] in names for kind in kinds)
    kinds = handler.type.elements if isinstance(handler.type, cst.Tuple) else [cst.Element(handler.type)]
    return any((dotted_name(k.value) or "").rsplit(".", 1)[-1] in names for k in kinds)


def in_import_try(index: TreeIndex, statement: cst.CSTNode | None) -> bool:
    """``statement`` lies in the body of a ``try`` whose handler catches a failed import (``index``: the
    file's :class:`TreeIndex`)."""
    return statement is not None and any(
        isinstance(owner, cst.Try) and role == "body" and any(map(catches_import_error, owner.handlers))
        for owner, role in index.enclosing(statement)
    )


def reraises(handler: cst.ExceptHandler | ast.ExceptHandler) -> bool:
    """The handler ends in ``raise`` (``raise``, ``raise ImportError(...) from e``), ``assert False``
    (MInference's ``xattention.py``) or ``sys.exit(...)``, or unpacks ``None`` (LongMamba's
    ``causal_conv1d_fn, causal_conv1d_update = None``: TypeError, round 35): no fallback. Read on
    ``ast``; a libcst handler is read through its code."""
    if isinstance(handler, cst.ExceptHandler):
        code = cst.Module([]).code_for_node(handler)
        handler = ast.parse(f"try:\n    pass\n{code}").body[0].handlers[0]
    if any(
        isinstance(statement, ast.Assign)
        and isinstance(statement.value, ast.Constant)
        and statement.value.value is None
        and any(isinstance(target, (ast.Tuple, ast.List)) for target in statement.targets)
        for statement in handler.body
    ):
        return True
    last = handler.body[-1]
    if isinstance(last, ast.Assert):
        return isinstance(last.test, ast.Constant) and not last.test.value
    if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
        return ast.unparse(last.value.func) in EXIT_CALLS
    return isinstance(last, ast.Raise)


def bound_name(alias: cst.ImportAlias, statement: cst.Import | cst.ImportFrom) -> str:
    """The name an import alias binds (``a`` for ``import a.b``, ``c`` for ``import a.b as c``)."""
    if alias.asname is not None:
        return dotted_name(alias.asname.name) or ""
    name = dotted_name(alias.name) or ""
    return name if isinstance(statement, cst.ImportFrom) else name.split(".")[0]


def bound_object(alias: cst.ImportAlias, statement: cst.Import | cst.ImportFrom) -> str | None:
    """The qualified name of what the alias binds (``a`` for ``import a.b``, ``a.b`` for ``import
    a.b as c``, ``m.x`` for ``from m import x``); None for a relative import."""
    name = dotted_name(alias.name) or ""
    if isinstance(statement, cst.Import):
        return name if alias.asname is not None else name.split(".")[0]
    if statement.relative or statement.module is None:
        return None
    return f"{dotted_name(statement.module)}.{name}"


def imported_module(alias: cst.ImportAlias, statement: cst.Import | cst.ImportFrom) -> str:
    """The qualified name an import alias imports (``apex.amp`` for ``from apex import amp`` and
    for ``import apex.amp``)."""
    name = dotted_name(alias.name) or ""
    if isinstance(statement, cst.Import):
        return name
    module = dotted_name(statement.module) if statement.module is not None else ""
    return f"{module}.{name}" if module else name


def import_root(statement: cst.Import | cst.ImportFrom) -> str | None:
    """``apex`` for ``from apex.optimizers import X``; None for relative imports and for an
    ``import`` of several top-level packages."""
    if isinstance(statement, cst.ImportFrom):
        if statement.relative or statement.module is None:
            return None
        return (dotted_name(statement.module) or "").split(".")[0]
    roots = {(dotted_name(a.name) or "").split(".")[0] for a in statement.names}
    return roots.pop() if len(roots) == 1 else None


class ImportNeed(NamedTuple):
    """An import a fix's code needs: ``import module [as alias]`` or ``from module import obj [as alias]``
    (``module`` ``"."`` with an ``obj``: ``from . import obj``, a generated file next to the migrated one)."""

    module: str
    obj: str | None = None
    alias: str | None = None

    def text(self) -> str:
        alias = f" as {self.alias}" if self.alias else ""
        return f"import {self.module}{alias}" if self.obj is None else f"from {self.module} import {self.obj}{alias}"


def binds_module(resolver, name: str) -> bool:
    """``name`` is bound at module level by ``import name`` (or ``import name.sub``)."""
    found = resolver.module_scope.lookup(name)
    return found is not None and name in found


def has_import(module: cst.Module, need: ImportNeed) -> bool:
    """A module-level import that binds what ``need`` binds, to the same object."""
    for line in module.body:
        if not isinstance(line, cst.SimpleStatementLine):
            continue
        for small in line.body:
            if need.obj is None and isinstance(small, cst.Import):
                if any(_binds(alias, need.module, need.alias) for alias in small.names):
                    return True
            elif (
                need.obj is not None
                and isinstance(small, cst.ImportFrom)
                and not isinstance(small.names, cst.ImportStar)
            ):
                if _from_module(small) == need.module and any(_binds(a, need.obj, need.alias) for a in small.names):
                    return True
    return False


def _binds(alias: cst.ImportAlias, name: str, asname: str | None) -> bool:
    """``alias`` binds ``name`` (as ``asname``): ``import torch``, also ``import torch.utils.data``, which binds
    ``torch`` too (a YOLOv7 training script, Torch-Pruning, round 57)."""
    bound = dotted_name(alias.asname.name) if alias.asname is not None else None
    written = dotted_name(alias.name) or ""
    return bound == asname and (written == name or (bound is None and written.startswith(f"{name}.")))


def _from_module(node: cst.ImportFrom) -> str:
    """``x.y`` for ``from x.y import ...``, ``.`` for ``from . import ...``."""
    return "." * len(node.relative) + ((dotted_name(node.module) or "") if node.module is not None else "")


def add_imports(module: cst.Module, needs: Iterable[tuple]) -> cst.Module:
    """``module`` with each missing import of ``needs`` (:class:`ImportNeed` fields) added after its
    leading imports (a ``from`` import joins an existing ``from`` import of the same module), by
    libcst's AddImportsVisitor."""
    missing = [need for need in dict.fromkeys(ImportNeed(*need) for need in needs) if not has_import(module, need)]
    for need in list(missing):
        joined = _join_guarded_import(module, need)
        if joined is not None:
            module = joined
            missing.remove(need)
    if not missing:
        return module
    from libcst.codemod import CodemodContext  # ~1 s to import: only when imports are added
    from libcst.codemod.visitors import AddImportsVisitor

    context = CodemodContext()
    for need in missing:
        name = need.module.lstrip(".")
        relative = len(need.module) - len(name)
        AddImportsVisitor.add_needed_import(context, name, need.obj, need.alias, relative=relative)
    return AddImportsVisitor(context).transform_module(module)


def _join_guarded_import(module: cst.Module, need: ImportNeed) -> cst.Module | None:
    """``module`` with ``need``'s name added to a ``from`` import of the same module that a module-level
    ``if`` or ``try`` guards (LLaMA-Factory's ``if is_ray_available(): from ray.train.torch import
    TorchTrainer``): the package is optional there, and an unguarded import of it would fail where it
    is not installed. None when there is no such import."""
    if need.obj is None or need.module.startswith("."):
        return None
    for line in module.body:
        if not isinstance(line, (cst.If, cst.Try)):
            continue
        for statement in line.body.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if (
                    isinstance(small, cst.ImportFrom)
                    and not small.relative
                    and not isinstance(small.names, cst.ImportStar)
                    and _from_module(small) == need.module
                ):
                    names = [*small.names]
                    if any(bound_name(alias, small) == (need.alias or need.obj) for alias in names):
                        return module  # joined already (a second run)
                    names[-1] = names[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                    alias = cst.ImportAlias(
                        name=cst.Name(need.obj), asname=cst.AsName(name=cst.Name(need.alias)) if need.alias else None
                    )
                    return module.deep_replace(small, small.with_changes(names=[*names, alias]))
    return None


def describe_imports(needs: Iterable[tuple]) -> str:
    """```import torch`, `from m import x``` for a message."""
    return ", ".join(f"`{ImportNeed(*need).text()}`" for need in needs)


def remove_import_names(node: cst.CSTNode, unused: Sequence[str]):
    """Fix: drop the unused aliases of an Import/ImportFrom, or the whole statement."""

    def fix(updated):
        kept = [a for a in updated.names if bound_name(a, updated) not in unused]
        if not kept:
            return cst.RemoveFromParent()
        # the last alias keeps the original last one's comma: none, or a parenthesized list's
        # trailing comma and line break (`(\n    a,\n)` stays so)
        kept[-1] = kept[-1].with_changes(comma=updated.names[-1].comma)
        return updated.with_changes(names=kept)

    return fix


def _imports_module(statement: cst.CSTNode, prefix: str) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, cst.Import):
            if any((dotted_name(a.name) or "").split(".")[0] == prefix for a in small.names):
                return True
        elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
            if (dotted_name(small.module) or "").split(".")[0] == prefix:
                return True
    return False


def is_import_line(statement: cst.CSTNode) -> bool:
    """A line holding only ``import``/``from ... import`` statements."""
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body
    )


def is_docstring(statement: cst.CSTNode) -> bool:
    """A line holding only a string literal (a module, class or function docstring when first)."""
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _blocks(body: Sequence[cst.CSTNode], functions: bool = True):
    """``body`` and, in source order, the statements of the blocks nested in it (``if``/``else``,
    ``try`` bodies, ``with``, classes, functions unless not ``functions``), never an ``except``
    handler: what runs when the imports there succeed."""
    yield body
    for statement in body:
        if functions or not isinstance(statement, cst.FunctionDef):
            for block in _nested_bodies(statement):
                yield from _blocks(block, functions)


def _nested_bodies(statement: cst.CSTNode) -> list[Sequence[cst.CSTNode]]:
    bodies = []
    if isinstance(statement, (cst.If, cst.Try, cst.With, cst.FunctionDef, cst.ClassDef)) and isinstance(
        statement.body, cst.IndentedBlock
    ):
        bodies.append(statement.body.body)
    orelse = getattr(statement, "orelse", None)
    if isinstance(statement, cst.If) and orelse is not None:
        bodies.append([orelse] if isinstance(orelse, cst.If) else orelse.body.body)
    return bodies


def has_plain_torch_npu_import(module: cst.Module, functions: bool = True) -> bool:
    """``import torch_npu`` (unaliased) anywhere but an ``except`` handler (and function bodies,
    unless ``functions``)."""
    for block in _blocks(module.body, functions):
        for statement in block:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.Import) and any(
                        dotted_name(a.name) == "torch_npu" and a.asname is None for a in small.names
                    ):
                        return True
    return False


TORCH_IMPORT = re.compile(r"^[ \t]*(import|from)[ \t]+torch\b", re.MULTILINE)


GUARDED_IMPORT = """\
try:
    import torch_npu  # registers the Ascend NPU device; not installed on CUDA hosts
except ImportError:
    pass
"""


def _torch_npu_import(guarded: bool) -> cst.BaseStatement:
    if guarded:
        return cst.parse_statement(GUARDED_IMPORT)
    return cst.SimpleStatementLine(body=[cst.Import(names=[cst.ImportAlias(cst.Name("torch_npu"))])])


def _after_torch_import(body: Sequence[cst.CSTNode], guarded: bool = False) -> list[cst.CSTNode] | None:
    """``body`` with ``import torch_npu`` after its first torch import line (``guarded``: after the
    import lines that follow it, so that the ``try`` does not split them); None without one."""
    for index, statement in enumerate(body):
        if _imports_module(statement, "torch"):
            while guarded and index + 1 < len(body) and is_import_line(body[index + 1]):
                index += 1
            return [*body[: index + 1], _torch_npu_import(guarded), *body[index + 1 :]]
    return None


def ensure_torch_npu_import(module: cst.Module, guarded: bool = False) -> cst.Module:
    """Insert ``import torch_npu`` after the first module-level torch import (unless one is imported
    outside functions already), else after the first
    torch import of a nested block in source order (an ``if is_torch_available():``, a ``try:``, a
    function importing torch lazily), so an optional or lazy import stays optional or lazy; in an
    ``except`` handler only when no other block imports torch (``except NameError: import torch``),
    never at module level of a file that imports torch only lazily; such a
    file also gets it in each function whose code names ``torch_npu`` without seeing an import of it.

    Files that never import torch need nothing (a device string they hold is used elsewhere), unless
    their code names ``torch_npu`` or reads ``torch.npu`` (torch from a star import): then it is
    imported with the file's other imports.
    ``guarded``: the import in a ``try`` whose ``except ImportError`` passes (portable output).
    """
    code = module.code  # generated anew on every access
    if not TORCH_IMPORT.search(code):
        needed = _names_torch_npu(module, code) or _reads_torch_npu_namespace(module, code)
        return add_imports(module, [ImportNeed("torch_npu")]) if needed else module
    if not has_plain_torch_npu_import(module, functions=False):  # one in a function serves that function only
        body = _after_torch_import(module.body, guarded)
        if body is not None:
            return module.with_changes(body=body)
    imported = has_plain_torch_npu_import(module)
    places = _TorchNpuPlaces()
    module.visit(places)
    blocks = places.blocks(first=not imported)
    return module.visit(_NestedInsertion(blocks, guarded)) if blocks else module


def _reads_torch_npu_namespace(module: cst.Module, code: str) -> bool:
    """The code reads ``torch.npu`` although the file imports no torch (``torch`` from a star
    import): the namespace exists once torch_npu is imported (torch < 2.5 does not load it itself)."""
    return "torch.npu" in code and any(
        isinstance(node.value, cst.Name) and node.value.value == "torch" and node.attr.value == "npu"
        for node in iter_nodes(module, cst.Attribute)
    )


def _names_torch_npu(module: cst.Module, code: str) -> bool:
    """The code reads the name ``torch_npu`` (a rewrite to ``torch_npu.optim.X`` in a file without a
    torch import; comments and markers that mention it do not count)."""
    return "torch_npu" in code and any(n.value == "torch_npu" for n in iter_nodes(module, cst.Name))


def _binds_torch_npu(statement: cst.CSTNode) -> bool:
    """``import torch_npu`` (or ``import torch_npu.x``, ``import y as torch_npu``) on this line."""
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(small, cst.Import) and any(bound_name(alias, small) == "torch_npu" for alias in small.names)
        for small in statement.body
    )


class _Scope:
    """A function (or the module) as ``_TorchNpuPlaces`` sees it."""

    def __init__(self) -> None:
        self.binds_torch_npu = False  # an ``import torch_npu`` among its own statements
        self.torch_block: cst.IndentedBlock | None = None  # its first block with a torch import


class _TorchNpuPlaces(cst.CSTVisitor):
    """Where a file that imports torch only in nested blocks gets ``import torch_npu``: after the
    first torch import of a nested block in source order (an ``except`` handler only as a last resort), and in
    each function whose code names ``torch_npu`` (``torch_npu.npu_fusion_attention``) without
    seeing an import of it (``def load(): import torch``), after that function's torch import."""

    def __init__(self) -> None:
        super().__init__()
        self.scopes = [_Scope()]
        self.first: tuple[cst.IndentedBlock, _Scope] | None = None  # the first block importing torch
        # the first ``except`` handler importing torch (``except NameError: import torch``): the
        # place only when no other block imports torch
        self.handler: tuple[cst.IndentedBlock, _Scope] | None = None
        self.uses: list[tuple[_Scope, ...]] = []  # the scopes around each use, outermost first
        self._attribute_names: set[cst.Name] = set()

    def blocks(self, first: bool) -> set[cst.IndentedBlock]:
        """The blocks that get ``import torch_npu``: with ``first``, the first torch block; per use,
        the innermost scope that binds the name or has a torch import (none: the use stays as it is)."""
        chosen = set()
        place = self.first or self.handler
        if first and place is not None:
            block, scope = place
            chosen.add(block)
            scope.binds_torch_npu = True
        for scopes in self.uses:
            for scope in reversed(scopes):
                if scope.binds_torch_npu:
                    break
                if scope.torch_block is not None:
                    chosen.add(scope.torch_block)
                    scope.binds_torch_npu = True
                    break
        return chosen

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.scopes.append(_Scope())

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.scopes.pop()

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> bool:
        body = node.body
        if self.handler is None and isinstance(body, cst.IndentedBlock):
            if any(_imports_module(statement, "torch") for statement in body.body):
                self.handler = (body, self.scopes[-1])
        return False  # the place of the import only as a last resort

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        scope = self.scopes[-1]
        scope.binds_torch_npu |= any(_binds_torch_npu(statement) for statement in node.body)
        if any(_imports_module(statement, "torch") for statement in node.body):
            if scope.torch_block is None:
                scope.torch_block = node
            if self.first is None:
                self.first = (node, scope)

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._attribute_names.add(node.attr)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "torch_npu" and node not in self._attribute_names and len(self.scopes) > 1:
            self.uses.append(tuple(self.scopes))


class _NestedInsertion(cst.CSTTransformer):
    """Adds ``import torch_npu`` after the first torch import of each of ``blocks``."""

    def __init__(self, blocks: set[cst.IndentedBlock], guarded: bool = False) -> None:
        super().__init__()
        self.blocks = blocks
        self.guarded = guarded

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock):
        if original_node not in self.blocks:
            return updated_node
        return updated_node.with_changes(body=_after_torch_import(updated_node.body, self.guarded))
