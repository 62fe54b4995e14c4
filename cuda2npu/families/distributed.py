"""NCCL → HCCL backend names (NPU201).

``"nccl"`` is rewritten only where it reaches torch.distributed: the backend argument of
``init_process_group`` / ``new_group`` / ``new_subgroups*`` / ``Backend(...)`` /
``is_backend_available``, ``backend=`` of any other ``torch.distributed`` call, the
``dist_backend=``-style keywords and wrappers of other libraries that hand it on
(:data:`WRAPPERS`; a call of dora's / flashy's ``distrib.init`` naming no backend takes NCCL, its
default: a manual item, :data:`NCCL_DEFAULTS`), comparisons with ``dist.get_backend(...)``, argparse ``--backend`` /
``--dist-backend`` defaults and choices, variables, attributes, parameters and arguments of
functions of the same file whose value flows into one of those (also through another name,
``self.backend = DEFAULT_BACKEND``, and the tuple a backend is validated against,
``if backend not in VALID_BACKENDS: raise``), module constants another file of the project passes
there (``from pkg.dist import BACKEND`` ... ``init_process_group(backend=BACKEND)``:
``options.file.backend_names``, a project fact of cuda2npu/analysis/backend_constants.py; not one
this file also hands to Ray), and a backend-named choice
``x_backend = "nccl" if c else "gloo"``. A callee named like torch's (``init_process_group``,
``new_group``, ...) counts only when it is torch's or cannot be resolved: the project's own
(imported from another module, relatively, or defined in the file) is followed like any function of
the file. ``"cpu:gloo,cuda:nccl"`` is torch's own syntax and ``dist.Backend.NCCL`` its own name:
both are rewritten wherever they are.

Left alone: Ray's collective groups (no HCCL there), ``Literal["nccl", ...]`` annotations, class
attributes and classes naming a CUDA/NCCL implementation, the CUDA side of code that already
handles the NPU (``{"cuda": "nccl", "npu": "hccl"}``, a function asking
``dist.Backend.default_device_backend_map``), the expected side of a mapping test
(``f("cuda") == "nccl"``), a comparison with an existing process group's own name
(``pg.name().lower() == "nccl"``, ``pg._get_backend_name()``: ``"hccl"`` up to torch 2.4, ``"custom"``
from 2.5 on for an HCCL group, so the test asks whether the group is NCCL's and chooses nothing), a
comparison selecting a conversion of the logical token (``remap(b) if b == "nccl" else b``:
:func:`_remap_test`) and the default of a parameter its function never reads. Any other ``"nccl"`` is a review item.

Portable output (``--portable``): the backend of the host's accelerator instead of ``"hccl"``,
``torch.distributed.get_default_backend_for_device(portable_device.device_type())`` (torch >= 2.6;
else ``portable_device.distributed_backend()``, cuda2npu/analysis/portable.py); ``"cpu:gloo,cuda:nccl"`` is
not portable yet.
"""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.analysis import portable
from cuda2npu.analysis.argparse_reads import option_unread
from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.arguments import Unbindable, bind
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import field_default, string_value
from cuda2npu.core.names import NameUses, dotted_name, module_qualified, string_comparisons
from cuda2npu.core.nodes import named_params
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes, walk

UPPER = "NCCL"  # `init_process_group(backend="NCCL")`: torch's Backend upper-cases the name it looks up
MIXED_BACKEND = re.compile(r"(?:\w+:\w+,)*cuda:nccl(?:,\w+:\w+)*")
# ProcessGroup methods naming its backend ("hccl" or "custom" for an HCCL group, by torch release) and
# the string methods a comparison may read it through
GROUP_NAME_METHODS = {"name", "_get_backend_name"}
CASE_METHODS = {"lower", "upper", "casefold", "strip"}
# torch.distributed callables → position of their `backend` parameter (torch 2.x signatures).
TORCH_BACKEND_PARAMS = {
    "init_process_group": 0,
    "new_group": 2,
    "new_subgroups": 3,
    "new_subgroups_by_enumeration": 2,
    "is_backend_available": 0,
    "Backend": 0,
}
# Other libraries' initialisers whose backend defaults to "nccl" → (keyword, position): a call that
# names none fails on an NPU host (dora's `init` asserts `backend != 'nccl'` without CUDA; flashy
# re-exports it: docs/reference/torch_npu.md §6). They hand the backend on (WRAPPERS).
NCCL_DEFAULTS = {
    "dora.distrib.init": ("backend", 0),
    "flashy.distrib.init": ("backend", 0),
}
# Other libraries' callables that pass a backend on to torch.distributed → (keyword, position).
WRAPPERS = {
    **NCCL_DEFAULTS,
    "deepspeed.init_distributed": ("dist_backend", 0),
    "deepspeed.comm.init_distributed": ("dist_backend", 0),
    "deepspeed.comm.comm.init_distributed": ("dist_backend", 0),
    **dict.fromkeys(  # accelerate re-exports it at the top (Step1X-Edit's `from accelerate import ...`, round 45)
        ("accelerate.InitProcessGroupKwargs", "accelerate.utils.InitProcessGroupKwargs"), ("backend", 0)
    ),
    "accelerate.utils.dataclasses.InitProcessGroupKwargs": ("backend", 0),
    "ray.train.torch.TorchConfig": ("backend", 0),
    "mmengine.dist.init_dist": ("backend", 1),
    **{
        f"{module}.{name}": ("backend", None)  # positions differ between releases: literals and `backend` names
        for module in ("colossalai", "colossalai.initialize", "colossalai.legacy", "colossalai.legacy.initialize")
        for name in ("launch", "launch_from_torch", "launch_from_slurm", "launch_from_openmpi")
    },
}
# functions named for starting distributed training (mmcv's `init_dist` that InternVL and Mini-Monkey copy,
# round 52): their `backend=` is the collective backend
DIST_INIT = re.compile(r"^(?:_?(?:init|setup)_?dist(?:ributed)?(?:_\w+)?|dist_init\w*)$")
# Keywords that only ever name a torch.distributed backend (DeepSpeed, Lightning, transformers).
BACKEND_KEYWORDS = {"dist_backend", "process_group_backend", "ddp_backend", "distributed_backend"}
BACKEND_OPTION = re.compile(r"(?:dist(?:ributed)?_|ddp_|process_group_)?backend")
IMPLEMENTATION_CLASS = re.compile(r"cuda|nccl", re.IGNORECASE)
CONSTANTS = {"None", "True", "False"}


def backend_literals(expr: cst.BaseExpression | None) -> list[cst.SimpleString]:
    """``"nccl"`` literals an expression in a backend position can evaluate to (also inside
    ``a if c else b``, ``x or "nccl"`` and tuples/lists/sets of choices)."""
    if expr is None:
        return []
    if isinstance(expr, cst.SimpleString):
        return [expr] if string_value(expr) in ("nccl", UPPER) else []
    if isinstance(expr, cst.IfExp):
        return backend_literals(expr.body) + backend_literals(expr.orelse)
    if isinstance(expr, cst.BooleanOperation):
        return backend_literals(expr.left) + backend_literals(expr.right)
    if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
        return [lit for e in expr.elements for lit in backend_literals(e.value)]
    return []


def value_names(expr: cst.BaseExpression) -> list[str]:
    """Dotted names an expression can evaluate to (``a``, ``self.b``, also inside ``a if c else b``
    and ``a or b``)."""
    if isinstance(expr, cst.IfExp):
        return value_names(expr.body) + value_names(expr.orelse)
    if isinstance(expr, cst.BooleanOperation):
        return value_names(expr.left) + value_names(expr.right)
    name = dotted_name(expr)
    return [name] if name and name not in CONSTANTS else []


def _nccl_or_gloo(expr: cst.BaseExpression) -> bool:
    """``"nccl" if c else "gloo"`` (either way round): a choice between two torch backends."""
    return isinstance(expr, cst.IfExp) and {string_value(expr.body), string_value(expr.orelse)} == {"nccl", "gloo"}


def _group_name_call(expr: cst.BaseExpression) -> bool:
    """``pg.name()`` / ``pg._get_backend_name()``, also through ``.lower()``/``.upper()``: the name of an
    existing process group's backend, which for an HCCL group is ``"hccl"`` up to torch 2.4 and
    ``"custom"`` from 2.5 on (docs/reference/torch_npu.md §6): a ``"nccl"`` compared with it asks
    whether the group is NCCL's (False on an NPU host either way), it chooses no backend."""
    while isinstance(expr, cst.Call) and not expr.args and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value in GROUP_NAME_METHODS:
            return True
        if expr.func.attr.value not in CASE_METHODS:
            return False
        expr = expr.func.value
    return False


def _called_with_cuda(expr: cst.BaseExpression) -> bool:
    """``f("cuda", ...)``: a call given the CUDA device by name."""
    return isinstance(expr, cst.Call) and any(string_value(arg.value) == "cuda" for arg in expr.args)


class _BackendFlow(cst.CSTVisitor):
    """Pre-pass: which ``"nccl"`` literals reach torch.distributed, and which name something else."""

    def __init__(self, scope, parents, exported: tuple[str, ...] = (), unread=lambda call: False) -> None:
        self.scope = scope
        self.parents = parents  # the module's TreeIndex.parents
        self.exported = exported  # names other project files pass to torch.distributed as the backend
        self.unread = unread  # whether nothing can read the value of an argparse option (its add_argument call)
        self.rewrite: set[cst.CSTNode] = set()
        self.ignore: set[cst.CSTNode] = set()  # Ray, Literal[...]
        self.attributes: set[cst.CSTNode] = set()  # implementation names, left unless their value flows
        self.uncertain: set[cst.CSTNode] = set()  # defaults of `x: Literal["nccl", ...]`: review
        self.sinks: set[str] = set()  # dotted names whose value is passed as a backend
        self.backend_values: set[str] = set()  # dotted names holding dist.get_backend()
        self.group_names: set[str] = set()  # dotted names holding a process group's `.name()`
        self.option_dests: set[str] = set()  # attributes of parsed argparse backend options
        self._functions: dict[str, list[cst.Param]] = {}
        self._calls: list[cst.Call] = []
        self._assigned: list[tuple[str, cst.BaseExpression]] = []
        self._compared: list[cst.Comparison] = []
        self._options: list[tuple[str, cst.Call]] = []
        self._class_attributes: list[tuple[str, cst.BaseExpression, bool]] = []  # (name, value, annotated)
        self._kinds: list[str] = []  # "class" / "function" of the enclosing definitions
        self._definitions: list[cst.FunctionDef] = []
        self._backend_kwargs: set[str] = set()  # `init_process_group(**name)`
        self._ray_kwargs: set[str] = set()  # `collective.create_collective_group(..., **name)`
        self._ray_names: set[str] = set()  # names passed to a Ray call (`backend=BACKEND`)
        self._relative_imports: set[str] = set()  # names bound by `from .x import y`: the project's own
        self._open: list[cst.FunctionDef] = []  # the enclosing functions
        self._device_mapped: list[cst.FunctionDef] = []  # functions reading dist.Backend.default_device_backend_map

    def _qualified(self, expr: cst.BaseExpression) -> str:
        return module_qualified(self.scope, expr) or ""

    def _positions(self, call: cst.Call) -> list[cst.BaseExpression]:
        """Expressions in the backend positions of a known call."""
        qualified = self._qualified(call.func)
        last = (dotted_name(call.func) or "").rpartition(".")[2]
        found = [a.value for a in call.args if a.keyword is not None and a.keyword.value in BACKEND_KEYWORDS]
        keyword, position = None, None
        if qualified in WRAPPERS:
            keyword, position = WRAPPERS[qualified]
        elif qualified.startswith("ray."):
            return []
        elif last in TORCH_BACKEND_PARAMS and self._torch_named(call.func, qualified):
            keyword, position = "backend", TORCH_BACKEND_PARAMS[last]
        elif qualified.startswith("torch.distributed.") or DIST_INIT.search(last):
            keyword = "backend"  # `init_dist(launcher, backend="nccl")`: a function named for starting distributed
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        for arg in call.args:
            if keyword is not None and arg.keyword is not None and arg.keyword.value == keyword:
                found.append(arg.value)
        if keyword is not None and position is None and qualified in WRAPPERS:
            found += [
                p for p in positional if backend_literals(p) or "backend" in (dotted_name(p) or "").rpartition(".")[2]
            ]
        elif position is not None and len(positional) > position:
            found.append(positional[position])
        if keyword is not None:  # `init_process_group(**kwargs)` with `kwargs = {"backend": ...}`
            self._backend_kwargs.update(_star_star_names(call))
        return found

    def _torch_named(self, func: cst.BaseExpression, qualified: str) -> bool:
        """Whether a callee named like one of torch.distributed's is torch's: it resolves there, or
        not at all (``self.dist.new_group``; not ``Backend``). The project's own (imported from
        another module or relatively, or a function of this file, followed by
        :meth:`_local_positions`) takes its own labels."""
        if qualified:
            return qualified.startswith("torch.distributed")
        name = dotted_name(func) or ""
        head, _, rest = name.partition(".")
        if isinstance(func, cst.Name):
            own = head in self._relative_imports or head in self._functions
        else:
            own = head in ("self", "cls") and rest in self._functions
        return not own and name.rpartition(".")[2] != "Backend"

    def _sink(self, expr: cst.BaseExpression) -> None:
        self.rewrite.update(backend_literals(expr))
        self.sinks.update(value_names(expr))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative and not isinstance(node.names, cst.ImportStar):
            self._relative_imports.update(
                dotted_name(alias.asname.name if alias.asname else alias.name) or "" for alias in node.names
            )

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if (
            self._open
            and node.attr.value == "default_device_backend_map"
            and self._qualified(node).startswith("torch.distributed.")
        ):
            self._device_mapped.append(self._open[-1])

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions[node.name.value] = named_params(node)
        self._definitions.append(node)
        self._open.append(node)
        self._kinds.append("function")

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._kinds.append("class")
        if IMPLEMENTATION_CLASS.search(node.name.value):  # `class CudaAccelerator`: names it, unless it flows
            self.attributes.update(_literals_in(node.body))

    def leave_FunctionDef(self, original_node: cst.CSTNode) -> None:
        self._open.pop()
        self._kinds.pop()

    def leave_ClassDef(self, original_node: cst.CSTNode) -> None:
        self._kinds.pop()

    def _assignment(self, target: cst.BaseExpression, value: cst.BaseExpression, annotated: bool = False) -> None:
        name = dotted_name(target)
        if not name:
            return
        if self._kinds and self._kinds[-1] == "class":
            self._class_attributes.append((name, value, annotated))
        else:
            self._assigned.append((name, value))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if (dotted_name(node.value) or "").rpartition(".")[2] == "Literal":
            self.ignore.update(_literals_in(node))

    def _is_get_backend(self, expr: cst.BaseExpression) -> bool:
        qualified = self._qualified(expr.func) if isinstance(expr, cst.Call) else ""
        return qualified.startswith("torch.distributed.") and qualified.endswith(".get_backend")

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self._qualified(node.func)
        if qualified.startswith("ray.") and qualified not in WRAPPERS:
            self.ignore.update(_literals_in(node))
            self._ray_kwargs.update(_star_star_names(node))
            self._ray_names.update(name for arg in node.args for name in value_names(arg.value))
        self._calls.append(node)
        if (dotted_name(node.func) or "").endswith("add_argument"):
            flags = [string_value(a.value) or "" for a in node.args if a.keyword is None]
            dests = [f.lstrip("-").replace("-", "_") for f in flags if f.startswith("--")] or [f for f in flags if f]
            if dests:
                self._options.append((dests[0], node))

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._assignment(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is None:
            return
        if any(string_value(s) == "nccl" for s in _literals_in(node.annotation)):
            self.uncertain.update(backend_literals(node.value))  # rewriting it breaks the annotation
        self._assignment(node.target, node.value, annotated=True)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        self._compared.append(node)

    def resolve(self) -> None:
        """Follow the values: keyword dicts, local functions passing a parameter on, assignments,
        comparisons."""
        for call in self._calls:
            for expr in self._positions(call):
                self._sink(expr)
        self.sinks.update(set(self.exported) - self._ray_names)  # `BACKEND` another file initialises with
        for name, value in self._assigned:
            if isinstance(value, cst.Dict) and (name in self._backend_kwargs or name in self._ray_kwargs):
                for element in value.elements:
                    key = string_value(element.key) if isinstance(element, cst.DictElement) else None
                    if key == "backend" or key in BACKEND_KEYWORDS:
                        if name in self._backend_kwargs:
                            self._sink(element.value)
                        else:
                            self.ignore.update(backend_literals(element.value))
        changed = True
        while changed:
            before = len(self.sinks)
            for call in self._calls:
                for expr in self._local_positions(call):
                    self._sink(expr)
            for name, value in self._assigned:  # `self.backend = DEFAULT_BACKEND`: DEFAULT_BACKEND too
                if name in self.sinks:
                    self.sinks.update(value_names(value))
            for params in self._functions.values():  # `def init(backend=DEFAULT_BACKEND)`
                for param in params:
                    if param.name.value in self.sinks and param.default is not None:
                        self.sinks.update(value_names(param.default))
            for comparison in self._compared:
                self.sinks.update(self._validated_against(comparison))
            changed = len(self.sinks) != before
        self._own_labels()
        sink_attributes = {s.rpartition(".")[2] for s in self.sinks if "." in s}
        for dest, call in self._options:
            if BACKEND_OPTION.fullmatch(dest) or dest in sink_attributes:
                literals = [
                    literal
                    for arg in call.args
                    if arg.keyword is not None and arg.keyword.value in ("default", "choices")
                    for literal in backend_literals(arg.value)
                ]
                if literals and self.unread(call):  # a default nothing reads: left as written, unreported
                    self.ignore.update(literals)
                    continue
                self.option_dests.add(dest)
                self.rewrite.update(literals)
        for name, value in self._assigned:
            if _group_name_call(value):
                self.group_names.add(name)
        for name, value in self._assigned:
            if self._is_get_backend(value):
                self.backend_values.add(name)
            elif name in self.sinks:
                self.rewrite.update(backend_literals(value))
            elif _nccl_or_gloo(value) and "backend" in name.rpartition(".")[2].lower():  # `pg_backend = ...`
                self.rewrite.update(set(backend_literals(value)) - self.attributes)
        # Class attributes: `name = "nccl"` names an implementation (left alone); a config field
        # `dist_backend: str = field(default="nccl")` is a backend option; other fields: review.
        for name, value, annotated in self._class_attributes:
            literals = backend_literals(field_default(value))
            if name in sink_attributes or BACKEND_OPTION.fullmatch(name):
                self.rewrite.update(literals)
            elif not annotated:
                self.attributes.update(literals)
        for params in self._functions.values():
            for param in params:
                if param.name.value in self.sinks and param.default is not None:
                    self.rewrite.update(backend_literals(param.default))
        for function in self._definitions:
            self.ignore.update(_compared_only_labels(function, self.sinks, self.parents))
        for comparison in self._compared:
            sides = [comparison.left, *(c.comparator for c in comparison.comparisons)]
            if _remap_test(comparison, self.parents):  # `remap(b) if b == "nccl" else b`: the token a remap reads
                self.ignore.update(literal for side in sides for literal in backend_literals(side))
            elif any(_called_with_cuda(side) for side in sides):  # `f("cuda") == "nccl"`: a mapping's test
                self.ignore.update(
                    literal for side in sides for literal in _literals_in(side) if _backend_string(literal)
                )
            elif any(self._names_group(side) for side in sides):  # `pg.name().lower() == "nccl"`: inspects a group
                self.ignore.update(literal for side in sides for literal in backend_literals(side))
            elif any(self._holds_backend(side) for side in sides):
                for side in sides:
                    self.rewrite.update(backend_literals(side))
        for function in self._device_mapped:  # asks torch for the device's backend: "nccl" is its fallback
            self.ignore.update(
                literal
                for literal in _literals_in(function)
                if _backend_string(literal) and literal not in self.rewrite
            )

    def _own_labels(self) -> None:
        """The ``"nccl"`` a call hands to the project's own ``init_process_group`` (imported from
        another module: veScale's NCCL emulator accepts only that label), directly or through a name
        nothing passes to torch: left alone, unreported."""
        labels: set[str] = set()
        for call in self._calls:
            last = (dotted_name(call.func) or "").rpartition(".")[2]
            qualified = self._qualified(call.func)
            own = (qualified and not qualified.startswith("torch.")) or (
                isinstance(call.func, cst.Name) and call.func.value in self._relative_imports
            )
            if last not in TORCH_BACKEND_PARAMS or not own:
                continue
            positional = [a.value for a in call.args if a.keyword is None and not a.star]
            given = [a.value for a in call.args if a.keyword is not None and a.keyword.value == "backend"]
            if len(positional) > TORCH_BACKEND_PARAMS[last]:
                given.append(positional[TORCH_BACKEND_PARAMS[last]])
            for expr in given:
                self.ignore.update(backend_literals(expr))
                labels.update(name for name in value_names(expr) if name not in self.sinks)
        for name, value in self._assigned:
            if name in labels:
                self.ignore.update(backend_literals(value))

    def _validated_against(self, comparison: cst.Comparison) -> list[str]:
        """``VALID`` of ``backend in VALID`` / ``backend not in VALID``: the collection of names a
        backend value is checked against, whose ``"nccl"`` must change with it."""
        found, left = [], comparison.left
        for target in comparison.comparisons:
            name = dotted_name(target.comparator)
            if isinstance(target.operator, (cst.In, cst.NotIn)) and name and self._holds_backend(left):
                found.append(name)
            left = target.comparator
        return found

    def _names_group(self, expr: cst.BaseExpression) -> bool:
        """``pg.name()``, ``pg._get_backend_name().lower()`` or a name assigned one (:func:`_group_name_call`)."""
        return _group_name_call(expr) or dotted_name(expr) in self.group_names

    def _holds_backend(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Call):
            return self._is_get_backend(expr)
        name = dotted_name(expr)
        if name is None:
            return False
        head, _, attribute = name.rpartition(".")
        return name in self.sinks or name in self.backend_values or (bool(head) and attribute in self.option_dests)

    def _local_positions(self, call: cst.Call) -> list[cst.BaseExpression]:
        """Arguments of a call to a function or method of this file that passes them on as a
        backend (``setup(0, 1, "nccl")``, ``self.start(backend="nccl")``, ``groups.get(ranks, "nccl")``)."""
        func = call.func
        last = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
        if last not in self._functions:
            return []
        names = [p.name.value for p in self._functions[last]]
        method = bool(names) and names[0] in ("self", "cls")
        if isinstance(func, cst.Attribute) != method:
            return []
        names = names[1:] if method else names
        try:
            bound = bind(call, names)
        except Unbindable:
            return []
        return [arg.value for param, arg in bound.items() if param in self.sinks]


def _compared_only_labels(function: cst.FunctionDef, sinks: set[str], parents) -> list[cst.SimpleString]:
    """The ``"nccl"`` literals of a parameter that its function only compares with literals and
    never passes on (``backend="nccl"`` ... ``assert backend == "nccl"``, the process group made
    elsewhere): a label of what the code supports, not a backend it sets up; and the default of a
    parameter its function never reads (the use commented out): it takes no effect."""
    found: list[cst.SimpleString] = []
    for param in named_params(function):
        name = param.name.value
        default = backend_literals(param.default)
        if not default or name in sinks:
            continue
        comparisons = string_comparisons(name, function.body, parents)
        if comparisons is not None:
            sides = [side for c in comparisons for side in (c.left, *(t.comparator for t in c.comparisons))]
            found += default + [literal for side in sides for literal in backend_literals(side)]
        else:
            reads = NameUses({name})
            walk(function.body, reads)
            if not reads.uses[name]:
                found += default
    return found


def _remap_test(comparison: cst.Comparison, parents) -> bool:
    """``b == "nccl"`` testing whether ``b`` holds the token the branch it selects converts in place:
    ``remap(b) if b == "nccl" else b``, ``if b == "nccl": b = remap(b)`` (slime's accelerator layer maps
    the logical ``"nccl"`` to the host's backend). It chooses no backend: rewritten to ``"hccl"``, the
    conversion would no longer see the token the callers pass."""
    if len(comparison.comparisons) != 1:
        return False
    target = comparison.comparisons[0]
    if not isinstance(target.operator, (cst.Equal, cst.NotEqual)):
        return False
    sides = (comparison.left, target.comparator)
    names = {dotted_name(side) for side in sides if not backend_literals(side)} - {None}
    owner = parents.get(comparison)
    if len(names) != 1 or not isinstance(owner, (cst.If, cst.IfExp)) or owner.test is not comparison:
        return False
    equal = isinstance(target.operator, cst.Equal)
    branch, other = (owner.body, owner.orelse) if equal else (owner.orelse, owner.body)
    if isinstance(owner, cst.IfExp):
        return _converts(branch, names) and dotted_name(other) in names
    if isinstance(branch, cst.Else):
        branch = branch.body
    return branch is not None and any(
        _converts(node.value, names) and any(dotted_name(t.target) in names for t in node.targets)
        for node in iter_nodes(branch, cst.Assign)
    )


def _converts(expr: cst.BaseExpression | None, names: set[str]) -> bool:
    """``expr`` is a call taking one of ``names`` (``remap(backend)``)."""
    return isinstance(expr, cst.Call) and any(dotted_name(arg.value) in names for arg in expr.args)


def _backend_string(node: cst.SimpleString) -> bool:
    value = string_value(node) or ""
    return value in ("nccl", UPPER) or bool(MIXED_BACKEND.fullmatch(value))


class _Literals(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found: list[cst.SimpleString] = []

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self.found.append(node)


def _names_backend(call: cst.Call, keyword: str, position: int) -> bool:
    """Whether a call passes the backend parameter (``keyword``, or positionally at ``position``), or
    may (``*args``, ``**kwargs``)."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return (
        len(positional) > position
        or any(a.star for a in call.args)
        or any(a.keyword is not None and a.keyword.value == keyword for a in call.args)
    )


def _star_star_names(call: cst.Call) -> set[str]:
    return {n for a in call.args if a.star == "**" and (n := dotted_name(a.value))}


def _literals_in(node: cst.CSTNode) -> list[cst.SimpleString]:
    finder = _Literals()
    walk(node, finder)
    return finder.found


@register
class NcclBackend(Rule):
    codes = ("NPU201",)
    # what a report reads: the string "nccl" (or "cuda:nccl" in a mixed one), is_nccl_available, dora/flashy,
    # Backend.NCCL; not the word in comments, torch.cuda.nccl or NCCL_* variables (NPU203's)
    triggers = (
        r"""["']nccl\b""",
        r"""["']NCCL["']""",
        r":nccl\b",
        r"is_nccl_available",
        r"\.\s*NCCL\b",
        r"\b(?:dora|flashy)\b",
    )
    portable_support = True

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._flow: _BackendFlow | None = None
        self._backend_tests: set[cst.Call] = set()  # is_nccl_available() choosing "nccl": rewritten

    @property
    def flow(self) -> _BackendFlow:
        if self._flow is None:
            parents = TreeIndex.of(self.ctx).parents
            self._flow = _BackendFlow(
                self.resolver.module_scope,
                parents,
                self.options.file.backend_names,
                unread=lambda call: option_unread(self.ctx, call),
            )
            walk(self.ctx.module, self._flow)
            self._flow.resolve()
        return self._flow

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if not _backend_string(node):
            return
        value = string_value(node)
        if is_cuda_alternative(self.ctx, node) or node in self.flow.ignore or self._mmengine_dist_cfg(node):
            return
        certain = node not in self.flow.uncertain
        if value == UPPER and (self.options.portable or not certain or node not in self.flow.rewrite):
            return  # torch's Backend reads names case-insensitively, but upper case is rarely a backend
        if value not in ("nccl", UPPER) and self.options.portable:
            self.report(
                "NPU201",
                node,
                f"{value!r}: not portable yet; name the accelerator's backend by hand, e.g. "
                f'f"cpu:gloo,{{{portable.device_type()}}}:{{{portable.distributed_backend(self.options)}}}"',
                tier=Tier.MANUAL,
            )
            return
        if value not in ("nccl", UPPER):
            fix = lambda n: n.with_changes(value=n.value.replace("cuda:nccl", "npu:hccl", 1))  # noqa: E731
        elif certain and node in self.flow.rewrite and self.options.portable:
            self._portable(node, '"nccl"')
            return
        elif certain and node in self.flow.rewrite:
            fix = lambda n: n.with_changes(value=n.value.replace(value, "hccl", 1))  # noqa: E731
        elif certain and node in self.flow.attributes:
            return
        else:
            self.report(
                "NPU201",
                node,
                '"nccl" not seen to reach torch.distributed; if it is the collective backend, use "hccl" '
                "(Ray collectives and library options have no HCCL spelling: leave those)",
                tier=Tier.REVIEW,
                needs_torch_npu=False,
            )
            return
        self.report("NPU201", node, 'NCCL does not exist on NPU; the collective backend is "hccl"', fix)

    def _mmengine_dist_cfg(self, node: cst.SimpleString) -> bool:
        """``env_cfg = dict(dist_cfg=dict(backend="nccl"))`` in an mmengine config: mmengine's
        ``init_dist`` ignores it on an NPU host (``init_process_group(backend="hccl")`` when
        ``is_npu_available()``; docs/reference/torch_npu.md §6): nothing to change or ask."""
        parents = TreeIndex.of(self.ctx).parents
        arg = parents.get(node)
        call = parents.get(arg)
        outer = parents.get(call)
        return (
            isinstance(arg, cst.Arg)
            and arg.keyword is not None
            and arg.keyword.value == "backend"
            and isinstance(call, cst.Call)
            and isinstance(outer, cst.Arg)
            and outer.keyword is not None
            and outer.keyword.value == "dist_cfg"
        )

    def visit_IfExp(self, node: cst.IfExp) -> None:
        """``"nccl" if dist.is_nccl_available() else "gloo"``: the test chooses the backend this
        rule renames, so it asks for HCCL (``is_backend_available``, torch >= 2.3)."""
        test = node.test
        if (
            self.options.portable
            or not isinstance(test, cst.Call)
            or test.args
            or not isinstance(test.func, cst.Attribute)  # `dist.X`: its module names the new function too
            or self.resolver.qualified_name(test.func) != "torch.distributed.is_nccl_available"
            or string_value(node.body) != "nccl"
            or not self._renamed(node.body)
            or (portable.target_torch(self.options) or (99, 0)) < (2, 3)
        ):
            return
        self._backend_tests.add(test)
        self.report(
            "NPU201",
            test,
            "`is_nccl_available()` is False on NPU: the backend choice asks whether HCCL is there "
            '(`is_backend_available("hccl")`, torch >= 2.3)',
            lambda call: call.with_changes(
                func=call.func.with_changes(attr=cst.Name("is_backend_available")),
                args=[cst.Arg(cst.SimpleString('"hccl"'))],
            ),
        )

    def _renamed(self, node: cst.BaseExpression) -> bool:
        """Whether the ``"nccl"`` string ``node`` becomes ``"hccl"`` (it reaches torch.distributed)."""
        return (
            not is_cuda_alternative(self.ctx, node)
            and node not in self.flow.ignore
            and node not in self.flow.uncertain
            and node in self.flow.rewrite
        )

    def visit_Call(self, node: cst.Call) -> None:
        if node in self._backend_tests:
            return
        qualified = self.resolver.qualified_name(node.func)
        if qualified in NCCL_DEFAULTS and not _names_backend(node, *NCCL_DEFAULTS[qualified]):
            backend = portable.distributed_backend(self.options) if self.options.portable else '"hccl"'
            self.report(
                "NPU201",
                node,
                f'`{qualified}()` initialises torch.distributed with its default backend "nccl", which an NPU '
                f"host lacks (dora asserts `backend != 'nccl'` without CUDA): pass `backend={backend}` (handed on "
                "to `init_process_group`) and call `torch.npu.set_device(local_rank)` before it (it sets only a "
                "CUDA device)",
                tier=Tier.MANUAL,
                needs_torch_npu=False,
            )
        elif qualified == "torch.distributed.is_nccl_available":
            self.report(
                "NPU201",
                node,
                "`is_nccl_available()` is False on NPU, so code guarded by it never runs; test "
                '`torch.distributed.is_backend_available("hccl")` (torch >= 2.3) instead',
                tier=Tier.MANUAL,
            )

    def _portable(self, node: cst.CSTNode, spelled: str) -> None:
        backend = portable.distributed_backend(self.options)
        alias = next((n for n, q in self.resolver.module_scope.imports.items() if q == {"torch.distributed"}), None)
        if alias is not None:  # `import torch.distributed as dist`: dist.get_default_backend_for_device(...)
            backend = backend.replace("torch.distributed.", f"{alias}.", 1)
        portable.need(self, Tier.EXACT, backend)
        self.report(
            "NPU201",
            node,
            f"NCCL does not exist on NPU; portable: {spelled} → the backend of the host's "
            f"accelerator, `{backend}` (nccl on a CUDA GPU, hccl on an Ascend NPU)",
            lambda _: cst.parse_expression(backend),
        )

    def leave_Module(self, original_node: cst.Module) -> None:
        portable.report_support(self, "NPU201")

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "NCCL" and self.resolver.qualified_name(node) == "torch.distributed.Backend.NCCL":
            if self.options.portable:
                self._portable(node, "`Backend.NCCL`")
                return
            self.report(
                "NPU201",
                node,
                "`Backend.NCCL` → `Backend.HCCL` (registered by torch_npu)",
                lambda n: n.with_changes(attr=cst.Name("HCCL")),
            )
