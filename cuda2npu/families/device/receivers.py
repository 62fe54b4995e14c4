"""What a ``.cuda()`` call is made on, when the file shows it. torch_npu adds ``.npu()`` to
``torch.Tensor`` and ``torch.nn.Module`` only (docs/reference/torch_npu.md §4); the containers of
other libraries have ``.cuda()`` and ``.to(device)`` but no ``.npu()``:
``TensorDict(...).cuda()`` becomes ``.to("npu")``. Only the libraries named here: a call of any
other library (``AutoModel.from_pretrained(...)``, ``torchvision.models.resnet50()``) usually
returns a module, which has ``.npu()``.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.bindings import assigned_values
from cuda2npu.core.statements import TreeIndex

# Top-level packages whose objects move with .cuda()/.to(device) but are neither tensors nor modules.
CONTAINER_LIBRARIES = ("tensordict", "torch_geometric", "dgl", "pytorch3d")


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
