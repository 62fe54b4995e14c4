"""Device and runtime rules on tensors and modules: ``.cuda()``, ``.is_cuda``, TF32 flags,
``transfer_to_npu`` imports (NPU101, NPU102, NPU105, NPU108).

Portable output (``--portable``): ``.cuda()`` → ``.to(<the accelerator>)``, ``.cuda(i)`` →
``.to(portable_device.device(i))``, ``x.is_cuda`` → ``portable_device.on_accelerator(x)``
(cuda2npu/analysis/portable.py). TF32 → HF32 is NPU-only: not portable yet (kept, reported).
"""

from __future__ import annotations

import functools

import libcst as cst

from cuda2npu.analysis import portable
from cuda2npu.analysis.cuda_gates import names_fallback, no_cuda_branch
from cuda2npu.analysis.kernel_switch import kernel_call
from cuda2npu.analysis.npu_aware import in_npu_branch, is_cuda_alternative
from cuda2npu.analysis.receivers import (
    QUANTIZING_PARAMETERS,
    TENSORDICT,
    foreign_constructor,
    imported_cuda_class,
    own_cuda_class,
    tensordict_source,
    torch_value,
)
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.feature_words import boolean_parts, name_tokens
from cuda2npu.core.imports import in_import_try
from cuda2npu.core.literals import string_value
from cuda2npu.core.names import dotted_name, target_names
from cuda2npu.core.nodes import code_of
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes, walk
from cuda2npu.families.device.device_branches import cuda_required
from cuda2npu.families.device.device_index import is_index, npu_index

CUDA_METHOD_PARAMS = ("device", "non_blocking", "memory_format")  # Tensor.cuda; Module.cuda takes `device` only

TF32_FLAGS = {
    "torch.backends.cuda.matmul.allow_tf32": ("matmul", "torch.npu.matmul.allow_hf32"),
    "torch.backends.cudnn.allow_tf32": ("conv", "torch.npu.conv.allow_hf32"),
}
TF32_AVAILABLE = (
    "is_torch_tf32_available"  # transformers': False without a CUDA device (rules/transformers.toml NPU904)
)


def _torch_cuda_arguments(node: cst.Call) -> bool:
    """Whether the arguments fit ``Tensor.cuda`` / ``Module.cuda``: hqq's ``Quantizer.cuda(W_q, meta=meta,
    device=device)`` (PyramidKV, round 27) is another library's method, which works with any device
    and has no ``npu``."""
    keywords = [arg.keyword.value for arg in node.args if arg.keyword is not None]
    positional = len(node.args) - len(keywords)
    return positional <= 2 and all(keyword in CUDA_METHOD_PARAMS for keyword in keywords)


def _rename(new: str):
    return lambda name: name.with_changes(value=new)


_EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


class _UserIsCuda(cst.CSTVisitor):
    """Pre-pass: ``is_cuda`` attributes the file defines itself (``self.is_cuda = ...``, a method
    or class attribute ``is_cuda``); torch's ``Tensor.is_cuda`` is a read-only property."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def _targets(self, *targets: cst.BaseExpression) -> None:
        for target in targets:
            if isinstance(target, cst.Attribute) and target.attr.value == "is_cuda":
                self.names.add(dotted_name(target) or "")

    def visit_Assign(self, node: cst.Assign) -> None:
        self._targets(*(t.target for t in node.targets))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._targets(node.target)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        for statement in node.body.body:
            defines = isinstance(statement, cst.FunctionDef) and statement.name.value == "is_cuda"
            if isinstance(statement, cst.SimpleStatementLine):
                defines = any(
                    isinstance(s, (cst.Assign, cst.AnnAssign)) and "is_cuda" in _assigned_names(s)
                    for s in statement.body
                )
            if defines:
                self.names.add("self.is_cuda")


def _is_cuda_tests(expr: cst.BaseExpression) -> list[cst.Attribute]:
    """The ``x.is_cuda`` attributes of a test or a flag's value."""
    return [n for n in iter_nodes(expr, cst.Attribute) if n.attr.value == "is_cuda"]


def _assigned_names(statement: cst.Assign | cst.AnnAssign) -> set[str]:
    targets = [t.target for t in statement.targets] if isinstance(statement, cst.Assign) else [statement.target]
    return {t.value for t in targets if isinstance(t, cst.Name)}


TENSORDICT_TO = "`.to(...)` moves a tensor, a module and a TensorDict alike (docs/reference/tensordict.md §1)"
OWN_CLASS_TO = "`.to(...)` moves a tensor and a module alike, and a `{cls}` where its class has a `to()` (check it)"


@register
class CudaMethodCall(Rule):
    """NPU101 ``x.cuda(...)`` → ``x.npu(...)``; NPU102 ``x.is_cuda`` → ``x.is_npu``.

    Left alone: the CUDA side of code that already handles the NPU (``npu_aware``),
    ``is_cuda`` attributes the file defines itself (assigned, or a method/class attribute, read
    through ``self``): they are the project's own flags, not torch's; and ``.cuda()`` calling a
    ``cuda`` method of the project's own (``receivers.own_cuda_class``): ``self.cuda()``/``super().cuda()``
    in such a class as written, on an instance of one (``self.decoder.cuda()``) reported for review.
    """

    codes = ("NPU101", "NPU102")
    triggers = (r"\.cuda\b", r"\bis_cuda\b")
    portable_support = True

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._user_is_cuda: set[str] | None = None
        self._cuda_implementations: dict[cst.Attribute, str] = {}  # `is_cuda` test -> the CUDA callee it chooses
        self._says_cuda_only: set[cst.Attribute] = set()  # `is_cuda` tests whose branch says the path needs CUDA
        self._kernel_flags: list[dict[str, str]] = []  # per enclosing function: flag name -> the CUDA callee it chooses
        self._classes: list[cst.ClassDef] = []  # the enclosing classes, innermost last

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.append(node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._classes.pop()

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "cuda":
            if "torch.cuda" in self.resolver.qualified_names(func):  # the module, not a call
                return
            if is_cuda_alternative(self.ctx, func) or not _torch_cuda_arguments(node):
                return
            own = own_cuda_class(self, func.value, self._classes[-1] if self._classes else None)
            if own is not None:
                self._own_cuda_method(func, own)
                return
            container = foreign_constructor(self, func.value)
            if container in QUANTIZING_PARAMETERS:
                self.report(
                    "NPU101",
                    node,
                    f"`.cuda()` on a bitsandbytes `{container.rpartition('.')[2]}` quantizes the weights as it moves "
                    "them (bitsandbytes overrides it); `.npu()` would copy them unquantized (bitsandbytes has no "
                    "Ascend backend, NPU606): keep this layer on CUDA hosts, or load the model unquantized on the NPU",
                    tier=Tier.MANUAL,
                )
            elif container is not None and container.split(".")[0] != TENSORDICT:
                self._container_cuda_call(node, container)
            elif self.options.portable:
                self._portable_cuda_call(node)
            elif container is not None or (self._tensordict_source and not torch_value(self, func.value)):
                what = f"a `{container}`" if container else f"a TensorDict ({self._tensordict_source})"
                self._moved_with_to(node, f"{what} is not a tensor or module", container is not None, TENSORDICT_TO)
            elif self._imported_cuda_class and self._from_container(func.value) and not torch_value(self, func.value):
                cls = self._imported_cuda_class
                what = f"the receiver may be a `{cls}` (a class of the project this file imports, with a `cuda()` of its own)"
                self._moved_with_to(node, what, False, OWN_CLASS_TO.format(cls=cls))
            else:
                self.report("NPU101", func.attr, "`.cuda()` moves data to a CUDA device; use `.npu()`", _rename("npu"))

    def _own_cuda_method(self, func: cst.Attribute, owner: str) -> None:
        """``.cuda()`` calling the ``cuda`` method of ``owner``, a class of the project: ``self.cuda()``
        and ``super().cuda()`` in the class stay as written; on an instance of it, reported (review)."""
        receiver = func.value
        if dotted_name(receiver) == "self" or (
            isinstance(receiver, cst.Call) and dotted_name(receiver.func) == "super"
        ):
            return  # `self.cuda()`, `super().cuda()`
        what = "classes of the project (they have" if "`, `" in owner else "a class of the project (it has"
        self.report(
            "NPU101",
            func.attr,
            f"`{_spelled(receiver)}.cuda()` calls the `cuda()` method of `{owner}`, {what} no `.npu()`); "
            "not rewritten: port that method and its callers together",
            tier=Tier.REVIEW,
        )

    @functools.cached_property
    def _tensordict_source(self) -> str | None:
        return tensordict_source(self)

    @functools.cached_property
    def _imported_cuda_class(self) -> str | None:
        return imported_cuda_class(self)

    def _from_container(self, receiver: cst.BaseExpression) -> bool:
        """``receiver`` is taken out of a container: an item or slice (``v[:batch]``), or a name a loop or
        comprehension binds (``for k, v in data.items()``), whose values may be of any class."""
        if isinstance(receiver, cst.Subscript):
            return True
        if not isinstance(receiver, cst.Name):
            return False
        scope = TreeIndex.of(self.ctx).function.get(self.ctx.statement) or self.ctx.module
        loops = iter_nodes(scope, (cst.For, cst.CompFor))
        return any(receiver.value in target_names(loop.target) for loop in loops)

    def _container_cuda_call(self, node: cst.Call, container: str) -> None:
        """``Data(...).cuda()`` → ``.to("npu")``: the container has no ``.npu()``."""
        blocking = [arg for arg in node.args if arg.keyword is not None and arg.keyword.value == "non_blocking"]
        what = f"a `{container}` is not a tensor or module: it has no `.npu()`"
        if len(blocking) != len(node.args):
            self.report("NPU101", node, f"`.cuda(...)`: {what}; move it with `.to(...)` by hand", tier=Tier.MANUAL)
            return
        target = portable.current_accelerator(self.options) if self.options.portable else '"npu"'
        if self.options.portable:
            portable.need(self, Tier.REVIEW, target)
        self.report(
            "NPU101",
            node,
            f"`.cuda()`: {what}; `.to({target})` moves it (check that `{container}` has `.to(device)`)",
            lambda call: call.with_changes(
                func=call.func.with_changes(attr=cst.Name("to")),
                args=[cst.Arg(cst.parse_expression(target)), *call.args],
            ),
            tier=Tier.REVIEW,
            needs_torch_npu=not self.options.portable,
        )

    def _moved_with_to(self, node: cst.Call, what: str, int_device: bool, why: str) -> None:
        """``.cuda(...)`` on ``what``, which has no ``.npu()``: a TensorDict (built in the file) or, in a file
        importing tensordict or a class of the project with a ``cuda()`` of its own, a receiver not known to be
        a tensor or module: ``.to("npu", ...)``, which moves them all (``why``), its keywords kept. A device
        index becomes ``"npu:N"`` / ``f"npu:{i}"`` where it is an int: always where ``int_device`` (a
        TensorDict's ``cuda(device: int)``), else an index the file shows (``0``, ``local_rank``,
        ``torch.cuda.current_device()``); a device string stays (NPU104 rewrites it). Any other device
        argument: by hand."""
        devices = [i for i, arg in enumerate(node.args) if arg.keyword is None or arg.keyword.value == "device"]
        at = devices[0] if devices else None
        device = node.args[at].value if at is not None else None
        string = device is not None and (string_value(device) is not None or isinstance(device, cst.FormattedString))
        index = (
            device is not None
            and not string
            and (int_device or is_index(self.resolver, device))
            and npu_index(device) is not None
        )
        if any(arg.star for arg in node.args) or len(devices) > 1 or not (device is None or string or index):
            self.report(
                "NPU101",
                node,
                f"`.cuda(...)`: {what}: it has no `.npu()`; move it with `.to(...)` by hand",
                tier=Tier.MANUAL,
            )
            return

        def fix(call: cst.Call) -> cst.Call:
            rest = [arg for i, arg in enumerate(call.args) if i != at]
            if rest:
                rest[-1] = rest[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            moved = cst.SimpleString('"npu"') if at is None else call.args[at].value
            moved = npu_index(moved) if index else moved
            return call.with_changes(func=call.func.with_changes(attr=cst.Name("to")), args=[cst.Arg(moved), *rest])

        self.report(
            "NPU101",
            node,
            f"`.cuda()`: {what}: it has no `.npu()`; {why}",
            fix,
        )

    def _portable_cuda_call(self, node: cst.Call) -> None:
        """``x.cuda(d, non_blocking=...)`` → ``x.to(<accelerator device>, non_blocking=...)``."""
        if any(arg.star for arg in node.args) or len(node.args) > len(CUDA_METHOD_PARAMS):
            self.report(
                "NPU101",
                node,
                "`.cuda(...)` with `*`/`**` arguments: not portable yet, move it to the "
                "accelerator by hand (`.to(torch.accelerator.current_accelerator())`)",
                tier=Tier.MANUAL,
            )
            return
        named = [(arg.keyword.value if arg.keyword else CUDA_METHOD_PARAMS[i], arg) for i, arg in enumerate(node.args)]
        device = next((arg.value for name, arg in named if name == "device"), None)
        target = portable.current_accelerator(self.options) if device is None else portable.device("{}")
        portable.need(self, Tier.EXACT, target)

        def fix(call: cst.Call) -> cst.Call:
            args = [
                (arg.keyword.value if arg.keyword else CUDA_METHOD_PARAMS[i], arg) for i, arg in enumerate(call.args)
            ]
            chosen = next((arg.value for name, arg in args if name == "device"), None)
            moved = cst.parse_expression(target.format(code_of(chosen)) if chosen is not None else target)
            rest = [arg.with_changes(keyword=cst.Name(name), equal=_EQUAL) for name, arg in args if name != "device"]
            if rest:
                rest[-1] = rest[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return call.with_changes(func=call.func.with_changes(attr=cst.Name("to")), args=[cst.Arg(moved), *rest])

        where = "the accelerator" if device is None else "the accelerator device of that index"
        self.report(
            "NPU101",
            node,
            f"`.cuda()` moves data to a CUDA device; portable: `.to()` {where} "
            f"(`{target.format('...')}`), which is a CUDA GPU or an Ascend NPU",
            fix,
        )

    def leave_Module(self, original_node: cst.Module) -> None:
        portable.report_support(self, "NPU101")

    def visit_If(self, node: cst.If) -> None:
        """``if x.is_cuda: median_filter_cuda(x)`` (whisper), ``if box.is_cuda: _C.box_iou(...)``
        (maskrcnn-benchmark): the test chooses a CUDA kernel of the project's; its ``is_cuda`` stays
        (review), unreported where a tensor off CUDA takes a fallback (:func:`_falls_back`: whisper's
        ``if result is None: result = x.unfold(...)`` after the branch). ``if not q.is_cuda: return
        False, "the TileLang backend is CUDA-only"``
        (flash-linear-attention's backend verifiers), ``if not x.is_cuda: raise RuntimeError("...
        requires CUDA tensors")`` before ``import deep_gemm`` (slime): a branch saying the path needs
        CUDA, left as written and unreported, as such device comparisons are (device_strings)."""
        tests = _is_cuda_tests(node.test)
        callee = kernel_call(self.ctx, node) if tests else None
        if callee is not None and _falls_back(self.ctx, node):
            self._says_cuda_only.update(tests)  # an NPU tensor takes the fallback: left, unreported
        elif tests and isinstance(node, cst.If) and _pytorch_fallback(self.ctx, node):
            self._says_cuda_only.update(tests)  # `else: out = multi_scale_deformable_attn_pytorch(...)`
        elif tests and isinstance(node, cst.If) and cuda_required(node):
            self._says_cuda_only.update(tests)  # `if not q.is_cuda: return False, "X is CUDA-only"`: left, unreported
        elif callee is not None:
            self._cuda_implementations.update((test, callee) for test in tests)

    visit_IfExp = visit_If  # `ball_query_cuda.forward(x) if x.is_cuda else fallback(x)`

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        """``fast = a.is_cuda and b.is_cuda`` … ``if fast: C.GeneratePreNMSUprightBoxes(...)``
        (maskrcnn-benchmark): the flags of the function whose ``if`` chooses a CUDA kernel (looked
        for only in a function that reads ``is_cuda``); None for a flag whose ``if`` falls back. A
        module-level function whose answer such an ``if`` tests (torchtitan's ``_cossin_eligible(q)``,
        ``return q.is_cuda and ...``, before a helion kernel: :func:`_kernel_predicates`) has the
        ``is_cuda`` tests of its ``return`` statements taken the same way."""
        flags = {}
        if (self.ctx.text is None or b"is_cuda" in self.ctx.text) and _is_cuda_tests(node.body):
            for statement in iter_nodes(node.body, cst.If):
                callee = kernel_call(self.ctx, statement) if isinstance(statement.test, cst.Name) else None
                if callee is not None:
                    flags.setdefault(statement.test.value, None if _falls_back(self.ctx, statement) else callee)
            if _selects_cuda_named(node.body):  # `config = self.cuda_config if is_cuda else self.cpu_config`
                self._says_cuda_only.update(_is_cuda_tests(node.body))
            predicates = self.ctx.file_state(_kernel_predicates)
            if node.name.value in predicates and node in self.ctx.module.body:
                callee = predicates[node.name.value]
                for returned in iter_nodes(node.body, cst.Return):
                    tests = _is_cuda_tests(returned.value) if returned.value is not None else []
                    if callee is None:
                        self._says_cuda_only.update(tests)  # its `if` falls back: left, unreported
                    else:
                        self._cuda_implementations.update((test, callee) for test in tests)
        self._kernel_flags.append(flags)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._kernel_flags.pop()

    def visit_Assign(self, node: cst.Assign) -> None:
        flags = self._kernel_flags[-1] if self._kernel_flags else {}
        names = [t.target.value for t in node.targets if isinstance(t.target, cst.Name) and t.target.value in flags]
        if names and flags[names[0]] is None:
            self._says_cuda_only.update(_is_cuda_tests(node.value))  # the flag's `if` falls back: unreported
        elif names:
            self._cuda_implementations.update((test, flags[names[0]]) for test in _is_cuda_tests(node.value))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "is_cuda" or is_cuda_alternative(self.ctx, node):
            return
        if self.resolver.qualified_name(node.value) == "torch.Tensor":
            return  # the property itself, not a tensor's answer (lightning-thunder registers it as a symbol)
        if self._user_is_cuda is None:
            users = _UserIsCuda()
            walk(self.ctx.module, users)
            self._user_is_cuda = users.names
        if dotted_name(node) in self._user_is_cuda:
            return
        if node in self._says_cuda_only or self._probed(node):
            return
        callee = self._cuda_implementations.get(node)
        if callee is not None:
            self.report(
                "NPU102",
                node,
                f"`.is_cuda` switches a CUDA-only implementation on (`{callee}` in its branch); not "
                "rewritten: `.is_npu` would run it on NPU tensors, where the CUDA kernel is not there",
                tier=Tier.REVIEW,
            )
            return
        if self.options.portable:
            check = f"{portable.HELPER}.on_accelerator(...)"
            portable.need(self, Tier.EXACT, check)
            self.report(
                "NPU102",
                node,
                f"`.is_cuda` is always False on NPU; portable: `{check}`, True on the "
                "accelerator of the host (a CUDA GPU or an Ascend NPU)",
                lambda n: cst.parse_expression(f"{portable.HELPER}.on_accelerator({code_of(n.value)})"),
            )
            return
        self.report("NPU102", node.attr, "`.is_cuda` is always False on NPU; use `.is_npu`", _rename("is_npu"))

    def _probed(self, node: cst.Attribute) -> bool:
        """``hasattr(event, "is_cuda") and event.is_cuda``: the receiver is probed for the attribute, so it
        is no tensor known to have ``is_npu`` (AReaL's profiler events); left as written."""
        parents = TreeIndex.of(self.ctx).parents
        top = node
        while isinstance(parents.get(top), (cst.BooleanOperation, cst.UnaryOperation, cst.Comparison)):
            top = parents[top]
        return any(
            dotted_name(call.func) == "hasattr"
            and len(call.args) == 2
            and string_value(call.args[1].value) == "is_cuda"
            and call.args[0].value.deep_equals(node.value)
            for call in iter_nodes(top, cst.Call)
        )


def _selects_cuda_named(body: cst.BaseSuite) -> bool:
    """The function chooses, by a flag named for CUDA, a value named for CUDA: ``config = self.cuda_config
    if is_cuda else self.cpu_config`` (lucidrains' ``Attend`` in AnyGPT's soundstorm, round 40), where the
    CUDA value is set only behind a CUDA check the migration keeps (None on an NPU host): its ``is_cuda``
    stays, and NPU tensors take the other value, as they would on a GPU host without CUDA. Also the tensor's
    own test, ``self.cuda_config if q.is_cuda else self.cpu_config`` (vit-pytorch's flash attention, round 60)."""
    return any(
        _cuda_named_test(choice.test)
        and any("cuda" in name_tokens(dotted_name(arm) or "") for arm in (choice.body, choice.orelse))
        for choice in iter_nodes(body, cst.IfExp)
    )


def _cuda_named_test(test: cst.BaseExpression) -> bool:
    """``is_cuda`` (a flag named for CUDA) or ``q.is_cuda``."""
    if isinstance(test, cst.Name):
        return "cuda" in name_tokens(test.value)
    return isinstance(test, cst.Attribute) and test.attr.value == "is_cuda"


def _kernel_predicates(ctx) -> dict[str, str | None]:
    """The module-level functions whose answer an ``if`` of the file tests before a CUDA kernel
    (``if _cossin_eligible(q, k): return torch.ops.helion.rope_cossin(...)``): name -> the kernel,
    None where a tensor the function turns down takes a fallback (:func:`_falls_back`)."""
    names = {s.name.value for s in ctx.module.body if isinstance(s, cst.FunctionDef)}
    found: dict[str, str | None] = {}
    for node in iter_nodes(ctx.module, (cst.If, cst.IfExp)):
        called = [
            p.func.value
            for p in boolean_parts(node.test)
            if isinstance(p, cst.Call) and isinstance(p.func, cst.Name) and p.func.value in names
        ]
        callee = kernel_call(ctx, node) if called else None
        if callee is not None:
            for name in called:
                found[name] = None if _falls_back(ctx, node) or found.get(name, "") is None else callee
    return found


def _falls_back(ctx, node: cst.If | cst.IfExp) -> bool:
    """What a tensor off CUDA runs at ``node`` is code, not a ``raise``: the other side of ``a if
    x.is_cuda else b``, the non-CUDA branch of an ``if``, or, without one, the statements after it."""
    if isinstance(node, cst.IfExp):
        return True
    other = no_cuda_branch(ctx, node)
    if other:
        block = other[0].body if isinstance(other[0], cst.Else) else other[0]
        return not _raises(block.body[0] if block.body else None)
    following = TreeIndex.of(ctx).following(node)
    return bool(following) and not _raises(following[0])


def _pytorch_fallback(ctx, node: cst.If) -> bool:
    """The branch an NPU tensor takes calls a pure-PyTorch implementation named so (InternImage's
    ``else: output = multi_scale_deformable_attn_pytorch(...)`` after ``if ... value.is_cuda:``
    ``MultiScaleDeformableAttnFunction_fp32.apply(...)``, a kernel of another module): that is what
    the test is there to choose, and an NPU tensor takes it, as before the migration."""
    return any(names_fallback(call.func) for block in no_cuda_branch(ctx, node) for call in iter_nodes(block, cst.Call))


def _raises(statement: cst.CSTNode | None) -> bool:
    if isinstance(statement, cst.SimpleStatementLine):
        statement = statement.body[0]
    return isinstance(statement, cst.Raise)


@register
class Tf32Flags(Rule):
    """NPU105: TF32 switches → the NPU's HF32 switches (not bit-identical: tier numeric)."""

    codes = ("NPU105",)
    triggers = (r"allow_tf32",)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "allow_tf32" or is_cuda_alternative(self.ctx, node):
            return
        qualified = self.resolver.qualified_name(node)
        if qualified not in TF32_FLAGS or self._under_tf32_test():
            return
        section, replacement = TF32_FLAGS[qualified]
        root = node
        while isinstance(root, cst.Attribute):
            root = root.value
        fix = None
        if isinstance(root, cst.Name) and self.resolver.lookup(root.value) == {"torch"}:
            fix = lambda _, torch=root: cst.Attribute(  # noqa: E731
                cst.Attribute(cst.Attribute(torch, cst.Name("npu")), cst.Name(section)), cst.Name("allow_hf32")
            )
        self.report("NPU105", node, f"TF32 does not exist on NPU; the analog is HF32: `{replacement}`", fix)

    def _under_tf32_test(self) -> bool:
        """In the body of ``if is_torch_tf32_available():`` (transformers'), which never runs on an NPU
        host: the flag there is left as written."""
        return any(
            isinstance(owner, cst.If)
            and role == "body"
            and any(
                isinstance(call, cst.Call)
                and (self.resolver.qualified_name(call.func) or "").startswith("transformers.")
                and (self.resolver.qualified_name(call.func) or "").endswith(f".{TF32_AVAILABLE}")
                for call in boolean_parts(owner.test)
            )
            for owner, role in TreeIndex.of(self.ctx).enclosing(self.ctx.statement)
        )


@register
class TransferToNpuImport(Rule):
    """NPU108: ``torch_npu.contrib.transfer_to_npu`` patches torch at run time; remove it."""

    codes = ("NPU108",)
    triggers = (r"transfer_to_npu",)
    portable_support = True  # portable code needs no monkey-patching either
    MODULE = "torch_npu.contrib.transfer_to_npu"

    def _flag(self, node: cst.CSTNode) -> None:
        if self._npu_setup(node):
            self.report(
                "NPU108",
                node,
                "`transfer_to_npu` kept: it is imported where the project already sets itself up for the NPU, "
                "and the code it serves may rely on its patches (`torch.cuda.amp` calls in NPU branches, "
                'libraries\' `device="cuda"` defaults); remove it only once nothing does',
                tier=Tier.REVIEW,
            )
            return
        self.report(
            "NPU108",
            node,
            "`transfer_to_npu` monkey-patches torch at import time (torch.cuda lies, torch.jit.script is "
            "disabled); the static rewrite replaces it",
            lambda _: cst.RemoveFromParent(),
            tier=Tier.REVIEW,
        )

    def _npu_setup(self, node: cst.CSTNode) -> bool:
        """The import sits in code written for the NPU: an NPU branch (``if is_npu_available():``) or a
        ``try`` that falls back when torch_npu is missing — a project's own NPU set-up, whose other
        code was written against the patched torch."""
        return in_npu_branch(self.ctx, node) or in_import_try(TreeIndex.of(self.ctx), self.ctx.statement)

    def visit_Import(self, node: cst.Import) -> None:
        if len(node.names) == 1 and dotted_name(node.names[0].name) == self.MODULE:
            self._flag(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or isinstance(node.names, cst.ImportStar) or len(node.names) != 1:
            return
        module = dotted_name(node.module)
        name = dotted_name(node.names[0].name)
        if f"{module}.{name}" == self.MODULE:
            self._flag(node)


def _spelled(receiver: cst.BaseExpression) -> str:
    """``receiver`` as a message shows it: a call by its callee (``sp.SparseTensor(...)``)."""
    return f"{code_of(receiver.func)}(...)" if isinstance(receiver, cst.Call) else code_of(receiver)
