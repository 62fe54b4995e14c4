"""Code that already handles the NPU next to CUDA: its CUDA alternative must stay as written.

Multi-backend code tests for both devices (``if x.is_cuda: ... elif x.is_npu: ...``,
``device.type == "cuda" or device.type == "npu"``, ``("cuda", "npu")``,
``{"cuda": "nccl", "npu": "hccl"}``, ``self.is_cuda = ...`` next to ``self.is_npu = ...``).
Rewriting its CUDA side to NPU duplicates the NPU side and loses the CUDA one. Rules skip any
node for which :func:`is_cuda_alternative` is true.

The constructs (a side "mentions" CUDA through ``"cuda"``/``"nccl"`` strings, names or
identifier-like strings with a ``cuda`` word, such as ``is_cuda``, ``torch.cuda``,
``CUDAFusedRMSNormWithHook`` and ``os.getenv("FORCE_CUDA")``; NPU likewise through ``npu``/``hccl``
and torch's PrivateUse1 backend name, ``torch._C._get_privateuse1_backend_name()``, which is
``"npu"`` once torch_npu is loaded (docs/reference/torch_npu.md §4.1)):

- runs of adjacent ``if`` statements and their ``elif`` branches: a branch whose test mentions
  CUDA (not NPU), test and body, when another branch's test mentions the NPU; and the ``else``
  of ``if is_torch_npu_available(): ... else: <CUDA code>`` (an NPU check in some branch, no
  CUDA test);
- the body of a branch taken only on the NPU (its test mentions the NPU, not CUDA): a CUDA
  name there is deliberate (``if device_type == "npu": device_type = "cuda"``, a table key);
- the test and body of a branch that rules the NPU out (``if x.device.type != "npu" and
  is_cuda_available():``, ``not x.is_npu``);
- the body of a branch taken only on another accelerator (``elif device_type == "musa":``,
  ``if is_mlu_available():``, ``a if is_torch_xla_available() else b``; ROCm's torch:
  ``if torch.version.hip:``, ``if "AMD" in torch.cuda.get_device_name():``, ``device == "hip"``):
  nothing there runs on the NPU (mmengine's MUSA autocast reads ``torch.get_autocast_gpu_dtype()``);
- the test and body of a branch (or ``a if c else b`` value) taken only where a device-neutral
  accelerator abstraction says CUDA (DeepSpeed's ``get_accelerator().device_name() == "cuda"``,
  ``communication_backend_name() == "nccl"``): it never runs on the NPU;
- ``a if c1 else b if c2 else c`` chains, the same way (the last ``else`` value is a side too),
  and the ``else`` value of ``a if <NPU detected> else b`` (portable output's dispatch
  ``npu_call(x) if x.device.type == "npu" else cuda_call(x)``: ``b`` runs on every other device);
- ``and``/``or`` operands that mention CUDA, when another operand mentions the NPU;
- not an NPU side: an exact test of a device that may carry an index against ``"npu"``
  (``device in ("mps", "npu")``, ``device == "npu"``) next to a CUDA prefix test
  (``device.startswith("cuda")``): ``"npu:0"`` passes neither, so the CUDA test must change;
- list, tuple and set elements that mention CUDA, when another element does the NPU;
- dict entries whose key mentions CUDA, when another key mentions the NPU;
- assignments to a name with a ``cuda`` word (``self.is_cuda``) when the same block also
  assigns its ``npu`` counterpart (``self.is_npu``);
- whole classes implementing another backend of an accelerator abstraction (``CPU_Accelerator``,
  ``HpuAccelerator``, ``MPSPlatform``): nothing there runs on the NPU; and the CUDA class of one
  whose NPU class the project implements in another file (``CudaAccelerator`` next to
  ``NpuAccelerator``: ``Options.npu_backend_classes``, a project fact);
- functions and classes that mock ``torch.cuda`` (``@patch("torch.cuda.is_available",
  return_value=True)``, ``with mock.patch.object(torch.cuda, "device_count", ...)``,
  ``monkeypatch.setattr("torch.cuda.is_available", ...)``): a test simulating a CUDA (or a CPU)
  host, whose expected ``"cuda"`` values hold on every host;
- code an NPU host never runs (:mod:`cuda2npu.analysis.never_run`: kept CUDA branches, skipped tests,
  flash-attn branches with a fallback).
"""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.analysis.never_run import never_run_nodes
from cuda2npu.core.feature_words import CUDA_WORD
from cuda2npu.core.imports import bound_name
from cuda2npu.core.literals import string_value
from cuda2npu.core.names import dotted_name
from cuda2npu.core.statements import TreeIndex, leaves
from cuda2npu.core.traversal import iter_nodes, walk

# torch.cuda calls that do nothing where CUDA was never initialized (an NPU host)
NO_OP_WITHOUT_CUDA = {"empty_cache"}  # torch.cuda.empty_cache: only `if is_initialized()`

NPU_WORD = re.compile(r"(?:^|_)npu(?:_|$)", re.IGNORECASE)
CUDA_CAMEL = re.compile(r"(?:^|(?<=[a-z0-9_]))(?:CUDA|Cuda)(?=[A-Z]|$)")  # CUDAFusedRMSNormWithHook
NPU_CAMEL = re.compile(r"(?:^|(?<=[a-z0-9_]))(?:NPU|Npu)(?=[A-Z]|$)")
PRIVATEUSE1 = re.compile(r"privateuse1", re.IGNORECASE)  # torch_npu's backend: _get_privateuse1_backend_name
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CUDA_STRING = re.compile(r"(?:cuda|nccl)(?::.*)?|torch\.cuda\.\w+Tensor", re.DOTALL)  # a tensor type: NPU111
NPU_STRING = re.compile(r"(?:npu|hccl)(?::.*)?|torch\.npu\.\w+Tensor", re.DOTALL)
# accelerators with branches of their own (``hip``: ROCm's torch, which answers to torch.cuda)
OTHER_DEVICES = (b"musa", b"mlu", b"xpu", b"mps", b"hpu", b"dipu", b"xla", b"hip", b"rocm")
_OTHER = "|".join(word.decode() for word in OTHER_DEVICES)
OTHER_DEVICE_WORD = re.compile(rf"(?:^|_)(?:{_OTHER})(?:_|$)", re.IGNORECASE)
OTHER_DEVICE_STRING = re.compile(rf"(?:{_OTHER})(?::.*)?", re.DOTALL)
# a ROCm device's name as torch.cuda reports it there (`"AMD" in torch.cuda.get_device_name()`,
# `"gfx90a" in props.gcnArchName`)
ROCM_DEVICE_NAME = re.compile(r"AMD|Radeon|Instinct|MI\d+|gfx\d+")
ROCM_QUERIES = ("get_device_name", "gcnArchName")
ROCM_TEXT = re.compile(rb"get_device_name|gcnArchName")
ACCELERATOR_QUERIES = {"device_name": "cuda", "communication_backend_name": "nccl"}  # DeepSpeed's on CUDA
MOCK_TEXT = re.compile(rb"patch|setattr")
MOCKERS = ("patch", "object", "setattr")  # mock.patch, mock.patch.object, monkeypatch.setattr
ACCELERATOR_TEXT = re.compile(rb"(?:device_name|communication_backend_name)\s*\(")
OTHER_BACKEND_CLASS = re.compile(
    r"(?:^|_|(?<=[a-z]))(?:cpu|hpu|xpu|mps|mlu|xla|tpu|ipu|sdaa|supa)_?(?:accelerator|platform|backend)$", re.IGNORECASE
)


class _Mentions(cst.CSTVisitor):
    """Whether an expression mentions CUDA and/or the NPU (strings and name words)."""

    def __init__(self) -> None:
        self.cuda = self.npu = self.other_backend = self.other_device = self.accelerator_query = False
        self.privateuse1 = False  # torch's PrivateUse1 backend name: the NPU where torch_npu is loaded
        self.device_name_query = False  # a device's name read (a ROCm test may look in it)

    def _string(self, value: str | None) -> None:
        if value is not None:
            self.cuda |= CUDA_STRING.fullmatch(value) is not None
            self.npu |= NPU_STRING.fullmatch(value) is not None
            self.other_device |= OTHER_DEVICE_STRING.fullmatch(value) is not None
            if IDENTIFIER.fullmatch(value):  # an environment variable: mmcv's os.getenv("FORCE_NPU")
                self.cuda |= CUDA_WORD.search(value) is not None
                self.npu |= NPU_WORD.search(value) is not None

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self._string(string_value(node))

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        first = node.parts[0] if node.parts else None
        if isinstance(first, cst.FormattedStringText):
            self._string(first.value)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.accelerator_query |= node.attr.value in ACCELERATOR_QUERIES
        self.device_name_query |= node.attr.value in ROCM_QUERIES

    def visit_Name(self, node: cst.Name) -> None:
        self.cuda |= CUDA_WORD.search(node.value) is not None or CUDA_CAMEL.search(node.value) is not None
        self.npu |= NPU_WORD.search(node.value) is not None or NPU_CAMEL.search(node.value) is not None
        self.privateuse1 |= PRIVATEUSE1.search(node.value) is not None
        self.other_backend |= OTHER_BACKEND_CLASS.search(node.value) is not None
        self.other_device |= OTHER_DEVICE_WORD.search(node.value) is not None


def mentions(node: cst.CSTNode | None) -> tuple[bool, bool]:
    """(mentions CUDA, mentions the NPU) for any node."""
    found = _Mentions()
    if node is not None:
        walk(node, found)
    return found.cuda, found.npu or found.privateuse1


def _excludes_npu(test: cst.BaseExpression) -> bool:
    """A test false on the NPU: an ``and`` with ``x.device.type != "npu"``, ``not x.is_npu`` or
    ``not is_npu_available()`` (mmcv's ``if xyz.device.type != 'npu' and is_cuda_available():``)."""
    if isinstance(test, cst.BooleanOperation):
        return isinstance(test.operator, cst.And) and (_excludes_npu(test.left) or _excludes_npu(test.right))
    if isinstance(test, cst.UnaryOperation):
        return isinstance(test.operator, cst.Not) and _detects_npu(test.expression)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        operator, other = test.comparisons[0].operator, test.comparisons[0].comparator
        if isinstance(operator, (cst.NotEqual, cst.IsNot)):
            return "npu" in (string_value(test.left), string_value(other))
        return isinstance(operator, cst.NotIn) and string_value(test.left) == "npu"  # "npu" not in str(device)
    return False


def _only_another_device(test: cst.BaseExpression) -> bool:
    """A test true only on another accelerator: ``is_mlu_available()``, ``torch.musa.is_available()``,
    ``x.is_mps``, ``device_type == "musa"`` (also ``and``-ed with other conditions). Its branch never
    runs on CUDA or the NPU."""
    if isinstance(test, cst.BooleanOperation):
        return isinstance(test.operator, cst.And) and (
            _only_another_device(test.left) or _only_another_device(test.right)
        )
    if _rocm_test(test):
        return True
    if isinstance(test, cst.Comparison):
        if len(test.comparisons) != 1 or not isinstance(test.comparisons[0].operator, (cst.Equal, cst.In)):
            return False
        found = _Mentions()
        walk(test, found)
        return found.other_device and not found.cuda and not found.npu
    name = dotted_name(test.func if isinstance(test, cst.Call) else test) or ""
    parts = name.split(".")
    return any(OTHER_DEVICE_WORD.search(part) for part in parts) and (
        "available" in name or parts[-1].startswith("is_")
    )


def _rocm_test(test: cst.BaseExpression) -> bool:
    """A test true only under ROCm's torch: ``torch.version.hip`` (``is not None``), or a ROCm
    device name looked for in what torch.cuda reports (``"AMD" in torch.cuda.get_device_name()``)."""
    if dotted_name(test) == "torch.version.hip":
        return True
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    operator, other = test.comparisons[0].operator, test.comparisons[0].comparator
    if isinstance(operator, cst.IsNot):
        return dotted_name(test.left) == "torch.version.hip" and dotted_name(other) == "None"
    name = string_value(test.left)
    queried = dotted_name(other.func if isinstance(other, cst.Call) else other) or ""
    return (
        isinstance(operator, cst.In)
        and name is not None
        and ROCM_DEVICE_NAME.fullmatch(name) is not None
        and queried.rpartition(".")[2] in ROCM_QUERIES
    )


def _accelerator_is_cuda(test: cst.BaseExpression) -> bool:
    """``get_accelerator().device_name() == "cuda"`` (also ``and``-ed): the device-neutral code of an
    accelerator abstraction asks whether it runs on CUDA; its branch never runs on the NPU."""
    if isinstance(test, cst.BooleanOperation):
        return isinstance(test.operator, cst.And) and (
            _accelerator_is_cuda(test.left) or _accelerator_is_cuda(test.right)
        )
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    if not isinstance(test.comparisons[0].operator, cst.Equal):
        return False
    sides = (test.left, test.comparisons[0].comparator)
    return any(
        isinstance(query, cst.Call)
        and isinstance(query.func, cst.Attribute)
        and query.func.attr.value in ACCELERATOR_QUERIES
        and ACCELERATOR_QUERIES[query.func.attr.value] == string_value(value)
        for query, value in (sides, sides[::-1])
    )


def _cuda_only(sides: list[tuple[cst.CSTNode, list[cst.CSTNode]]]) -> list[cst.CSTNode]:
    """The nodes to keep of the CUDA-only sides of ``(tested node, nodes to keep)`` pairs, when
    another side mentions the NPU only.

    A side that mentions both devices is neither alternative (its own parts are looked at).
    """
    kinds = [mentions(tested) for tested, _ in sides]
    npu_sides = [tested for (tested, _), (cuda, npu) in zip(sides, kinds) if npu and not cuda]
    if not npu_sides:
        return []
    if all(map(_exact_npu_test, npu_sides)) and any(_cuda_prefix_test(tested) for tested, _ in sides):
        return []  # `device.startswith("cuda") or device in ("mps", "npu")`: "npu:0" is in neither
    return [node for (_, keep), (cuda, npu) in zip(sides, kinds) if cuda and not npu for node in keep]


def _exact_npu_test(test: cst.CSTNode) -> bool:
    """``device == "npu"`` / ``device in ("mps", "npu")``: an exact test of a value that may carry an
    index (not a device type such as ``x.device.type`` or ``device_type``), false for ``"npu:0"``."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    operator, value, other = test.comparisons[0].operator, test.left, test.comparisons[0].comparator
    if isinstance(operator, cst.Equal):
        value, other = (other, value) if string_value(value) == "npu" else (value, other)
        exact = string_value(other) == "npu"
    else:
        exact = (
            isinstance(operator, cst.In)
            and isinstance(other, (cst.List, cst.Tuple, cst.Set))
            and any(string_value(e.value) == "npu" for e in other.elements)
        )
    return exact and not (dotted_name(value) or "").lower().endswith("type")


def _cuda_prefix_test(test: cst.CSTNode) -> bool:
    """Whether ``test`` holds a CUDA prefix test, true for an index too: ``device.startswith("cuda")``,
    ``"cuda" in device``."""
    for call in iter_nodes(test, cst.Call):
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "startswith":
            if any(mentions(arg)[0] for arg in call.args):
                return True
    return any(
        isinstance(c.comparisons[0].operator, cst.In) and string_value(c.left) in ("cuda", "cuda:")
        for c in iter_nodes(test, cst.Comparison)
        if len(c.comparisons) == 1
    )


class _Constructs(cst.CSTVisitor):
    """Pre-pass: the roots of the CUDA alternatives of NPU-aware constructs."""

    def __init__(self) -> None:
        self.roots: list[cst.CSTNode] = []
        self._inner: set[cst.CSTNode] = set()  # nested parts of a chain already looked at

    def _block(self, body) -> None:
        run: list[cst.If] = []
        for statement in [*body, None]:
            if isinstance(statement, cst.If):
                run.append(statement)
                continue
            if run:
                branches = _branches(run)
                self.roots += _cuda_only([(t, [t, b]) for t, b in branches])
                self.roots += [b for t, b in branches if mentions(t) == (False, True) and mentions(b)[0]]
                self.roots += [b for t, b in branches if _only_another_device(t)]
                self.roots += [n for t, b in branches if _accelerator_is_cuda(t) for n in (t, b)]
                self.roots += [n for t, b in branches if _excludes_npu(t) for n in (t, b)]
                self.roots += [e for chain in run if (e := _cuda_else(chain)) is not None]
                run = []
        for position, statement in enumerate(body):
            if _npu_early_exit(statement):  # `if <probe>: return x.to("npu")`, then the CUDA code
                self.roots += body[position + 1 :]
            elif _rebound_for_npu(statement, body[position + 1 :]):
                self.roots.append(statement)
            elif _repeated_for_npu(statement, body[position + 1 : position + 4]):
                self.roots.append(statement)
        self._assignments(body)

    def _assignments(self, body) -> None:
        targets: dict[str, cst.CSTNode] = {}
        for statement in body:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    for target in _assigned(small):
                        targets.setdefault(target, statement)
        for name, statement in targets.items():
            if CUDA_WORD.search(name.rpartition(".")[2]):
                counterpart = CUDA_WORD.sub(_npu_word, name)
                if counterpart != name and counterpart in targets:
                    self.roots.append(statement)

    def visit_Module(self, node: cst.Module) -> None:
        self._block(node.body)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if OTHER_BACKEND_CLASS.search(node.name.value):
            self.roots.append(node.body)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._block(node.body)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if node in self._inner:
            return
        if _detects_npu(node.test) and not mentions(node.orelse)[1]:
            self.roots.append(node.orelse)
        if _only_another_device(node.test):  # `"cuda" if <XLA on a GPU> else device.type`
            self.roots.append(node.body)
        if _accelerator_is_cuda(node.test):  # `x if get_accelerator().device_name() == "cuda" else y`
            self.roots.append(node.test)
            self.roots.append(node.body)
        sides = []
        while isinstance(node, cst.IfExp):
            self._inner.add(node)
            sides.append((node.test, [node.test, node.body]))
            if mentions(node.test) == (False, True) and mentions(node.body)[0]:
                self.roots.append(node.body)
            node = node.orelse
        self.roots += _cuda_only([*sides, (node, [node])])

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        if node in self._inner:
            return
        operands = _operands(node, self._inner)
        self.roots += _cuda_only([(o, [o]) for o in operands])

    def _elements(self, node: cst.List | cst.Tuple | cst.Set) -> None:
        values = [e.value for e in node.elements]
        self.roots += _cuda_only([(v, [v]) for v in values])

    visit_List = visit_Tuple = visit_Set = _elements

    def visit_Dict(self, node: cst.Dict) -> None:
        entries = [e for e in node.elements if isinstance(e, cst.DictElement)]
        self.roots += _cuda_only([(e.key, [e]) for e in entries])


def _npu_word(match: re.Match) -> str:
    word = match.group()
    return word.replace("cuda", "npu").replace("CUDA", "NPU").replace("Cuda", "Npu")


NPU_CHECK = re.compile(r"npu.*available|available.*npu", re.IGNORECASE)
NPU_FLAG = re.compile(  # SUPPORT_NPU, HAS_NPU, use_npu, npu_enabled; not a feature such as `args.npu_fused`
    r"(?:(?:is|has|use|using|with|on|support|supports|enable|enabled)_)+npu|npu_(?:enabled|supported|support)",
    re.IGNORECASE,
)


def _detects_npu(test: cst.BaseExpression) -> bool:
    """``is_torch_npu_available()``, ``torch.npu.is_available()``, ``x.is_npu``, ``d.type == "npu"``,
    an NPU flag (ColossalAI's ``SUPPORT_NPU``, set where ``import torch_npu`` works). Not a
    comparison with torch's PrivateUse1 name: it tests a configured device (torch's DataLoader
    ``pin_memory_device``, "" by default), so an ``else`` after it also runs on the NPU. An ``and`` with
    one such operand detects the NPU too (trl's ``is_torch_npu_available() and self.accelerator_type ==
    "npu"``, round 53)."""
    if isinstance(test, cst.BooleanOperation):
        return isinstance(test.operator, cst.And) and (_detects_npu(test.left) or _detects_npu(test.right))
    if isinstance(test, cst.Comparison):
        found = _Mentions()
        walk(test, found)
        return found.npu and not found.cuda
    name = dotted_name(test.func if isinstance(test, cst.Call) else test) or ""
    last = name.rpartition(".")[2]
    flag = NPU_FLAG.fullmatch(last.lstrip("_")) is not None and (
        not isinstance(test, cst.Call) or last.lstrip("_") == "is_npu"  # xDiT's `_is_npu()` probe
    )
    return bool(NPU_CHECK.search(name)) or last == "is_npu" or flag


def _npu_early_exit(statement: cst.CSTNode) -> bool:
    """``if accel_ok(): return x.to("npu")`` with no ``else``: a branch that handles the NPU alone
    and leaves, under a test naming no CUDA (a probe of another module, ``if use_npu:``), or one that
    leaves where the test detects the NPU (xDiT's ``if _is_npu(): return False``); what follows it in
    the block is the CUDA alternative."""
    return (
        isinstance(statement, cst.If)
        and statement.orelse is None
        and leaves(statement.body)
        and (
            (mentions(statement.body) == (False, True) and not mentions(statement.test)[0])
            or _detects_npu(statement.test)
        )
    )


def _repeated_for_npu(statement: cst.CSTNode, following: list[cst.CSTNode]) -> bool:
    """``torch.cuda.empty_cache()`` followed in its block by ``if device == "npu": torch.npu.empty_cache()``
    (FastChat's ``generate_stream``, copied by InfLLM: round 32): a call that does nothing without CUDA
    (:data:`NO_OP_WITHOUT_CUDA`), which the code repeats for the NPU itself."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return False
    call = statement.body[0].value if isinstance(statement.body[0], cst.Expr) else None
    name = dotted_name(call.func) if isinstance(call, cst.Call) else None
    if name is None or not name.startswith("torch.cuda.") or name.rpartition(".")[2] not in NO_OP_WITHOUT_CUDA:
        return False
    npu_name = "torch.npu." + name.rpartition(".")[2]
    return any(
        isinstance(later, cst.If)
        and _detects_npu(later.test)
        and any(dotted_name(c.func) == npu_name for c in iter_nodes(later.body, cst.Call))
        for later in following
    )


def _rebound_for_npu(statement: cst.CSTNode, following: list[cst.CSTNode]) -> bool:
    """``from torch.cuda import synchronize`` followed in its block by ``if envs._is_npu(): from torch.npu
    import synchronize`` or ``try: from torch.npu import synchronize`` (xDiT): the NPU branch rebinds what the
    import binds, which is the CUDA side."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    bound = _names_from(statement.body, ("torch.cuda",))
    if not bound:
        return False
    for later in following:
        if isinstance(later, cst.If) and _detects_npu(later.test):
            rebound = _names_from(iter_nodes(later.body, cst.ImportFrom), ("",))
        elif isinstance(later, cst.Try):
            rebound = _names_from(iter_nodes(later.body, cst.ImportFrom), ("torch.npu", "torch_npu"))
        else:
            continue
        if bound <= rebound:
            return True
    return False


def _names_from(nodes, modules: tuple[str, ...]) -> set[str]:
    """The names the ``from <module> import ...`` statements among ``nodes`` bind, for modules starting
    with one of ``modules`` ("" : any)."""
    return {
        bound_name(alias, node)
        for node in nodes
        if isinstance(node, cst.ImportFrom)
        and not isinstance(node.names, cst.ImportStar)
        and (dotted_name(node.module) or "").startswith(modules)
        for alias in node.names
    }


def _cuda_else(chain: cst.If) -> cst.CSTNode | None:
    """The ``else`` body of ``if <NPU detected>: ... else: <CUDA code>``, the NPU test in any
    branch (``if is_mlu_available(): ... elif is_npu_available(): ... else: <CUDA>``) or a branch
    whose body handles the NPU alone under a test naming no device (``if accel_ok(): x.to("npu")``,
    a probe of another module), no branch testing CUDA."""
    last, tests, bodies = chain, [chain.test], [chain.body]
    while isinstance(last.orelse, cst.If):
        last = last.orelse
        tests.append(last.test)
        bodies.append(last.body)
    npu_branch = any(_detects_npu(test) for test in tests) or any(
        mentions(body) == (False, True) and mentions(test) == (False, False) for test, body in zip(tests, bodies)
    )
    if not isinstance(last.orelse, cst.Else) or not npu_branch:
        return None
    if any(mentions(test)[0] for test in tests):
        return None
    return last.orelse.body if mentions(last.orelse.body) == (True, False) else None


def _branches(run: list[cst.If]) -> list[tuple[cst.BaseExpression, cst.CSTNode]]:
    """(test, body) of every ``if``/``elif`` of a run of if statements."""
    found = []
    for statement in run:
        node: cst.CSTNode | None = statement
        while isinstance(node, cst.If):
            found.append((node.test, node.body))
            node = node.orelse
    return found


def _operands(node: cst.BaseExpression, inner: set[cst.CSTNode]) -> list[cst.BaseExpression]:
    """Operands of nested ``and``/``or`` (parenthesised or not), marking the nested operations."""
    if isinstance(node, cst.BooleanOperation):
        inner.add(node)
        return _operands(node.left, inner) + _operands(node.right, inner)
    return [node]


def _assigned(small: cst.BaseSmallStatement) -> list[str]:
    if isinstance(small, cst.Assign):
        return [n for t in small.targets if (n := dotted_name(t.target))]
    if isinstance(small, cst.AnnAssign) and small.value is not None:
        name = dotted_name(small.target)
        return [name] if name else []
    return []


# what a file must spell (lower-cased) for a name or string of it to mention the NPU or another backend
# (a word start is checked apart; other accelerators' names for their branches, see _only_another_device)
NPU_TEXT = tuple(re.compile(rb"%s(?![a-z0-9])" % word) for word in (b"npu", b"hccl", b"privateuse1", *OTHER_DEVICES))
BACKEND_CLASS_TEXT = re.compile(rb"(?:cpu|hpu|xpu|mps|mlu|xla|tpu|ipu|sdaa|supa)_?(?:accelerator|platform|backend)")


def may_mention_another_device(text: bytes) -> bool:
    """Whether some name or string of this source can mention the NPU or another backend (a
    superset: ``input`` is no NPU word, ``x_npu`` and ``"npu:0"`` are). Literal scans only: a
    pattern starting with a look-behind would cost more than the walk it saves."""
    lowered = text.lower()
    for word in NPU_TEXT:
        for match in word.finditer(lowered):
            if not lowered[match.start() - 1 : match.start()].isalnum():
                return True
    return (b"accelerator" in lowered or b"platform" in lowered or b"backend" in lowered) and (
        BACKEND_CLASS_TEXT.search(lowered) is not None
    )


def cuda_alternatives(ctx) -> frozenset[cst.CSTNode]:
    """Every node inside a CUDA alternative of an NPU-aware construct of the file of ``ctx`` (a
    :class:`~cuda2npu.core.rulebase.RuleContext`; computed once per file)."""
    return ctx.file_state(_cuda_alternatives)


def _cuda_alternatives(ctx) -> frozenset[cst.CSTNode]:
    bodies = [*_counterpart_classes(ctx), *_cuda_mocking_scopes(ctx)]
    nodes: set[cst.CSTNode] = {node for body in bodies for node in iter_nodes(body)} | never_run_nodes(ctx)
    if (
        ctx.text is not None
        and not may_mention_another_device(ctx.text)
        and not ACCELERATOR_TEXT.search(ctx.text)
        and not ROCM_TEXT.search(ctx.text)
    ):
        return frozenset(nodes)  # most CUDA files never spell the NPU: no walk needed
    found = _Mentions()
    walk(ctx.module, found)
    # most CUDA files name none: nothing to keep
    if (
        found.npu
        or found.privateuse1
        or found.other_backend
        or found.other_device
        or found.accelerator_query
        or found.device_name_query
    ):
        constructs = _Constructs()
        walk(ctx.module, constructs)
        for root in constructs.roots:
            nodes.update(iter_nodes(root))
    return frozenset(nodes)


def _counterpart_classes(ctx) -> list[cst.CSTNode]:
    """The bodies of the module-level classes whose NPU counterpart the project implements in another
    file (ColossalAI's ``CudaAccelerator`` next to ``npu_accelerator.py``'s ``NpuAccelerator``, DeepSpeed's
    ``CUDA_Accelerator`` next to ``NPU_Accelerator``): an accelerator table picks one of them per host.
    Also the other CUDA-side classes of that family (AReaL's ``UnknownPlatform``, chosen for a CUDA
    device that is not NVIDIA's, beside ``NPUPlatform``): named with the same ending, not the family's
    base (``Platform``), and naming CUDA in their body."""
    wanted = {_backend_key(name) for name in ctx.options.project.npu_backend_classes}
    if not wanted:
        return []
    families = {key.replace("npu", "", 1) for key in wanted}
    found = []
    for statement in ctx.module.body:
        if not isinstance(statement, cst.ClassDef):
            continue
        key = _backend_key(statement.name.value)
        counterpart = "cuda" in key and key.replace("cuda", "npu") in wanted
        sibling = key not in families and key not in wanted and any(key.endswith(f) for f in families)
        if counterpart or (sibling and mentions(statement.body)[0]):
            found.append(statement.body)
    return found


def _cuda_mocking_scopes(ctx) -> list[cst.CSTNode]:
    """The functions that mock ``torch.cuda`` (in a decorator or their body) and the classes whose
    decorator does."""
    if ctx.text is not None and not (b"torch.cuda" in ctx.text and MOCK_TEXT.search(ctx.text)):
        return []
    return [
        scope
        for scope in iter_nodes(ctx.module, (cst.FunctionDef, cst.ClassDef))
        if any(
            _mocks_cuda(call)
            for part in ([scope] if isinstance(scope, cst.FunctionDef) else scope.decorators)
            for call in iter_nodes(part, cst.Call)
        )
    ]


def _mocks_cuda(call: cst.Call) -> bool:
    """``patch("torch.cuda.x", ...)``, ``patch.object(torch.cuda, "x", ...)``, ``setattr(torch.cuda, ...)``."""
    func = call.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    if name not in MOCKERS or not call.args:
        return False
    target = call.args[0].value
    spelled = string_value(target) if isinstance(target, cst.SimpleString) else dotted_name(target)
    return spelled is not None and (spelled == "torch.cuda" or spelled.startswith("torch.cuda."))


def _backend_key(name: str) -> str:
    return name.lower().replace("_", "")


def is_cuda_alternative(ctx, node: cst.CSTNode) -> bool:
    """Whether ``node`` is part of the CUDA side of code that already handles the NPU."""
    return node in cuda_alternatives(ctx)


def in_npu_branch(ctx, node: cst.CSTNode) -> bool:
    """Whether ``node`` is code written knowing the NPU: on the CUDA side of a construct that handles
    it (:func:`is_cuda_alternative`), or on either side of an ``if`` / ``a if c else b`` whose test
    mentions the NPU (``if is_torch_npu_available():``, ``if not use_npu:``, ``0 if use_npu else 1``).
    Library calls that name neither device (Ray's ``num_gpus=1``, vLLM's ``PyNcclCommunicator(...)``,
    ``attn_implementation="flash_attention_2"``) are kept by the branch they sit in."""
    if is_cuda_alternative(ctx, node):
        return True
    parents = TreeIndex.of(ctx).parents
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, (cst.If, cst.IfExp)) and child is not parent.test and mentions(parent.test)[1]:
            return True
        child, parent = parent, parents.get(parent)
    return False
