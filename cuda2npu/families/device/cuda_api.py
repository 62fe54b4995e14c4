"""``torch.cuda.*`` → ``torch.npu.*`` (NPU103), ``torch.cuda.amp`` → NPU AMP (NPU106) and
torch.cuda APIs with no NPU counterpart (NPU601). Mapping data: ``rules/tables/torch_cuda_api.toml``;
the keywords of every rewritten call are checked against ``rules/tables/torch_npu_signatures.toml``.

Left alone: a ``torch.cuda.is_available()`` whose value switches on a CUDA-only feature (reported,
tier review: on NPU the feature must stay off), another library's CUDA path (``use_gpu=`` of its
call) or a CUDA value no rule rewrites (``if torch.cuda.is_available(): accelerator = "cuda"``:
the test and the value change together or not at all), silently one that gates an NVIDIA-only
check (``check_nvlink_connectivity()``), and code that already handles NPU next to CUDA
(``if torch.cuda.is_available(): ... elif torch.npu.is_available(): ...``, ``{"cuda": ..., "npu": ...}``).
A compute-capability test choosing bfloat16 (``get_device_capability()[0] >= 8``) becomes
``torch.npu.is_bf16_supported()``.
``torch._C._cuda_*`` bindings are reported with their ``torch_npu._C._npu_*`` counterpart.

Portable output (``--portable``): cuda2npu/families/device/cuda_api_portable.py.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import libcst as cst

from cuda2npu.analysis import portable
from cuda2npu.analysis.autocast import never_entered
from cuda2npu.analysis.cuda_gates import (
    CAPABILITY_QUERIES,
    NVIDIA_TOOL_WORDS,
    cuda_branch,
    cuda_only_skip_reason,
    cudnn_settings_only,
    gated_cuda_use,
    names_fallback,
    no_cuda_branch,
    nvidia_checks_only,
    paired_gate,
    skipped_cuda_use,
    stream_handle,
)
from cuda2npu.analysis.exports import exported
from cuda2npu.analysis.kernel_switch import kernel_call
from cuda2npu.analysis.npu_aware import is_cuda_alternative, mentions
from cuda2npu.analysis.raising_fallbacks import failed_import_flags, requires_flag
from cuda2npu.analysis.runtime_devices import library_device_count
from cuda2npu.core.catalogue import table
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.feature_words import boolean_parts, cuda_library, feature_word, name_tokens
from cuda2npu.core.imports import remove_import_names
from cuda2npu.core.literals import DEVICE_STRING, rename_fix, string_value
from cuda2npu.core.names import NameUses, dotted_name
from cuda2npu.core.nodes import attribute_chain, code_of
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex, leaves
from cuda2npu.core.torch_npu_target import parse_target
from cuda2npu.core.traversal import iter_nodes, walk
from cuda2npu.families.device import cuda_api_portable as portable_api
from cuda2npu.families.device.capability_tests import capability_device_test
from cuda2npu.families.device.cuda_api_checks import (
    CallCheck,
    adapt_keywords,
    bf16_capability_test,
    check_call,
    fp16_capability_test,
    gpu_flag_choice,
    kept_cuda_value,
    library_flag_use,
    library_gpu_switch,
    signature,
)
from cuda2npu.families.device.cuda_graphs import annotated
from cuda2npu.families.device.default_tensor_type import default_type_argument
from cuda2npu.families.device.device_branches import CUDA_REQUIRED
from cuda2npu.families.device.device_expressions import cuda_call_devices

KEPT_VALUE = "a CUDA value no rule rewrites"  # the kinds of switch with a message of their own
FALLBACK = "a pure-PyTorch fallback"
SIBLING_CHOICE = "a choice made with another argument's CUDA value"  # kept with it, unreported
LIBRARY_PATH = "another library's CUDA path"
NVIDIA_CHECK = "an NVIDIA-only check"  # left as written, unreported: nothing to decide
# `if torch.cuda.is_available(): info["cuda"] = torch.version.cuda`: an environment report, alike
FACTS_RECORD = "a record of CUDA build facts"
MODULE_VALUE = "the torch.cuda module as a value"  # left as written, unreported: the branch stays CUDA's
LOG_CALLS = {"print", "info", "debug", "warning", "log"}  # calls that only show a value
# strings that choose another library's CUDA runtime: ONNX Runtime's providers, the GPU builds on PyPI
CUDA_RUNTIME = re.compile(r"CUDAExecutionProvider|TensorrtExecutionProvider|\b[\w.]+-gpu\b")


@dataclass(frozen=True)
class Api:
    """What ``torch.cuda[.<sub>].<name>`` is on NPU."""

    status: str  # renamed | review | unchanged | unsupported
    note: str = ""
    npu: str = ""  # the name under torch.npu (``mstx.annotate``)
    code: str = "NPU103"


def cuda_api_entry(sub: str, name: str) -> Api:
    """What ``torch.cuda.<name>`` (``sub``: ``torch.cuda.<sub>.<name>``) is on NPU, from the API table."""
    api = table("torch_cuda_api")
    if sub:
        head, _, inner = sub.partition(".")  # `amp.autocast_mode`: a module of the submodule
        module = api["submodules"][head]
        code = module.get("code", "NPU103")
        if inner:
            if name in module["modules"][inner]:
                return Api("renamed", npu=f"{module['target']}.{inner}.{name}", code=code)
            return Api("unsupported", f"torch_npu.npu.{module['target']}.{inner} has no `{name}`", code=code)
        renamed = module["renamed"]
        if name in module.get("modules", ()):
            return Api("renamed", npu=f"{module['target']}.{name}", code=code)
        if name in renamed:
            new = renamed[name] if isinstance(renamed, dict) else name
            return Api("renamed", npu=f"{module['target']}.{new}", code=code)
        return Api("unsupported", module.get("notes", {}).get(name) or module["other"].format(name=name), code=code)
    if name in api["unchanged"]:
        return Api("unchanged")
    if name in api["renamed"]:
        return Api("renamed", npu=name)
    if name in api["submodules"] and name not in api["unsupported"]:
        module = api["submodules"][name]
        return Api("renamed", npu=module["target"], code=module.get("code", "NPU103"))
    for status in ("review", "unsupported"):
        if name in api[status]:
            return Api(status, api[status][name], npu=name)
    return Api("unsupported", f"`torch.cuda.{name}` is not in torch.npu's API")


def _npu_module(module: str) -> str | None:
    """``torch.cuda`` → ``torch_npu.npu``; ``torch.cuda.memory`` → ``torch_npu.npu.memory``;
    ``torch.cuda.amp.autocast_mode`` → ``torch_npu.npu.amp.autocast_mode``."""
    if module == "torch.cuda":
        return "torch_npu.npu"
    head, _, inner = module.removeprefix("torch.cuda.").partition(".")
    spec = table("torch_cuda_api")["submodules"].get(head) if module.startswith("torch.cuda.") else None
    if not spec or not spec["importable"] or (inner and inner not in spec.get("modules", ())):
        return None
    return f"torch_npu.npu.{spec['target']}" + (f".{inner}" if inner else "")


def _cuda_to_npu(node: cst.BaseExpression) -> cst.BaseExpression:
    """``<x>.cuda`` → ``<x>.npu``; a bare name (bound by a rewritten import) stays."""
    if isinstance(node, cst.Attribute) and node.attr.value == "cuda":
        return node.with_changes(attr=cst.Name("npu"))
    return node


@register
class TorchCudaApi(Rule):
    codes = ("NPU103", "NPU106", "NPU601")
    triggers = (r"\bcuda\b", r"\b_cuda", r"\.cuda_stream\b")
    portable_support = True

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._aliases = portable_api.cuda_aliases(ctx.module) if self.options.portable else None
        self._amp: set[cst.CSTNode] = set()  # portable: torch.cuda.amp references a call/decorator fix replaces
        self._covered: dict[cst.Name, Tier] = {}  # portable: reads of imported torch.cuda names that are replaced
        self._skip: set[cst.CSTNode] = set()  # attributes a finding on an enclosing one covers
        self._blocked: dict[cst.CSTNode, str] = {}  # call.func → why the call stays torch.cuda (manual)
        self._properties: dict[cst.CSTNode, str | None] = {}  # get_device_properties func → empty field read
        self._switches: dict[cst.CSTNode, str] = {}  # is_available attribute → the feature it gates
        self._switch_parts: set[cst.CSTNode] = set()  # attributes of a switch's expression: stay as written
        self._kept_branch: set[cst.CSTNode] = set()  # attributes in the CUDA branch of a kept switch: as written
        self._guards: list[tuple[cst.If, set[str]]] = []  # `if hasattr(_C, "_cuda_x"):` → names
        self._scopes: list[cst.ClassDef | cst.FunctionDef] = []  # enclosing classes and functions
        self._target = self.options.target
        self._calls: dict[str, list[tuple[str, cst.Call]]] | None = None  # first name → calls (on demand)
        self._kept_aliases: set[str] = set()  # `from torch import cuda as tc` kept for a call `tc` serves

    # --- context: hasattr guards, feature switches ---------------------------------------------

    def visit_If(self, node: cst.If) -> None:
        self._capability_device_test(node.test)
        names = _hasattr_names(node.test)
        if names:
            self._guards.append((node, names))
        if self._mark_switch(
            node.test,
            lambda: _first(
                lambda: _operand_feature(node.test),
                lambda: self._gated(node),
                lambda: self._fallback(node),
                lambda: self._feature_exit(node),
            ),
        ):
            self._keep_cuda_branch(node)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._capability_device_test(node.test)
        if node.body.deep_equals(node.orelse):  # `"cpu" if torch.cuda.is_available() else "cpu"`: no choice
            self._switch_parts.update(_attributes(node.test))
            return
        if self._mark_switch(
            node.test,
            lambda: _first(
                lambda: _operand_feature(node.test),
                lambda: self._gated(node),
                lambda: self._sibling_choice(node),
                lambda: _runtime_choice(self.ctx, node),
            ),
            capability=not _device_choice(node),
        ):
            self._keep_cuda_branch(node)

    def _capability_device_test(self, test: cst.BaseExpression) -> None:
        """``"cuda" in device and torch.cuda.get_device_properties(device).major >= 7`` (capability_tests.py):
        its calls stay ``torch.cuda`` (False on an NPU host, as its "cuda" test), with one review marker."""
        if not capability_device_test(self.ctx, test) or is_cuda_alternative(self.ctx, test):
            return
        self._switch_parts.update(_attributes(test))
        self.report(
            "NPU103",
            test,
            "kept: this test asks for a CUDA device and its compute capability, which torch_npu leaves empty "
            "(`get_device_capability()` is None, the properties have no `major`): rewritten it would raise; as "
            "written it is False on an NPU host, where its other branch runs: decide what it means on the NPU",
            tier=Tier.REVIEW,
        )

    def _keep_cuda_branch(self, node: cst.If | cst.IfExp) -> None:
        """The test stays `torch.cuda`, False on an NPU host: its CUDA branch never runs there, and is
        left as written with it (not half torch.cuda, half torch.npu)."""
        self._kept_branch.update(n for block in cuda_branch(self.ctx, node) for n in iter_nodes(block, cst.Attribute))

    def visit_Comparison(self, node: cst.Comparison) -> None:
        """``torch.cuda.get_device_capability()[0] >= 8`` choosing bfloat16 → ``torch.npu.is_bf16_supported()``
        (``bf16_capability_test``; torch.npu.get_device_capability() is None); ``... >= 7`` for a float16
        flag → ``True`` (``fp16_capability_test``)."""
        call = self._bf16_tests.get(node)
        fp16 = call is None and node in self._fp16_tests
        if (call is None and not fp16) or self.options.portable or is_cuda_alternative(self.ctx, node):
            return
        self._switch_parts.update(_attributes(node))
        if fp16:
            self.report(
                "NPU103",
                node,
                f"`{code_of(node)}` asks for CUDA compute capability 7, the first with float16 tensor cores → `True`: "
                "every Ascend NPU computes in float16 (torch.npu.get_device_capability() is None; "
                "docs/reference/torch_npu.md §4.2)",
                lambda updated: cst.Name("True", lpar=updated.lpar, rpar=updated.rpar),
                tier=Tier.REVIEW,
            )
            return
        supported = cst.Call(
            func=call.func.with_changes(value=_cuda_to_npu(call.func.value), attr=cst.Name("is_bf16_supported"))
        )
        self.report(
            "NPU103",
            node,
            f"`{code_of(node)}` asks for CUDA compute capability 8, the first with bfloat16 → "
            f"`{code_of(supported)}` (torch.npu.get_device_capability() is None; docs/reference/torch_npu.md §4.2)",
            lambda updated: supported.with_changes(lpar=updated.lpar, rpar=updated.rpar),
        )

    def _gated(self, node: cst.If | cst.IfExp) -> tuple[str | None, str]:
        """CUDA-only code in the branch the test selects (``if torch.cuda.is_available(): from knn_cuda
        import KNN``, a TensorRT-LLM import, ``nvcc`` run through a shell): ``cuda_gates``; or a read
        of the CUDA compute capability there (``if not torch.cuda.is_available(): return ""`` before
        a loop unpacking ``get_device_capability(i)``, which is None on the NPU)."""
        branch = cuda_branch(self.ctx, node)
        if nvidia_checks_only(branch) or cudnn_settings_only(branch):
            return NVIDIA_CHECK, ""
        found = gated_cuda_use(self.ctx, node)
        if found:
            return found[1], f"{found[0]} in its branch"
        paired = paired_gate(self.ctx, node)
        if paired:
            return paired[1], f"{paired[0]} under the same test elsewhere in this class, which stays"
        kernel = kernel_call(self.ctx, node)  # `if ... and value.is_cuda: DeformAttnFunction.apply(...)`
        if kernel:
            return "a CUDA kernel", f"`{kernel}` in its branch"
        if self._records_facts(branch):
            return FACTS_RECORD, ""
        word, read = self._branch_read(branch)
        if word:
            return word, f"{read} in its branch"
        kept = kept_cuda_value(self.ctx, branch)
        if kept:
            return KEPT_VALUE, kept
        module = self._module_value(branch)
        if module:
            return MODULE_VALUE, module
        flag = gpu_flag_choice(node) if isinstance(node, cst.If) else None
        return (LIBRARY_PATH, flag) if flag else (None, "")

    def _module_value(self, blocks: list[cst.CSTNode]) -> str:
        """The first ``torch.cuda`` module used as a value in ``blocks`` (trl's ``accelerator_module = torch.xpu if
        is_torch_xpu_available() else torch.cuda``, then ``accelerator_module.get_device_properties(d).uuid``,
        round 53): no rule rewrites it, so the test stays as written with it (else the NPU host would run
        ``torch.cuda`` there); "" where there is none."""
        parents = TreeIndex.of(self.ctx).parents
        for block in blocks:
            for attribute in iter_nodes(block, cst.Attribute):
                parent = parents.get(attribute)
                used = not (isinstance(parent, cst.Attribute) and parent.value is attribute)
                if used and self.resolver.qualified_name(attribute) == "torch.cuda":
                    return f"`{code_of(parents.get(attribute, attribute))}`"
        return ""

    def _branch_read(self, blocks: list[cst.CSTNode]) -> tuple[str | None, str]:
        """A read in ``blocks`` of what an NPU host answers with None: the CUDA compute capability
        (``_capability_read``; its calls stay as written with the switch: the branch never runs on
        the NPU) or a CUDA build fact (``torch.version.cuda``, ``torch.backends.cudnn.version()``;
        OLMo-core's ``assert torch.version.cuda is not None``)."""
        queries = [
            (call, read)
            for block in blocks
            for call in iter_nodes(block, cst.Call)
            if (read := self._capability_read(call))
        ]
        if queries:
            self._switch_parts.update(attribute for call, _ in queries for attribute in _attributes(call.func))
            return "compute capability", queries[0][1]
        facts = table("torch_cuda_api")["feature_switches"]["cuda_facts"]
        for block in blocks:
            for attribute in iter_nodes(block, cst.Attribute):
                if self.resolver.qualified_name(attribute) in facts:
                    return "the CUDA build's version, None on NPU", f"`{code_of(attribute)}`"
        return None, ""

    def _records_facts(self, blocks: list[cst.CSTNode]) -> bool:
        """``blocks`` only store or show CUDA build facts (``info["cuda_version"] = torch.version.cuda``,
        ``print(torch.backends.cudnn.version())``: an environment report): left as written, the test
        is False on an NPU host and the report leaves them out, as it does on any host without CUDA."""
        facts = table("torch_cuda_api")["feature_switches"]["cuda_facts"]
        blocks = [block.body if isinstance(block, cst.Else) else block for block in blocks]
        if any(True for block in blocks for _ in iter_nodes(block, cst.BaseCompoundStatement)):
            return False
        statements = [
            small for block in blocks for line in iter_nodes(block, cst.SimpleStatementLine) for small in line.body
        ]
        if not statements:
            return False
        for small in statements:
            if isinstance(small, (cst.Assign, cst.AnnAssign)):
                value = small.value
            elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                if (dotted_name(small.value.func) or "").rpartition(".")[2] not in LOG_CALLS:
                    return False
                value = small.value
            else:
                return False
            if value is None or not any(
                self.resolver.qualified_name(a) in facts for a in iter_nodes(value, cst.Attribute)
            ):
                return False
        return True

    def _fallback(self, node: cst.If) -> tuple[str | None, str]:
        """The branch the test takes without CUDA assigns a pure-PyTorch implementation (OLMo-core:
        ``if not torch.cuda.is_available() and backend != Backend.torch: backend = Backend.torch``):
        the fallback an NPU host needs too, whose other choice (flash-attn) does not run there."""
        for block in no_cuda_branch(self.ctx, node):
            for assign in iter_nodes(block, cst.Assign):
                if names_fallback(assign.value):
                    return FALLBACK, f"`{code_of(assign.targets[0].target)} = {code_of(assign.value)}`"
        return None, ""

    def _capability_read(self, call: cst.Call) -> str | None:
        """How ``call`` reads the CUDA compute capability (``get_device_capability()``, a field torch_npu
        leaves empty of ``get_device_properties()``, or its whole answer), else None: a bfloat16 test
        (rewritten) or a read of filled fields only (``.name``, ``.total_memory``)."""
        qualified = self.resolver.qualified_name(call.func)
        if (
            qualified not in CAPABILITY_QUERIES
            or call in self._bf16_tests.values()
            or call in self._fp16_tests.values()
        ):
            return None
        if qualified == "torch.cuda.get_device_capability":
            return f"`{qualified}()`"
        fields = self._fields_read(call)
        filled = table("torch_cuda_api")["device_properties"]["filled"]
        empty = [f for f in fields if f not in filled] if fields is not None else None
        if empty == []:
            return None
        return f"`{qualified}(...).{empty[0]}`" if empty else f"`{qualified}(...)`"

    def _fields_read(self, call: cst.Call) -> list[str] | None:
        """The fields read of a ``get_device_properties(...)`` answer: ``(...).name``, or ``p.<field>`` of
        ``p = get_device_properties(...)`` in its function (or module); None: used whole."""
        index = TreeIndex.of(self.ctx)
        parent = index.parents.get(call)
        if isinstance(parent, cst.Attribute) and parent.value is call:
            return [parent.attr.value]
        if (
            isinstance(parent, cst.Assign)
            and len(parent.targets) == 1
            and isinstance(parent.targets[0].target, cst.Name)
        ):
            scope = index.function.get(index.parents.get(parent)) or self.ctx.module
            return _variable_fields(scope, parent.targets[0].target.value)
        return None

    @functools.cached_property
    def _bf16_tests(self) -> dict[cst.Comparison, cst.Call]:
        """``torch.cuda.get_device_capability()[0] >= 8`` tests choosing bfloat16 → the capability call."""
        text = self.ctx.source
        if b"get_device_capability" not in text or b"bf" not in text:
            return {}
        found = {}
        for node in iter_nodes(self.ctx.module, (cst.If, cst.IfExp, cst.Assign)):
            found.update(bf16_capability_test(self.ctx, node))
        return found

    @functools.cached_property
    def _fp16_tests(self) -> dict[cst.Comparison, cst.Call]:
        """``SUPPORT_FP16 = ... torch.cuda.get_device_capability(0)[0] >= 7`` → the capability call."""
        text = self.ctx.source
        if b"get_device_capability" not in text:
            return {}
        found = {}
        for node in iter_nodes(self.ctx.module, cst.Assign):
            found.update(fp16_capability_test(self.ctx, node))
        return found

    def _flag_gates(self, name: str | None, local: bool = False) -> tuple[str | None, str]:
        """``HAS_KNN = torch.cuda.is_available()`` read by a test whose branch runs CUDA-only code
        (``if HAS_KNN: knn_cuda.knn(...)``, also ``if not HAS_KNN: return fallback(...)``), in the
        function that assigns it (``local``: a plain name there) or anywhere in the file."""
        if not name:
            return None, ""
        scope = self._function() if local and self._function() is not None else self.ctx.module
        for choice in iter_nodes(scope, (cst.If, cst.IfExp)):
            if _reads_flag(choice.test, name):
                found = gated_cuda_use(self.ctx, choice)
                if found:
                    return found[1], f"`{name}` gates {found[0]}"
                word, read = self._branch_read(cuda_branch(self.ctx, choice))
                if word:  # OLMo-core: `cc = torch.cuda.get_device_capability()[0] if has_cuda else None`
                    return word, f"`{name}` gates {read}"
        for both in iter_nodes(scope, cst.BooleanOperation):  # mPLUG-Owl2: `SUPPORT_CUDA and <capability> >= 7`
            if isinstance(both.operator, cst.And) and _reads_flag(both.left, name):
                word, read = self._branch_read([both.right])
                if word:
                    return word, f"`{name}` gates {read}"
        if not name.endswith("()") and (where := library_flag_use(self.ctx, scope, name.rpartition(".")[2])):
            return LIBRARY_PATH, f"`{name}` is {where}"  # `GradCAM(..., use_cuda=args.use_cuda)`
        for call in iter_nodes(scope, cst.Call):  # `pytest.mark.skipif(not HAS_CUDA, reason="... need CUDA")`
            reason = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "reason"), None)
            text = string_value(reason) if reason is not None else None
            if (
                text
                and (dotted_name(call.func) or "").endswith("mark.skipif")
                and _reads_flag(call.args[0].value, name)
                and CUDA_REQUIRED.search(text)
            ):
                return "tests that need CUDA", f"`{name}` skips tests saying so ({text!r})"
        return None, ""

    def leave_If(self, original_node: cst.If) -> None:
        if self._guards and self._guards[-1][0] is original_node:
            self._guards.pop()

    def visit_DictElement(self, node: cst.DictElement) -> None:
        key = string_value(node.key) if isinstance(node.key, cst.SimpleString) else None
        if key is not None:
            self._mark_switch(node.value, lambda: (feature_word(key), f"`{key}`"))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._scopes.append(node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._scopes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._scopes.pop()

    def _in_nvidia_tool(self) -> bool:
        """Inside a function named for NVIDIA's driver or tools (``check_nvlink_connectivity``,
        ``_nvml_memory``): a diagnostic of NVIDIA hardware with nothing to ask of an NPU, left as
        written (its tests mock ``torch.cuda``)."""
        return any(
            isinstance(scope, cst.FunctionDef) and set(name_tokens(scope.name.value)) & NVIDIA_TOOL_WORDS
            for scope in self._scopes
        )

    def _sibling_choice(self, node: cst.IfExp) -> tuple[str | None, str]:
        """A conditional argument of a call another argument of which, testing the same, chooses a CUDA
        value no rule rewrites (GPT-SoVITS' ``Trainer(accelerator="gpu" if torch.cuda.is_available() else "cpu",
        devices=-1 if torch.cuda.is_available() else 1, ...)``, round 46): the choices go together, so this
        test stays CUDA's with that one (renamed alone: accelerator "cpu" with ``devices=-1``)."""
        parents = TreeIndex.of(self.ctx).parents
        arg = parents.get(node)
        call = parents.get(arg)
        if not isinstance(arg, cst.Arg) or arg.value is not node or not isinstance(call, cst.Call):
            return None, ""
        test = code_of(node.test)
        for other in call.args:
            value = other.value
            if other is arg or not isinstance(value, cst.IfExp) or code_of(value.test) != test:
                continue
            if kept_cuda_value(self.ctx, cuda_branch(self.ctx, value)):
                return SIBLING_CHOICE, f"`{code_of(other).strip()}`"
        return None, ""

    def _feature_exit(self, node: cst.If) -> tuple[str | None, str]:
        """``if not torch.cuda.is_available(): return`` in the body of a function named for a CUDA-only feature
        (GPT-SoVITS' ``load_cudnn``, which then preloads NVIDIA's cuDNN libraries with ctypes, round 46): what
        follows the exit is that feature, which an NPU host does not have."""
        function = self._function()
        if function is None or not isinstance(function.body, cst.IndentedBlock) or node not in function.body.body:
            return None, ""
        if not no_cuda_branch(self.ctx, node) or not leaves(node.body, (cst.Return, cst.Raise)):
            return None, ""
        return self._scope_feature()

    def _scope_feature(self) -> tuple[str | None, str]:
        """A feature word of the enclosing function or class (a returned value is its answer)."""
        for scope in reversed(self._scopes):
            word = feature_word(scope.name.value)
            if word:
                return word, f"`{scope.name.value}`"
        return None, ""

    def _function(self) -> cst.FunctionDef | None:
        """The innermost function the traversal is in."""
        return next((s for s in reversed(self._scopes) if isinstance(s, cst.FunctionDef)), None)

    def _returns(self, name: str | None) -> bool:
        """Whether the innermost function returns the local ``name`` (``return cuda_available``)."""
        function = self._function()
        return function is not None and name in _returned_names(function)

    def _mark_switch(self, value: cst.BaseExpression | None, word_and_place, capability: bool = True) -> bool:
        """Record the ``torch.cuda.is_available()`` calls ``value`` is made of as a feature switch,
        when ``word_and_place()`` (called only then) names a CUDA-only feature or, with ``capability``,
        when ``value`` also tests the CUDA compute capability (torchtitan's ``has_cuda_capability``:
        ``torch.npu.get_device_capability()`` is None, so the rewritten comparison would raise).
        Whether ``value`` stays a ``torch.cuda`` test."""
        if value is None or _device_choice(value):
            return False
        calls = [
            p.func
            for p in boolean_parts(value)
            if isinstance(p, cst.Call)
            and isinstance(p.func, cst.Attribute)
            and p.func.attr.value == "is_available"
            and self.resolver.qualified_name(p.func) == "torch.cuda.is_available"
        ]
        if not calls:
            return False
        word, where = word_and_place()
        read = capability and not word and not self._switches.keys() >= set(calls) and self._tests_capability(value)
        if read:
            word, where = "compute capability", f"{read} in the same test"
        if word in (NVIDIA_CHECK, FACTS_RECORD) or (word and self._under_failed_import()):
            # nothing to decide: the check stays off on NPU, as before (or never runs there)
            self._switch_parts.update(_attributes(value))
        elif word:
            self._switches.update((func, _switch_message(word, where)) for func in calls)
            self._switch_parts.update(_attributes(value))  # `... and torch.cuda.get_device_capability()[0] >= 7`
        return bool(word)

    def _under_failed_import(self) -> bool:
        """In the body of ``if fa3 is not None:`` where ``fa3`` is None on an NPU host (a CUDA-only
        import's ``except ImportError`` fallback, ``failed_import_flags``): code that never runs there."""
        flags = failed_import_flags(self.ctx)
        return bool(flags) and any(
            isinstance(owner, cst.If) and role == "body" and any(requires_flag(owner.test, f) for f in flags)
            for owner, role in TreeIndex.of(self.ctx).enclosing(self.ctx.statement)
        )

    def _npu_aware_choice(self, name: str) -> tuple[str | None, str]:
        """``has_cuda = torch.cuda.is_available()`` read by a choice whose other side is the NPU's
        (ChatTTS: ``provider = torch.cuda if has_cuda else torch.npu``, under ``if has_cuda or
        _is_torch_npu_available():``): the flag is that dispatch's CUDA test and stays one."""
        scope = self._function() or self.ctx.module
        for choice in iter_nodes(scope, (cst.If, cst.IfExp)):
            if _reads_flag(choice.test, name) and any(mentions(part)[1] for part in (choice.body, choice.orelse)):
                return "an NPU-aware choice", f"`{name}` chooses between CUDA and the NPU"
        return None, ""

    def _tests_capability(self, value: cst.BaseExpression) -> str | None:
        """How ``value`` reads the CUDA compute capability (``_capability_read``), else None."""
        return next((read for call in iter_nodes(value, cst.Call) if (read := self._capability_read(call))), None)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            name = _target_name(target.target)
            self._mark_switch(node.value, lambda n=name: (feature_word(n), f"`{n}`"))
            self._mark_switch(node.value, lambda n=name: self._scope_feature() if self._returns(n) else (None, ""))
            local = isinstance(target.target, cst.Name)
            if self._mark_switch(node.value, lambda n=name, local=local: self._flag_gates(n, local)):
                self._keep_flag_branches(name, local)
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            name = node.targets[0].target.value
            self._mark_switch(node.value, lambda: self._chooses_cuda_runtime(name))
            self._mark_switch(node.value, lambda: self._npu_aware_choice(name))
            self._properties_variable(name, node.value)

    def _keep_flag_branches(self, name: str | None, local: bool) -> None:
        """The flag ``name`` stays a ``torch.cuda`` test, False on an NPU host, for the CUDA-only code a
        test reading it gates (``_flag_gates``): the CUDA branches of the tests reading it (in its
        function when ``local``, else in the file) never run there and stay as written with it
        (lerobot's ``if torch_cuda_available: cuda_version = str(torch.version.cuda); gpu =
        torch.cuda.get_device_name(0)``). A flag kept for its name (``nvtx = torch.cuda.is_available()``)
        leaves its branches migrated: a reviewer who turns the feature on for the NPU finds them ported."""
        scope = self._function() if local and self._function() is not None else self.ctx.module
        for choice in iter_nodes(scope, (cst.If, cst.IfExp)):
            if name and _reads_flag(choice.test, name):
                self._kept_branch.update(
                    n for block in cuda_branch(self.ctx, choice) for n in iter_nodes(block, cst.Attribute)
                )

    def _chooses_cuda_runtime(self, name: str) -> tuple[str | None, str]:
        """``cuda = torch.cuda.is_available()`` read by a test choosing a CUDA-only runtime of another
        library (yolov5: ``"onnxruntime-gpu" if cuda else "onnxruntime"``, ``CUDAExecutionProvider``)."""
        scope = self._function() or self.ctx.module
        for choice in iter_nodes(scope, (cst.If, cst.IfExp)):
            if not any(n.value == name for n in iter_nodes(choice.test, cst.Name)):
                continue
            found = _cuda_runtime_in(choice.body)
            if found:
                return "another library's CUDA runtime", f"`{name}` chooses `{found}`"
        return None, ""

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        name = _target_name(node.target)
        self._mark_switch(node.value, lambda: (feature_word(name), f"`{name}`"))
        local = isinstance(node.target, cst.Name)
        if self._mark_switch(node.value, lambda: self._flag_gates(name, local)):
            self._keep_flag_branches(name, local)

    def visit_Param(self, node: cst.Param) -> None:
        self._mark_switch(node.default, lambda: (feature_word(node.name.value), f"`{node.name.value}=`"))

    def visit_Return(self, node: cst.Return) -> None:
        self._mark_switch(node.value, self._scope_feature)
        function = self._function()
        if function is not None and len(self._scopes) == 1:  # `def has_knn(): return torch.cuda.is_available()`
            self._mark_switch(node.value, lambda: self._flag_gates(f"{function.name.value}()"))

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.resolver.qualified_name(node.func) or ""
        default_type = default_type_argument(self.ctx, node)
        if default_type is not None:  # `torch.set_default_tensor_type(torch.cuda.HalfTensor)`: NPU113's
            self._skip.add(default_type)
        library = cuda_library(qualified)
        for arg in node.args:
            if library:
                self._mark_switch(arg.value, lambda: (library, f"an argument of `{qualified}`"))
            elif arg.keyword is not None and not qualified.startswith(
                "torch."
            ):  # torch's own `fused=` dispatch by device
                keyword = arg.keyword.value
                self._mark_switch(
                    arg.value,
                    lambda k=keyword: _first(
                        lambda: (feature_word(k), f"`{k}=`"),
                        lambda: self._library_path(node, k),
                    ),
                )
        if node.args and node.args[0].keyword is None:  # `@pytest.mark.skipif(not torch.cuda.is_available(), ...)`
            self._mark_switch(node.args[0].value, lambda: self._skipped(node))
        if qualified.startswith("torch.cuda.") and not is_cuda_alternative(self.ctx, node):
            self._check_arguments(node, qualified)
        if qualified == "torch.cuda.device_count" and (why := library_device_count(self.ctx, node)):
            self._blocked[node.func] = why

    def _library_path(self, node: cst.Call, keyword: str) -> tuple[str | None, str]:
        """``lib.load(args=Namespace(use_gpu_init=torch.cuda.is_available()))``: ``library_gpu_switch``."""
        where = library_gpu_switch(self.ctx, node, keyword)
        return (LIBRARY_PATH, where) if where else (None, "")

    def _skipped(self, node: cst.Call) -> tuple[str | None, str]:
        """A skip decorator over a test of CUDA-only code (``import my_cuda_ext``): ``cuda_gates``; or one
        whose reason says the test is CUDA-only (torchtitan's ``skipUnless(torch.cuda.is_available(),
        "silu_and_mul op is CUDA-only")`` over a custom op registered for CUDA tensors)."""
        found = skipped_cuda_use(self.ctx, node)
        if found:
            return found[1], f"{found[0]} in the test it skips"
        reason = cuda_only_skip_reason(self.ctx, node)
        return ("tests that need CUDA", f"the skip says the test is CUDA-only ({reason!r})") if reason else (None, "")

    # --- torch.cuda calls whose arguments torch_npu does not take ---------------------------------

    def _argument_check(self, node: cst.Call, qualified: str) -> tuple[Api, CallCheck] | None:
        """How the arguments of ``qualified(...)`` fit the torch_npu callable it would become."""
        split = split_cuda_api(qualified)
        api = cuda_api_entry(*split) if split else None
        if api is None or api.status not in ("renamed", "review"):
            return None
        entry = signature(api.npu)
        if entry and "since" in entry and self._target.release < parse_target(entry["since"]).release:
            blocker = f"`torch.npu.{api.npu}` needs TorchNPU {entry['since']}, the target is {self._target.text}"
            return api, CallCheck(blockers=[blocker + _kept_failure(qualified)])
        return api, check_call(node, api.npu)

    def _check_arguments(self, node: cst.Call, qualified: str) -> None:
        if self.options.portable:
            self._portable_arguments(node, qualified)
            return
        found = self._argument_check(node, qualified)
        if found is None or node.func in self._switches:
            return
        api, check = found
        if check.blockers and isinstance(node.func, cst.Attribute):
            self._blocked[node.func] = "; ".join(check.blockers)
        elif check.blockers:  # `Event(...)` imported from torch.cuda: its import is kept too
            self.report("NPU601", node, f"`{qualified}(...)` kept: {'; '.join(check.blockers)}")
        elif check.renames or check.drops:
            changes = [f"`{k}=` → `{v}=`" for k, v in check.renames.items()]
            changes += [
                f"`{k}=` dropped (torch.npu.{api.npu} has no such parameter; the value was torch.cuda's default)"
                for k in check.drops
            ]
            tier = Tier.REVIEW if check.drops else None
            self.report(
                api.code,
                node,
                f"`{qualified}` keywords: {', '.join(changes)}",
                lambda c, k=check: adapt_keywords(c, k),
                tier=tier,
            )

    def _blocked_use(self, bound: str, qualified: str) -> bool:
        """Whether a call through the imported name ``bound`` (``qualified``) does not fit torch_npu."""
        if self._calls is None:
            self._calls = _calls_by_name(self.ctx.module)
        for dotted, call in self._calls.get(bound, ()):
            found = self._argument_check(call, qualified + dotted[len(bound) :])
            if found is not None and found[1].blockers:
                return True
        return False

    # --- attributes -----------------------------------------------------------------------------

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node in self._skip or node in self._kept_branch or self._in_nvidia_tool() or self._never_entered(node):
            self._skip.add(node.value)
            return
        self._unfilled_property(node)
        if stream_handle(self.ctx, node) and not is_cuda_alternative(self.ctx, node):
            self.report(
                "NPU601",
                node,
                "`.cuda_stream` is the raw cudaStream_t of a CUDA stream, for native code (a CUDA "
                "extension, TensorRT); a torch_npu stream has no `.cuda_stream`: its raw handle is "
                "`.npu_stream`, an aclrtStream (docs/reference/torch_npu.md §4.2). Port the native code "
                "that takes it to the NPU, then read `.npu_stream`",
            )
        qualified = self.resolver.qualified_names(node.value)
        if node.attr.value.startswith("_cuda") and "torch._C" in qualified:
            self._private_binding(node, node.attr.value)
            return
        if "torch.cuda" in qualified:
            sub = ""
        else:
            sub = next((s for s in table("torch_cuda_api")["submodules"] if f"torch.cuda.{s}" in qualified), None)
        if sub is None or is_cuda_alternative(self.ctx, node):
            return  # not torch.cuda, or `if torch.cuda.is_available(): ... elif torch.npu.is_available(): ...`
        self._member(node, sub, node.attr.value)

    def _never_entered(self, node: cst.Attribute) -> bool:
        """``torch.cuda.amp.autocast`` called where the autocast is never entered (``never_entered``)."""
        if node.attr.value != "autocast":  # every attribute comes here: the cheap test first
            return False
        call = TreeIndex.of(self.ctx).parents.get(node)
        return isinstance(call, cst.Call) and call.func is node and never_entered(self.ctx, call)

    def _unfilled_property(self, node: cst.Attribute) -> None:
        """``torch.cuda.get_device_properties(0).major``: a field torch_npu leaves empty."""
        call = node.value
        if (
            not isinstance(call, cst.Call)
            or self.resolver.qualified_name(call.func) != "torch.cuda.get_device_properties"
        ):
            return
        field = node.attr.value
        self._properties[call.func] = None if field in table("torch_cuda_api")["device_properties"]["filled"] else field

    def _properties_variable(self, name: str, value: cst.BaseExpression) -> None:
        """``p = torch.cuda.get_device_properties(i)`` read only as ``p.<field>`` in its function (or
        module): the fields read decide, as for ``get_device_properties(i).<field>`` (reads after
        another binding of ``p``, such as diffusers' ``torch.xpu`` branch, count too)."""
        if (
            not isinstance(value, cst.Call)
            or self.resolver.qualified_name(value.func) != "torch.cuda.get_device_properties"
        ):
            return
        fields = _variable_fields(self._function() or self.ctx.module, name)
        if not fields:
            return  # unread, or used whole (printed, passed on): the general review stays
        filled = table("torch_cuda_api")["device_properties"]["filled"]
        self._properties[value.func] = next((f for f in fields if f not in filled), None)

    def _member(self, node: cst.Attribute, sub: str, name: str) -> None:
        api = cuda_api_entry(sub, name)
        spelled = f"torch.cuda.{sub + '.' if sub else ''}{name}"
        if sub:  # the enclosing attribute speaks for `torch.cuda.<sub>`
            self._skip.add(node.value)
        if node in self._switches:
            if self._switches[node]:
                self.report(api.code, node, f"`{spelled}()` {self._switches[node]}", tier=Tier.REVIEW)
            return
        if node in self._switch_parts:
            return  # the switch's finding covers its expression
        if node in self._blocked:
            self.report("NPU601", node, f"`{spelled}(...)` kept: {self._blocked[node]}")
            return
        if api.status == "unchanged":
            return
        if api.status == "unsupported":
            if not annotated(self.ctx, node):  # `graph: torch.cuda.CUDAGraph`: the capture is marked
                self.report("NPU601", node, f"`{spelled}` has no drop-in NPU counterpart: {api.note}")
            return
        if self.options.portable:
            self._portable_member(node, sub, name, api, spelled)
            return
        fix = self._fix(node, sub, api)
        if fix is None:  # `nvtx.mark` / `tc.X` whose import from torch.cuda is kept: the import is reported
            return
        message = f"`{spelled}` → `torch.npu.{api.npu}`"
        if node in self._properties:  # `get_device_properties(...).<field>`: the field decides
            field = self._properties[node]
            api = (
                Api(
                    api.status,
                    f"torch_npu leaves `.{field}` empty (it fills name, total_memory, L2_cache_size, cube_core_num, vector_core_num): decide what the check means on NPU",
                )
                if field
                else Api("renamed")
            )
        if api.status == "review":
            self.report(api.code, node, f"{message}; {api.note}", fix, tier=Tier.REVIEW)
        else:
            self.report(api.code, node, message, fix)
        call = TreeIndex.of(self.ctx).parents.get(node)
        if isinstance(call, cst.Call) and call.func is node:  # its device arguments change with it
            for literal in cuda_call_devices(self.ctx, call):
                message = f'CUDA device string given to `{spelled}`, renamed with it: "npu"'
                self.report("NPU103", literal, message, rename_fix("cuda", "npu"))

    def _fix(self, node: cst.Attribute, sub: str, api: Api):
        if not sub:
            if isinstance(node.value, cst.Attribute):
                return lambda n: n.with_changes(value=_cuda_to_npu(n.value))
            if isinstance(node.value, cst.Name) and node.value.value in self._kept_aliases:
                return None  # its `from torch import cuda` is kept (and reported)
            return lambda n: n  # `cuda.X` / `tc.X`: the name's import becomes torch_npu.npu
        if not isinstance(node.value, cst.Attribute):
            return None
        target, new = api.npu.split(".")
        return lambda n: n.with_changes(
            value=n.value.with_changes(value=_cuda_to_npu(n.value.value), attr=cst.Name(target)), attr=cst.Name(new)
        )

    def _private_binding(self, node: cst.CSTNode, name: str) -> None:
        if any(name in names for _, names in self._guards) or is_cuda_alternative(self.ctx, node):
            return  # `if hasattr(torch._C, "_cuda_x"): ... torch._C._cuda_x`: skipped on NPU
        bindings = table("torch_cuda_api")["private_bindings"]
        npu = bindings.get("renamed", {}).get(name) or "_npu_" + name.removeprefix("_cuda_")
        counterpart = (
            f"its torch_npu counterpart is `torch_npu._C.{npu}` ({bindings['source']}), with NPU device indices"
            if npu in bindings["npu"]
            else "torch_npu has no counterpart; use the public torch.npu API"
        )
        self.report(
            "NPU601",
            node,
            f"`torch._C.{name}` is a binding of torch's CUDA build, absent from the CPU torch that torch_npu runs on; {counterpart}",
        )

    # --- imports --------------------------------------------------------------------------------

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            self._skip.add(alias.name)  # the dotted name of an import is not a use
            if is_cuda_alternative(self.ctx, node):
                continue  # `else: import torch.cuda.amp as amp` after `if is_npu_available(): ...`
            module = dotted_name(alias.name) or ""
            target = _npu_module(module)
            if target is not None and alias.asname is not None and not self.options.portable:
                self.report(
                    "NPU106" if module == "torch.cuda.amp" else "NPU103",
                    alias,
                    f"`import {module}` → `import {target}`",
                    lambda a, t=target: a.with_changes(name=attribute_chain(t)),
                )
            elif module.startswith("torch.cuda.") and target is None and alias.asname is not None:
                sub = module.split(".")[2]
                self.report(
                    "NPU601", alias, f"`import {module}` has no NPU counterpart: {cuda_api_entry('', sub).note}"
                )

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        self._skip.add(node.module)  # the dotted module of an import is not a use
        if is_cuda_alternative(self.ctx, node):
            return  # `else: from torch.cuda.amp import GradScaler` after `if is_npu_available(): ...`
        module = dotted_name(node.module) or ""
        if self.options.portable and module != "torch._C":
            return  # the names it binds are replaced where they are read (_portable_member)
        if module == "torch":
            self._from_torch(node)
        elif module == "torch._C":
            for alias in node.names:
                name = dotted_name(alias.name) or ""
                if name.startswith("_cuda"):
                    self._private_binding(alias, name)
        elif (module == "torch.cuda" or module.startswith("torch.cuda.")) and not self._unread(node):
            self._from_cuda_module(node, module)

    def _unread(self, node: cst.ImportFrom) -> bool:
        """Nothing in the file reads the names ``node`` binds, and no other module imports them (LAVIS's
        ``from torch.cuda.amp import autocast as autocast`` beside its own ``maybe_autocast``): torch's
        CPU build, which torch_npu runs on, has ``torch.cuda``, so the import works as written there."""
        bound = {(a.asname.name if a.asname else a.name).value for a in node.names if isinstance(a.name, cst.Name)}
        if len(bound) != len(node.names) or any(exported(self.ctx, node, name) for name in bound):
            return False
        reads = NameUses(bound, self.resolver.scopes)
        walk(self.ctx.module, reads)
        return not any(reads.uses.values())

    def _from_torch(self, node: cst.ImportFrom) -> None:
        """``from torch import cuda [as x]`` → ``from torch_npu import npu as <x or cuda>``.

        Keeping the bound name keeps every use of it valid without renaming; other names imported
        from torch on the same line stay in their own statement.
        """
        if not any(dotted_name(a.name) == "cuda" for a in node.names):
            return
        alias = next(a for a in node.names if dotted_name(a.name) == "cuda")
        bound = alias.asname.name.value if alias.asname is not None else "cuda"
        if self._blocked_use(bound, "torch.cuda"):
            self._kept_aliases.add(bound)
            self.report(
                "NPU601",
                node,
                f"`from torch import cuda` kept: a call through `{bound}` passes arguments torch.npu's counterpart does not take",
            )
            return
        npu_import = cst.ImportFrom(
            module=cst.Name("torch_npu"),
            names=[cst.ImportAlias(cst.Name("npu"), asname=cst.AsName(cst.Name(bound)))],
        )

        def fix(stmt: cst.ImportFrom):
            others = [a for a in stmt.names if dotted_name(a.name) != "cuda"]
            if not others:
                return npu_import
            others[-1] = others[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return cst.FlattenSentinel([stmt.with_changes(names=others), npu_import])

        self.report("NPU103", node, f"`from torch import cuda` → `from torch_npu import npu as {bound}`", fix)

    def _from_cuda_module(self, node: cst.ImportFrom, module: str) -> None:
        target = _npu_module(module)
        sub = module.removeprefix("torch.cuda").lstrip(".")
        kept = target is None
        if kept:
            note = cuda_api_entry("", sub.split(".")[0]).note or f"torch.npu has no `{sub}` module"
            self.report("NPU601", node, f"`from {module} import ...` has no NPU counterpart: {note}")
            return
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            api = cuda_api_entry(sub, name)
            entry = signature(api.npu) if api.status in ("renamed", "review") else None
            bound = alias.asname.name.value if alias.asname is not None else name
            if self._blocked_use(bound, f"{module}.{name}"):
                kept = True
                self.report(
                    "NPU601",
                    alias,
                    f"`{module}.{name}` kept: a call of `{bound}` passes arguments `torch.npu.{api.npu}` does not take",
                )
            elif api.status == "unsupported":
                kept = True
                self.report("NPU601", alias, f"`{module}.{name}` has no drop-in NPU counterpart: {api.note}")
            elif entry and "since" in entry and self._target.release < parse_target(entry["since"]).release:
                kept = True
                self.report(
                    "NPU601",
                    alias,
                    f"`torch.npu.{api.npu}` needs TorchNPU {entry['since']}, the target is {self._target.text}",
                )
            elif api.status == "review":
                self.report(api.code, alias, f"`{module}.{name}`: {api.note}", tier=Tier.REVIEW)
        if not kept:
            self.report(
                cuda_api_entry("", sub).code if sub else "NPU103",
                node.module,
                f"`from {module} import ...` → `from {target} import ...`",
                lambda _, t=target: attribute_chain(t),
            )

    # --- portable output (cuda_api_portable.py) -------------------------------------------------

    def _portable_arguments(self, node: cst.Call, qualified: str) -> None:
        """Calls whose arguments decide the portable rewrite: amp calls, torch.accelerator functions
        (device positional), device-module members (torch.npu must take the same arguments)."""
        split = split_cuda_api(qualified)
        if split is None or node.func in self._switches:
            return
        sub, name = split
        if sub == "amp" and name in portable_api.AMP_MEMBERS:
            fix = portable_api.amp_call_fix(name, node)
            if fix is None:
                self._blocked[node.func] = "its arguments cannot be mapped to torch.amp's"
                return
            self._amp.add(node.func)
            self._cover(node.func, Tier.EXACT)
            portable.need(self, Tier.EXACT, portable.device_type())
            self.report(
                "NPU106",
                node,
                f"`{qualified}(...)` → `torch.amp.{name}({portable.device_type()}, ...)`, "
                "the accelerator's autocast/scaler (a CUDA GPU's or an Ascend NPU's)",
                fix,
            )
            return
        if sub in ("", "memory") and portable.accelerator_function(name):
            reason = portable_api.accelerator_arguments(node)
            if reason:
                self._blocked[node.func] = reason
            elif node.args and node.args[0].keyword is not None:
                self.report(
                    "NPU103",
                    node,
                    "`device=` passed positionally, as torch.accelerator takes it",
                    portable_api.positional_device,
                )
            return
        found = self._argument_check(node, qualified)
        if found is not None and (found[1].blockers or found[1].renames or found[1].drops):
            api, check = found
            why = check.blockers or [
                f"torch.npu.{api.npu} names its keywords differently ({', '.join(list(check.renames) + check.drops)})"
            ]
            self._blocked[node.func] = (
                "; ".join(why) + " (portable code passes one set of arguments to torch.cuda and torch.npu)"
            )

    def visit_Decorator(self, node: cst.Decorator) -> None:
        """``@torch.cuda.amp.custom_fwd`` (not called) → ``@torch.amp.custom_fwd(device_type=...)``."""
        target = node.decorator
        qualified = self.resolver.qualified_name(target) if self.options.portable else None
        if qualified in (f"{portable_api.AMP}custom_fwd", f"{portable_api.AMP}custom_bwd"):
            name = qualified.rpartition(".")[2]
            self._amp.add(target)
            self._cover(target, Tier.EXACT)
            portable.need(self, Tier.EXACT, portable.device_type())
            self.report(
                "NPU106",
                target,
                f"`@{qualified}` → `@torch.amp.{name}(device_type=...)` with the accelerator's type",
                lambda _: portable_api.amp_decorator(name),
            )

    def visit_Name(self, node: cst.Name) -> None:
        """A read of a name imported from torch.cuda (``synchronize`` of ``from torch.cuda import synchronize``)."""
        if self._aliases is None or node in self._amp or node not in self._alias_reads:
            return
        split = split_cuda_api(self.resolver.qualified_name(node) or "")
        if split is None or (split[0] and split[0] not in table("torch_cuda_api")["submodules"]):
            return  # a module alias (`tc` of `tc.synchronize()`): its attribute is replaced
        sub, name = split
        api = cuda_api_entry(sub, name)
        spelled = f"torch.cuda.{sub + '.' if sub else ''}{name}"
        if node in self._blocked:
            self.report("NPU601", node, f"`{spelled}(...)` kept: {self._blocked[node]}")
        elif api.status == "unsupported" and not annotated(self.ctx, node):
            self.report("NPU601", node, f"`{spelled}` has no drop-in NPU counterpart: {api.note}")
        elif api.status not in ("unchanged", "unsupported"):
            self._portable_member(node, sub, name, api, spelled)

    @property
    def _alias_reads(self) -> set[cst.Name]:
        if "_reads" not in self.__dict__:
            self._reads = {read for reads in self._aliases.reads.values() for read in reads}
        return self._reads

    def _portable_member(self, node: cst.BaseExpression, sub: str, name: str, api: Api, spelled: str) -> None:
        """``torch.cuda[.<sub>].<name>`` (an attribute chain or an imported name) → portable code."""
        if sub == "amp":
            if node not in self._amp:
                self.report(
                    "NPU106",
                    node,
                    f"`{spelled}` used other than by calling it: not portable yet; use "
                    f"`torch.amp.{name}` with the accelerator's device type",
                    tier=Tier.MANUAL,
                )
            return
        accelerator = portable.accelerator_function(name) if sub in ("", "memory") else None
        if accelerator:
            replacement = portable.function(self.options, accelerator)
        elif sub in ("", "memory", "random", "streams") and api.npu.rpartition(".")[2] == name:
            replacement = f"{portable.HELPER}.device_module().{sub + '.' if sub else ''}{name}"
        else:
            self.report(
                api.code,
                node,
                f"`{spelled}` is `torch.npu.{api.npu}` on NPU: not portable yet, "
                "choose by the accelerator's type by hand",
                tier=Tier.MANUAL,
            )
            return
        message = f"`{spelled}` → `{replacement}` (torch.cuda's on a CUDA GPU, torch.npu's on an Ascend NPU)"
        tier = None
        if node in self._properties:  # `get_device_properties(...).<field>`: the field decides
            field = self._properties[node]
            api = (
                Api(api.status, f"torch_npu leaves `.{field}` empty: decide what the check means on NPU")
                if field
                else Api("renamed")
            )
        if api.status == "review":
            message, tier = f"{message}; on NPU {api.note}", Tier.REVIEW
        self._cover(node, tier or Tier.EXACT)
        portable.need(self, tier or Tier.EXACT, replacement)
        self.report(api.code, node, message, lambda _: cst.parse_expression(replacement), tier=tier)

    def _cover(self, node: cst.BaseExpression, tier: Tier) -> None:
        """Record that a fix replaces ``node``, whose first name may be a name imported from torch.cuda."""
        root = node
        while isinstance(root, cst.Attribute):
            root = root.value
        if isinstance(root, cst.Name) and self._aliases is not None and root in self._alias_reads:
            self._covered[root] = max(tier, self._covered.get(root, tier))

    def leave_Module(self, original_node: cst.Module) -> None:
        if self._aliases is None:
            return
        portable.report_support(self, "NPU103")
        unused: dict[cst.CSTNode, list[str]] = {}
        for bound, statement in self._aliases.imports.items():
            reads = self._aliases.reads.get(bound)
            if exported(self.ctx, statement, bound):
                continue  # other modules read it (analysis/exports.py)
            if reads and all(read in self._covered for read in reads):
                unused.setdefault(statement, []).append(bound)
        for statement, names in unused.items():
            tier = max(self._covered[read] for name in names for read in self._aliases.reads[name])
            self.report(
                "NPU103",
                statement,
                f"import of {', '.join(f'`{n}`' for n in names)} removed: every use of it is portable code now",
                remove_import_names(statement, names),
                tier=tier,
                needs_torch_npu=False,
            )


def _runtime_choice(ctx, node: cst.IfExp) -> tuple[str | None, str]:
    """``"onnxruntime-gpu" if torch.cuda.is_available() else "onnxruntime"`` (MobileSAM's bundled ultralytics
    exporter installing its requirements, round 60), also as a suffix, ``"onnxruntime" + ("-gpu" if
    torch.cuda.is_available() else "")`` (yolov10's, round 64): the test chooses another library's CUDA build,
    which an NPU host must not install."""
    found = _cuda_runtime_in(node.body)
    parent = TreeIndex.of(ctx).parents.get(node)
    if not found and isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Add):
        prefix, suffix = string_value(parent.left), string_value(node.body)
        found = CUDA_RUNTIME.search(prefix + suffix) if prefix is not None and suffix is not None else None
        found = found.group() if found else None
    return ("another library's CUDA runtime", f"chooses `{found}`") if found else (None, "")


def _cuda_runtime_in(node: cst.CSTNode) -> str | None:
    """The first name of another library's CUDA runtime a string of ``node`` holds (``onnxruntime-gpu``,
    ``CUDAExecutionProvider``), else None."""
    for string in iter_nodes(node, cst.SimpleString):
        found = CUDA_RUNTIME.search(string_value(string) or "")
        if found:
            return found.group()
    return None


def _kept_failure(qualified: str) -> str:
    """What a kept ``torch.cuda`` call does on an NPU host, where it fails whenever it runs (SkyReels-V2's
    ``torch.cuda.nvtx.range_push`` on every attention call, round 43); "" where it is not known to."""
    if qualified.startswith("torch.cuda.nvtx."):
        return (
            "; as written it raises on an NPU host (torch.cuda.nvtx without a CUDA build: 'NVTX functions not "
            "installed'): remove the profiling range, or use `torch.npu.mstx.range_start`/`range_end`"
        )
    return ""


def _switch_message(word: str, where: str) -> str:
    """What a kept ``torch.cuda.is_available()`` says after its name, by the kind of switch; "" where it
    asks nothing (left unreported): the test stays False on an NPU host, which takes the branch a host
    without CUDA took (a CUDA-only feature stays off, a pure-PyTorch fallback runs, another library's
    CUDA path stays off). Only a choice of a CUDA value no rule rewrites needs a person."""
    if word == KEPT_VALUE:
        return (
            f"chooses {where}, which no rule rewrites (not known to be a torch device: it may be a library's "
            "accelerator name or a label); not rewritten: the rewritten test alone would pick that CUDA value on an NPU host, "
            "where it fails; change the test and the value together, or leave both"
        )
    return ""


def _variable_fields(scope: cst.CSTNode, name: str) -> list[str] | None:
    """The fields read of the variable ``name`` in ``scope``, all its reads being ``name.<field>``
    (reads after another binding of it count too); None: it is unread or used whole."""
    bases = {a.value: a.attr.value for a in iter_nodes(scope, cst.Attribute) if isinstance(a.value, cst.Name)}
    uses = [n for n in iter_nodes(scope, cst.Name) if n.value == name]
    bound = [
        t for t in iter_nodes(scope, cst.AssignTarget) if isinstance(t.target, cst.Name) and t.target.value == name
    ]
    reads = [n for n in uses if all(n is not t.target for t in bound)]
    if not reads or any(n not in bases for n in reads):
        return None
    return [bases[n] for n in reads]


def _target_name(target: cst.BaseExpression) -> str | None:
    if isinstance(target, cst.Name):
        return target.value
    if isinstance(target, cst.Attribute):
        return target.attr.value
    return None


def _first(*finders) -> tuple[str | None, str]:
    """The first ``(word, place)`` of ``finders`` (called in turn) that names a feature."""
    for finder in finders:
        word, where = finder()
        if word:
            return word, where
    return None, ""


def _reads_flag(test: cst.BaseExpression, name: str) -> bool:
    """Whether an operand of ``test`` is the flag ``name`` (``HAS_KNN``, ``self.has_knn``) or, for
    ``"f()"``, a call of the module-level function ``f``."""
    call = name.endswith("()")
    for part in boolean_parts(test):
        if call:
            if isinstance(part, cst.Call) and isinstance(part.func, cst.Name) and part.func.value == name[:-2]:
                return True
        elif (isinstance(part, cst.Name) and part.value == name) or (
            isinstance(part, cst.Attribute) and part.attr.value == name
        ):
            return True
    return False


def _operand_feature(test: cst.BaseExpression) -> tuple[str | None, str]:
    """``torch.cuda.is_available() and has_fused_layernorm``: an operand named like a CUDA-only feature."""
    for part in _operands(test):
        func = part.func if isinstance(part, cst.Call) else part
        name = (
            func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
        )
        word = feature_word(name) if name != "is_available" else None
        if word:
            return word, f"`{name}` in the same test"
    return None, ""


def _operands(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of ``and``/``or``/``not`` (not inside comparisons: ``kernel_size > 1`` is no switch)."""
    if isinstance(expr, cst.BooleanOperation):
        return _operands(expr.left) + _operands(expr.right)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        return _operands(expr.expression)
    return [expr]


def _hasattr_names(test: cst.BaseExpression) -> set[str]:
    """Attribute names tested by ``hasattr(x, "name")`` calls in an ``if`` test."""
    names: set[str] = set()
    for part in boolean_parts(test):
        if isinstance(part, cst.Call) and dotted_name(part.func) == "hasattr" and len(part.args) == 2:
            value = string_value(part.args[1].value) if isinstance(part.args[1].value, cst.SimpleString) else None
            if value is not None:
                names.add(value)
    return names


def _attributes(expr: cst.CSTNode) -> set[cst.CSTNode]:
    """Every attribute node inside ``expr``."""
    return set(iter_nodes(expr, cst.Attribute))


def _returned_names(function: cst.FunctionDef) -> set[str]:
    """Names a function returns (``return cuda_available``), not looking into nested functions."""
    names: set[str] = set()

    class Returns(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_Return(self, node: cst.Return) -> None:
            if node.value is not None:
                names.update(p.value for p in boolean_parts(node.value) if isinstance(p, cst.Name))

    walk(function, Returns())
    return names


def split_cuda_api(qualified: str) -> tuple[str, str] | None:
    """``torch.cuda.Event`` → ("", "Event"); ``torch.cuda.memory._snapshot`` → ("memory", "_snapshot")."""
    parts = qualified.split(".")[2:]
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2 and parts[0] in table("torch_cuda_api")["submodules"]:
        return parts[0], parts[1]
    return None


def _calls_by_name(module: cst.Module) -> dict[str, list[tuple[str, cst.Call]]]:
    """Calls of dotted names (``Event(...)``, ``tc.Event(...)``) by their first name."""
    calls: dict[str, list[tuple[str, cst.Call]]] = {}
    for node in iter_nodes(module, cst.Call):
        dotted = dotted_name(node.func)
        if dotted:
            calls.setdefault(dotted.split(".")[0], []).append((dotted, node))
    return calls


def _device_choice(value: cst.BaseExpression) -> bool:
    """``"cuda" if torch.cuda.is_available() else "cpu"``: a device check (its test follows the
    device string, NPU104), not a feature switch, even as an argument of a CUDA-only library."""
    return isinstance(value, cst.IfExp) and any(
        DEVICE_STRING.fullmatch(string_value(branch) or "") for branch in (value.body, value.orelse)
    )
