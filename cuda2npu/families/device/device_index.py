"""Int device indices chosen for CUDA that a consumer reads as ``cuda:N`` (NPU104,
:class:`CudaDeviceIndex`): ``d = int(os.environ["LOCAL_RANK"]) if torch.cuda.is_available() else -1``
passed to transformers' ``pipeline(device=d)`` before 4.38, or to ``.to(d)`` / ``torch.device(d)``
before torch 2.3; and an int literal written as the device, ``torch.device(0)``, which a torch
before 2.3 reads as ``cuda:0`` wherever it stands. The device strings themselves are device_strings.py's.
"""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.analysis import portable
from cuda2npu.analysis.cuda_gates import cuda_branch
from cuda2npu.analysis.device_parameters import by_callable
from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.bindings import assigned_values
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.feature_words import boolean_parts
from cuda2npu.core.names import NameUses
from cuda2npu.core.nodes import code_of
from cuda2npu.core.pins import excludes_from, pin_at_least, pin_predates, pinned_torch
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes, walk

PIPELINE_INT_ON_NPU = "4.38.0"  # transformers' Pipeline maps an int device to "npu:N" (else "cuda:N")
TORCH_INT_ON_NPU = (2, 3)  # torch's toDevice maps an int to the registered PrivateUse1 backend (else CUDA)
CUDA_INDEX_CALLS = {"torch.cuda.current_device", "torch.cuda.device_count"}
PIPELINES = {"transformers.pipeline", "transformers.pipelines.pipeline"}
# torch modules of one backend: their `device=` reads an int as an index of that backend (torch.npu's as the NPU's)
BACKEND_MODULES = ("torch.cuda.", "torch.npu.", "torch.xpu.", "torch.mps.", "torch.mtia.")
# a literal index written as a device (`torch.device(0)`, `device=0`): parsed for it under a torch before 2.3
LITERAL_INDEX_TRIGGERS = (r"\bdevice\(\s*\d", r"\bdevice\s*=\s*\d")
RANK_NAME = re.compile(r"(^|_)rank$", re.IGNORECASE)


@register
class CudaDeviceIndex(Rule):
    """An int device index chosen for CUDA (``d = int(os.environ["LOCAL_RANK"]) if
    torch.cuda.is_available() else -1``, ``d = torch.cuda.device_count() - 1``) that reaches a
    consumer reading an int as ``cuda:N``: transformers' ``pipeline(device=d)`` before 4.38 (the
    project's pin), ``.to(d)`` / ``torch.device(d)`` / ``device=d`` of torch calls before torch 2.3
    (the targeted torch). NPU103 makes the guard true on the NPU, so the int would now reach CUDA;
    it becomes ``f"npu:{...}"`` when every read of ``d`` is such a device position, else it is
    marked. An index no such consumer reads stays as it is. ``torch.cuda.current_device()`` passed
    there itself (``torch.empty(n, device=torch.cuda.current_device())``, or as a device parameter of
    the project's callable: ``SFTMetric(device=torch.cuda.current_device())``) becomes ``f"npu:{...}"`` too,
    and an int literal there (``torch.device(0)``, ``device=0``) ``"npu:N"``, in a CUDA branch or not."""

    codes = ("NPU104",)
    triggers = (r"cuda\.is_available", r"current_device", r"device_count")
    requires = (r"device|\.to\(",)

    @classmethod
    def triggers_for(cls, options) -> tuple[str, ...]:
        """Also a literal index written as a device (``torch.device(0)``) where the targeted torch
        reads it as ``cuda:N``: such a file may hold no other CUDA text (an evaluation script's
        ``device = torch.device(0)``)."""
        return cls.triggers + (LITERAL_INDEX_TRIGGERS if reads_int_as_cuda(options) else ())

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, (cst.Name, cst.Attribute)):
            return
        target = node.targets[0].target
        if isinstance(target, cst.Attribute) and code_of(target.value) != "self":
            return
        index = self._cuda_index(node)
        if index is None or is_cuda_alternative(self.ctx, node):
            return
        name = code_of(target)
        tree = TreeIndex.of(self.ctx)
        statement = tree.parents.get(node)
        if isinstance(target, cst.Name):
            consumers, others = self._reads(tree.function.get(statement) or self.ctx.module, name)
        else:
            consumers, others = self._attribute_reads(statement, name)
        if not consumers:
            return
        where = " and ".join(sorted(set(consumers)))
        message = f"`{name}` is a device index that {where} reads as `cuda:N`"
        fix = npu_index if npu_index(index) is not None else None
        if others or fix is None:
            why = "it has other reads" if others else "it does not fit in an f-string as written"
            self.report(
                "NPU104", index, f'{message}; not rewritten ({why}): pass f"npu:{{{name}}}" there', tier=Tier.REVIEW
            )
            return
        self.report("NPU104", index, f'{message}; → f"npu:{{...}}"', fix)

    def visit_Arg(self, node: cst.Arg) -> None:
        """``torch.empty(n, device=torch.cuda.current_device())`` (nanotron): the index itself in a consumer."""
        if isinstance(node.value, cst.Integer):
            self._literal_index(node, node.value)
            return
        if isinstance(node.value, cst.IfExp):
            self._chosen_index(node, node.value)
            return
        if not from_cuda_count(self.resolver, node.value) or is_cuda_alternative(self.ctx, node):
            return
        where = self._consumer(node, node.value, TreeIndex.of(self.ctx).parents)
        if where:
            self.report(
                "NPU104",
                node.value,
                f'`{code_of(node.value)}` is a device index that {where} reads as `cuda:N`; → f"npu:{{...}}"',
                npu_index,
            )

    def _literal_index(self, node: cst.Arg, index: cst.Integer) -> None:
        """``torch.device(0)``, ``torch.ones(n, device=0)``: a literal index that a torch before 2.3
        reads as ``cuda:N`` wherever it stands, in a CUDA branch (whose guard NPU103 makes true on the
        NPU) or not, becomes ``"npu:N"``. ``.to(0)`` stays (its receiver need not be torch's), and so
        does the CUDA side of code that handles the NPU already."""
        call = TreeIndex.of(self.ctx).parents.get(node)
        if not isinstance(call, cst.Call) or is_method_call(call, "to") or not index.value.isdigit():
            return
        where = self._consumer(node, index, TreeIndex.of(self.ctx).parents)
        pinned_old = pin_predates(self.options.project.pins, "transformers", PIPELINE_INT_ON_NPU)
        if where and where.startswith("`pipeline") and not pinned_old:
            return  # no pin saying so: the newest transformers reads `device=0` as the NPU
        if where and not is_cuda_alternative(self.ctx, node):
            self.report(
                "NPU104",
                index,
                f'`{index.value}` is a device index that {where} reads as `cuda:N`; → "npu:{index.value}"',
                npu_index,
            )

    def _chosen_index(self, node: cst.Arg, choice: cst.IfExp) -> None:
        """``pipeline(..., device=0 if torch.cuda.is_available() else -1)`` (gorilla's raft, round 53): the CUDA
        side of a choice written in the consumer, as the same choice assigned to a name (:meth:`visit_Assign`)."""
        branch = cuda_branch(self.ctx, choice) if self._tests_cuda(choice.test) else []
        index = branch[0] if branch else None
        if index is None or not is_index(self.resolver, index) or is_cuda_alternative(self.ctx, node):
            return
        where = self._consumer(node, choice, TreeIndex.of(self.ctx).parents)
        if where:
            message = f"`{code_of(index)}` is a device index that {where} reads as `cuda:N`"
            fix = npu_index if npu_index(index) is not None else None
            tail = '; → f"npu:{...}"' if fix is not None else '; not rewritten: pass f"npu:{...}" there'
            self.report("NPU104", index, message + tail, fix, tier=None if fix is not None else Tier.REVIEW)

    def _cuda_index(self, node: cst.Assign) -> cst.BaseExpression | None:
        """The int index ``node`` assigns for CUDA: the CUDA side of ``a if torch.cuda.is_available()
        else b``, a value assigned in the CUDA branch of ``if torch.cuda.is_available():``, or a value
        computed from ``torch.cuda.current_device()`` / ``device_count()``."""
        value = node.value
        if isinstance(value, cst.IfExp):
            branch = cuda_branch(self.ctx, value) if self._tests_cuda(value.test) else []
            chosen = branch[0] if branch else None
            return chosen if chosen is not None and is_index(self.resolver, chosen) else None
        if from_cuda_count(self.resolver, value):
            return value
        tree = TreeIndex.of(self.ctx)
        statement = tree.parents.get(node)
        enclosing = tree.enclosing(statement) if statement in tree.placement else []
        owner = enclosing[0][0] if enclosing else None
        if not isinstance(owner, cst.If) or not self._tests_cuda(owner.test) or not is_index(self.resolver, value):
            return None
        block = tree.placement[statement].block
        branches = cuda_branch(self.ctx, owner)
        return value if any(b is block or getattr(b, "body", None) is block for b in branches) else None

    def _tests_cuda(self, test: cst.BaseExpression) -> bool:
        return any(
            isinstance(p, cst.Call) and self.resolver.qualified_name(p.func) == "torch.cuda.is_available"
            for p in boolean_parts(test)
        )

    def _reads(self, scope: cst.CSTNode, name: str) -> tuple[list[str], list[cst.Name]]:
        """(the consumers that read ``name`` as a CUDA index, the reads of it outside device positions)."""
        if assigned_values(scope, name) is None:
            return [], []
        uses = NameUses({name}, self.resolver.scopes)
        walk(scope, uses)
        return self._sort_reads(uses.uses[name])

    def _attribute_reads(self, statement: cst.CSTNode, name: str) -> tuple[list[str], list[cst.CSTNode]]:
        """:meth:`_reads` for ``self.device`` assigned once in its class (PandaGPT's ``self.device =
        torch.cuda.current_device()`` in ``__init__``, read by ``.to(self.device)`` in other methods)."""
        tree = TreeIndex.of(self.ctx)
        owner = tree.enclosing_class(statement)
        if owner is None:
            return [], []
        same = [n for n in iter_nodes(owner, cst.Attribute) if code_of(n) == name]
        assigned = [n for n in same if isinstance(tree.parents.get(n), (cst.AssignTarget, cst.AugAssign))]
        if len(assigned) != 1:
            return [], []
        return self._sort_reads([n for n in same if n not in assigned])

    def _sort_reads(self, reads: list[cst.BaseExpression]) -> tuple[list[str], list[cst.BaseExpression]]:
        """(the consumers among ``reads`` that read an int as CUDA, the reads outside device positions)."""
        parents = TreeIndex.of(self.ctx).parents
        consumers, others = [], []
        for read in reads:
            kind = self._consumer(parents.get(read), read, parents)
            if kind is None:
                others.append(read)
            elif kind:
                consumers.append(kind)
        return consumers, others

    def _consumer(self, arg: cst.CSTNode | None, read: cst.BaseExpression, parents) -> str | None:
        """What reads ``read`` as a device: a consumer's name when it reads an int as CUDA under the
        project's pins, "" when it is a device position that maps an int to the NPU, None otherwise."""
        call = parents.get(arg) if isinstance(arg, cst.Arg) and arg.value is read else None
        if not isinstance(call, cst.Call):
            return None
        qualified = self.resolver.qualified_name(call.func) or ""
        keyword = arg.keyword.value if arg.keyword is not None else None
        first = arg is next((a for a in call.args if a.keyword is None), None)
        if keyword == "device" and (
            qualified in PIPELINES or (qualified.startswith("transformers.") and qualified.endswith("Pipeline"))
        ):
            new_enough = pin_at_least(self.options.project.pins, "transformers", PIPELINE_INT_ON_NPU) is True
            return "" if new_enough else f"`{code_of(call.func)}(device=)` (transformers before {PIPELINE_INT_ON_NPU})"
        is_to = is_method_call(call, "to")
        if keyword == "device" and qualified.startswith(BACKEND_MODULES):
            return ""  # `torch.cuda.synchronize(device=0)`: torch.npu's after NPU103, an index of the NPU
        if (
            (is_to and (first or keyword == "device"))
            or (qualified == "torch.device" and first)
            or (keyword == "device" and qualified.startswith("torch."))
            or self._project_device_parameter(call, keyword)
        ):
            if not reads_int_as_cuda(self.options):
                return ""
            spelled = ".to()" if is_to else f"{code_of(call.func)}()"
            return f"`{spelled}` ({_torch_read(self.options)})"
        return None

    def _project_device_parameter(self, call: cst.Call, keyword: str | None) -> bool:
        """``keyword`` is a device parameter of the project's callable ``call`` calls (project fact
        ``device_parameters``: MOSS's ``SFTMetric(device=...)``, which hands it to ``.to(device=)``)."""
        func = call.func
        callee = (
            func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
        )
        parameters = by_callable(self.options.project.device_parameters).get(callee, ())
        return keyword is not None and any(param == keyword for _, param in parameters)


def reads_int_as_cuda(options) -> bool:
    """Whether the targeted torch reads an int device as ``cuda:N`` (before 2.3; not the newest), or the
    project's torch pin (or the torch its torchvision/torchaudio pin requires) allows only such a torch
    even where no torch_npu fits it (PandaGPT's ``torchvision==0.14.1``: torch 1.13)."""
    target = portable.target_torch(options)
    if target is not None:
        return target < TORCH_INT_ON_NPU
    torch = pinned_torch(options.project.pins) if options.target.chosen is None else None
    return torch is not None and excludes_from(torch[0], ".".join(map(str, TORCH_INT_ON_NPU)))


def _torch_read(options) -> str:
    """The torch that reads an int as CUDA, for a message: ``torch 2.1``, or the pin that implies it
    (``torch==1.13.*, which `torchvision==0.14.1` requires``)."""
    target = portable.target_torch(options)
    if target is not None:
        return f"torch {target[0]}.{target[1]}"
    spec, source = pinned_torch(options.project.pins)
    return f"torch{spec}" if source == f"torch{spec}" else f"torch{spec}, which `{source}` requires"


def is_method_call(call: cst.Call, name: str) -> bool:
    """``<expr>.<name>(...)``."""
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == name


def is_index(resolver, expr: cst.BaseExpression) -> bool:
    """``0``, ``int(...)``, ``local_rank`` / ``args.local_rank``, or a value of ``torch.cuda.current_device()``."""
    if isinstance(expr, cst.Integer):
        return True
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "int":
        return True
    last = expr.attr.value if isinstance(expr, cst.Attribute) else expr.value if isinstance(expr, cst.Name) else ""
    return bool(RANK_NAME.search(last)) or from_cuda_count(resolver, expr)


def from_cuda_count(resolver, expr: cst.BaseExpression) -> bool:
    """``torch.cuda.current_device()``, ``torch.cuda.device_count() - 1``."""
    while isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract)):
        expr = expr.left if isinstance(expr.left, cst.Call) else expr.right
    return isinstance(expr, cst.Call) and resolver.qualified_name(expr.func) in CUDA_INDEX_CALLS


def npu_index(index: cst.BaseExpression) -> cst.BaseExpression | None:
    """``"npu:N"`` / ``f"npu:{index}"`` for an int device index; None when the f-string cannot hold it."""
    if isinstance(index, cst.Integer):
        return cst.SimpleString(f'"npu:{index.value}"')
    text = code_of(index)
    quote = next((q for q in ('"', "'") if q not in text), None)
    if quote is None or any(c in text for c in "\\\n{}#"):
        return None
    return cst.parse_expression(f"f{quote}npu:{{{text}}}{quote}")
