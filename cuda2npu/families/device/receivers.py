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
"""

from __future__ import annotations

import re
from pathlib import Path

import libcst as cst

from cuda2npu.core.bindings import assigned_values
from cuda2npu.core.statements import TreeIndex

# Top-level packages whose objects move with .cuda()/.to(device) but are neither tensors nor modules.
CONTAINER_LIBRARIES = ("tensordict", "torch_geometric", "dgl", "pytorch3d")
TENSORDICT = "tensordict"
TOP_LEVEL_LINE = re.compile(rb"^[^\s#].*", re.MULTILINE)  # a module-level statement's first line
TENSORDICT_FIELD = re.compile(  # `    batch: TensorDict = None`, `    self.batch: Optional[TensorDict] = ...`
    rb"^[ \t]+(?:self\.)?\w+[ \t]*:[ \t]*(?:Optional\[|[\"'])?(?:tensordict\.)?TensorDict\b", re.MULTILINE
)
# Top-level packages whose calls return tensors or modules (``AutoModel.from_pretrained(...)``).
TORCH_LIBRARIES = ("torch", "torchvision", "transformers", "timm")


def tensordict_holders(texts: dict[Path, bytes]) -> tuple[str, ...]:
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
    (``tensordict.TensorDict``): ``receiver`` is a call of it, or a plain name bound once, in the
    enclosing function (or module), to such a call. None: anything else."""
    if isinstance(receiver, cst.Name):
        receiver = _single_binding(rule, receiver.value)
    if not isinstance(receiver, cst.Call):
        return None
    name = rule.resolver.qualified_name(receiver.func)
    return name if name is not None and name.split(".")[0] in CONTAINER_LIBRARIES else None


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
