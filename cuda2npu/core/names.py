"""Scope-aware name resolution through imports, without libcst's full scope metadata.

libcst's ``QualifiedNameProvider`` + ``ScopeProvider`` cost about ten times a plain parse (see
docs/design.md §2). Rules only need to know which imported module or object a
name refers to, and whether a local binding shadows it, so a cheap pre-pass records, per scope,
the names bound by imports (with their qualified names) and the names bound any other way.
Resolution then follows Python's rules: function scopes see enclosing function and module scopes,
class bodies are invisible to nested functions, ``global`` declarations jump to the module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from cuda2npu.core.literals import string_value
from cuda2npu.core.traversal import walk

SCOPE_NODES = (
    cst.Module,
    cst.FunctionDef,
    cst.Lambda,
    cst.ClassDef,
    cst.ListComp,
    cst.SetComp,
    cst.DictComp,
    cst.GeneratorExp,
)


@dataclass
class Scope:
    kind: str
    parent: "Scope | None"
    imports: dict[str, set[str]] = field(default_factory=dict)
    others: set[str] = field(default_factory=set)
    globals: set[str] = field(default_factory=set)

    def bind_import(self, name: str, qualified: str) -> None:
        self.imports.setdefault(name, set()).add(qualified)

    def lookup(self, name: str) -> frozenset[str] | None:
        """Qualified names if bound here by an import, empty if bound otherwise, None if unbound."""
        if name in self.imports:
            return frozenset(self.imports[name])
        if name in self.others:
            return frozenset()
        return None


def dotted_name(node: cst.BaseExpression | None) -> str | None:
    """``a.b.c`` for Name/Attribute chains, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None


def target_names(target: cst.BaseExpression) -> list[str]:
    """Names bound by an assignment target (``a``, ``a, (b, *c)``)."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in target_names(el.value)]
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    return []


class _BindingCollector(cst.CSTVisitor):
    """Pre-pass: build a :class:`Scope` for every scope-creating node."""

    def __init__(self) -> None:
        self.scopes: dict[cst.CSTNode, Scope] = {}
        self.stack: list[Scope] = []
        self.star_imports = False  # `from m import *` (module level: the only place Python allows it)

    def _push(self, node: cst.CSTNode, kind: str) -> None:
        scope = Scope(kind, self.stack[-1] if self.stack else None)
        self.scopes[node] = scope
        self.stack.append(scope)

    def _pop(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()

    def _bind(self, names: list[str]) -> None:
        self.stack[-1].others.update(names)

    def visit_Module(self, node: cst.Module) -> None:
        self._push(node, "module")

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._bind([node.name.value])
        self._push(node, "function")

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._bind([node.name.value])
        self._push(node, "class")

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._push(node, "function")

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._push(node, "comprehension")

    visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_ListComp

    leave_Module = leave_FunctionDef = leave_ClassDef = leave_Lambda = _pop
    leave_ListComp = leave_SetComp = leave_DictComp = leave_GeneratorExp = _pop

    def visit_Param(self, node: cst.Param) -> None:
        self._bind([node.name.value])

    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None:
                bound = dotted_name(alias.asname.name)
                if bound:
                    self.stack[-1].bind_import(bound, full)
            else:
                first = full.split(".")[0]
                self.stack[-1].bind_import(first, first)
        return False  # aliases are not `as` bindings of with/except

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if isinstance(node.names, cst.ImportStar):
            self.star_imports = True
            return False
        module = dotted_name(node.module) if node.module is not None else None
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            bound = dotted_name(alias.asname.name) if alias.asname is not None else name
            if not bound:
                continue
            if module is not None and not node.relative:
                self.stack[-1].bind_import(bound, f"{module}.{name}")
            else:
                self._bind([bound])
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind(target_names(target.target))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(target_names(node.target))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind(target_names(node.target))

    def visit_For(self, node: cst.For) -> None:
        self._bind(target_names(node.target))

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bind(target_names(node.target))

    def visit_AsName(self, node: cst.AsName) -> None:
        # `with ... as x` and `except E as x`; import aliases are handled above.
        if isinstance(node.name, (cst.Name, cst.Tuple, cst.List)):
            self._bind(target_names(node.name))

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind(target_names(node.target))

    def visit_Global(self, node: cst.Global) -> None:
        self.stack[-1].globals.update(item.name.value for item in node.names)


class NameResolver(cst.BatchableCSTVisitor):
    """Tracks the current scope during the rules' traversal and resolves names through imports."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__()
        collector = _BindingCollector()
        walk(module, collector)
        self._scopes = collector.scopes
        self._stack: list[Scope] = []
        if collector.star_imports:
            _torch_from_star_import(self.module_scope)

    @property
    def scopes(self) -> dict[cst.CSTNode, Scope]:
        """The scope of every scope-creating node of the module (built once, by the pre-pass)."""
        return self._scopes

    @property
    def module_scope(self) -> Scope:
        return next(iter(self._scopes.values()))

    def _enter(self, node: cst.CSTNode) -> None:
        self._stack.append(self._scopes[node])

    def _leave(self, original_node: cst.CSTNode) -> None:
        self._stack.pop()

    def get_visitors(self) -> dict:
        visitors = {f"visit_{cls.__name__}": self._enter for cls in SCOPE_NODES}
        visitors.update({f"leave_{cls.__name__}": self._leave for cls in SCOPE_NODES})
        return visitors

    def lookup(self, name: str) -> frozenset[str]:
        """Qualified names an unqualified name refers to here (empty: local, builtin or unknown)."""
        innermost = True
        for scope in reversed(self._stack):
            if scope.kind == "class" and not innermost:
                continue
            innermost = False
            if name in scope.globals:
                return self.module_scope.lookup(name) or frozenset()
            found = scope.lookup(name)
            if found is not None:
                return found
        return frozenset()

    def is_bound(self, name: str) -> bool:
        """Whether ``name`` is bound in any scope of the file (used to avoid name clashes)."""
        return any(name in s.imports or name in s.others for s in self._scopes.values())

    def qualified_names(self, node: cst.BaseExpression) -> frozenset[str]:
        """``{'torch.cuda.synchronize'}`` for ``th.cuda.synchronize`` after ``import torch as th``."""
        if isinstance(node, cst.Name):
            return self.lookup(node.value)
        if isinstance(node, cst.Attribute):
            return frozenset(f"{q}.{node.attr.value}" for q in self.qualified_names(node.value))
        return frozenset()

    def qualified_name(self, node: cst.BaseExpression) -> str | None:
        """The single qualified name of ``node``, or None if unknown or ambiguous."""
        names = self.qualified_names(node)
        return next(iter(names)) if len(names) == 1 else None


def _torch_from_star_import(module_scope: Scope) -> None:
    """A file that never binds ``torch`` but star-imports a module gets ``torch`` from it
    (``from pkg.utils import *`` where utils.py does ``import torch``): whatever else the star
    brings, a ``torch.cuda.synchronize()`` there can only be torch's."""
    if module_scope.lookup("torch") is None:
        module_scope.bind_import("torch", "torch")


def module_qualified(module_scope, expr: cst.BaseExpression) -> str | None:
    """Qualified name of ``expr`` through module-level imports only (for pre-passes)."""
    dotted = dotted_name(expr)
    if dotted is None:
        return None
    head, _, rest = dotted.partition(".")
    found = module_scope.imports.get(head)
    if not found or len(found) != 1 or head in module_scope.others:
        return None
    base = next(iter(found))
    return f"{base}.{rest}" if rest else base


class NameUses(cst.CSTVisitor):
    """Name nodes that read one of ``names`` (imports, attributes' attrs, keywords, definitions
    and plain assignment targets are not reads).

    Walking a whole module, a name read in a function that binds the same name itself (not by an
    import, not ``global``) reads that local variable, not the module's name, and is left out;
    walking a subtree, every read counts. ``scopes``: the module's (``NameResolver.scopes``, which
    a rule has already); without them the walk builds them.
    """

    def __init__(self, names: set[str], scopes: dict[cst.CSTNode, Scope] | None = None) -> None:
        super().__init__()
        self.names = names
        self.uses: dict[str, list[cst.Name]] = {name: [] for name in names}
        self._skip: set[cst.Name] = set()
        self._scopes = scopes
        self._stack: list[Scope] = []  # empty until the walk enters the module

    def visit_Module(self, node: cst.Module) -> None:
        if self._scopes is None or node not in self._scopes:
            collector = _BindingCollector()
            walk(node, collector)
            self._scopes = collector.scopes
        self._stack = [self._scopes[node]]

    def _enter(self, node: cst.CSTNode) -> None:
        if self._stack and node in self._scopes:
            self._stack.append(self._scopes[node])

    def _leave(self, original_node: cst.CSTNode) -> None:
        if self._stack and original_node in self._scopes:
            self._stack.pop()

    visit_Lambda = visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _enter
    leave_FunctionDef = leave_ClassDef = leave_Lambda = _leave
    leave_ListComp = leave_SetComp = leave_DictComp = leave_GeneratorExp = _leave

    def _reads_outer_binding(self, name: str) -> bool:
        """False when the innermost scope binding ``name`` is a function's own variable."""
        innermost = True
        for scope in reversed(self._stack):
            if scope.kind == "class" and not innermost:
                continue  # a class body's names are not visible in its methods
            innermost = False
            if name in scope.globals or name in scope.imports or scope.kind == "module":
                return True
            if name in scope.others:
                return False
        return True

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._skip.add(node.attr)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._skip.add(node.keyword)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._skip.add(node.name)
        self._enter(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._skip.add(node.name)
        self._enter(node)

    def visit_Param(self, node: cst.Param) -> None:
        self._skip.add(node.name)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if isinstance(node.target, cst.Name):
            self._skip.add(node.target)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names and node not in self._skip and self._reads_outer_binding(node.value):
            self.uses[node.value].append(node)


def string_comparisons(name: str, body: cst.CSTNode, parents) -> list[cst.Comparison] | None:
    """The comparisons of ``name`` with string literals when they are its every read in ``body``
    (``impl == "cuda"``, ``backend in ("nccl", "gloo")``): a label the code tests, not a value it
    passes on. None when some read is anything else, or there is none. ``parents``: the module's
    ``TreeIndex.parents``."""
    reads = NameUses({name})
    walk(body, reads)
    comparisons = [parents.get(use) for use in reads.uses[name]]
    if not comparisons or not all(_against_strings(c, use) for c, use in zip(comparisons, reads.uses[name])):
        return None
    return comparisons


def _against_strings(comparison: cst.CSTNode | None, operand: cst.Name) -> bool:
    """``comparison`` tests ``operand`` against string literals only (single ones or a list, tuple or set of them)."""
    if not isinstance(comparison, cst.Comparison):
        return False
    others = [
        side for side in (comparison.left, *(c.comparator for c in comparison.comparisons)) if side is not operand
    ]
    literals = [
        element.value if isinstance(side, (cst.List, cst.Tuple, cst.Set)) else side
        for side in others
        for element in (side.elements if isinstance(side, (cst.List, cst.Tuple, cst.Set)) else [side])
    ]
    return bool(others) and all(string_value(literal) is not None for literal in literals)


def is_torch_dtype(resolver: NameResolver, node: cst.BaseExpression | None, *names: str) -> bool:
    """``torch.float16`` / ``torch.half`` (by qualified name) for ``names=("float16", "half")``."""
    return node is not None and resolver.qualified_name(node) in {f"torch.{n}" for n in names}
