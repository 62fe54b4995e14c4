"""TransformerEngine FP8 recipe objects (NPU415): which go once the FP8 autocasts became BF16 autocast.

A recipe (``transformer_engine.common.recipe.DelayedScaling(...)``, ``Format.HYBRID``, a dict of
recipe options) only configures FP8 autocast. NPU411 drops the recipe argument of each autocast it
rewrites; on the next round the statement building the recipe is removed once nothing reads the
name it assigns, and then the recipe import (NPU416), so that the file imports on an NPU host.

Statements that may go (:func:`plan_recipes`), in any block they do not empty:

* ``name = <recipe>``, where ``<recipe>`` names a recipe and is otherwise side-effect free:
  ``DelayedScaling(fp8_format=fmt, amax_history_len=16)``, ``Format.HYBRID if hybrid else Format.E4M3``,
  ``DelayedScaling(...) if args.fp8 else None``, ``{"fp8_format": Format.HYBRID, "margin": 0}``;
* an ``if``/``elif``/``else`` with side-effect-free tests whose branches only assign such values or
  plain values (``fp8_recipe = None``) or hold such ``if`` statements;
* ``obj.attr = <recipe>`` (``self.fp8_recipe``): the attribute's reads are those of ``.attr`` on any
  object in the file and ``"attr"`` passed to a call (``getattr``); other files are not seen (review);
* a module-level ``def`` that only builds a recipe from its arguments (its calls are recipe values);
  only a ``_private`` one goes (review), a public one may be imported elsewhere (manual).

A read of the name other than in an autocast's recipe argument or in another such statement (the
recipe passed to a function, returned, formatted, compared) keeps the statement: it is reported with
that use (manual). A read belongs to the statement's variable by Python's scoping rules for functions
(local unless declared ``global``; closures see the enclosing function's).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import libcst as cst

from cuda2npu.core.imports import is_docstring
from cuda2npu.core.literals import string_value
from cuda2npu.core.names import dotted_name, target_names
from cuda2npu.core.nodes import code_of, is_pure, named_params
from cuda2npu.core.traversal import children, iter_nodes, walk

IMPURE, PURE, RECIPE_VALUE = 0, 1, 2


class Read(NamedTuple):
    node: cst.CSTNode  # the Name (or the string naming it, as in `__all__`)
    statement: cst.CSTNode | None  # the innermost statement around it
    function: cst.FunctionDef | None  # the innermost function around it (None: module level)


class RecipePlan(NamedTuple):
    removals: dict[cst.CSTNode, tuple[str, ...]]  # statement → the names it assigned
    kept: dict[cst.CSTNode, tuple[tuple[str, ...], str]]  # statement → (its names, why it stays): manual
    lines: frozenset  # every line of every recipe statement (removed or not)
    removed_lines: frozenset  # the lines that go (their names are no uses)
    review: dict[cst.CSTNode, str]  # removed statement → why a reviewer looks (other files may read it)


NO_RECIPES = RecipePlan({}, {}, frozenset(), frozenset(), {})  # a file that never spells "recipe"


def plan_recipes(
    module: cst.Module,
    is_recipe: Callable[[cst.BaseExpression], bool],
    autocast_recipe: Callable[[cst.Call], cst.BaseExpression | None],
    autocasts_kept: bool = False,
) -> RecipePlan:
    """The recipe statements of ``module`` that go and those that stay. ``is_recipe(expr)``: whether a
    name or attribute is a ``transformer_engine.common.recipe`` object; ``autocast_recipe(call)``: the
    recipe argument of a TE autocast call (None for other calls). ``autocasts_kept`` (portable output,
    where TE's autocasts stay for CUDA hosts): their reads count as gone at once, so "removals" are the
    statements only those autocasts read (built on CUDA hosts only, not removed)."""
    facts = _Collect(is_recipe, autocast_recipe)
    facts.find_recipe_functions(module)
    walk(module, facts)
    inside = {n for stmt in facts.candidates for n in _names(stmt)}
    removed: list[cst.CSTNode] = []
    while True:
        gone = {n for stmt in removed for n in _names(stmt)} | (facts.fp8_reads if autocasts_kept else set())
        new = []
        for stmt in facts.candidates:
            if stmt in removed or _public_function(stmt):
                continue
            own = {n for n in _names(stmt)}  # `fmt` read by the recipe the same `if` builds
            if any(r.node not in gone and r.node not in own for r in facts.reads_of(stmt)):
                continue
            block = facts.blocks.get(stmt)
            left = facts.block_sizes.get(block, 0) - sum(1 for s in removed + new if facts.blocks.get(s) is block)
            if left > 1:  # never empty a block
                new.append(stmt)
        if not new:
            break
        removed += new
    kept = {}
    for stmt, names in facts.candidates.items():
        if stmt in removed:
            continue
        reads = facts.reads_of(stmt)
        others = [r for r in reads if r.node not in inside and r.node not in facts.fp8_reads]
        if others:
            kept[stmt] = (names, f"it is also {describe_use(others[0].statement, others[0].node)}")
        elif _public_function(stmt) and not reads:
            kept[stmt] = (names, "this file does not call it; other files may import it")
        elif not reads:
            kept[stmt] = (names, "unused, but it is the only statement of its block")
    for stmt, names in facts.class_attributes.items():
        kept[stmt] = (names, "it is a class attribute, which code elsewhere (also in other files) may read")
    lines = frozenset(line for stmt in [*facts.candidates, *facts.class_attributes] for line in _lines(stmt))
    removed_lines = frozenset(line for stmt in removed for line in _lines(stmt))
    review = {s: why for s in removed if (why := _other_files(s, facts.candidates[s], facts.where[s]))}
    return RecipePlan({s: facts.candidates[s] for s in removed}, kept, lines, removed_lines, review)


def _other_files(stmt: cst.CSTNode, names: tuple[str, ...], function: cst.FunctionDef | None) -> str:
    """Why other files may read what ``stmt`` assigns ("" if they cannot: a function's variable)."""
    if isinstance(stmt, cst.FunctionDef):
        return "review that no other file imports it (its name says it is private)"
    if any(n.startswith(".") for n in names):
        return "review that no other file reads the attribute"
    if function is None and any(not n.startswith("_") for n in names):
        return "review that no other file imports it"
    return ""


def assigned(stmt: cst.CSTNode) -> list[str]:
    """What a recipe statement assigns, as written (``fp8_recipe``, ``self.fp8_recipe``)."""
    return list(dict.fromkeys(code_of(t.target) for t in iter_nodes(stmt, cst.AssignTarget)))


def describe_use(statement: cst.CSTNode | None, node: cst.CSTNode) -> str:
    """How ``statement`` uses ``node`` (a recipe or a name holding one), for a message: ``passed to
    `train(...)` ``, ``returned``, ``stored in `self.fp8_recipe` ``, ...."""
    if statement is None:
        return "used"
    for parent, child in reversed(list(_pairs(statement, node))):
        if isinstance(parent, cst.Call) and child is not parent.func:
            return f"passed to `{code_of(parent.func)}(...)`"
        if isinstance(parent, cst.Return):
            return "returned"
        if isinstance(parent, (cst.Yield, cst.Await)):
            return f"used in `{code_of(parent)}`"
        if isinstance(parent, cst.FormattedStringExpression):
            return "formatted into a string"
        if isinstance(parent, (cst.Assign, cst.AnnAssign, cst.AugAssign)) and child is parent.value:
            targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
            shared = any(isinstance(t, (cst.Attribute, cst.Subscript)) for t in targets)
            return f"stored in `{', '.join(code_of(t) for t in targets)}`" + (
                " (code elsewhere, also in other files, may read it there)" if shared else ""
            )
    header = code_of(statement.with_changes(leading_lines=())).strip().splitlines()
    return f"used in `{header[0] if header else ''}`"


def _public_function(stmt: cst.CSTNode) -> bool:
    """A function other files may import (only a ``_private`` one goes once this file no longer calls it)."""
    return isinstance(stmt, cst.FunctionDef) and not stmt.name.value.startswith("_")


def _pairs(root: cst.CSTNode, target: cst.CSTNode):
    """(parent, child) pairs from ``root`` down to ``target`` (nothing if it is not there)."""
    path: list[cst.CSTNode] = []

    def find(node: cst.CSTNode) -> bool:
        if node is target:
            return True
        for child in children(node):
            if find(child):
                path.append(child)
                return True
        return False

    if find(root):
        chain = [root, *reversed(path)]
        yield from zip(chain, chain[1:])


def _bound_names(target: cst.BaseExpression) -> list[cst.Name]:
    """The Name nodes an assignment target binds (as :func:`cuda2npu.core.names.target_names` names them)."""
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _bound_names(e.value)]
    if isinstance(target, cst.StarredElement):
        return _bound_names(target.value)
    return []


def _lines(stmt: cst.CSTNode) -> list[cst.SimpleStatementLine]:
    return [stmt] if isinstance(stmt, cst.SimpleStatementLine) else list(iter_nodes(stmt, cst.SimpleStatementLine))


def _names(stmt: cst.CSTNode) -> list[cst.CSTNode]:
    return list(iter_nodes(stmt, (cst.Name, cst.Attribute, cst.SimpleString)))


class _Collect(cst.CSTVisitor):
    """Recipe statements, the block of every statement, every read of a name and the names each
    function binds (to tell which variable a read reads)."""

    def __init__(self, is_recipe, autocast_recipe) -> None:
        self.is_recipe = is_recipe
        self.autocast_recipe = autocast_recipe
        self.candidates: dict[cst.CSTNode, tuple[str, ...]] = {}
        self.blocks: dict[cst.CSTNode, cst.CSTNode] = {}  # statement → the block holding it
        self.block_sizes: dict[cst.CSTNode, int] = {}
        self.reads: dict[str, list[Read]] = {}
        self.fp8_reads: set[cst.CSTNode] = set()  # the names inside autocasts' recipe arguments
        self._blocks: list[cst.CSTNode] = []
        self._statements: list[cst.CSTNode] = []
        self._in_chain: set[cst.If] = set()  # elif branches of a recipe `if`
        self._class_bodies: set[cst.CSTNode] = set()
        self.class_attributes: dict[cst.CSTNode, tuple[str, ...]] = {}  # read as `self.x`: always kept
        self._bindings: set[cst.CSTNode] = set()  # the Name nodes that are no reads (bound, attribute, keyword)
        self.recipe_functions: set[str] = set()  # module-level functions that only build a recipe
        self._stores: set[cst.CSTNode] = set()  # the attributes assigned to (`self.x = ...`)
        self.where: dict[cst.CSTNode, cst.FunctionDef | None] = {}  # candidate → its function
        self.enclosing: dict[cst.FunctionDef, cst.FunctionDef | None] = {}
        self.local: dict[cst.FunctionDef, set[str]] = {}  # names a function binds (its variables)
        self.declared_global: dict[cst.FunctionDef, set[str]] = {}
        self._functions: list[cst.FunctionDef] = []

    # ------------------------------------------------------------ scopes
    def reads_of(self, stmt: cst.CSTNode) -> list[Read]:
        """The reads of the variables a candidate statement assigns."""
        found = []
        for name in self.candidates[stmt]:
            if name.startswith("."):  # an attribute: any object's, anywhere in the file
                found += self.reads.get(name, [])
                continue
            owner = self._owner(self.where[stmt], name, assigning=True)
            found += [r for r in self.reads.get(name, ()) if self._owner(r.function, name) is owner]
        return found

    def _owner(self, function: cst.FunctionDef | None, name: str, assigning: bool = False):
        """The function whose variable ``name`` is at ``function`` (None: the module's)."""
        while function is not None:
            if name in self.declared_global[function]:
                return None
            if assigning or name in self.local[function]:
                return function
            function = self.enclosing[function]
        return None

    def _bind(self, target: cst.BaseExpression) -> None:
        """``target`` binds its names (in the current function): they are no reads."""
        if self._functions:
            self.local[self._functions[-1]].update(target_names(target))
        self._bindings.update(n for n in _bound_names(target))

    # ------------------------------------------------------------ blocks and statements
    # (visit_X/leave_X, not on_visit: core.traversal.walk then takes its fast path)
    def _enter(self, node: cst.CSTNode) -> None:
        if self._blocks:
            self.blocks[node] = self._blocks[-1]
        self._statements.append(node)

    def _leave(self, node: cst.CSTNode) -> None:
        self._statements.pop()

    def _open_block(self, node: cst.Module | cst.IndentedBlock | cst.SimpleStatementSuite) -> None:
        self._blocks.append(node)
        self.block_sizes[node] = len(node.body)

    def _close_block(self, node: cst.CSTNode) -> None:
        self._blocks.pop()

    visit_Module = visit_IndentedBlock = visit_SimpleStatementSuite = _open_block
    leave_Module = leave_IndentedBlock = leave_SimpleStatementSuite = _close_block
    visit_While = visit_With = visit_Try = visit_TryStar = visit_Match = _enter
    leave_While = leave_With = leave_Try = leave_TryStar = leave_Match = _leave
    leave_SimpleStatementLine = leave_If = leave_ClassDef = leave_For = _leave

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._enter(node)
        self._class_bodies.add(node.body)
        self._bind(node.name)

    def find_recipe_functions(self, module: cst.Module) -> None:
        """The module's functions that only build a recipe from their arguments (``def get_fp8_recipe(args):
        ... return DelayedScaling(...)``): calling one is a recipe value; one calling another counts too."""
        functions = [s for s in module.body if isinstance(s, cst.FunctionDef)]
        while True:
            new = {f.name.value for f in functions if f.name.value not in self.recipe_functions and self._builds(f)}
            if not new:
                return
            self.recipe_functions |= new

    def _builds(self, function: cst.FunctionDef) -> bool:
        """Whether ``function`` has no decorator nor side effects and returns a recipe: its body only
        assigns side-effect-free values (in ``if`` statements too) and ends in ``return <recipe>``."""
        body = function.body.body if isinstance(function.body, cst.IndentedBlock) else ()
        if function.decorators or function.asynchronous or not body:
            return False
        defaults = [p.default for p in named_params(function) if p.default]
        if not all(is_pure(d) for d in defaults):
            return False
        *steps, last = body
        if steps and is_docstring(steps[0]):
            steps = steps[1:]  # the docstring
        if not (
            isinstance(last, cst.SimpleStatementLine)
            and len(last.body) == 1
            and isinstance(last.body[0], cst.Return)
            and last.body[0].value is not None
        ):
            return False
        kinds = [self._kind(last.body[0].value)]
        for step in steps:
            if isinstance(step, cst.If):
                found = self._if_assignments(step)
            else:
                line = self._assignment(step) if isinstance(step, cst.SimpleStatementLine) else None
                found = None if line is None or line[0].startswith(".") else [line]
            if found is None:
                return False
            kinds += [kind for _, kind in found]
        return IMPURE not in kinds and RECIPE_VALUE in kinds

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._enter(node)
        if node.name.value in self.recipe_functions and not self._functions and not self._in_class_body():
            self.candidates[node] = (node.name.value,)
            self.where[node] = None
        self._bind(node.name)
        self.enclosing[node] = self._functions[-1] if self._functions else None
        self.local[node], self.declared_global[node] = set(), set()
        self._functions.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._functions.pop()
        self._leave(original_node)

    def visit_Param(self, node: cst.Param) -> None:
        self._bind(node.name)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._bind(node.name)

    def visit_Global(self, node: cst.Global) -> None:
        self._bindings.update(n.name for n in node.names)
        if self._functions:
            self.declared_global[self._functions[-1]].update(n.name.value for n in node.names)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self._functions:  # `x += 1` binds x and reads it
            self.local[self._functions[-1]].update(target_names(node.target))

    def visit_For(self, node: cst.For) -> None:
        self._enter(node)
        self._bind(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind(node.target)

    def _in_class_body(self) -> bool:
        return bool(self._blocks) and self._blocks[-1] in self._class_bodies

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._enter(node)
        assigned = self._assignment(node)
        if assigned is None or assigned[1] != RECIPE_VALUE or self._in_recipe_if():
            return
        if self._in_class_body():
            self.class_attributes[node] = (assigned[0],)
            return
        self.candidates[node] = (assigned[0],)
        self.where[node] = self._functions[-1] if self._functions else None

    def visit_If(self, node: cst.If) -> None:
        self._enter(node)
        if isinstance(node.orelse, cst.If):
            self._in_chain.add(node.orelse)  # an `elif` never goes alone
        if node in self._in_chain or self._in_class_body() or self._in_recipe_if():
            return
        assignments = self._if_assignments(node)
        if assignments and RECIPE_VALUE in (kind for _, kind in assignments):
            self.candidates[node] = tuple(dict.fromkeys(name for name, _ in assignments))
            self.where[node] = self._functions[-1] if self._functions else None

    def _if_assignments(self, node: cst.If) -> list[tuple[str, int]] | None:
        """(name, kind) of every assignment in an ``if``/``elif``/``else`` whose tests are side-effect
        free and whose branches only assign side-effect-free values or hold such ``if`` statements
        (Megatron's format chosen from ``args`` inside ``if self.use_fp8:``); None for any other."""
        found: list[tuple[str, int]] = []
        branch: cst.If | cst.Else | None = node
        while branch is not None:
            if isinstance(branch, cst.If) and not is_pure(branch.test):
                return None
            if not isinstance(branch.body, cst.IndentedBlock):
                return None
            for statement in branch.body.body:
                if isinstance(statement, cst.If):
                    inner = self._if_assignments(statement)
                else:
                    line = self._assignment(statement) if isinstance(statement, cst.SimpleStatementLine) else None
                    inner = None if line is None else [line]
                if inner is None or IMPURE in (kind for _, kind in inner):
                    return None
                found += inner
            branch = branch.orelse if isinstance(branch, cst.If) else None
            if isinstance(branch, cst.If):
                self._in_chain.add(branch)
        return found

    def _in_recipe_if(self) -> bool:
        """Whether the statement visited is inside a recipe ``if`` or function (which goes whole)."""
        return any(isinstance(s, (cst.If, cst.FunctionDef)) and s in self.candidates for s in self._statements)

    def _assignment(self, line: cst.SimpleStatementLine) -> tuple[str, int] | None:
        """(name, kind of the value) for a line ``name = value``, or ``.x`` for ``obj.x = value``
        (``self.fp8_recipe``, ``args.fp8_recipe``: an attribute of a named object)."""
        if len(line.body) != 1 or not isinstance(line.body[0], cst.Assign) or len(line.body[0].targets) != 1:
            return None
        assign = line.body[0]
        target = assign.targets[0].target
        if isinstance(target, cst.Name):
            return target.value, self._kind(assign.value)
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
            return "." + target.attr.value, self._kind(assign.value)
        return None

    def _kind(self, expr: cst.BaseExpression) -> int:
        """RECIPE_VALUE: side-effect free and naming a recipe; PURE: side-effect free; else IMPURE."""
        if isinstance(expr, (cst.Name, cst.Attribute)) and self.is_recipe(expr):
            return RECIPE_VALUE
        if isinstance(expr, cst.Call):
            calls_builder = isinstance(expr.func, cst.Name) and expr.func.value in self.recipe_functions
            if not (calls_builder or isinstance(expr.func, (cst.Name, cst.Attribute)) and self.is_recipe(expr.func)):
                return IMPURE
            kinds = [self._kind(a.value) for a in expr.args]
            return IMPURE if IMPURE in kinds else RECIPE_VALUE
        if isinstance(expr, cst.IfExp):
            kinds = [PURE if is_pure(expr.test) else IMPURE, self._kind(expr.body), self._kind(expr.orelse)]
        elif isinstance(expr, cst.Dict):
            kinds = [
                self._kind(v)
                for e in expr.elements
                for v in ((e.key, e.value) if isinstance(e, cst.DictElement) else (e.value,))
            ]
        elif isinstance(expr, (cst.Tuple, cst.List)):
            kinds = [self._kind(e.value) for e in expr.elements]
        else:
            return PURE if is_pure(expr) else IMPURE
        return IMPURE if IMPURE in kinds else max(kinds, default=PURE)

    # ------------------------------------------------------------ reads
    def _read(self, name: str, node: cst.CSTNode) -> None:
        self.reads.setdefault(name, []).append(
            Read(
                node,
                self._statements[-1] if self._statements else None,
                self._functions[-1] if self._functions else None,
            )
        )

    def visit_Call(self, node: cst.Call) -> None:
        recipe = self.autocast_recipe(node)
        if recipe is not None:
            self.fp8_reads.update(n for n in iter_nodes(recipe, (cst.Name, cst.Attribute)))
        for arg in node.args:  # `getattr(self, "fp8_recipe")` may read the attribute
            value = string_value(arg.value) if isinstance(arg.value, cst.SimpleString) else None
            if value is not None and value.isidentifier():
                self._read("." + value, arg.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._bind(node.target)  # `x, y = ...` binds x and y; `a[i] = ...` reads a
        if isinstance(node.target, cst.Attribute):
            self._stores.add(node.target)  # `self.x = ...` does not read `.x`

    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            self._bind(alias.asname.name if alias.asname else cst.Name((dotted_name(alias.name) or "_").split(".")[0]))
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        for alias in () if isinstance(node.names, cst.ImportStar) else node.names:
            self._bind(alias.asname.name if alias.asname else alias.name)
        return False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node not in self._stores:
            self._read("." + node.attr.value, node)  # a read of the attribute, on any object
        self._bindings.add(node.attr)  # the attribute name is not a read of a variable

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._bindings.add(node.keyword)  # nor is a keyword name

    def visit_Name(self, node: cst.Name) -> None:
        if node not in self._bindings:
            self._read(node.value, node)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)
        if value is not None and value.isidentifier():
            self._read(value, node)  # `__all__ = ["fp8_recipe"]` exports it
