"""Binding the free names of a site to synthetic values, the same on both sides.

The original call's arguments are bound to its API's parameters (:mod:`.sites_roles` says what
each is). Every free name (``q``, ``self.dropout_p``, ``scale``) becomes a *leaf*: a tensor of the
parameter's shape, found through the argument expression (``q.transpose(0, 1)`` gets a ``q`` whose
transpose has flash-attn's layout), or representative values (a condition takes True and False).
A leaf that cannot be given a value generically raises :class:`Unbindable` with the reason.

The migrated expression is evaluated with the same leaves, the migrated module's imports and
module-level helpers (``_npu_causal_mask``), and the assignments the migration hoisted before the
statement (``query = q.clone()``), all read from the migrated file as it is.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import importlib
import importlib.util
import inspect
import itertools
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
import torch

from cuda2npu.core.arguments import Unbindable, bind
from cuda2npu.validation import sites_roles as roles
from cuda2npu.validation.missing import local_file
from cuda2npu.validation.sites_find import module_level

MAX_COMBINATIONS = 16


class MissingDependency(ImportError):
    """A module the original or the migrated code imports is not installed here."""


def _signature(callee, api: str) -> tuple[list[str], int, bool]:
    """The API's parameter names in order, how many of them take a position and whether it takes
    ``**kwargs`` (:data:`~.sites_roles.SIGNATURES` for builtins torch does not describe)."""
    try:
        parameters = inspect.signature(callee).parameters.values()
    except (TypeError, ValueError) as exc:
        if api not in roles.SIGNATURES:
            raise Unbindable(f"the signature of `{api}` is unknown: {exc}") from exc
        positional, keyword = roles.SIGNATURES[api]
        return [*positional, *keyword], len(positional), False
    kind = inspect.Parameter
    named = [p for p in parameters if p.kind not in (kind.VAR_POSITIONAL, kind.VAR_KEYWORD)]
    taking_position = sum(p.kind in (kind.POSITIONAL_ONLY, kind.POSITIONAL_OR_KEYWORD) for p in named)
    return [p.name for p in named], taking_position, any(p.kind is kind.VAR_KEYWORD for p in parameters)


def call_arguments(call: ast.Call, source: str, callee, api: str) -> dict[str, ast.expr]:
    """Parameter → argument expression of ``call`` (parsed from ``source``) against the signature of
    ``callee``, bound by :func:`cuda2npu.core.arguments.bind` (the expressions are ``call``'s own nodes)."""
    names, positional, var_keyword = _signature(callee, api)
    parsed = cst.parse_expression(source)
    if not isinstance(parsed, cst.Call):
        raise Unbindable(f"`{source}` is not a call")
    if var_keyword:  # ``**kwargs`` takes any other keyword
        names += [arg.keyword.value for arg in parsed.args if arg.keyword and arg.keyword.value not in names]
    bound = bind(parsed, names, max_positional=positional)
    keywords = {keyword.arg: keyword.value for keyword in call.keywords}
    order = [arg for arg in parsed.args if arg.keyword is None]
    params = {}
    for name, arg in bound.items():
        if arg.keyword is None:
            params[name] = call.args[next(index for index, other in enumerate(order) if other is arg)]
        else:
            params[name] = keywords[arg.keyword.value]
    return params


class Attrs(types.SimpleNamespace):
    """Stands for an object whose attributes the site reads (``self.dropout_p``)."""


@dataclass
class Leaf:
    """A free name of the original call (``q``, ``self.dropout_p``) and the arguments it appears in."""

    text: str
    uses: list = field(default_factory=list)  # (parameter, spec, context, argument expression)

    @property
    def is_tensor(self) -> bool:
        return any(isinstance(spec, tuple) for _, spec, _, _ in self.uses)


def chain_text(node: ast.expr) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = chain_text(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _locally_bound(expr: ast.AST) -> set[str]:
    """Names bound inside the expression (lambda parameters, comprehension targets)."""
    bound = set()
    for node in ast.walk(expr):
        if isinstance(node, ast.Lambda):
            bound |= {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
        elif isinstance(node, ast.comprehension):
            bound |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    return bound


def free_names(expr: ast.AST) -> set[str]:
    inner = _locally_bound(expr)
    return {n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - inner


def references(expr: ast.expr, known: set[str]) -> list[tuple[str, str, bool]]:
    """(chain text, context, called) for each maximal Name/Attribute chain whose root is not in ``known``."""
    found = []
    inner = _locally_bound(expr) | known | set(dir(builtins))

    def visit(node: ast.AST, context: str, parent: ast.AST | None) -> None:
        text = chain_text(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if text is not None:
            if text.split(".", 1)[0] not in inner:
                found.append((text, context, isinstance(parent, ast.Call) and parent.func is node))
            return
        for name, value in ast.iter_fields(node):
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST):
                    visit(child, _context(node, name, context), node)

    visit(expr, "whole", None)
    return found


def _context(node: ast.AST, field_name: str, context: str) -> str:
    """How a name below ``node.field_name`` is used: as the argument's value, part of it, or a condition."""
    if isinstance(node, ast.IfExp):
        return "flag" if field_name == "test" else context
    if isinstance(node, ast.BoolOp) or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)):
        return "flag"
    if isinstance(node, ast.Subscript) and field_name == "value":
        return context  # ``self.window[0]``: the name holds the whole value
    return "part" if context == "whole" else context


def _under(text: str, tensors: set[str]) -> bool:
    return any(text == t or text.startswith(t + ".") for t in tensors)


def leaves_of(params: dict[str, ast.expr], api: str, known: set[str]) -> list[Leaf]:
    """The free names of the original call's arguments with the roles of the parameters they feed."""
    table = roles.ARGUMENTS.get(api, {})
    leaves: dict[str, Leaf] = {}
    tensors: set[str] = set()
    ordered = sorted(params.items(), key=lambda item: not isinstance(table.get(item[0]), tuple))
    for param, expr in ordered:
        spec = table.get(param)
        if spec == "params":
            continue  # replaced by the check's own parameters
        source = f"`{param}={ast.unparse(expr)}`"
        found = []
        for text, context, called in references(expr, known):
            if called and isinstance(spec, tuple) and "." in text:
                text, called = text.rsplit(".", 1)[0], False  # ``q.transpose(0, 1)``: the tensor is ``q``
            if _under(text, tensors):
                continue  # ``q.shape[-1]``: computed from a tensor leaf
            if called:
                raise Unbindable(f"{source} calls `{text}`, which the check cannot provide")
            if spec is None:
                raise Unbindable(f"{source}: the check has no representative value for `{text}`")
            found.append((text, context))
        operands = set()
        if isinstance(spec, tuple) and len({text for text, _ in found}) > 1:
            operands = _elementwise_operands(expr) & {text for text, _ in found}
            if len({text for text, _ in found} - operands) != 1:
                raise Unbindable(f"{source} has several free names ({', '.join(sorted({t for t, _ in found}))})")
        if isinstance(spec, tuple):
            tensors |= {text for text, _ in found} - operands
        for text, context in found:
            use = (param, roles.OPERAND if text in operands else spec, context, expr)
            leaves.setdefault(text, Leaf(text)).uses.append(use)
    return list(leaves.values())


def _elementwise_operands(expr: ast.expr) -> set[str]:
    """The names passed to an elementwise method of a tensor in ``expr`` (``self.gamma`` of
    ``v.pow(self.gamma)``): scalars that leave the argument's shape as it is."""
    found = set()
    for node in ast.walk(expr):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in roles.ELEMENTWISE:
            found |= {text for arg in node.args if (text := chain_text(arg)) is not None}
    return found


class NotApplicable(Exception):
    """This variant contradicts the site (one name would need two different values)."""


def _candidates(use, dims: dict, device) -> list:
    param, spec, context, _ = use
    if context == "flag" or spec == "flag":
        return roles.FLAGS
    if spec == "mask":
        return [roles.role_value("mask", dims, device, None), None]
    if spec == "shape" and context != "whole":
        spec = "size"  # ``(dim,)``: the name is one dimension
    value = roles.role_value(spec, dims, device, None)
    if value is not None:
        return [value]
    table = roles.WHOLE if context == "whole" else roles.PART
    if spec not in table:
        raise Unbindable(f"`{param}`: no representative value for a free name used as {context} of it")
    return table[spec]


def _same(left: list, right: list) -> bool:
    if len(left) != len(right):
        return False
    for a, b in zip(left, right):
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)):
                return False
        elif a != b:
            return False
    return True


def combinations(leaves: list[Leaf], dims: dict) -> list[dict[str, object]]:
    """Every assignment of representative values to the scalar leaves (at most MAX_COMBINATIONS)."""
    choices = []
    parts: dict[str, int] = {}  # role -> free names that took its value inside an expression so far
    for leaf in leaves:
        if leaf.is_tensor:
            continue
        # the uses where the name is the whole argument must agree; ``3 * dim`` follows ``dim``
        whole = [use for use in leaf.uses if use[2] == "whole"]
        whole = [use for use in whole if use[1] not in roles.ANY_SIZE] or whole  # (dim, dim): both are D
        values = [_candidates(use, dims, "cpu") for use in whole or [u for u in leaf.uses if u[2] != "flag"]]
        for other in values[1:]:
            if not _same(values[0], other):
                raise NotApplicable(f"`{leaf.text}` would need two different values")
        chosen = values[0] if values else roles.FLAGS
        part = {spec for _, spec, context, _ in leaf.uses if context == "part"}
        if not whole and len(part) == 1 and len(leaf.uses) == 1:
            # ``(d // self.heads) ** -0.5``: two names of one role get different values, or the
            # expression may land on the API's default (here a scale of 1) and hide a dropped argument
            role = part.pop()
            chosen = roles.distinct_part(role, parts.get(role, 0), chosen)
            parts[role] = parts.get(role, 0) + 1
        choices.append([(leaf.text, value) for value in chosen])
    return [dict(combo) for combo in itertools.islice(itertools.product(*choices), MAX_COMBINATIONS)]


def _permutations(shape: tuple[int, ...]):
    return (tuple(shape[i] for i in order) for order in itertools.permutations(range(len(shape))))


def tensor_shape(text: str, expr: ast.expr, target: tuple[int, ...], namespace: dict, dtype) -> tuple[int, ...]:
    """A shape for the leaf ``text`` such that ``expr`` (the argument) has shape ``target``."""
    code = compile(ast.Expression(expr), "<site argument>", "eval")
    for shape in _permutations(target):
        trial = dict(namespace)
        assign(trial, text, torch.zeros(shape, dtype=dtype))
        try:
            value = eval(code, trial)  # noqa: S307 - the project's own argument expression
        except Exception:  # noqa: BLE001 - this shape does not fit
            continue
        if isinstance(value, torch.Tensor) and tuple(value.shape) == target:
            return shape
    raise Unbindable(f"no shape of `{text}` makes `{ast.unparse(expr)}` a {list(target)} tensor")


def random_tensor(text: str, shape, dtype, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed + sum(map(ord, text)))
    return torch.randn(shape, generator=generator).to(dtype)


def assign(namespace: dict, text: str, value) -> None:
    """Bind ``a.b.c`` in ``namespace`` (``a`` becomes an :class:`Attrs` holding ``b``, …)."""
    root, *attrs = text.split(".")
    if not attrs:
        namespace[root] = value
        return
    target = namespace.get(root)
    if not isinstance(target, Attrs):
        target = namespace[root] = Attrs()
    for attr in attrs[:-1]:
        inner = getattr(target, attr, None)
        if not isinstance(inner, Attrs):
            inner = Attrs()
            setattr(target, attr, inner)
        target = inner
    setattr(target, attrs[-1], value)


def _in_tree(package: str, root: Path) -> Path | None:
    """Where ``package`` imports from, when that is inside the migrated tree ``root`` (else None)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    origin = Path(spec.origin).resolve() if spec is not None and spec.origin else None
    return origin if origin is not None and origin.is_relative_to(root.resolve()) else None


@contextlib.contextmanager
def outside_tree(package: str, root: Path):
    """While the block runs, ``package`` imports from outside the migrated tree ``root``.

    When the project is the library its sites call (flash-attn's own tests), the tree's copy is the
    migrated library: the original side takes the real library installed elsewhere, else its CPU
    stand-in; the tree's modules are back in ``sys.modules`` afterwards. A no-op otherwise."""
    if _in_tree(package, root) is None:
        yield
        return
    mine = [name for name in sys.modules if name == package or name.startswith(package + ".")]
    saved, path = {name: sys.modules.pop(name) for name in mine}, list(sys.path)
    tree = root.resolve()
    sys.path[:] = [entry for entry in path if not Path(entry or ".").resolve().is_relative_to(tree)]
    importlib.invalidate_caches()
    try:
        if (origin := _in_tree(package, root)) is not None:
            raise MissingDependency(f"`{package}` imports from the migrated tree itself ({origin.relative_to(tree)})")
        yield
    finally:
        for name in [name for name in sys.modules if name == package or name.startswith(package + ".")]:
            del sys.modules[name]
        sys.modules.update(saved)
        sys.path[:] = path


def import_object(qualified: str):
    """The object ``a.b.c`` names: the longest importable module prefix, then attributes."""
    parts = qualified.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            if cut == 1:
                raise
            continue
        for attr in parts[cut:]:
            value = getattr(value, attr)
        return value
    raise ImportError(qualified)


def _stored(node: ast.AST) -> set[str]:
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for sub in ast.walk(node):
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = sub.args
            names |= {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
            names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
            if not isinstance(sub, ast.Lambda) and sub is not node:
                names.add(sub.name)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in sub.names}
    return names


class MigratedModule:
    """The module-level names of the migrated file, bound on demand: imports, defs, simple assignments."""

    def __init__(self, tree: ast.Module, file: Path, root: Path) -> None:
        relative = file.relative_to(root).with_suffix("")
        parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
        self.name = ".".join(parts)
        package = ".".join(parts if relative.name == "__init__" else parts[:-1])
        self.namespace: dict = {"__name__": f"{self.name}", "__package__": package, "__file__": str(file)}
        self.root = root
        if str(root) not in sys.path:  # the tree's own packages import from the tree, on both sides
            sys.path.insert(0, str(root))
        self.definitions: dict[str, ast.stmt] = {}
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.definitions[node.name] = node
            elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
                for target in node.targets:
                    self.definitions[target.id] = node
        for node in module_level(tree):  # also inside module-level ``try``/``if`` blocks
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.definitions.setdefault(node.name, node)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    self.definitions.setdefault(bound, type(node)(**{**_fields(node), "names": [alias]}))
        self._bound: set[str] = set()

    def bind(self, names: set[str]) -> set[str]:
        """Bind ``names`` (and what their definitions need); return the ones this module does not define."""
        missing = set()
        for name in sorted(names):
            if name in self._bound or name in dir(builtins):
                continue
            node = self.definitions.get(name)
            if node is None:
                missing.add(name)
                continue
            self._bound.add(name)
            try:
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    missing |= self.bind(free_names(node) - _stored(node) - {name}) - {name}
                self._run(node, name)
            except BaseException:
                self._bound.discard(name)  # a module of the tree is shared by the sites: the next one tries again
                raise
        return missing

    def _run(self, node: ast.stmt, name: str) -> None:
        try:
            exec(compile(ast.Module([node], []), self.namespace["__file__"], "exec"), self.namespace)  # noqa: S102
        except ImportError as exc:
            if not isinstance(node, ast.ImportFrom) or node.names[0].name == "*":
                raise
            module = importlib.util.resolve_name("." * node.level + (node.module or ""), self.namespace["__package__"])
            self.namespace[name] = tree_object(f"{module}.{node.names[0].name}", self.root, exc)


_TREE_MODULES: dict[Path, MigratedModule] = {}


def tree_module(module: str, root: Path) -> MigratedModule | None:
    """The tree's own module ``module`` (a file under ``root``) for binding names on demand, or None."""
    file = local_file(root, module)
    if file is None:
        return None
    if file not in _TREE_MODULES:
        _TREE_MODULES[file] = MigratedModule(ast.parse(file.read_bytes()), file, root)
    return _TREE_MODULES[file]


def tree_object(qualified: str, root: Path, error: ImportError):
    """``qualified``, a name the project defines in the tree ``root``, from its module's source when the
    module does not import (``error``): a package ``__init__`` on the way imports a dependency that is
    not installed (ColossalAI's ``colossalai/__init__.py`` needs psutil, numpy, peft, ...). Only the
    definition and the module-level names it uses run; ``error`` again when the tree does not define it
    (an ImportError naming both when that fails too)."""
    parts = qualified.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = tree_module(".".join(parts[:cut]), root)
        if module is None:
            continue
        name = parts[cut]
        if name not in module.definitions:
            break
        try:
            module.bind({name})
        except Exception as exc:  # noqa: BLE001 - reported with the import's own error, the cause
            where = module.namespace["__file__"]
            raise ImportError(f"{error} (read from the tree's {Path(where).relative_to(root)}, `{name}` fails too: "
                              f"{type(exc).__name__}: {exc})") from exc  # fmt: skip
        value = module.namespace[name]
        for attr in parts[cut + 1 :]:
            value = getattr(value, attr)
        return value
    raise error


def _fields(node: ast.AST) -> dict:
    return {name: getattr(node, name) for name in node._fields} | {"lineno": node.lineno, "col_offset": node.col_offset}


def hoisted(location, name: str) -> ast.expr | None:
    """The value of the nearest ``name = ...`` before the site's statement in its block (a hoisted operand)."""
    statement = location.statement
    parent = location.parents.get(statement)
    for field_name in ("body", "orelse", "finalbody"):
        block = getattr(parent, field_name, None)
        if isinstance(block, list) and any(s is statement for s in block):
            before = block[: next(i for i, s in enumerate(block) if s is statement)]
            for node in reversed(before):
                if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                    return node.value
            return None
    return None
