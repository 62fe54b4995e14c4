"""Shared machinery of the attention and TransformerEngine rules (NPU4xx): the kernel rewrites of both families.

* :func:`may_be_none` classifies argument expressions (with ``core.literals.literal`` and
  ``core.nodes.is_pure``), so a rewrite knows when it may fold a value or must report instead;
* :func:`call_source` lays out (updated) nodes back to source for the string-built
  string-built replacements one keyword per line (nodes render with ``core.nodes.code_of``);
* :class:`ModuleFacts` is a pre-pass over the file: which names are used, which statements a
  call heads (for hoisting an argument out of it), which module-level imports and helpers exist;
* :func:`support_fix` adds the module-level helpers a rewrite needs, idempotently (the imports
  it needs go on its report and the engine adds them);
* :func:`plan_import_removals` finds imports of CUDA-only packages that nothing uses any more
  (``core.imports.remove_import_names`` removes them), :func:`plan_fallback_removals` whole
  ``try``/``except ImportError`` statements of such imports;
* :func:`import_port_note` (with ``cuda_only_modules.import_port``) says which flash-attn names are ported at their import
  alone (pure-PyTorch helpers to copy, einops functions it re-exports) and how (NPU403, NPU606), and
  :func:`marked_imports` which imports of a file NPU606 marked so (their uses need no marker);
* :func:`node_path` / :func:`follow` find a node again in the updated tree, so a statement-level
  fix (hoisting an argument) can rewrite the call inside it atomically;
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Callable, Iterable, Sequence

import libcst as cst

from cuda2npu.analysis import portable
from cuda2npu.analysis.cuda_only_modules import REEXPORTED
from cuda2npu.core.arguments import bind
from cuda2npu.core.imports import (
    TORCH_IMPORT,
    ImportNeed,
    binds_module,
    bound_name,
    catches_import_error,
    is_docstring,
    is_import_line,
)
from cuda2npu.core.literals import literal, string_value
from cuda2npu.core.names import dotted_name
from cuda2npu.core.nodes import atom, code_of, expression, is_pure
from cuda2npu.core.traversal import iter_nodes, walk

NO_LIMIT = 2147483647  # npu_fusion_attention's "no bound" for pre_tockens / next_tockens


def may_be_none(expr: cst.BaseExpression) -> bool:
    """Whether ``expr`` can evaluate to None (numbers and arithmetic cannot)."""
    if literal(expr) is None:
        return True
    if isinstance(expr, (cst.Integer, cst.Float, cst.BinaryOperation)):
        return False
    if isinstance(expr, cst.UnaryOperation) and not isinstance(expr.operator, cst.Not):
        return False
    return True


def one_minus(node: cst.BaseExpression) -> str:
    """``1 - p``: folded for a literal (``0.1`` → ``0.9``), ``1.0 - (expr)`` otherwise."""
    value = literal(node)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            folded = Decimal(1) - Decimal(code_of(node).replace("_", "")).normalize()
        except InvalidOperation:
            folded = Decimal(repr(1.0 - float(value)))
        text = format(folded.normalize(), "f")
        return text if "." in text else f"{text}.0"
    return f"1.0 - {code_of(atom(node))}"


def call_source(func: str, positional: Iterable[str], keywords: Iterable[tuple[str, str]], suffix: str = "") -> str:
    """A call laid out like hand-written code: positional arguments on one line, then one keyword per line."""
    lines = [", ".join(positional) + ","] if positional else []
    lines += [f"{name}={value}," for name, value in keywords]
    body = "".join(f"\n    {line}" for line in lines)
    return f"{func}({body}\n){suffix}"


def dispatch(npu: str, tensor: str, original: cst.BaseExpression) -> str:
    """Portable output (``--portable``): ``npu`` when ``tensor`` is on an Ascend NPU, the original
    call on any other device (chosen at run time; ``tensor`` must be cheap to evaluate twice)."""
    return portable.choose(npu, f'{tensor}.device.type == "npu"', code_of(original))


PORTABLE_NOTE = (
    "; portable: only on an Ascend NPU (chosen by the tensor's device at run time), the original call elsewhere"
)


# --------------------------------------------------------------------------------------------
# Pre-pass over the module


def _head_chain(expr: cst.BaseExpression) -> Iterable[cst.BaseExpression]:
    """The expressions evaluated first when ``expr`` is evaluated, outermost first.

    Evaluating ``f(a)(b)``, ``x.f(a)``, ``x[i]``, ``x + y`` starts with the callee's receiver,
    the subscripted value, the left operand; evaluating ``g(a, b)`` with a side-effect free
    ``g`` starts with ``a``. Hoisting an argument of a call found here into a statement of its
    own, just before, keeps the order of evaluation.
    """
    yield expr
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Attribute) and not is_pure(expr.func.value):
            yield from _head_chain(expr.func.value)
        elif is_pure(expr.func) and expr.args and expr.args[0].keyword is None and not expr.args[0].star:
            yield from _head_chain(expr.args[0].value)
    elif isinstance(expr, (cst.Attribute, cst.Subscript)):
        yield from _head_chain(expr.value)
    elif isinstance(expr, cst.BinaryOperation):
        yield from _head_chain(expr.left)
    elif isinstance(expr, cst.Comparison):
        yield from _head_chain(expr.left)


def _statement_value(line: cst.SimpleStatementLine) -> cst.BaseExpression | None:
    if len(line.body) != 1:
        return None
    small = line.body[0]
    if isinstance(small, (cst.Assign, cst.Return, cst.Expr)) and small.value is not None:
        return small.value
    if isinstance(small, cst.AnnAssign) and small.value is not None:
        return small.value
    if isinstance(small, cst.AugAssign) and is_pure(small.target):
        return small.value
    return None


class ModuleFacts(cst.CSTVisitor):
    """What the attention/TE rules need to know about the whole file before rewriting it."""

    def __init__(self, skip: frozenset = frozenset()) -> None:
        self.skip = skip  # statements about to be removed: their names are not uses
        self.used_names: set[str] = set()
        self.string_values: set[str] = set()
        self.heads: dict[cst.Call, cst.SimpleStatementLine] = {}
        self.blocks: dict[cst.SimpleStatementLine, cst.CSTNode] = {}  # line → module, function or `if` body
        self.block_sizes: dict[cst.CSTNode, int] = {}
        self.conditional: set[cst.CSTNode] = set()  # the `if`/`elif`/`else` bodies among the blocks
        self.guards: dict[cst.CSTNode, cst.Try] = {}  # import directly in a `try` body → that try
        self._block_stack: list[cst.CSTNode] = []
        self._not_uses: set[cst.Name] = set()  # the names that are attribute or keyword names
        self._naming = 0  # inside an `__all__` assignment or a call: a string there may name a variable
        self.used_in: dict[str, set[cst.CSTNode]] = {}  # name → the bodies of the functions reading it
        self._functions: list[cst.CSTNode] = []  # the bodies of the functions enclosing the current node
        self._function_bodies: set[cst.CSTNode] = set()

    @classmethod
    def of(cls, module: cst.Module, skip: frozenset = frozenset()) -> "ModuleFacts":
        facts = cls(skip)
        walk(module, facts)
        return facts

    # blocks whose direct import lines may be removed: the module, function and `if` bodies
    def visit_Module(self, node: cst.Module) -> None:
        self._block_stack.append(node)
        self.block_sizes[node] = len(node.body)

    def leave_Module(self, node: cst.Module) -> None:
        self._block_stack.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        body = node.body
        self._block_stack.append(body)
        self._functions.append(body)
        self._function_bodies.add(body)
        self.block_sizes[body] = len(body.body) if isinstance(body, cst.IndentedBlock) else 0

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._block_stack.pop()
        self._functions.pop()

    def _other_block(self, node: cst.CSTNode) -> None:
        self._block_stack.append(node)

    def _leave_other(self, node: cst.CSTNode) -> None:
        self._block_stack.pop()

    visit_ClassDef = visit_If = visit_For = visit_While = visit_Try = visit_With = _other_block
    leave_ClassDef = leave_If = leave_For = leave_While = leave_Try = leave_With = _leave_other
    visit_TryStar = visit_Match = _other_block
    leave_TryStar = leave_Match = _leave_other

    def visit_Else(self, node: cst.Else) -> None:
        if isinstance(self._block_stack[-1], cst.If):
            self._block_stack.append(node)

    def leave_Else(self, node: cst.Else) -> None:
        if self._block_stack[-1] is node:
            self._block_stack.pop()

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        owner = self._block_stack[-1] if self._block_stack else None
        if isinstance(owner, cst.Else) or (
            isinstance(owner, cst.If) and dotted_name(owner.test) not in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        ):  # `if x: import ...` (what type checkers alone import never runs)
            self._block_stack.append(node)
            self.block_sizes[node] = len(node.body)
            self.conditional.add(node)

    def leave_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if self._block_stack and self._block_stack[-1] is node and node in self.conditional:
            self._block_stack.pop()

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        if node in self.skip:
            return False
        if self._block_stack and isinstance(self._block_stack[-1], (cst.Module, cst.IndentedBlock)):
            self.blocks[node] = self._block_stack[-1]
        value = _statement_value(node)
        if value is not None:
            for expr in _head_chain(value):
                if isinstance(expr, cst.Call):
                    self.heads[expr] = node
        return True

    def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
        if isinstance(node.target, cst.Name):
            return False  # `x = ...` binds x; it is not a use (targets like `a[i]` use `a`)
        return True

    def visit_Import(self, node: cst.Import) -> bool:
        self._guarded(node)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        self._guarded(node)
        return False

    def _guarded(self, node: cst.CSTNode) -> None:
        """Record an import whose line is directly in the body of a ``try`` catching ImportError."""
        guard = self._block_stack[-1] if self._block_stack else None
        if (
            isinstance(guard, cst.Try)
            and isinstance(guard.body, cst.IndentedBlock)
            and any(isinstance(line, cst.SimpleStatementLine) and node in line.body for line in guard.body.body)
            and any(catches_import_error(h) for h in guard.handlers)
        ):
            self.guards[node] = guard

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._not_uses.add(node.attr)  # the attribute name is not a use of a variable

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._not_uses.add(node.keyword)  # nor is a keyword name

    def visit_Name(self, node: cst.Name) -> None:
        if node not in self._not_uses:
            self.used_names.add(node.value)
            self.used_in.setdefault(node.value, set()).update(self._functions)

    def visit_Assign(self, node: cst.Assign) -> None:
        self._naming += any(dotted_name(t.target) == "__all__" for t in node.targets)

    def leave_Assign(self, node: cst.Assign) -> None:
        self._naming -= any(dotted_name(t.target) == "__all__" for t in node.targets)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._naming += dotted_name(node.target) == "__all__"

    def leave_AugAssign(self, node: cst.AugAssign) -> None:
        self._naming -= dotted_name(node.target) == "__all__"

    def visit_Call(self, node: cst.Call) -> None:
        self._naming += 1  # `getattr(module, "flash_attn_func")`

    def leave_Call(self, node: cst.Call) -> None:
        self._naming -= 1

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        """A string that may name a variable: in ``__all__`` (``__all__ = ["flash_attn_func"]`` re-exports it)
        or in a call; not a label compared or assigned elsewhere (TRELLIS' ``elif ATTN == "flash_attn": import
        flash_attn``, round 58)."""
        value = string_value(node)
        if value is not None and value.isidentifier() and self._naming:
            self.string_values.add(value)

    def is_used(self, name: str, block: cst.CSTNode | None = None) -> bool:
        """Whether ``name`` is read in the file, or, for an import in a function's body ``block``, in
        that function (EasyContext's ``test_gqa`` imports ``flash_attn_func`` for itself while the
        module binds the same name through a ``try`` of its own)."""
        if block is not None and block in self._function_bodies:
            return block in self.used_in.get(name, ())
        return name in self.used_names or name in self.string_values


def fresh_name(resolver, base: str, taken: set[str] = frozenset()) -> str:
    """``base``, else ``base_npu``, ``base_npu2``...: a name bound nowhere in the file."""
    candidates = [base, f"{base}_npu"] + [f"{base}_npu{i}" for i in range(2, 100)]
    for candidate in candidates:
        if not resolver.is_bound(candidate) and candidate not in taken:
            return candidate
    raise ValueError(f"no free name for {base}")


# --------------------------------------------------------------------------------------------
# flash-attn names ported at their import alone


# pure-PyTorch helpers of the flash-attn package (a module or a function) -> what they are: their uses
# stay as written once the project has its own copy
def import_port_note(names: dict[str, str]) -> str:
    """How to port ``names`` (as written -> what :func:`import_port` says they are) at their import."""
    by_kind: dict[str, list[str]] = {}
    for name, kind in names.items():
        by_kind.setdefault(kind, []).append(f"`{name}`")
    parts = [
        f"import {_listed(shown)} from einops (flash-attn only re-exports {'it' if len(shown) == 1 else 'them'})"
        if kind == REEXPORTED
        else f"copy {_listed(shown)} into the project ({kind})"
        for kind, shown in by_kind.items()
    ]
    return "; ".join(parts)


def marked_imports(ctx) -> set[cst.CSTNode]:
    """The imports of flash-attn helpers whose NPU606 marker says how to port them (filled as the
    traversal reaches them): their uses need no marker of their own (NPU403)."""
    return ctx.file_state(_no_imports)


def _no_imports(ctx) -> set[cst.CSTNode]:
    return set()


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


# --------------------------------------------------------------------------------------------
# Module-level support: imports and helper functions

CAUSAL_MASK_HELPER = "_npu_causal_mask"
CAUSAL_MASK_SOURCE = '''
@functools.lru_cache(maxsize=None)
def _npu_causal_mask(device):
    """The compressed causal mask of torch_npu.npu_fusion_attention (True = masked), one per device."""
    return torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=device), diagonal=1)
'''
ROTARY_HELPER = "_npu_apply_rotary_emb"
ROTARY_SOURCE = '''
def _npu_apply_rotary_emb(x, cos, sin, interleaved=False):
    """flash-attn's apply_rotary_emb on torch_npu.npu_rotary_mul: x [b, s, h, d], cos/sin [>= s, rotary_dim / 2].

    npu_rotary_mul takes cos/sin at the rotated width, laid out for its mode; channels after
    rotary_dim pass through unchanged.
    """
    rotary_dim = cos.shape[-1] * 2
    cos, sin = cos[: x.shape[1]], sin[: x.shape[1]]
    if interleaved:
        cos, sin = cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)
    else:
        cos, sin = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
    rotated = torch_npu.npu_rotary_mul(
        x[..., :rotary_dim], cos[None, :, None].to(x.dtype), sin[None, :, None].to(x.dtype),
        rotary_mode="interleave" if interleaved else "half",
    )
    return torch.cat([rotated, x[..., rotary_dim:]], dim=-1)
'''
HELPER_IMPORTS = {CAUSAL_MASK_HELPER: ("functools", "torch"), ROTARY_HELPER: ("torch",)}
HELPER_SOURCES = {CAUSAL_MASK_HELPER: CAUSAL_MASK_SOURCE, ROTARY_HELPER: ROTARY_SOURCE}
HELPER_DESCRIPTIONS = {
    CAUSAL_MASK_HELPER: "(device) (the compressed causal mask, built once per device)",
    ROTARY_HELPER: "(x, cos, sin, interleaved) (flash-attn's rotary embedding on npu_rotary_mul)",
}


def missing_imports(resolver, module: cst.Module, names: Iterable[str]) -> list[str]:
    """Which of ``names`` (``torch``, ``torch.utils.checkpoint``) the module does not import yet."""
    missing = []
    for name in dict.fromkeys(names):
        present = _imports_module(module.body, name) if "." in name else binds_module(resolver, name)
        if not present:
            missing.append(name)
    return missing


class _ImportFinder(cst.CSTVisitor):
    """The import statements of a statement, outside the functions and classes it defines."""

    def __init__(self) -> None:
        self.found: list[cst.CSTNode] = []

    def visit_Import(self, node: cst.Import) -> None:
        self.found.append(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.found.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False


def _contains_import(statement: cst.CSTNode) -> bool:
    finder = _ImportFinder()
    walk(statement, finder)
    return bool(finder.found)


def _imports_module(body: Sequence[cst.CSTNode], name: str) -> bool:
    """``import name`` at module level (for a dotted name: that import, or ``from name import ...``)."""
    for statement in body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Import) and any(
                    a.asname is None
                    and (
                        (dotted_name(a.name) or "") == name
                        or ("." not in name and (dotted_name(a.name) or "").split(".")[0] == name)
                    )
                    for a in small.names
                ):
                    return True
                if "." in name and isinstance(small, cst.ImportFrom) and not small.relative:
                    if dotted_name(small.module) == name:
                        return True
    return False


def _has_function(body: Sequence[cst.CSTNode], name: str) -> bool:
    return any(isinstance(s, cst.FunctionDef) and s.name.value == name for s in body)


def _with_blank_lines(statement: cst.CSTNode, count: int) -> cst.CSTNode:
    lines = list(statement.leading_lines)
    blank = 0
    while blank < len(lines) and lines[blank].comment is None:
        blank += 1
    if blank >= count:
        return statement
    return statement.with_changes(leading_lines=[cst.EmptyLine()] * (count - blank) + lines)


def add_helpers(module: cst.Module, helpers: Iterable[str]) -> cst.Module:
    """``module`` with each missing helper function, after the last import-like statement that
    precedes the first definition (the imports a helper needs are the report's, see support_fix)."""
    body = list(module.body)
    missing_helpers = [name for name in dict.fromkeys(helpers) if not _has_function(body, name)]
    if not missing_helpers:
        return module
    after = -1
    for index, statement in enumerate(body):
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            break
        if (
            is_import_line(statement)
            or (index == 0 and is_docstring(statement))
            or (isinstance(statement, (cst.Try, cst.If)) and _contains_import(statement))
        ):
            after = index
    helpers_nodes = []
    for name in missing_helpers:
        helper = cst.parse_statement(HELPER_SOURCES[name].lstrip("\n"))
        helpers_nodes.append(helper.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()]))
    position = after + 1
    if position < len(body):
        body[position] = _with_blank_lines(body[position], 2)
    body[position:position] = helpers_nodes
    return module.with_changes(body=body)


def support_fix(helpers: Iterable[str] = ()):
    """The Module fix adding ``helpers``; the imports go on the report (``imports=``), and the
    engine adds them."""
    helpers = tuple(helpers)
    return lambda module: add_helpers(module, helpers)


def import_needs(imports: Iterable[str]) -> list[ImportNeed]:
    """``import X`` for each name, as ``Report.imports``."""
    return [ImportNeed(name) for name in imports]


def describe_support(imports: Sequence[str], helpers: Sequence[str]) -> str:
    parts = [f"`import {name}`" for name in imports]
    parts += [f"the module-level helper `{name}`{HELPER_DESCRIPTIONS[name]}" for name in helpers]
    return "adds " + " and ".join(parts) + " for the rewritten calls"


# --------------------------------------------------------------------------------------------
# Removing imports of CUDA-only packages once nothing uses them


# a comment that declares an import unused on purpose (a re-export): ruff/flake8's F401, pylint's
REEXPORT = re.compile(r"#[^\n]*(?:unused-import|\bnoqa\b(?::[^\n]*\bF401\b|(?!:)))")


def _keep_none(node: cst.CSTNode, name: str) -> bool:
    return False


def plan_import_removals(
    facts: ModuleFacts, packages: tuple[str, ...], keep: Callable[[cst.CSTNode, str], bool] = _keep_none
) -> dict[cst.CSTNode, tuple[str, ...]]:
    """Imports of ``packages`` whose bound names are used nowhere: ``{Import node: unused names}``.

    Only lines directly in the module, a function or an ``if``/``else`` body are considered (an
    import inside ``try: ... except ImportError`` is a deliberate guard), only lines importing
    nothing but ``packages``, and never every statement of a module or function body. An ``if``
    body may be emptied (libcst writes ``pass``): ``if torch.cuda.is_available(): from flash_attn
    import ...`` would import flash-attn on an NPU host once its test is rewritten. An import its
    author marked as unused on purpose (``# noqa: F401``, ``# pylint: disable=unused-import``: a
    re-export for other modules) stays, and so does a name ``keep(import node, name)`` says other
    modules import (analysis/exports.py: an ``__init__.py``'s, one in ``__all__``, one another file
    of the project imports).
    """
    per_block: dict[cst.CSTNode, list[tuple[cst.SimpleStatementLine, cst.CSTNode, tuple[str, ...], bool]]] = {}
    for statement, block in facts.blocks.items():
        if len(statement.body) != 1:
            continue
        small = statement.body[0]
        if isinstance(small, cst.Import):
            names = [(a, dotted_name(a.name) or "") for a in small.names]
        elif isinstance(small, cst.ImportFrom) and not small.relative and not isinstance(small.names, cst.ImportStar):
            module = dotted_name(small.module) or ""
            names = [(a, module) for a in small.names]
        else:
            continue
        if not all(full.split(".")[0] in packages for _, full in names) or REEXPORT.search(code_of(statement)):
            continue
        bound = (bound_name(a, small) for a, _ in names)
        unused = tuple(b for b in bound if b and not facts.is_used(b, block) and not keep(small, b))
        if unused:
            per_block.setdefault(block, []).append((statement, small, unused, len(unused) == len(names)))
    removals: dict[cst.CSTNode, tuple[str, ...]] = {}
    for block, entries in per_block.items():
        emptied = sum(1 for *_, whole in entries if whole)
        if emptied >= facts.block_sizes.get(block, 0) and block not in facts.conditional:
            continue
        for _, small, unused, _ in entries:
            removals[small] = unused
    return removals


def plan_guard_removals(
    module: cst.Module,
    facts: ModuleFacts,
    packages: tuple[str, ...],
    migrated: bool,
    keep: Callable[[cst.CSTNode, str], bool] = _keep_none,
) -> dict[cst.CSTNode, tuple[str, ...]]:
    """Imports of ``packages`` in a ``try: ... except ImportError`` guard whose names nothing uses any
    more, once the file's calls of them were rewritten (``migrated``): ``{Import node: names}``.

    Such an import only decides whether the code after it runs (``HAS_FLASH_ATTN = True``), and on an
    NPU host it always fails, so the rewritten code would never run. It is removed only when no other
    import of ``packages`` stays in the file (else the guard still protects what remains) and the try
    body keeps a statement.
    """
    if not migrated:
        return {}
    found: list[tuple[cst.Try, cst.CSTNode, tuple[str, ...], bool]] = []
    others = False
    for node in iter_nodes(module, (cst.Import, cst.ImportFrom)):
        names = package_names(node, packages)
        if names is None:
            others = others or _imports_package(node, packages)
            continue
        unused = tuple(b for b in names if not facts.is_used(b) and not keep(node, b))
        others = others or len(unused) < len(names)  # a name of it is still used: the import stays
        guard = facts.guards.get(node)
        if guard is not None and unused:
            found.append((guard, node, unused, len(unused) == len(names)))
    if others:
        return {}
    removals = {}
    for guard, node, unused, whole in found:
        emptied = sum(1 for g, _, _, w in found if g is guard and w)
        if emptied < len(guard.body.body):
            removals[node] = unused
    return removals


def plan_fallback_removals(
    facts: ModuleFacts,
    packages: tuple[str, ...],
    migrated: bool,
    keep: Callable[[cst.CSTNode, str], bool] = _keep_none,
) -> dict[cst.Try, tuple[str, ...]]:
    """``try:``/``except ImportError:`` statements that only import ``packages``, in the body and again
    in a handler (LLaVA's flash-attn 1.x name, else 2.x's under the 1.x name), once the file's calls
    were rewritten (``migrated``) and nothing uses the names: ``{Try: names}``. Both imports fail on an
    NPU host and bind nothing anyone reads, so the whole statement goes."""
    if not migrated:
        return {}
    removals: dict[cst.Try, tuple[str, ...]] = {}
    for guard in dict.fromkeys(facts.guards.values()):
        if guard.orelse is not None or guard.finalbody is not None:
            continue
        clauses = [_imported_only(guard.body, packages), *(_imported_only(h.body, packages) for h in guard.handlers)]
        if any(names is None for names in clauses) or not any(clauses[1:]):
            continue
        names = tuple(dict.fromkeys(name for clause in clauses for name in clause))
        if not any(facts.is_used(name) or keep(guard, name) for name in names):
            removals[guard] = names
    return removals


def _imported_only(block: cst.BaseSuite, packages: tuple[str, ...]) -> list[str] | None:
    """The names a block of nothing but imports of ``packages`` binds (None: it holds something else)."""
    if not isinstance(block, cst.IndentedBlock):
        return None
    names: list[str] = []
    for line in block.body:
        if not isinstance(line, cst.SimpleStatementLine):
            return None
        for small in line.body:
            bound = package_names(small, packages) if isinstance(small, (cst.Import, cst.ImportFrom)) else None
            if bound is None:
                return None
            names += bound
    return names


def package_names(node: cst.CSTNode, packages: tuple[str, ...]) -> list[str] | None:
    """The names an import of only ``packages`` binds (None: it imports something else too)."""
    if isinstance(node, cst.ImportFrom):
        if node.relative or isinstance(node.names, cst.ImportStar):
            return None
        if (dotted_name(node.module) or "").split(".")[0] not in packages:
            return None
        return [b for b in (bound_name(a, node) for a in node.names) if b]
    if not all((dotted_name(a.name) or "").split(".")[0] in packages for a in node.names):
        return None
    return [b for b in (bound_name(a, node) for a in node.names) if b]


def _imports_package(node: cst.CSTNode, packages: tuple[str, ...]) -> bool:
    if isinstance(node, cst.ImportFrom):
        return not node.relative and (dotted_name(node.module) or "").split(".")[0] in packages
    return any((dotted_name(a.name) or "").split(".")[0] in packages for a in node.names)


# --------------------------------------------------------------------------------------------
# Locating a node again in the updated tree


def node_path(root: cst.CSTNode, target: cst.CSTNode) -> list[tuple[str, int | None]] | None:
    """The (field, index) steps from ``root`` down to ``target`` (by identity), or None."""
    if root is target:
        return []
    for name in root.__dataclass_fields__:
        value = getattr(root, name)
        if isinstance(value, cst.CSTNode):
            sub = node_path(value, target)
            if sub is not None:
                return [(name, None), *sub]
        elif isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                if isinstance(item, cst.CSTNode):
                    sub = node_path(item, target)
                    if sub is not None:
                        return [(name, index), *sub]
    return None


def follow(root: cst.CSTNode, path: list[tuple[str, int | None]]) -> cst.CSTNode:
    node = root
    for name, index in path:
        node = getattr(node, name)
        if index is not None:
            node = node[index]
    return node


def hoisting_fix(path, params: Sequence[str], hoist: str, render: Callable[[cst.Call, str], str]):
    """A statement fix that binds the call's query to ``hoist`` on a line of its own (the rewrite
    reads it several times) and replaces the call (at ``path`` in the statement) by ``render(call,
    hoist)``. ``params``: the call's parameter names (the query is ``params[0]``'s argument)."""

    def fix(statement: cst.SimpleStatementLine):
        call = follow(statement, path)
        if not isinstance(call, cst.Call):
            raise ValueError("the call moved")
        query = bind(call, params)[params[0]].value
        line = cst.parse_statement(f"{hoist} = {code_of(query)}\n").with_changes(leading_lines=statement.leading_lines)
        rewritten = statement.deep_replace(call, expression(render(call, hoist)))
        return cst.FlattenSentinel([line, rewritten.with_changes(leading_lines=[])])

    return fix


def report_mask_helper_support(rule, code: str, module: cst.Module, uses_mask_helper: bool) -> None:
    """From ``leave_Module`` of a rule that rewrote calls: the fix adding the imports its rewrites
    need (torch, and functools for the cached causal-mask helper) and the helper itself."""
    imports = missing_imports(rule.resolver, module, HELPER_IMPORTS[CAUSAL_MASK_HELPER] if uses_mask_helper else ())
    if not TORCH_IMPORT.search(module.code) and "torch" not in imports:
        imports.append("torch")  # the engine adds `import torch_npu` next to a torch import
    helpers = [CAUSAL_MASK_HELPER] if uses_mask_helper and not rule.resolver.is_bound(CAUSAL_MASK_HELPER) else []
    if imports or helpers:
        rule.report(
            code,
            module,
            describe_support(imports, helpers),
            support_fix(helpers),
            needs_torch_npu=False,
            imports=import_needs(imports),
        )
