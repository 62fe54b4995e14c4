"""Whether anything may read the value of an argparse option: a default nothing reads needs no NPU spelling.

An evaluation script declares ``parser.add_argument("--device", default="cuda:0")``, parses it
(``args = parser.parse_args()``) and hands ``args`` to its own ``run_inference(args)``, which reads
``args.model_path`` and others but never ``args.device``: rewriting that default to ``"npu:0"`` (and
adding ``import torch_npu`` for it) changes nothing the script does. The device and backend rules
(NPU104, NPU201) leave such a default as written where :func:`option_unread` says so.

It says so only when the file shows every place the value can go:

- the option's ``dest`` (``dest=``, else the first long flag, ``--dist-backend`` → ``dist_backend``)
  is read nowhere in the file: no attribute of that name on anything (``<anything>.<dest>``, also a
  write) and no string literal of it (``getattr(args, "<dest>")``, ``parser.get_default("<dest>")``)
  outside the option's own call;
- the option is added, in a statement of its own, to a parser the file makes: a name bound only to
  ``argparse.ArgumentParser(...)`` (or to a group or sub-parser made from one), never by an import,
  a parameter or anything else;
- the option converts and checks nothing at parse time: no ``type=`` other than ``str``, no
  ``action=`` other than ``"store"``, no ``choices=`` (a launch script's ``--device npu`` then
  passes, as its rewrite expects);
- no parser and no parse result of the file escapes its sight (:class:`_ParsedValues`): they go only
  to attribute reads (not ``__dict__`` or other underscored ones), ``print``/``str``/``repr``,
  ``getattr``-like builtins with a literal name, f-strings, plain names, parameters of the file's
  own undecorated functions (no ``*args``/``**kwargs``), and returns from functions no other module
  can call (nested ones, or ones defined under ``if __name__ == "__main__":``); a name holding one
  is bound in a function or under ``if __name__ == "__main__":`` (names bound there are no
  module attribute another file imports), never at module level elsewhere, in a class or by
  ``global``. ``vars(args)``, ``args.__dict__``, ``self.args = args``, a call of an imported function
  or a method, ``parse_known_args()`` unpacked into anything but two names, and ``eval``/``exec``/
  ``locals()``/``globals()``/``vars()`` anywhere in the file count as escapes.

Names are followed by spelling across the whole file (every ``args`` of it is checked wherever
it is), which only makes more escapes. ``options.file.exports`` is not asked: it lists the
imports of the files that import a library some rule removes (analysis/project_imports.py), so
for most scripts it is empty whatever other files import; any module-level binding is an escape
instead. Not covered: another module reaching the script's globals through ``import __main__``
or ``sys.modules``.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.arguments import try_bind
from cuda2npu.core.literals import string_value
from cuda2npu.core.names import module_qualified
from cuda2npu.core.nodes import named_params
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes

PARSER_CLASS = "argparse.ArgumentParser"
# parser methods returning a parser-like object the options are added to
GROUP_METHODS = frozenset({"add_argument_group", "add_mutually_exclusive_group", "add_subparsers", "add_parser"})
PARSE_METHODS = frozenset({"parse_args", "parse_known_args", "parse_intermixed_args", "parse_known_intermixed_args"})
KNOWN_PARSES = frozenset({"parse_known_args", "parse_known_intermixed_args"})  # (namespace, extras)
PRINTERS = frozenset({"print", "str", "repr"})  # builtins that only format a namespace
ATTRIBUTE_BUILTINS = frozenset({"getattr", "hasattr", "setattr", "delattr"})  # with a literal name: counted as a read
SCOPE_READERS = frozenset({"eval", "exec", "locals", "globals"})  # read names without naming them
TARGET_PARTS = (cst.Element, cst.StarredElement, cst.Tuple, cst.List)
SCOPES = (cst.FunctionDef, cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


def option_unread(ctx, call: cst.Call) -> bool:
    """True when no code can read the value the argparse option ``call`` (an ``add_argument``
    call of the file of ``ctx``) stores, so its default may stay as written (see the module doc);
    False whenever that is not certain."""
    dest = option_dest(call)
    if dest is None or not _converts_nothing(ctx, call):
        return False
    values = ctx.file_state(_ParsedValues)
    if values.escape is not None or not values.owns_option(call):
        return False
    return not values.reads(dest, call)


def option_dest(call: cst.Call) -> str | None:
    """The attribute an ``add_argument`` call stores into: ``dest=``, else its first ``--long``
    option (``--dist-backend`` → ``dist_backend``), else its first short one, else a positional's
    name; None when that is not written as literals or the flags use other prefix characters."""
    flags: list[str] = []
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "dest":
            return string_value(arg.value)
        if arg.keyword is None:
            flag = string_value(arg.value)
            if flag is None or arg.star:
                return None
            flags.append(flag)
    if not flags:
        return None
    if not flags[0].startswith("-"):  # a positional argument (or a parser's own prefix_chars: unknown)
        return flags[0] if flags[0].isidentifier() else None
    flag = next((f for f in flags if f.startswith("--")), flags[0])
    return flag.lstrip("-").replace("-", "_") or None


def _converts_nothing(ctx, call: cst.Call) -> bool:
    """The option converts and checks nothing at parse time: no ``type=`` other than ``str``,
    no ``action=`` other than ``"store"``, no ``choices=``."""
    for arg in call.args:
        keyword = arg.keyword.value if arg.keyword is not None else None
        if keyword == "choices":
            return False
        if keyword == "action" and string_value(arg.value) != "store":
            return False
        is_str = isinstance(arg.value, cst.Name) and arg.value.value == "str" and not ctx.resolver.is_bound("str")
        if keyword == "type" and not is_str:
            return False
    return True


class _ParsedValues:
    """Where the file's parsers and parse results go (``file_state`` of a file): ``escape`` says why
    one may reach code the file does not show (None: none does); names are followed by spelling."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.index = TreeIndex.of(ctx)
        self.parents = self.index.parents
        self.escape: str | None = None
        self._occurrences: dict[str, list[cst.Name]] = {}
        self._defined: dict[str, list[cst.FunctionDef]] = {}
        self._bound: set[str] = set()  # names bound other than by `def` (also parameters, imports: the resolver's)
        self._tracked_names: set[str] = set()
        self._pending: list[cst.CSTNode] = []
        self._seen: set[cst.CSTNode] = set()
        self._attributes: set[str] | None = None  # the attribute names of the file (on first need)
        self._strings: dict[str | None, list[cst.SimpleString]] = {}  # its string literals by value
        self._index_names()
        self._follow()

    # --- the file's names

    def _index_names(self) -> None:
        """Every name occurrence by spelling, the functions by name, the names bound otherwise;
        the seeds (``argparse.ArgumentParser(...)`` calls) and the file's scope readers."""
        for node in iter_nodes(self.ctx.module, cst.Name):
            role = self._role(node)
            if role == "definition":
                if isinstance(self.parents[node], cst.FunctionDef):
                    self._defined.setdefault(node.value, []).append(self.parents[node])
                else:
                    self._bound.add(node.value)
            elif role != "skip":
                self._occurrences.setdefault(node.value, []).append(node)
                if role != "load":
                    self._bound.add(node.value)
        self._bound.update(name for scope in self.ctx.resolver.scopes.values() for name in scope.imports)
        for call in self.index.calls:
            func = call.func
            if isinstance(func, cst.Name) and not self.ctx.resolver.is_bound(func.value):
                if func.value in SCOPE_READERS or (func.value == "vars" and not call.args):
                    self.escape = f"`{func.value}()` reads names it is not given"
            if module_qualified(self.ctx.resolver.module_scope, func) == PARSER_CLASS:
                self._pending.append(call)

    def _role(self, name: cst.Name) -> str:
        """How a name occurrence binds or reads its name: ``skip`` (an attribute's or keyword's name,
        an import), ``definition`` (of a function or class), ``parameter``, ``declared``
        (``global``/``nonlocal``), ``augmented`` (``x += ...``), ``binding``, or ``load``."""
        parent = self.parents.get(name)
        if isinstance(parent, cst.Attribute) and parent.attr is name:
            return "skip"
        if isinstance(parent, cst.Arg) and parent.keyword is name:
            return "skip"
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef)) and parent.name is name:
            return "definition"
        if isinstance(parent, cst.Param) and parent.name is name:
            return "parameter"
        if isinstance(parent, cst.NameItem):
            return "declared"
        if self._in_import(name):
            return "skip"
        node = name
        while isinstance(parent, TARGET_PARTS):
            node, parent = parent, self.parents.get(parent)
        if isinstance(parent, cst.AugAssign) and parent.target is node:
            return "augmented"
        if isinstance(parent, cst.Del):
            return "skip"
        if (
            (isinstance(parent, cst.AssignTarget) and parent.target is node)
            or (isinstance(parent, (cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr)) and parent.target is node)
            or (isinstance(parent, cst.AsName) and parent.name is node)
        ):
            return "binding"
        return "load"

    def _in_import(self, node: cst.CSTNode) -> bool:
        parent = self.parents.get(node)
        while isinstance(parent, (cst.Attribute, cst.AsName, cst.ImportAlias, cst.Import, cst.ImportFrom)):
            if isinstance(parent, (cst.ImportAlias, cst.Import, cst.ImportFrom)):
                return True
            parent = self.parents.get(parent)
        return False

    # --- following the values

    def _follow(self) -> None:
        """Check every use of every value until all are seen or one escapes."""
        while self._pending and self.escape is None:
            node = self._pending.pop()
            if node not in self._seen:
                self._seen.add(node)
                self._use(node)

    def _escapes(self, why: str) -> None:
        if self.escape is None:
            self.escape = why

    def _track(self, node: cst.CSTNode) -> None:
        self._pending.append(node)

    def _track_name(self, name: str) -> None:
        """Follow every occurrence of ``name`` in the file (by spelling)."""
        if name in self._tracked_names:
            return
        self._tracked_names.add(name)
        for occurrence in self._occurrences.get(name, []):
            role = self._role(occurrence)
            if role in ("declared", "augmented"):
                self._escapes(f"`{name}` is {role}")
            elif role == "binding" and not self._local_place(occurrence):
                self._escapes(f"`{name}` is bound where other modules may read it")
            elif role == "load":
                self._track(occurrence)

    def _use(self, node: cst.CSTNode) -> None:
        """A parser or parse result ``node`` is used: follow it or record the escape."""
        parent = self.parents.get(node)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            self._attribute(parent)
        elif isinstance(parent, cst.Arg) and parent.value is node and not parent.star:
            self._argument(parent)
        elif isinstance(parent, cst.Assign) and parent.value is node:
            for target in parent.targets:
                self._assigned(target.target, node)
        elif isinstance(parent, cst.AnnAssign) and parent.value is node:
            self._assigned(parent.target, node)
        elif isinstance(parent, cst.Return):
            self._returned(parent)
        elif isinstance(parent, (cst.FormattedStringExpression, cst.Expr)):
            return  # formatted, or a statement of its own (`parser.parse_args()` to validate the command line)
        elif isinstance(parent, cst.Subscript) and self._first_of_known_parse(parent, node):
            self._track(parent)
        else:
            self._escapes(f"used as `{type(parent).__name__}`")

    def _attribute(self, attribute: cst.Attribute) -> None:
        """``x.attr``: read by name (counted with the file's reads), or a parse/group call to follow."""
        attr = attribute.attr.value
        call = self.parents.get(attribute)
        called = isinstance(call, cst.Call) and call.func is attribute
        if attr.startswith("_"):
            self._escapes(f"`.{attr}` reads or lists every option")
        elif attr in PARSE_METHODS or attr in GROUP_METHODS:
            if not called:
                self._escapes(f"`.{attr}` is not called")
            elif attr in PARSE_METHODS and _given_namespace(call):
                self._escapes("parsed into a namespace given from elsewhere")
            else:
                self._track(call)

    def _argument(self, arg: cst.Arg) -> None:
        """Passed to a call: a formatter, a ``getattr``-like builtin with a literal name, or the
        file's own function (its parameter is followed); anything else escapes."""
        call = self.parents.get(arg)
        func = call.func if isinstance(call, cst.Call) else None
        if isinstance(func, cst.Name) and not self.ctx.resolver.is_bound(func.value):
            if func.value in PRINTERS:
                return
            named = len(call.args) > 1 and string_value(call.args[1].value) is not None
            if func.value in ATTRIBUTE_BUILTINS and call.args[0] is arg and named:
                return
        if isinstance(func, cst.Name) and self._own_callee(func.value, call, arg):
            return
        self._escapes("passed to a callable the file does not show")

    def _own_callee(self, name: str, call: cst.Call, arg: cst.Arg) -> bool:
        """``name`` is bound only by undecorated plain functions of the file (no methods, no ``*args``
        or ``**kwargs``) that all take ``arg`` as a named parameter: those parameters are followed."""
        functions = self._defined.get(name)
        if not functions or name in self._bound:
            return False
        params = []
        for function in functions:
            if function.decorators or self._method(function) or _has_stars(function):
                return False
            kwonly = {p.name.value for p in function.params.kwonly_params}
            bound = try_bind(call, [p.name.value for p in named_params(function)])
            param = next((p for p, given in (bound or {}).items() if given is arg), None)
            if param is None or (arg.keyword is None and param in kwonly):
                return False
            params.append(param)
        for param in params:
            self._track_name(param)
        return True

    def _assigned(self, target: cst.BaseExpression, value: cst.CSTNode) -> None:
        """Bound to a name (followed), or the namespace of ``args, extras = parse_known_args()``."""
        if isinstance(target, cst.Name):
            self._track_name(target.value)
        elif self._known_parse(value) and _two_names(target):
            self._track_name(target.elements[0].value.value)
        else:
            self._escapes("stored on an object, in a container or unpacked")

    def _returned(self, statement: cst.Return) -> None:
        """Returned from a function no other module can call: its calls are followed."""
        function = self._enclosing_function(statement)
        if function is None or self._method(function) or not self._local_place(function):
            self._escapes("returned from a function other modules may call")
            return
        name = function.name.value
        for occurrence in self._occurrences.get(name, []):
            call = self.parents.get(occurrence)
            if isinstance(call, cst.Call) and call.func is occurrence:
                self._track(call)
            elif self._role(occurrence) == "load":
                self._escapes(f"`{name}` is used other than called")

    # --- places

    def _enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        parent = self.parents.get(node)
        while parent is not None and not isinstance(parent, (cst.FunctionDef, cst.Lambda)):
            parent = self.parents.get(parent)
        return parent if isinstance(parent, cst.FunctionDef) else None

    def _method(self, function: cst.FunctionDef) -> bool:
        """``function`` is defined in a class body."""
        parent = self.parents.get(function)
        while parent is not None and not isinstance(parent, (cst.FunctionDef, cst.ClassDef, cst.Module)):
            parent = self.parents.get(parent)
        return isinstance(parent, cst.ClassDef)

    def _local_place(self, node: cst.CSTNode) -> bool:
        """``node`` (a binding or a definition) sits in a function, a comprehension or under ``if
        __name__ == "__main__":``: no other module can import what it binds. Not in a class body."""
        child, parent = node, self.parents.get(node)
        guarded = False
        while parent is not None:
            if isinstance(parent, SCOPES) and child is not getattr(parent, "name", None):
                return True
            if isinstance(parent, cst.ClassDef):
                return False
            if isinstance(parent, cst.If) and parent.body is child and _main_test(parent.test):
                guarded = True
            child, parent = parent, self.parents.get(parent)
        return guarded

    def _known_parse(self, node: cst.CSTNode) -> bool:
        """``node`` is a ``parse_known_args(...)`` call (a (namespace, extras) pair)."""
        return (
            isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in KNOWN_PARSES
        )

    def _first_of_known_parse(self, subscript: cst.Subscript, node: cst.CSTNode) -> bool:
        """``parser.parse_known_args()[0]``."""
        index = subscript.slice[0].slice if len(subscript.slice) == 1 else None
        return (
            self._known_parse(node)
            and isinstance(index, cst.Index)
            and isinstance(index.value, cst.Integer)
            and index.value.value == "0"
        )

    # --- the questions

    def owns_option(self, call: cst.Call) -> bool:
        """``call`` is an ``add_argument`` statement of its own on a parser this file makes."""
        return (
            isinstance(call.func, cst.Attribute)
            and isinstance(self.parents.get(call), cst.Expr)
            and self._own_parser(call.func.value)
        )

    def _own_parser(self, expr: cst.BaseExpression, followed: frozenset[str] = frozenset()) -> bool:
        """``expr`` is surely a parser (or group) made in this file: ``argparse.ArgumentParser(...)``,
        a group or sub-parser made from one, or a name bound only to such values by plain
        assignments (``followed``: the names on the way; a cycle proves nothing)."""
        if isinstance(expr, cst.Call):
            func = expr.func
            if module_qualified(self.ctx.resolver.module_scope, func) == PARSER_CLASS:
                return True
            made = isinstance(func, cst.Attribute) and func.attr.value in GROUP_METHODS
            return made and self._own_parser(func.value, followed)
        if not isinstance(expr, cst.Name) or expr.value in self._defined or expr.value in followed:
            return False
        values = self._assigned_values(expr.value)
        return bool(values) and all(self._own_parser(v, followed | {expr.value}) for v in values)

    def _assigned_values(self, name: str) -> list[cst.BaseExpression] | None:
        """The values of every binding of ``name`` in the file, None where one is no plain
        assignment of a single name (a parameter, a loop, an import, a tuple target)."""
        if any(name in scope.imports for scope in self.ctx.resolver.scopes.values()):
            return None
        values = []
        for occurrence in self._occurrences.get(name, []):
            role = self._role(occurrence)
            if role == "load":
                continue
            parent = self.parents.get(occurrence)
            binder = self.parents.get(parent) if isinstance(parent, cst.AssignTarget) else parent
            if role != "binding" or not isinstance(binder, (cst.Assign, cst.AnnAssign)) or binder.value is None:
                return None
            values.append(binder.value)
        return values

    def reads(self, dest: str, call: cst.Call) -> bool:
        """Whether the file names ``dest`` as an attribute or a string outside the option's own call."""
        if self._attributes is None:
            self._attributes = {a.attr.value for a in iter_nodes(self.ctx.module, cst.Attribute)}
            for string in iter_nodes(self.ctx.module, cst.SimpleString):
                self._strings.setdefault(string_value(string), []).append(string)
        own = set(iter_nodes(call, cst.SimpleString))
        return dest in self._attributes or any(s not in own for s in self._strings.get(dest, []))


def _given_namespace(call: cst.Call) -> bool:
    """``parse_args(argv, ns)`` / ``parse_args(namespace=ns)``: options land on an object from elsewhere."""
    positional = [a for a in call.args if a.keyword is None]
    return (
        len(positional) > 1
        or any(a.star for a in call.args)
        or any(a.keyword is not None and a.keyword.value == "namespace" for a in call.args)
    )


def _has_stars(function: cst.FunctionDef) -> bool:
    """``*args`` or ``**kwargs`` in the signature."""
    return isinstance(function.params.star_arg, cst.Param) or function.params.star_kwarg is not None


def _two_names(target: cst.BaseExpression) -> bool:
    """``a, b`` (or ``[a, b]``): two plain names."""
    return (
        isinstance(target, (cst.Tuple, cst.List))
        and len(target.elements) == 2
        and all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in target.elements)
    )


def _main_test(test: cst.BaseExpression) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    sides = [test.left, target.comparator]
    return (
        isinstance(target.operator, cst.Equal)
        and any(isinstance(side, cst.Name) and side.value == "__name__" for side in sides)
        and any(string_value(side) == "__main__" for side in sides)
    )
