"""Which expressions are devices: names and keys named like a device, device-type expressions
(``x.device.type``, ``str(x.device)``), device strings with an index, environment reads of a device
variable, and the names a file passes in device positions."""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.core.literals import DEVICE_STRING, NOT_LITERAL, device_literals, string_value
from cuda2npu.core.literals import literal as python_literal
from cuda2npu.core.names import dotted_name
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes, walk

DEVICE_KEYWORDS = {"device", "map_location", "device_type"}

DEVICE_NAME = re.compile(r"(^|_)(device|dev)(_|$)|^device|device$", re.IGNORECASE)

DEVICE_CALLS = {
    "torch.device",
    "torch.Generator",
    "torch.set_default_device",
    "torch.get_device_module",
    "torch.distributed.device_mesh.init_device_mesh",
    "torch.distributed.init_device_mesh",
    "torch.distributed.device_mesh.DeviceMesh",
    "torch.distributed.DeviceMesh",
    "torch.distributed.tensor.DeviceMesh",
    "torch.distributed._tensor.DeviceMesh",
    "torch.distributed._tensor.device_mesh.DeviceMesh",
    "fairseq2.typing.Device",  # `Device: TypeAlias = torch.device` (fairseq2 0.2, src/fairseq2/typing.py)
}

DEVICE_MODULES = ("torch.cuda.", "torch.npu.")  # their functions take a device as first argument
# loaders whose second positional parameter is the device the data lands on (`torch.load(f, "cuda")`)
SECOND_ARGUMENT_DEVICE = {"torch.load", "torch.jit.load", "safetensors.torch.load_file"}

DEVICE_TYPES = {"cpu", "cuda", "mps", "xpu", "hpu", "mlu", "meta"}  # torch's device types (a table keyed by them)

AMBIGUOUS_KEYWORDS = {"accelerator", "backend_device", "devices"}

SPLITS = {"split", "rsplit", "partition", "rpartition"}

ENV_CALLS = {  # environment reads with a default (setdefault: a write that reads)
    f"{prefix}{call}" for prefix in ("os.", "") for call in ("getenv", "environ.get", "environ.setdefault")
}


def device_getter(ctx, node: cst.Return) -> bool:
    """``node`` returns a string from a function named like a device (``get_device``, ``select_device``): LTX-Video's
    ``def get_device(): if torch.cuda.is_available(): return "cuda"`` (round 43), whose result the file
    moves the pipeline to; its ``"cuda"`` is a device, not a label."""
    if not isinstance(node.value, cst.SimpleString):
        return False  # `return accelerator_type() or "cuda"`: chosen with what else the function returns
    index = TreeIndex.of(ctx)
    function = index.function.get(index.statement_of(node))
    return function is not None and bool(DEVICE_NAME.search(function.name.value))


def looks_like_device(target: cst.BaseExpression) -> bool:
    """Names, attributes and string-keyed items such as ``device``, ``DEVICE``, ``self.dev``,
    ``train_device``, ``kwargs["device_type"]`` (mamba's custom_fwd wrapper), and reads of an
    environment variable so named (``os.getenv("DEVICE", "cuda")``, as ``os.environ["DEVICE"]``:
    picotron sets the variable in one file and compares it with "cuda" in another)."""
    if isinstance(target, cst.Name):
        name = target.value
    elif isinstance(target, cst.Attribute):
        name = target.attr.value
    elif isinstance(target, cst.Subscript) and len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index):
        name = string_value(target.slice[0].slice.value) or ""
    elif isinstance(target, cst.Call):
        name = environment_variable(target)
    else:
        name = ""
    return bool(name) and bool(DEVICE_NAME.search(name))


def environment_variable(call: cst.Call) -> str:
    """The variable ``os.getenv(K, ...)``, ``os.environ.get(K, ...)`` or ``os.environ.setdefault(K, ...)``
    names ("" for any other call)."""
    if (dotted_name(call.func) or "") not in ENV_CALLS or not call.args or call.args[0].keyword is not None:
        return ""
    return string_value(call.args[0].value) or ""


def environment_default(call: cst.Call) -> cst.BaseExpression | None:
    """The default (or, for ``setdefault``, the value) of an environment read :func:`environment_variable` names."""
    positional = [a.value for a in call.args if a.keyword is None]
    keyword = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "default"), None)
    return positional[1] if len(positional) > 1 else keyword


def is_device_type_expr(expr: cst.BaseExpression) -> bool:
    """``x.device.type``, ``device.type``, ``torch.device(d).type``, ``args.device``, ``device``,
    ``str(x.device)``, ``device.split(":")[0]``, ``getattr(device, "type", None)``."""
    if isinstance(expr, cst.Attribute) and expr.attr.value == "type":
        inner = expr.value
        if isinstance(inner, cst.Call) and (dotted_name(inner.func) or "").endswith("device"):
            return True
        return looks_like_device(inner)
    if isinstance(expr, cst.Call) and dotted_name(expr.func) == "str" and len(expr.args) == 1:
        return is_device_type_expr(expr.args[0].value)
    if isinstance(expr, cst.Call) and dotted_name(expr.func) == "getattr" and len(expr.args) >= 2:
        # RVC's `getattr(_AUDIO_DEVICE, "type", None) == "cuda"` (round 55): `device.type` spelled with getattr
        return string_value(expr.args[1].value) == "type" and looks_like_device(expr.args[0].value)
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Call):
        func = expr.value.func
        return isinstance(func, cst.Attribute) and func.attr.value in SPLITS and is_device_type_expr(func.value)
    return looks_like_device(expr)


def plain_data(expr: cst.BaseExpression) -> bool:
    """A literal, or a dict of literals with string keys (``{"num_requests": 100}``)."""
    if isinstance(expr, cst.Dict):
        return all(
            isinstance(e, cst.DictElement) and string_value(e.key) is not None and plain_data(e.value)
            for e in expr.elements
        )
    return python_literal(expr) is not NOT_LITERAL


def indexed_device(expr: cst.BaseExpression) -> bool:
    """``"cuda:0"``, ``f"cuda:{i}"``, ``"cuda:" + str(i)``, ``"cuda:%d" % i``, ``"cuda:{}".format(i)``."""
    if isinstance(expr, cst.SimpleString):
        value = string_value(expr)
        return value is not None and value.startswith("cuda:") and DEVICE_STRING.fullmatch(value) is not None
    if isinstance(expr, cst.FormattedString):
        first = expr.parts[0] if expr.parts else None
        return isinstance(first, cst.FormattedStringText) and first.value == "cuda:" and len(expr.parts) == 2
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Modulo)):
        return string_value(expr.left) in ("cuda:", "cuda:%d", "cuda:%s", "cuda:%i")
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "format":
        return string_value(expr.func.value) == "cuda:{}"
    return False


def indexed_devices(expr: cst.BaseExpression) -> bool:
    """A device with an index (:func:`indexed_device`), a list, tuple or set holding one
    (``devices=["cuda:0", "cuda:1"]``) or a comprehension of them (``[f"cuda:{i}" for i in ids]``)."""
    if isinstance(expr, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
        expr = expr.elt
    if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
        return any(indexed_device(element.value) for element in expr.elements)
    return indexed_device(expr)


def is_device_string(expr: cst.BaseExpression) -> bool:
    value = string_value(expr)
    return value is not None and DEVICE_STRING.fullmatch(value) is not None


def display_members(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The elements of a tuple, list or set display; ``[expr]`` for anything else."""
    return [e.value for e in expr.elements] if isinstance(expr, (cst.Tuple, cst.List, cst.Set)) else [expr]


def compared_pairs(comparison: cst.Comparison) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """The operand pairs a comparison compares (``a < b < c``: ``(a, b)``, ``(b, c)``)."""
    operands = [comparison.left, *(target.comparator for target in comparison.comparisons)]
    return list(zip(operands, operands[1:]))


def calls_in(expr: cst.BaseExpression) -> list[cst.Call]:
    """Calls at the top of a boolean test (``a()``, ``not a()``, ``a() and b``)."""
    if isinstance(expr, cst.Call):
        return [expr]
    if isinstance(expr, cst.UnaryOperation):
        return calls_in(expr.expression)
    if isinstance(expr, cst.BooleanOperation):
        return calls_in(expr.left) + calls_in(expr.right)
    return []


def cuda_type_literals(expr: cst.BaseExpression, is_device) -> list[cst.BaseExpression]:
    """The ``"cuda"`` literals ``expr`` compares with a device type (``x.device.type == "cuda"``, also
    as a member of ``x.device.type in ("cuda", "xpu")``: AQLM's Triton kernel gate;
    ``is_device(side, literal)``: ``device_roles.device_side``)."""
    return [
        element
        for comparison in iter_nodes(expr, cst.Comparison)
        for first, second in compared_pairs(comparison)
        for device, literal in ((first, second), (second, first))
        if is_device(device, literal)
        for element in display_members(literal)
        if string_value(element) == "cuda"
    ]


class DeviceVariableUses(cst.CSTVisitor):
    """Pre-pass: names passed in device positions anywhere in the file (``.to(dev)``, ``device=dev``)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        candidates = [a.value for a in node.args if a.keyword is not None and a.keyword.value in DEVICE_KEYWORDS]
        positional = [a.value for a in node.args if a.keyword is None]
        func = node.func
        is_to = isinstance(func, cst.Attribute) and func.attr.value == "to"
        if positional and (is_to or (dotted_name(func) or "").endswith("device")):
            candidates.append(positional[0])
        self.names.update(c.value for c in candidates if isinstance(c, cst.Name))


def device_variables(ctx) -> frozenset[str]:
    """Names the file of ``ctx`` passes in device positions anywhere (computed once per file, on
    first need)."""
    return ctx.file_state(_find_device_variables)


def _find_device_variables(ctx) -> frozenset[str]:
    uses = DeviceVariableUses()
    walk(ctx.module, uses)
    return frozenset(uses.names)


def cuda_call_devices(ctx, call: cst.Call) -> list[cst.CSTNode]:
    """The CUDA device literals among the arguments of ``call`` (``torch.cuda.X(...)``): each argument's own
    (``set_device("cuda:1")``) and those ``torch.device(...)`` builds there (``get_device_properties(torch.device(
    "cuda"))``). They change with the call: cuda_api renames both or neither (PaLM-rlhf-pytorch, stable-audio-tools
    and denoising-diffusion-pytorch keep the call behind a feature switch, rounds 52 and 54)."""
    found = []
    for arg in call.args:
        found += device_literals(arg.value)
        for inner in iter_nodes(arg.value, cst.Call):
            if ctx.resolver.qualified_name(inner.func) == "torch.device" and inner.args:
                found += device_literals(inner.args[0].value)
    return found


def in_cuda_call(ctx, node: cst.CSTNode) -> bool:
    """Whether ``node`` is among the :func:`cuda_call_devices` of a ``torch.cuda.X(...)`` call (an attribute:
    ``set_device(...)`` imported from torch.cuda goes with its import, and NPU104 renames its device)."""
    parents = TreeIndex.of(ctx).parents
    current = parents.get(node)
    while current is not None and not isinstance(current, cst.BaseStatement):
        if isinstance(current, cst.Call) and isinstance(current.func, cst.Attribute):
            if (ctx.resolver.qualified_name(current.func) or "").startswith("torch.cuda."):
                return node in cuda_call_devices(ctx, current)
        current = parents.get(current)
    return False
