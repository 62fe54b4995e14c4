"""What a ``.cuda()`` call is made on, when the file shows it. torch_npu adds ``.npu()`` to
``torch.Tensor`` and ``torch.nn.Module`` only (docs/reference/torch_npu.md §4); the containers of
other libraries have ``.cuda()`` and ``.to(device)`` but no ``.npu()``:
``TensorDict(...).cuda()`` becomes ``.to("npu")``. Only the libraries named here: a call of any
other library (``AutoModel.from_pretrained(...)``, ``torchvision.models.resnet50()``) usually
returns a module, which has ``.npu()``.

A TensorDict also comes out of its methods (``td.split(2)``, ``td.select(...)``, ``td[0]``), out of
dataclass fields (``batch: TensorDict``) and parameters: in a file that imports ``tensordict``, any
``.cuda()`` whose receiver is not a torch value the file shows becomes ``.to(...)``, which moves a
tensor, a module and a TensorDict alike (docs/reference/tensordict.md).

A class of the project may define a ``cuda()`` method of its own (flux's TensorRT ``Engine``, which
loads its engine there): ``self.cuda()`` in it, and ``.cuda()`` on an instance of it
(``self.decoder.cuda()`` where ``self.decoder`` is a ``VAEDecoder(Engine)``), call that method, and
``.npu()`` would not be there (:func:`own_cuda_class`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import libcst as cst

from cuda2npu.core.bindings import assigned_values, self_assignments
from cuda2npu.core.literals import string_value
from cuda2npu.core.names import dotted_name
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes

# Top-level packages whose objects move with .cuda()/.to(device) but are neither tensors nor modules.
CONTAINER_LIBRARIES = ("tensordict", "torch_geometric", "dgl", "pytorch3d")
# bitsandbytes' parameters, whose `.cuda()` quantizes the weights as it moves them (bitsandbytes/nn/modules.py)
QUANTIZING_PARAMETERS = {
    f"bitsandbytes.nn{module}.{name}" for module in ("", ".modules") for name in ("Int8Params", "Params4bit")
}
TENSORDICT = "tensordict"
TOP_LEVEL_LINE = re.compile(rb"^[^\s#].*", re.MULTILINE)  # a module-level statement's first line
TENSORDICT_FIELD = re.compile(  # `    batch: TensorDict = None`, `    self.batch: Optional[TensorDict] = ...`
    rb"^[ \t]+(?:self\.)?\w+[ \t]*:[ \t]*(?:Optional\[|[\"'])?(?:tensordict\.)?TensorDict\b", re.MULTILINE
)
CLASS_LINE = re.compile(rb"^([ \t]*)class[ \t]+(\w+)[ \t]*(?:\(([^)]*)\))?[ \t]*:", re.MULTILINE)
CUDA_METHOD = re.compile(rb"^([ \t]+)def[ \t]+cuda[ \t]*\(", re.MULTILINE)
# Top-level packages whose calls return tensors or modules (``AutoModel.from_pretrained(...)``).
TORCH_LIBRARIES = ("torch", "torchvision", "transformers", "timm")


def tensordict_holders(texts: Mapping[Path, bytes]) -> tuple[str, ...]:
    """The project's module-level classes with a field annotated ``TensorDict`` (verl's
    ``DataProto``: ``batch: TensorDict = None``), from a regex over the files that name tensordict
    (a project fact: cuda2npu/project/facts.py)."""
    names: set[str] = set()
    for text in texts.values():
        if b"tensordict" not in text:
            continue
        for field in TENSORDICT_FIELD.finditer(text):
            owner = None
            for line in TOP_LEVEL_LINE.finditer(text, 0, field.start()):
                owner = re.match(rb"class[ \t]+(\w+)", line.group())
            if owner is not None:
                names.add(owner.group(1).decode())
    return tuple(sorted(names))


def tensordict_source(rule) -> str | None:
    """Why a ``.cuda()`` receiver of the file may be a TensorDict: the file imports tensordict, or
    a class of the project holding one (``Options.tensordict_holders``); None when nothing says so."""
    holders = set(rule.options.project.tensordict_holders)
    for scope in rule.resolver.scopes.values():
        for names in scope.imports.values():
            for name in names:
                if name.split(".")[0] == TENSORDICT:
                    return "this file imports tensordict"
                if name.rpartition(".")[2] in holders:
                    return f"this file imports `{name.rpartition('.')[2]}`, a class of the project holding one"
    return None


def torch_value(rule, receiver: cst.BaseExpression) -> bool:
    """``receiver`` is a tensor or module by what the file shows: a call of torch (``torch.zeros(2)``,
    ``nn.Linear(4, 4)``) or of a library of models (``AutoModel.from_pretrained(...)``), a method
    chain on one (``torch.ones(2).float()``), or a plain name bound once, in its scope, to one."""
    if isinstance(receiver, cst.Name):
        receiver = _single_binding(rule, receiver.value)
    while isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute):
        if not isinstance(receiver.func.value, cst.Call):
            break
        receiver = receiver.func.value
    if not isinstance(receiver, cst.Call):
        return False
    name = rule.resolver.qualified_name(receiver.func)
    return name is not None and name.split(".")[0] in TORCH_LIBRARIES


def foreign_constructor(rule, receiver: cst.BaseExpression) -> str | None:
    """The qualified name of the container library's callable that built ``receiver``
    (``tensordict.TensorDict``), or of bitsandbytes' parameter class (``QUANTIZING_PARAMETERS``):
    ``receiver`` is a call of it, a plain name bound once, in the enclosing function (or module), to
    such a call, or a ``self`` attribute its class's methods assign once, that call. None: anything else."""
    if isinstance(receiver, cst.Name):
        receiver = _single_binding(rule, receiver.value)
    elif isinstance(receiver, cst.Attribute) and dotted_name(receiver.value) == "self":
        index = TreeIndex.of(rule.ctx)
        owner = index.enclosing_class(rule.ctx.statement)
        assigned = [
            value
            for method, value in self_assignments(rule.ctx).get(receiver.attr.value, [])
            if owner is not None and index.enclosing_class(method) is owner
        ]
        receiver = assigned[0] if len(assigned) == 1 else None
    if not isinstance(receiver, cst.Call):
        return None
    name = rule.resolver.qualified_name(receiver.func)
    if name is None:
        return None
    return name if name.split(".")[0] in CONTAINER_LIBRARIES or name in QUANTIZING_PARAMETERS else None


def _single_binding(rule, name: str) -> cst.BaseExpression | None:
    """The value of the only assignment to ``name`` in the scope of the current statement (moves of
    it, ``name = name.cuda()``, do not count; any other binding of it: not known)."""
    statement = rule.ctx.statement
    if statement is None:
        return None
    scope = TreeIndex.of(rule.ctx).function.get(statement) or rule.ctx.module
    values = assigned_values(scope, name)
    values = [value for value in values if not _moved(value, name)] if values is not None else []
    return values[0] if len(values) == 1 else None


def _moved(value: cst.BaseExpression, name: str) -> bool:
    """``name.cuda()`` / ``name.to(...)`` / ``name.npu()`` / ``name.cpu()``: the same object, moved."""
    return (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and isinstance(value.func.value, cst.Name)
        and value.func.value.value == name
        and value.func.attr.value in ("cuda", "to", "npu", "cpu")
    )


def cuda_method_classes(texts: Mapping[Path, bytes]) -> tuple[str, ...]:
    """The project's classes with a ``cuda`` method of their own (``class Engine: def cuda(self)``)
    and their subclasses, by name (a base named in another file counts), from a regex over the
    files' ``class``/``def cuda(`` lines (a project fact: cuda2npu/project/facts.py)."""
    found: set[str] = set()
    for text in texts.values():
        if b"def cuda" not in text:
            continue
        classes = [(m.start(), len(m.group(1)), m.group(2).decode()) for m in CLASS_LINE.finditer(text)]
        for method in CUDA_METHOD.finditer(text):
            owner = [
                name for start, indent, name in classes if start < method.start() and indent < len(method.group(1))
            ]
            if owner:
                found.add(owner[-1])
    if not found:
        return ()
    bases = {
        m.group(2).decode(): {b.strip().rpartition(".")[2] for b in (m.group(3) or b"").decode().split(",")}
        for text in texts.values()
        for m in CLASS_LINE.finditer(text)
    }
    return tuple(sorted(_with_subclasses(found, bases)))


def _with_subclasses(found: set[str], bases: dict[str, set[str]]) -> set[str]:
    """``found`` and every class of ``bases`` (class → its base names) deriving from one of them."""
    found = set(found)
    grown = True
    while grown:
        grown = False
        for name, parents in bases.items():
            if name not in found and parents & found:
                found.add(name)
                grown = True
    return found


def own_cuda_classes(ctx) -> frozenset[str]:
    """The classes with a ``cuda`` method of their own or inherited from one, of this file and of the
    project (``ProjectFacts.cuda_method_classes``), by name."""
    return ctx.file_state(_own_cuda_classes)


def _own_cuda_classes(ctx) -> frozenset[str]:
    project = set(ctx.options.project.cuda_method_classes)
    if ctx.text is not None and b"cuda" not in ctx.text:
        return frozenset(project)
    classes = list(iter_nodes(ctx.module, cst.ClassDef))
    direct = {c.name.value for c in classes if any(m.name.value == "cuda" for m in _methods(c))}
    bases = {c.name.value: {(dotted_name(b.value) or "").rpartition(".")[2] for b in c.bases} for c in classes}
    return frozenset(_with_subclasses(project | direct, bases))


def _methods(cls: cst.ClassDef) -> list[cst.FunctionDef]:
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    return [statement for statement in body if isinstance(statement, cst.FunctionDef)]


def own_cuda_class(rule, receiver: cst.BaseExpression, owner: cst.ClassDef | None) -> str | None:
    """The class with a ``cuda`` method of its own (:func:`own_cuda_classes`) whose instance
    ``receiver`` is, in the class ``owner`` that the call is in: ``self`` (``owner`` itself),
    ``super()`` (a base of ``owner``), ``self.decoder`` where the file assigns it such an instance
    (``self.decoder = VAEDecoder(...)``, or a parameter annotated with the class: ``decoder:
    VAEDecoder``), a plain name bound once to one, a parameter so annotated, or a member of the class
    (``Signal.FORWARD``, an enum's). None: anything else."""
    classes = own_cuda_classes(rule.ctx)
    if not classes:
        return None
    if isinstance(receiver, cst.Name) and receiver.value == "self" and owner is not None:
        return owner.name.value if owner.name.value in classes else None
    if isinstance(receiver, cst.Call) and dotted_name(receiver.func) == "super" and owner is not None:
        parents = [(dotted_name(b.value) or "").rpartition(".")[2] for b in owner.bases]
        return next((p for p in parents if p in classes), None)
    if isinstance(receiver, cst.Attribute) and dotted_name(receiver.value) == "self":
        return rule.ctx.file_state(_attribute_classes).get(receiver.attr.value)
    if isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name) and receiver.value.value in classes:
        return receiver.value.value  # a member of the class: NeMo-Aligner's `ServerSignal.FORWARD.cuda()` (an IntEnum)
    if isinstance(receiver, cst.Name):
        function = TreeIndex.of(rule.ctx).function.get(rule.ctx.statement) if rule.ctx.statement else None
        found = _parameter_class(function, receiver.value, classes) if function is not None else None
        return found or _instance_class(_single_binding(rule, receiver.value), classes)
    return _instance_class(receiver, classes)  # `sp.SparseTensor(...).cuda()` (TRELLIS, round 58)


def imported_cuda_class(rule) -> str | None:
    """A class of the project with a ``cuda()`` of its own (:func:`own_cuda_classes`) that the file imports
    by name (TRELLIS' trainers: ``from ...modules.sparse import SparseTensor``, whose batches hold one): a
    ``.cuda()`` receiver not known to be a tensor or module may be one. None where the file imports none."""
    classes = own_cuda_classes(rule.ctx)
    if not classes or (rule.ctx.text is not None and not any(name.encode() in rule.ctx.text for name in classes)):
        return None
    for statement in iter_nodes(rule.ctx.module, cst.ImportFrom):  # relative imports too
        if isinstance(statement.names, cst.ImportStar):
            continue
        found = next(
            (a.name.value for a in statement.names if isinstance(a.name, cst.Name) and a.name.value in classes), None
        )
        if found is not None:
            return found
    return None


def _attribute_classes(ctx) -> dict[str, str]:
    """``self.<attr>`` → the classes with a ``cuda`` method the assignments of the file give it (an
    instance, or a parameter annotated with that class), as ``A`` or ``A`, `B`` (lightllm's
    ``self.model``: a ``LlavaVisionModel()``, a ``VisionTransformer(...)`` or a ``Gemma3VisionModel()``
    by model type, each with its own ``cuda()``; round 28)."""
    classes = own_cuda_classes(ctx)
    found: dict[str, set[str]] = {}
    for attr, assignments in self_assignments(ctx).items():
        for function, value in assignments:
            cls = _instance_class(value, classes)
            if cls is None and isinstance(value, cst.Name):
                cls = _parameter_class(function, value.value, classes)
            if cls is not None:
                found.setdefault(attr, set()).add(cls)
    return {attr: "`, `".join(sorted(names)) for attr, names in found.items()}


def _instance_class(value: cst.BaseExpression | None, classes: frozenset[str]) -> str | None:
    """``VAEDecoder(...)`` → ``VAEDecoder`` when it is one of ``classes``; also an alternate constructor,
    ``Pipeline.from_pretrained(...)`` (InstantID's pipeline class with a ``cuda()`` of its own, round 57)."""
    if not isinstance(value, cst.Call):
        return None
    func = value.func
    if isinstance(func, cst.Attribute) and func.attr.value.startswith("from_"):
        func = func.value  # `Class.from_pretrained(...)`, `Class.from_single_file(...)`
    name = (dotted_name(func) or "").rpartition(".")[2]
    return name if name in classes else None


def _parameter_class(function: cst.FunctionDef, name: str, classes: frozenset[str]) -> str | None:
    """The class of ``classes`` the annotation of ``function``'s parameter ``name`` names
    (``decoder: VAEDecoder``, ``encoder: VAEEncoder | None``, ``Optional["VAEEncoder"]``)."""
    for param in iter_nodes(function.params, cst.Param):
        if param.name.value != name or param.annotation is None:
            continue
        named = {n.value for n in iter_nodes(param.annotation.annotation, cst.Name)}
        named |= {
            (string_value(s) or "").rpartition(".")[2]
            for s in iter_nodes(param.annotation.annotation, cst.SimpleString)
        }
        return next((cls for cls in sorted(named & classes)), None)
    return None
