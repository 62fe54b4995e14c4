"""What a name is to the code around it: a device (passed in a device position, compared with a
device string), a device type a function maps, a registry key, a label only compared with strings,
an onnxruntime device. Each answer is computed once per file and node (``RuleContext.file_state``)."""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.core.literals import device_literals, string_value
from cuda2npu.core.names import NameUses, dotted_name, string_comparisons
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes, walk
from cuda2npu.families.device.device_branches import does_nothing, picks_ort_provider
from cuda2npu.families.device.device_callees import own_functions
from cuda2npu.families.device.device_expressions import (
    DEVICE_CALLS,
    DEVICE_KEYWORDS,
    DeviceVariableUses,
    compared_pairs,
    display_members,
    environment_variable,
    indexed_device,
    is_device_type_expr,
    looks_like_device,
)

KEY_METHODS = ("setdefault", "get", "pop")  # dict methods whose first argument is a key
# platforms and build targets that are no torch device type: a name compared with one is a platform label
PLATFORM_TARGETS = frozenset({"rocm", "hip", "neuron", "empty"})
PLATFORM_TEXT = re.compile(rb"""["'](?:rocm|hip|neuron|empty)["']""")  # one of them as a string literal


def device_side(ctx, expr: cst.BaseExpression, other: cst.BaseExpression) -> bool:
    """``expr``, compared with ``other``, is a device or its type: :func:`is_device_type_expr`, or
    a :func:`device_value` (or its ``.type``) compared with a CUDA device string; not a
    :func:`platform_label`."""
    if platform_label(ctx, expr):
        return False
    if is_device_type_expr(expr):
        return True
    value = expr.value if isinstance(expr, cst.Attribute) and expr.attr.value == "type" else expr
    return (
        isinstance(value, cst.Name)
        and bool(device_literals(other, prefix_ok=True))
        and (device_value(ctx, value) or device_type_name(ctx, value))
    )


def device_type_name(ctx, expr: cst.Name) -> bool:
    """``expr`` is a name its function also compares with ``"cpu"``: a device type the function maps
    (FlexLLMGen's ``DeviceType.convert(name)``: ``if name == "cpu": ... elif name == "cuda": ...
    else: raise ValueError(f"Invalid name: {name}")``, called with ``torch.device(...).type``)."""
    function = TreeIndex.of(ctx).enclosing_function(expr)
    return function is not None and any(
        any(isinstance(side, cst.Name) and side.value == expr.value for side in sides)
        and any(string_value(side) == "cpu" for side in sides)
        for comparison in iter_nodes(function.body, cst.Comparison)
        for sides in [(comparison.left, *(target.comparator for target in comparison.comparisons))]
    )


def device_value(ctx, expr: cst.BaseExpression) -> bool:
    """``expr`` is a name its function also uses as a device (:func:`_device_names_of`):
    LatentSync's ``if s == "cuda": return 0`` before ``torch.device(s).type != "cuda"`` is a
    device comparison too, rewritten with the other (a parser half rewritten takes ``"npu"`` to
    ``torch.device("npu").index``, None). A name only compared stays a label."""
    if not isinstance(expr, cst.Name):
        return False
    function = TreeIndex.of(ctx).enclosing_function(expr)
    return function is not None and expr.value in _device_names_of(ctx, function)


def _device_names_of(ctx, function: cst.FunctionDef) -> frozenset[str]:
    """The names ``function`` uses as a device: passed as the first argument of ``torch.device``-like
    calls (``DEVICE_CALLS``) or of ``.to()``, as ``device=`` / ``map_location=`` / ``device_type=``,
    assigned such a call (``d = torch.device(s)``), or returned where it also returns a device with an
    index (lerobot's ``if s == "cuda" and torch.cuda.is_available(): return f"cuda:{rank}"`` ...
    ``return s``: the name is the device the function resolves)."""
    known = ctx.file_state(_device_names)
    if function not in known:
        found = set()
        for call in iter_nodes(function.body, cst.Call):
            positional = [a.value for a in call.args if a.keyword is None]
            is_to = isinstance(call.func, cst.Attribute) and call.func.attr.value == "to"
            if positional and (is_to or ctx.resolver.qualified_name(call.func) in DEVICE_CALLS):
                found.add(positional[0])
            found.update(a.value for a in call.args if a.keyword is not None and a.keyword.value in DEVICE_KEYWORDS)
        for assign in iter_nodes(function.body, cst.Assign):
            value = assign.value
            if isinstance(value, cst.Call) and ctx.resolver.qualified_name(value.func) in DEVICE_CALLS:
                found.update(target.target for target in assign.targets)
        returned = [r.value for r in iter_nodes(function.body, cst.Return) if r.value is not None]
        if any(indexed_device(value) for value in returned):
            found.update(returned)
        known[function] = frozenset(v.value for v in found if isinstance(v, cst.Name))
    return known[function]


def is_stub(ctx, param: cst.Param) -> bool:
    """``param`` belongs to a function that does nothing: its body is only ``pass``, ``...``, a
    docstring or ``raise NotImplementedError`` (mistral-inference's abstract ``from_folder``)."""
    function = TreeIndex.of(ctx).parents.get(TreeIndex.of(ctx).parents.get(param))
    if not isinstance(function, cst.FunctionDef):
        return False
    body = function.body
    if isinstance(body, cst.SimpleStatementSuite):
        statements = list(body.body)
    elif all(isinstance(line, cst.SimpleStatementLine) for line in body.body):
        statements = [statement for line in body.body for statement in line.body]
    else:
        return False
    return all(does_nothing(statement) for statement in statements)


def param_role(ctx, param: cst.Param) -> str | None:
    """What a parameter is to its function: ``"device"`` when it is named like a device
    (``ema_device``) and read, or passed in a device position (``.to(target)``); ``"key"`` when it
    is named like a device and only used as a key (``registry[device]``,
    ``table.setdefault(device, ...)``): a registry keyed by device type, whose ``"cuda"`` is the
    CUDA entry next to the project's own ``"npu"`` one (verl's engine registry), not a device to
    move tensors to; ``"unread"`` when it is named like a device and never read (nor ``locals()``); ``"runtime"`` when
    the function tests it against a string to pick an onnxruntime execution provider (an ONNX
    encoder's ``device="cuda"``: onnxruntime's device, not torch's); else None."""
    known = ctx.file_state(_param_roles)
    if param not in known:
        function = TreeIndex.of(ctx).parents.get(TreeIndex.of(ctx).parents.get(param))
        body = function.body if isinstance(function, (cst.FunctionDef, cst.Lambda)) else None
        role = None
        if looks_like_device(param.name) and body is not None and picks_ort_provider(body, param.name.value):
            role = "runtime"
        elif looks_like_device(param.name):
            reads = NameUses({param.name.value}) if body is not None else None
            if reads is not None:
                walk(body, reads)
            uses = reads.uses[param.name.value] if reads is not None else []
            known[param] = None  # a call cycle ends here
            if uses and all(_forwarded_to_runtime(ctx, function, use) for use in uses):
                role = "runtime"
            else:
                if not uses:
                    role = "device" if _reads_locals(body) else "unread"
                else:
                    role = "key" if all(_as_key(ctx, use) for use in uses) else "device"
        elif body is not None:
            devices = DeviceVariableUses()
            walk(body, devices)
            role = "device" if param.name.value in devices.names else None
            if role == "device" and param.name.value in ctx.file_state(_names_compared_with_cuda):
                role = None  # sam2's `accelerator="cuda"`, tested `accelerator == "cuda"` elsewhere: a label too
            if role is None and _compared_only(ctx, param.name.value, body):
                role = "label"
        known[param] = role
    return known[param]


def _reads_locals(body: cst.CSTNode | None) -> bool:
    """Whether ``body`` calls ``locals()`` (``**locals()`` reads every parameter without naming it)."""
    return body is not None and any(
        isinstance(call.func, cst.Name) and call.func.value == "locals" for call in iter_nodes(body, cst.Call)
    )


def _forwarded_to_runtime(ctx, function: cst.FunctionDef, use: cst.Name) -> bool:
    """``use`` is an argument of a call to a class of this file (``Yolo(path, device)``,
    ``super().__init__(path, device=device)`` in a method of its subclass, or ``self.set_device(device)``
    in a method of the class) at a parameter picking an
    onnxruntime provider (``"runtime"``): Wan2.2's ``Pose2d`` → ``Yolo`` → ``SimpleOnnxInference``
    (round 41), whose ``device="cuda"`` defaults are onnxruntime's device all the way down."""
    parents = TreeIndex.of(ctx).parents
    arg = parents.get(use)
    call = parents.get(arg)
    if not (isinstance(arg, cst.Arg) and arg.value is use and isinstance(call, cst.Call)):
        return False
    functions = ctx.file_state(own_functions)
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "__init__" and isinstance(func.value, cst.Call):
        owner = TreeIndex.of(ctx).enclosing_class(function)  # super().__init__(...), super(Cls, self).__init__(...)
        bases = [dotted_name(base.value) or "" for base in owner.bases] if owner is not None else []
        callee = next((functions[(b, "__init__")] for b in bases if (b, "__init__") in functions), None)
    elif isinstance(func, cst.Name):
        callee = functions.get((func.value, "__init__"))
    elif isinstance(func, cst.Attribute) and dotted_name(func.value) == "self":  # `self.set_device(device)`
        owner = TreeIndex.of(ctx).enclosing_class(function)
        callee = functions.get((owner.name.value, func.attr.value)) if owner is not None else None
    else:
        callee = None
    if callee is None:
        return False
    params = list(callee.params.params)[1:]  # after self
    if arg.keyword is not None:
        target = next((p for p in (*params, *callee.params.kwonly_params) if p.name.value == arg.keyword.value), None)
    else:
        index = [a for a in call.args if a.keyword is None].index(arg)
        target = params[index] if index < len(params) and arg.star == "" else None
    return target is not None and param_role(ctx, target) == "runtime"


def _names_compared_with_cuda(ctx) -> frozenset[str]:
    """The last names of the expressions this file compares with a ``"cuda"`` literal (``accelerator
    == "cuda"``, ``self.accelerator != "cuda"``): a parameter of that name, not named like a device,
    is a label the code tests, whose default changes with those tests or not at all."""
    found = set()
    for node in iter_nodes(ctx.module, cst.Comparison):
        sides = [node.left, *(target.comparator for target in node.comparisons)]
        if any(string_value(side) == "cuda" for side in sides):
            found.update(
                (dotted_name(side) or "").rpartition(".")[2]
                for side in sides
                if not device_value(ctx, side) and not (isinstance(side, cst.Name) and device_type_name(ctx, side))
            )
    return frozenset(found - {""})


def _compared_only(ctx, name: str, body: cst.CSTNode) -> bool:
    """Every read of ``name`` in ``body`` compares it with strings (``impl == "cuda"``, ``impl in
    ["ref", "cuda"]``): StyleGAN2-style ops' ``impl="cuda"`` names an implementation, not a device."""
    return string_comparisons(name, body, TreeIndex.of(ctx).parents) is not None


def _as_key(ctx, name: cst.Name) -> bool:
    parents = TreeIndex.of(ctx).parents
    parent = parents.get(name)
    if isinstance(parent, cst.Index):  # registry[device]
        return True
    if isinstance(parent, cst.Arg) and parent.keyword is None:
        call = parents.get(parent)
        return (
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value in KEY_METHODS
            and call.args[0] is parent
        )
    return isinstance(parent, cst.DictElement) and parent.key is name


def _device_names(ctx) -> dict[cst.FunctionDef, frozenset[str]]:
    """The file's cache of :func:`_device_names_of`: function -> names it uses as a device."""
    return {}


def _param_roles(ctx) -> dict[cst.Param, str | None]:
    """The file's cache of :func:`param_role`."""
    return {}


def platform_label(ctx, expr: cst.BaseExpression) -> bool:
    """``expr`` (a name, an attribute, an environment read) is named like a name the file compares with a
    platform or build target that is no torch device (:data:`PLATFORM_TARGETS`): vLLM's setup.py reads
    ``VLLM_TARGET_DEVICE = os.getenv("VLLM_TARGET_DEVICE", "cuda")`` and tests it against "cuda", "rocm",
    "neuron" and "cpu" to choose what CMake builds (vllm-ltr, round 31): its "cuda" is a build target,
    and "npu" one CMake rejects."""
    labels = ctx.file_state(_platform_labels)
    if not labels:
        return False
    if isinstance(expr, cst.Call):
        return environment_variable(expr) in labels
    name = dotted_name(expr) or ""
    return bool(name) and name.rpartition(".")[2] in labels


def _platform_labels(ctx) -> frozenset[str]:
    """The last names of what the file compares with a :data:`PLATFORM_TARGETS` string."""
    if ctx.text is not None and PLATFORM_TEXT.search(ctx.text) is None:  # `torch.empty` is no label
        return frozenset()
    found = set()
    for comparison in iter_nodes(ctx.module, cst.Comparison):
        for first, second in compared_pairs(comparison):
            for side, other in ((first, second), (second, first)):
                if any(string_value(member) in PLATFORM_TARGETS for member in display_members(other)):
                    found.add((dotted_name(side) or "").rpartition(".")[2])
    return frozenset(found - {""})
