"""CUDA device strings in device positions (NPU104), autocast/GradScaler device arguments
(NPU106) and CUDA-looking strings whose role is unclear (NPU109); int device indices chosen for
CUDA are device_index.py's.

Only strings in positions that are devices are rewritten: ``torch.device(...)``, ``.to(...)``,
``.cuda(...)``, ``DeviceMesh(...)``, ``device=`` / ``map_location=`` / ``device_type=`` keywords,
comparisons with ``x.device.type`` (also ``device.startswith("cuda:")``, ``"cuda" in device``,
``device.split(":")[0] == "cuda"``), variables and attributes named like a device or used as one
(also lists of them and loops over them), ``def f(device="cuda")``, dataclass fields
``device: str = field(default="cuda")``, ``{"device": "cuda"}``, environment variables named like
a device (``os.environ["DEVICE"] = "cuda"``, ``os.getenv("DEVICE", "cuda") == "cuda"``), ``--device``
option defaults and choices (argparse, click, absl flags), ``@pytest.mark.parametrize("device", [...])``, device
arguments of ``torch.cuda.*`` functions, ``str(x.device) == "cuda:0"``, and ``"cuda" if
torch.cuda.is_available() else "cpu"``; a device with an index (``"cuda:0"``, ``f"cuda:{i}"``)
wherever a bare ``"cuda"`` would be NPU109, and as an item key (``table["cuda:0"]``). Log text,
dictionary-display keys and file names are left alone, and so is the CUDA side of code that
already handles the NPU (``npu_aware``).

Portable output (``--portable``): the ``cuda`` of those strings becomes the accelerator's type,
``portable_device.device_type()`` (``"cuda"`` → that call, ``"cuda:0"`` → an f-string of it),
which is "npu" on Ascend hosts and "cuda" elsewhere (cuda2npu/analysis/portable.py).

The rule decides and reports; what it reads is in its siblings: ``device_expressions`` (which
expressions are devices), ``device_roles`` (what a name is to its function), ``device_branches``
(what a device test's branches say) and ``device_callees`` (the callables whose parameters are devices).
"""

from __future__ import annotations

import functools
import re

import libcst as cst

from cuda2npu.analysis import portable
from cuda2npu.analysis.argparse_reads import option_unread
from cuda2npu.analysis.autocast import autocast_alias
from cuda2npu.analysis.cuda_gates import cuda_branch, cuda_flags, gated_cuda_use, no_cuda_branch, renamed_cuda_test
from cuda2npu.analysis.hf_sources import sources
from cuda2npu.analysis.kernel_switch import kernel_call
from cuda2npu.analysis.npu_aware import is_cuda_alternative, mentions
from cuda2npu.analysis.runtime_devices import OTHER_RUNTIMES
from cuda2npu.core.bindings import assigned_values
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.feature_words import feature_word
from cuda2npu.core.literals import (
    DEVICE_STRING,
    device_literals,
    field_default,
    rename_fix,
    replace_word,
    string_value,
)
from cuda2npu.core.names import dotted_name
from cuda2npu.core.nodes import code_of, named_params
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex, leaves
from cuda2npu.core.traversal import iter_nodes
from cuda2npu.families.device.capability_tests import capability_device_test
from cuda2npu.families.device.cuda_api_checks import library_flag_use
from cuda2npu.families.device.cuda_graphs import graph_classes, graph_use
from cuda2npu.families.device.device_branches import (
    ASSERT_EQUAL,
    TEST_PARTS,
    contiguous_workaround,
    cuda_named_choice,
    cuda_required,
    gpu_refusal,
    ort_provider,
    picks_ort_provider,
    stated_value,
    validation_arm,
)
from cuda2npu.families.device.device_callees import (
    imported_device_callables,
    module_device_callable,
    own_callee,
    unaliased,
)
from cuda2npu.families.device.device_expressions import (
    AMBIGUOUS_KEYWORDS,
    DEVICE_CALLS,
    DEVICE_KEYWORDS,
    DEVICE_MODULES,
    DEVICE_NAME,
    DEVICE_TYPES,
    SECOND_ARGUMENT_DEVICE,
    calls_in,
    compared_pairs,
    cuda_type_literals,
    device_getter,
    device_variables,
    environment_default,
    in_cuda_call,
    indexed_device,
    indexed_devices,
    is_device_string,
    is_device_type_expr,
    looks_like_device,
    plain_data,
)
from cuda2npu.families.device.device_roles import device_side, is_stub, param_role, platform_label

# backend names of other runtimes, never a torch device: a value compared with one is that runtime's (gpt4all's
# llama.cpp backends "kompute", "metal"; Vulkan, OpenCL, SYCL builds)
OTHER_BACKENDS = frozenset({"kompute", "metal", "vulkan", "opencl", "sycl"})
OTHER_BACKEND_WORD = re.compile(rb"""["'](?:kompute|metal|vulkan|opencl|sycl)["']""")
NPU_COMPARED = re.compile(rb"""(?:==|!=)\s*["']npu["']|["']npu["']\s*(?:==|!=|in\b)""")  # device == "npu"
AMP_CALLS = {
    "torch.autocast",
    "torch.amp.autocast",
    "torch.amp.GradScaler",
    "torch.GradScaler",
    "torch.amp.custom_fwd",
    "torch.amp.custom_bwd",
    "torch.is_autocast_enabled",
    "torch.get_autocast_dtype",
    "torch.set_autocast_dtype",
    "torch.set_autocast_enabled",
}
ORT_DEVICE = (
    "onnxruntime's device here ({provider}), not a torch device: onnxruntime has no NPU device and "
    'its io-binding takes "cuda" or "cpu"; kept as written: run onnxruntime on "cpu" on an NPU host, or use '
    "onnxruntime-cann's CANNExecutionProvider"
)
LMDEPLOY_CALLS = ("lmdeploy.",)  # its `device_type` names a platform ("ascend"), not a torch device: NPU935's
# Option definitions: the call's last name → (keywords holding the default, holding the choices).
OPTION_CALLS = {
    "add_argument": ("default", "choices"),  # argparse
    "option": ("default", "type"),  # click: type=click.Choice([...])
    "DEFINE_string": ("default", None),  # absl: DEFINE_string(name, default, help)
    "DEFINE_enum": ("default", "enum_values"),  # absl: DEFINE_enum(name, default, enum_values, help)
}


INPUT_DEPTH = 3  # assignments followed back from a test's actual value to its input


# parameters naming an implementation, not a device: their "cuda" picks a kernel (StyleGAN's ops, rounds 60 and 63)
IMPLEMENTATION_NAMES = frozenset({"impl", "implementation"})


@register
class DeviceStrings(Rule):
    codes = ("NPU104", "NPU106", "NPU109")
    triggers = (r"""["']cuda""",)
    portable_support = True

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._seen: set[cst.CSTNode] = set()
        self._kernel_switches: dict[cst.CSTNode, str] = {}  # "cuda" compared in a test choosing a CUDA kernel -> it
        self._graph_switches: dict[cst.CSTNode, str] = {}  # "cuda" compared in a test switching CUDA graphs on
        self._feature_switches: dict[cst.CSTNode, str] = {}  # "cuda" compared for a CUDA-only feature -> its name
        self._sequences: dict[str, cst.BaseExpression | None] = {}  # name -> the strings it holds (_named_sequence)
        self._availability_switches: dict[cst.IfExp, bool | None] = {}  # see _availability_switch
        self._says_cuda_only: set[cst.CSTNode] = set()  # "cuda" compared where the branches say it needs CUDA
        self._rewritten: set[cst.CSTNode] = set()  # the literals rewritten so far
        self._stated: list[tuple] = []  # (literal, statement, code, why, unparsed) of tests' stated values
        self._settled: set[cst.CSTNode] = set()  # stated literals rewritten with the file's others
        self._says_gpu_only: dict[cst.CSTNode, str] = {}  # "cuda" compared where a branch refuses: "needs a GPU"

    @property
    def _device_variables(self) -> frozenset[str]:
        return device_variables(self.ctx)

    def _rewrite(
        self,
        expr: cst.BaseExpression | None,
        code: str = "NPU104",
        why: str = "device",
        prefix_ok: bool = False,
        unparsed: bool = False,
    ) -> bool:
        """Report every device literal in ``expr`` (``prefix_ok``: also ``"cuda:"`` prefixes; a
        comprehension: those of its element); True if there was one. ``unparsed``: torch parses no
        device from the string in this file (it is only compared, ``x.device.type == "cuda"``,
        ``device.startswith("cuda")``, or it is the default of a stub's parameter), so its ``"npu"``
        needs no ``import torch_npu``."""
        if isinstance(expr, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):  # [f"cuda:{i}" for i in ids]
            expr = expr.elt
        if expr is None:
            return False
        found = False
        for literal in device_literals(expr, prefix_ok):
            found = True
            if literal in self._seen or is_cuda_alternative(self.ctx, literal) or self._kept_choice(literal):
                continue
            if not self.options.portable and in_cuda_call(self.ctx, literal):
                continue  # `torch.cuda.get_device_properties(torch.device("cuda"))`: cuda_api renames it with the call
            self._seen.add(literal)
            if literal in self._feature_switches:
                self.report(
                    code,
                    literal,
                    f'"cuda" in a test that switches a CUDA-only feature on ({self._feature_switches[literal]}); '
                    'not rewritten: "npu" would turn it on on NPU, where it may not exist',
                    tier=Tier.REVIEW,
                )
                continue
            if literal in self._graph_switches:
                self.report(
                    code,
                    literal,
                    f'"cuda" in a test that switches CUDA-graph capture on ({self._graph_switches[literal]}); not '
                    'rewritten: the capture stays torch.cuda (NPU601), which "npu" would run on NPU tensors; to '
                    "capture NPU graphs (torch.npu.NPUGraph, inference-only), port the capture and this test together",
                    tier=Tier.REVIEW,
                )
                continue
            if literal in self._kernel_switches:
                self.report(
                    code,
                    literal,
                    f'"cuda" in a test that switches a CUDA-only implementation on (`{self._kernel_switches[literal]}` '
                    'in its branch); not rewritten: with "npu" the branch would run on an NPU host, where what it needs '
                    "(a CUDA kernel, program or package) is not there",
                    tier=Tier.REVIEW,
                )
                continue
            if literal not in self._settled and stated_value(self.ctx, literal):
                self._stated.append((literal, self.ctx.statement, code, why, unparsed))
                continue  # decided with the file's other literals of its string (leave_Module)
            self._rewritten.add(literal)
            message, fix, unparsed = self._rename(why, unparsed)
            self.report(code, literal, message, fix, needs_torch_npu=not unparsed)
        return found

    def _rename(self, why: str, unparsed: bool):
        """(message, fix, ``unparsed``: whether it needs no ``import torch_npu``) of a device literal's rewrite."""
        if self.options.portable:
            portable.need(self, Tier.EXACT, portable.device_type())
            message = (
                f"CUDA device string in a {why} position; portable: the accelerator's type "
                f'`{portable.device_type()}` ("npu" on Ascend hosts, "cuda" elsewhere)'
            )
            return message, portable.device_type_fix, False
        return f'CUDA device string in a {why} position; use "npu"', rename_fix("cuda", "npu"), unparsed

    def leave_Module(self, original_node: cst.Module) -> None:
        self._settle_stated()
        portable.report_support(self, "NPU104")

    def _settle_stated(self) -> None:
        """The device literals of the values tests state (``assert out == {"device": "cuda:0"}``): all
        or nothing with what the file's fakes return. slime's test states ``"cuda:0"``, which its own
        fakes produce (``accelerator.device = lambda: "cuda:0"``, left as written): rewritten alone,
        the expected value would fail on every host. Left where a lambda or a ``return`` of the file
        gives the same string and stays as written, else rewritten. (A value :meth:`_expected`
        rewrites with the test's input is decided there.)"""
        returned = (
            n.body if isinstance(n, cst.Lambda) else n.value
            for n in iter_nodes(self.ctx.module, (cst.Lambda, cst.Return))
        )
        left = {string_value(s) for s in returned if isinstance(s, cst.SimpleString) and s not in self._rewritten}
        for literal, statement, code, why, unparsed in self._stated:
            if string_value(literal) in left:
                continue
            self._settled.add(literal)
            self._rewritten.add(literal)
            message, fix, unparsed = self._rename(why, unparsed)
            self.report_in(statement, code, literal, message, fix, needs_torch_npu=not unparsed)

    def _ambiguous(self, expr: cst.BaseExpression | None, where: str, indexed_is_device: bool = True) -> None:
        """NPU109 for a ``"cuda"`` whose role is unclear. A device with an index (``"cuda:0"``,
        ``f"cuda:{i}"``, ``"cuda:%d" % i``) names nothing but a device: it is rewritten like one
        (ParlAI's model-parallel helper keeps ``f"cuda:{i}"`` names in a list and a dict and passes
        them to ``.to()``: they must all change), unless ``indexed_is_device`` is False."""
        if expr is not None and indexed_is_device and indexed_devices(expr):
            self._rewrite(expr, why=f"device ({where}, with an index)")
            return
        value = string_value(expr) if expr is not None else None
        if value is None or not DEVICE_STRING.fullmatch(value) or expr in self._seen:
            return
        if is_cuda_alternative(self.ctx, expr):
            return
        self._seen.add(expr)
        self.report("NPU109", expr, f"{value!r} {where} may be a CUDA device; not rewritten, check it by hand")

    def _device_type_slice(self, expr: cst.BaseExpression) -> None:
        """``device[:4]`` as an autocast device type (LivePortrait's ``torch.autocast(device_type=self.device[:4])``
        over ``self.device = "cuda:" + str(device_id)``): "cuda" of "cuda:0", "npu:" of the migrated "npu:0",
        which torch.autocast rejects; ``device.split(":")[0]`` is the type of both (and of "cpu")."""
        if not (
            isinstance(expr, cst.Subscript)
            and len(expr.slice) == 1
            and isinstance(index := expr.slice[0].slice, cst.Slice)
            and index.lower is None
            and index.step is None
            and isinstance(index.upper, cst.Integer)
            and index.upper.value == "4"
        ):
            return
        self.report(
            "NPU106",
            expr,
            f'`{code_of(expr)}` → `{code_of(expr.value)}.split(":")[0]`: the device type of "cuda:0" and of "npu:0" '
            '(a four-character slice of "npu:0" is "npu:", which autocast rejects)',
            lambda updated: cst.Subscript(
                value=cst.Call(
                    func=cst.Attribute(value=updated.value, attr=cst.Name("split")),
                    args=[cst.Arg(cst.SimpleString('":"'))],
                ),
                slice=[cst.SubscriptElement(cst.Index(cst.Integer("0")))],
            ),
        )

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.resolver.qualified_name(node.func) or autocast_alias(self.ctx, node.func, True) or ""
        positional = [a.value for a in node.args if a.keyword is None]
        func_name = dotted_name(node.func) or ""
        if qualified == "functools.partial" and positional:  # Infinity's `partial(autocast, 'cuda', enabled=False)`
            bound = self.resolver.qualified_name(positional[0]) or autocast_alias(self.ctx, positional[0], True)
            qualified, positional = (bound or "", positional[1:]) if bound in AMP_CALLS else (qualified, positional)
        if qualified in AMP_CALLS:
            devices = [
                a.value for a in node.args if a.keyword is not None and a.keyword.value in ("device_type", "device")
            ]
            for device in positional[:1] + devices:  # `device=`: GradScaler's
                self._rewrite(device, "NPU106", "autocast/GradScaler device")
                self._device_type_slice(device)
            return
        if (qualified in DEVICE_CALLS or qualified.startswith(DEVICE_MODULES)) and positional:
            self._rewrite(positional[0], why=f"`{qualified}` device")
        if qualified in SECOND_ARGUMENT_DEVICE and len(positional) > 1:  # x-attention's `torch.load(path, "cuda")`
            self._rewrite(positional[1], why=f"`{qualified}` device (map_location)")
        if looks_like_device(node) and not platform_label(self.ctx, node):  # os.getenv("DEVICE", "cuda")
            self._rewrite(environment_default(node), why="device environment variable")
        if func_name.endswith("parametrize") and len(positional) >= 2:
            names = string_value(positional[0]) or ""
            if any(DEVICE_NAME.search(n.strip()) for n in names.split(",")):
                self._rewrite(positional[1], why="parametrized `device`")
        method = node.func.attr.value if isinstance(node.func, cst.Attribute) else None
        if method in ("get", "pop") and len(positional) == 2 and DEVICE_NAME.search(string_value(positional[0]) or ""):
            self._rewrite(positional[1], why="default of a `device` entry")  # funasr's `kwargs.get("device", "cuda")`
        if method in ("append", "add", "insert") and positional:
            self._added_device(node, positional[-1])
        if method in ("to", "cuda", "npu") and positional and qualified != "torch.cuda":
            self._rewrite(positional[0], why=f"`.{method}()`")
        if method == "startswith" and code_of(node.func.value) in self._other_vocabulary:
            self._seen.update(device_literals(positional[0], True) if positional else ())
        elif method == "startswith" and positional and device_side(self.ctx, node.func.value, positional[0]):
            self._rewrite_test(positional[0], node.func.value, why="device prefix test", prefix_ok=True)
        if qualified.startswith(LMDEPLOY_CALLS):  # before the `device=` keywords: not a torch device
            self._seen.update(a.value for a in node.args if a.keyword and a.keyword.value in ("device", "device_type"))
        runtime = next((why for prefixes, why in OTHER_RUNTIMES.items() if qualified.startswith(prefixes)), None)
        if runtime is not None:  # before the `device=` keywords: not a torch device
            self._other_runtime(node, qualified, runtime)
        func = unaliased(self.ctx, node.func)
        callee = own_callee(self.ctx, func)
        imported = imported_device_callables(self.ctx)
        if callee is not None:  # before the `device=` keywords: a registry key's "cuda" stays
            self._own_call_arguments(node, *callee)
        elif (called := dotted_name(func)) in imported:  # `Class(...)`, `Class.classmethod(...)`
            self._project_call_arguments(node, imported[called])
        elif (parameters := module_device_callable(self.ctx, func)) is not None:  # `module.function(...)`
            self._project_call_arguments(node, parameters)
        if qualified.endswith("DeviceMesh.from_group") and len(positional) > 1:
            self._rewrite(positional[1], why="`DeviceMesh.from_group` device")
        if func_name.rpartition(".")[2] in OPTION_CALLS:
            self._option(node, positional, *OPTION_CALLS[func_name.rpartition(".")[2]])
        for arg in node.args:
            if arg.keyword is None:
                continue
            if arg.keyword.value in DEVICE_KEYWORDS:
                self._rewrite(arg.value, why=f"`{arg.keyword.value}=`")
            elif arg.keyword.value == "rng_types" and qualified.startswith("accelerate."):
                self._rewrite(arg.value, why="accelerate's `rng_types=` (its RNGType has `npu`)")
            elif ("device", arg.keyword.value) in self.options.project.config_keys:
                self._rewrite(
                    arg.value, why=f"`{arg.keyword.value}=` (a configuration key the project reads as a device)"
                )
            elif arg.keyword.value in self.options.project.device_keywords:
                self._rewrite(arg.value, why=f"`{arg.keyword.value}=` (a device parameter of the project's functions)")
            elif arg.keyword.value in AMBIGUOUS_KEYWORDS:
                self._ambiguous(arg.value, f"passed as `{arg.keyword.value}=`")

    def _added_device(self, node: cst.Call, value: cst.BaseExpression) -> None:
        """A string added to a collection of devices (``devices.append("cuda")``), or added where a CUDA
        availability test the migration renames opens the branch (pytorch3d's benchmarks: ``if
        torch.cuda.is_available(): backend.append("cuda:0")``, round 60): renamed alone, the test would add
        a CUDA device on NPU hosts."""
        receiver = node.func.value
        if looks_like_device(receiver) or code_of(receiver) in self._device_variables:
            self._rewrite(value, why="device added to a device list")
        elif renamed_cuda_test(self.ctx, TreeIndex.of(self.ctx).statement_of(node)):
            self._rewrite(value, why="device added under a CUDA availability test")

    def _other_runtime(self, node: cst.Call, qualified: str, why: str) -> None:
        """``WhisperModel(size, device="cuda")`` (faster-whisper): CTranslate2's device, "cpu", "cuda" or
        "auto" (docs/reference/kernel_libraries.md): it has no NPU backend, so "npu" raises ValueError;
        ModelScope's ``pipeline(..., device="cuda:0")`` (VGen, round 44): its ``verify_device`` accepts
        cpu, cuda and gpu only; marked, the value kept."""
        arg = next((a for a in node.args if a.keyword is not None and a.keyword.value == "device"), None)
        value = string_value(arg.value) if arg is not None else None
        if arg is not None and isinstance(arg.value, cst.Name) and self._migrated_source(arg.value):
            self.report(
                "NPU109",
                arg.value,
                f"`{qualified.rpartition('.')[2]}(device={arg.value.value})`: `{arg.value.value}` is torch's device "
                f'too, which the migration makes "npu"; here it {why}',
                tier=Tier.MANUAL,
            )
            return
        if value is None or not DEVICE_STRING.fullmatch(value) or is_cuda_alternative(self.ctx, arg.value):
            return
        self._seen.add(arg.value)
        self.report(
            "NPU109",
            arg.value,
            f"`{qualified.rpartition('.')[2]}(device={value!r})` {why}",
            tier=Tier.MANUAL,
        )

    def _migrated_source(self, name: cst.Name) -> bool:
        """``name`` may hold a CUDA device string of this file that the migration rewrites (not one it keeps)."""
        return any(
            isinstance(source, cst.SimpleString)
            and DEVICE_STRING.fullmatch(string_value(source) or "")
            and not is_cuda_alternative(self.ctx, source)
            and not self._kept_choice(source)
            for source in sources(self.ctx, name)
        )

    def _option(self, node: cst.Call, positional: list, default: str, choices: str | None) -> None:
        """``--device`` options: argparse/click defaults and choices, absl ``DEFINE_*("device", "cuda")``;
        not an argparse option whose value nothing can read (analysis/argparse_reads.py)."""
        last = (dotted_name(node.func) or "").rpartition(".")[2]
        absl = last.startswith("DEFINE_")
        names = [string_value(p) or "" for p in (positional[:1] if absl else positional)]
        names += [string_value(a.value) or "" for a in node.args if a.keyword is not None and a.keyword.value == "name"]
        if not any(DEVICE_NAME.search(f.lstrip("-").replace("-", "_")) for f in names):
            return
        if last == "add_argument" and option_unread(self.ctx, node):
            return
        values = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        if absl:  # DEFINE_enum(name, default, enum_values, help)
            values.update(zip((default, choices), positional[1:3]))
        self._rewrite(values.get(default), why="`--device` option default")
        choice = values.get(choices) if choices else None
        if isinstance(choice, cst.Call) and choice.args:  # click.Choice([...])
            choice = choice.args[0].value
        if isinstance(choice, (cst.List, cst.Tuple, cst.Set)):
            for element in choice.elements:
                self._rewrite(element.value, why="`--device` option choice")

    def visit_Comparison(self, node: cst.Comparison) -> None:
        left = node.left
        for target in node.comparisons:
            right = target.comparator
            if device_side(self.ctx, left, right):
                self._rewrite_compared(right, left)
            if device_side(self.ctx, right, left):  # `"cuda" in device`, `"cuda:" in device`: a part of it
                self._rewrite_compared(left, right, prefix_ok=isinstance(target.operator, (cst.In, cst.NotIn)))
            left = right

    def _rewrite_compared(self, expr: cst.BaseExpression, device: cst.BaseExpression, prefix_ok: bool = False) -> None:
        """``device`` compared with ``expr``: the accelerator, unless the file also compares the same
        expression with ``"npu"`` (FastChat's ``if device != "cuda": warn("CPU-offloading is only enabled
        when using CUDA-devices")`` next to ``elif device == "npu":``): then ``"cuda"`` is CUDA itself. A
        part test (``"cuda" in device``) is a prefix test, rewritten as ``device.startswith("cuda")`` is:
        ``"npu:0"`` fails ``device == "npu"``, so the part test is where the NPU is taken."""
        if code_of(device) in self._other_vocabulary:
            self._seen.update(device_literals(expr, prefix_ok))  # another library's backend names
            return
        named = self._named_sequence(expr)  # the accepted devices of a value torch then parses: torch_npu needed
        expr = named or expr
        sequence = isinstance(expr, (cst.Tuple, cst.List, cst.Set))
        part = prefix_ok and not sequence
        for element in [e.value for e in expr.elements] if sequence else [expr]:
            if element in self._says_cuda_only:
                continue  # the code already handles every other device: as written, nothing to ask
            if element in self._says_gpu_only:
                self._refusal(element)
                continue
            switch = element in self._kernel_switches or element in self._feature_switches
            switch = switch or element in self._graph_switches or self._graph_predicate() is not None
            if code_of(device) in self._compared_with_npu and not switch and not part:
                self._ambiguous(
                    element,
                    f'compared with `{code_of(device)}`, which this file also compares with "npu",',
                    indexed_is_device=False,
                )
            else:
                self._rewrite_test(element, device, why="device comparison", prefix_ok=part, unparsed=named is None)

    def _named_sequence(self, expr: cst.BaseExpression) -> cst.Tuple | cst.List | cst.Set | None:
        """The list, tuple or set of strings a name the file binds once holds (gemma_pytorch's
        ``_VALID_DEVICES = ['cpu', 'cuda']`` tested with ``device not in _VALID_DEVICES``), else None."""
        if not isinstance(expr, cst.Name):
            return None
        if expr.value not in self._sequences:  # one walk of the module per name
            values = assigned_values(self.ctx.module, expr.value) or []
            value = values[0] if len(values) == 1 else None
            strings = isinstance(value, (cst.Tuple, cst.List, cst.Set)) and bool(value.elements)
            strings = strings and all(string_value(e.value) is not None for e in value.elements)
            self._sequences[expr.value] = value if strings else None
        return self._sequences[expr.value]

    def _rewrite_test(
        self, expr: cst.BaseExpression, device: cst.BaseExpression, why: str, prefix_ok: bool, unparsed: bool = True
    ) -> None:
        """The device literals of a device test (``x.device.type == "cuda"``, ``d.startswith("cuda")``):
        kept in a predicate of a class capturing CUDA graphs (:meth:`_graph_predicate`); the NPU added
        next to CUDA in an arm of a validation chain (:func:`validation_arm`) that tests a configured
        device (``device``, ``self.device``; not a tensor's ``x.device.type``, never "cuda" on an NPU
        host); else rewritten."""
        literals = device_literals(expr, prefix_ok)
        if literals and self._ort_choice(expr, device):
            return
        graph = self._graph_predicate()
        configured = isinstance(device, cst.Name) or (isinstance(device, cst.Attribute) and device.attr.value != "type")
        for literal in literals:
            if graph is not None:
                self._graph_switches.setdefault(literal, graph)
            arm = validation_arm(self.ctx, literal) if graph is None and configured else None
            if arm is None or literal in self._seen or is_cuda_alternative(self.ctx, literal):
                continue
            provider = ort_provider(arm.body)
            if provider is not None:  # efficientvit's ONNX encoder: `if device == "cuda": provider = [...]`
                self._seen.add(literal)
                if not self._runtime_parameter(device):  # else reported once, at the parameter's default
                    self.report("NPU109", literal, _ort_message(provider), tier=Tier.REVIEW)
                continue
            if literal in self._kernel_switches or literal in self._feature_switches:
                continue  # reported as such below
            if not mentions(arm.body)[0] and self._accept_too(literal):
                continue
            self._seen.add(literal)
            self._rewritten.add(literal)  # "npu" also in portable output: the CUDA arm before it serves CUDA
            message = 'CUDA device string in the NPU\'s arm; use "npu"'
            self.report("NPU104", literal, message, rename_fix("cuda", "npu"), needs_torch_npu=False)
            if arm not in self._seen:  # once for an arm testing two literals
                self._seen.add(arm)
                self.report(
                    "NPU104",
                    arm,
                    f"`{code_of(arm.test)}` chooses an arm of a chain that refuses unknown devices: kept as "
                    'written (a configured "cuda" is still known), the NPU\'s arm added after it',
                    functools.partial(_after_original, arm),
                    needs_torch_npu=False,
                )
        self._rewrite(expr, why=why, prefix_ok=prefix_ok, unparsed=unparsed)

    def _ort_choice(self, literal: cst.BaseExpression, device: cst.BaseExpression) -> bool:
        """``literal`` is in the test of an ``if`` whose branch names an onnxruntime provider (Wan2.2's
        ``if device.type == 'cuda': providers = [("CUDAExecutionProvider", ...)]``, round 41): onnxruntime's
        device, kept as written, reported once (at the parameter's default where it is one)."""
        parents = TreeIndex.of(self.ctx).parents
        node, parent = literal, parents.get(literal)
        while isinstance(parent, TEST_PARTS):
            node, parent = parent, parents.get(parent)
        provider = ort_provider(parent.body) if isinstance(parent, cst.If) and parent.test is node else None
        if provider is None or literal in self._seen:
            return provider is not None
        self._seen.add(literal)
        root = device
        while isinstance(root, cst.Attribute):
            root = root.value
        if not self._runtime_parameter(root):
            self.report("NPU109", literal, _ort_message(provider), tier=Tier.REVIEW)
        return True

    def _runtime_parameter(self, device: cst.BaseExpression) -> bool:
        """``device`` is a parameter of the enclosing function with a CUDA default picking an onnxruntime
        provider (``param_role`` "runtime"): its default carries the one marker."""
        index = TreeIndex.of(self.ctx)
        function = index.function.get(self.ctx.statement)
        return isinstance(device, cst.Name) and any(
            param.name.value == device.value and param.default is not None and param_role(self.ctx, param) == "runtime"
            for param in (named_params(function) if function is not None else ())
        )

    def _accept_too(self, literal: cst.BaseExpression) -> bool:
        """``d.startswith("cuda")`` → ``d.startswith(("cuda", "npu"))``, ``d in ["cuda", "cpu"]`` → ``d in
        ["cuda", "npu", "cpu"]`` in an arm whose body names no CUDA (it serves both devices as written);
        False for any other shape."""
        parents = TreeIndex.of(self.ctx).parents
        parent = parents.get(literal)
        if isinstance(parent, cst.Element):  # the sequence's fix: the element's would replace one by two
            target, fix = parents[parent], functools.partial(_npu_after, index=parents[parent].elements.index(parent))
        elif isinstance(parent, cst.Arg) and isinstance(literal, cst.SimpleString):
            target, fix = literal, _with_npu
        else:
            return False
        self._seen.add(literal)
        sliced = self._sliced_by(literal)
        if sliced is not None:  # h2o-llmstudio's `device.startswith("cuda:") and device[5:].isdigit()`
            self.report(
                "NPU104",
                target,
                f"{code_of(literal)} accepted by a chain that refuses unknown devices, and `{sliced}` cuts its "
                'length off: accept the NPU with a test of its own (`device.startswith("npu:") and device[4:]...`)',
                tier=Tier.REVIEW,
                needs_torch_npu=False,
            )
            return True
        self.report(
            "NPU104",
            target,
            f"{code_of(literal)} accepted by a chain that refuses unknown devices: kept, the NPU accepted next to it",
            fix,
            needs_torch_npu=False,
        )
        return True

    def _sliced_by(self, literal: cst.BaseExpression) -> str | None:
        """The slice of the statement's test that cuts off as many characters as ``literal`` has
        (``device[5:]`` beside ``"cuda:"``), as written; None when there is none."""
        value = string_value(literal)
        statement = self.ctx.statement
        test = statement.test if isinstance(statement, (cst.If, cst.While)) else statement
        for subscript in iter_nodes(test, cst.Subscript) if value else ():
            for element in subscript.slice:
                lower = element.slice.lower if isinstance(element.slice, cst.Slice) else None
                if isinstance(lower, cst.Integer) and lower.evaluated_value == len(value):
                    return code_of(subscript)
        return None

    def _graph_predicate(self) -> str | None:
        """What captures CUDA graphs in the class of the method holding the current statement, when that
        method answers True/False (``can_use(x)``: ``if x.device.type != "cuda": return False``): its
        device tests are the capture's switch, read by its callers; else None."""
        index = TreeIndex.of(self.ctx)
        function = index.function.get(self.ctx.statement)
        owner = index.parents.get(index.parents.get(function)) if function is not None else None
        if not isinstance(owner, cst.ClassDef) or owner not in graph_classes(self.ctx):
            return None
        answers = {dotted_name(r.value) for r in iter_nodes(function.body, cst.Return) if r.value is not None}
        return graph_classes(self.ctx)[owner] if answers & {"True", "False"} else None

    def _refusal(self, literal: cst.BaseExpression) -> None:
        """``if device.type != "cuda": raise ValueError("Quantization is only supported on the GPU.")``
        (lit-llama, before bitsandbytes' LLM.int8): left as written, the refusal stays clear on an NPU
        host; whether the feature runs on the NPU is the reviewer's call."""
        if literal in self._seen or is_cuda_alternative(self.ctx, literal):
            return
        self._seen.add(literal)
        self.report(
            "NPU104",
            literal,
            f'"cuda" in a test that refuses every other device ({self._says_gpu_only[literal]!r}); not rewritten: '
            'the feature may need CUDA itself (a CUDA-only library); if it runs on the NPU, write "npu"',
            tier=Tier.REVIEW,
        )

    def _project_call_arguments(self, node: cst.Call, parameters: tuple[tuple[int, str], ...]) -> None:
        """``GPUMemoryMonitor("cuda")``, ``VideoProcessor(256, f"cuda:{i}")`` where another file of the
        project defines ``GPUMemoryMonitor.__init__(self, device="cuda:0")``, ``VideoProcessor.__init__(self,
        resolution=512, device="cpu")``: the argument of the device parameter is a device."""
        positional = [arg for arg in node.args if arg.keyword is None]
        for position, param in parameters:
            if any(arg.star for arg in node.args[: position + 1]):
                return
            chosen = next((arg for arg in node.args if arg.keyword is not None and arg.keyword.value == param), None)
            if chosen is None and len(positional) > position:
                chosen = positional[position]
            if chosen is not None:
                self._rewrite(chosen.value, why=f"`{dotted_name(node.func)}()`'s `{param}` parameter")

    def _own_call_arguments(self, node: cst.Call, function: cst.FunctionDef, first: int) -> None:
        """``build(m, ema_device="cuda")``, ``moving_average(m, e, 0.99, "cuda")``: an argument of the
        file's own function whose parameter there is a device (``param_role``) is rewritten like that
        parameter's default; one whose parameter is a registry key is NPU109, as its default is."""
        params = function.params
        positional = [*params.posonly_params, *params.params][first:]
        by_keyword = {p.name.value: p for p in (*params.params, *params.kwonly_params)}
        name = dotted_name(node.func)
        for index, arg in enumerate(node.args):
            if arg.star == "*":
                positional = []  # the parameters of later positional arguments are unknown
            param = by_keyword.get(arg.keyword.value) if arg.keyword else None
            if arg.keyword is None and not arg.star and index < len(positional):
                param = positional[index]
            role = param_role(self.ctx, param) if param is not None else None
            if role == "device":
                self._rewrite(arg.value, why=f"`{name}()`'s `{param.name.value}` parameter")
            elif role == "key":
                self._ambiguous(
                    arg.value, f"passed to `{name}()`'s `{param.name.value}`, a registry key,", indexed_is_device=False
                )

    @functools.cached_property
    def _other_vocabulary(self) -> frozenset[str]:
        """The expressions this file compares with a backend name that is no torch device (``"kompute"``,
        ``"metal"``, ``"vulkan"``), or assigns one: gpt4all's ``device in ("cuda", "kompute")`` picks a
        llama.cpp ``backend`` (round 54), whose ``"cuda"`` is that library's, not torch's."""
        if OTHER_BACKEND_WORD.search(self.ctx.source) is None:
            return frozenset()
        found = set(
            self._compared_sides(
                lambda other: any(string_value(s) in OTHER_BACKENDS for s in iter_nodes(other, cst.SimpleString))
            )
        )
        for node in iter_nodes(self.ctx.module, cst.Assign):  # `backend = "metal"`: that variable too
            if string_value(node.value) in OTHER_BACKENDS:
                found.update(code_of(target.target) for target in node.targets)
        return frozenset(found)

    @functools.cached_property
    def _compared_with_npu(self) -> frozenset[str]:
        """The expressions this file compares with ``"npu"`` (the source of each)."""
        if NPU_COMPARED.search(self.ctx.source) is None:
            return frozenset()
        return frozenset(self._compared_sides(lambda other: string_value(other) == "npu"))

    def _compared_sides(self, matches) -> list[str]:
        """The code of each expression the file compares with one that ``matches``."""
        return [
            code_of(side)
            for node in iter_nodes(self.ctx.module, cst.Comparison)
            for first, second in compared_pairs(node)
            for side, other in ((first, second), (second, first))
            if matches(other)
        ]

    def visit_If(self, node: cst.If) -> None:
        """``if impl == "cuda" and x.device.type == "cuda": _bias_act_cuda(...)`` (StyleGAN2's ops):
        the device test chooses a CUDA kernel of the project's (``kernel_switch``); its "cuda" stays."""
        literals = cuda_type_literals(node.test, functools.partial(device_side, self.ctx))
        if literals and capability_device_test(self.ctx, node.test):
            self._says_cuda_only.update(literals)  # `"cuda" in device and ...major >= 7`: left whole (cuda_api)
            return
        if literals and self._feature_exit(node):
            self._seen.update(literals)  # kept as written, unreported: the NPU host answers "no", as before
            return
        graph = graph_use(self.ctx, cuda_branch(self.ctx, node)) if literals else None
        callee = kernel_call(self.ctx, node) if literals and graph is None else None
        if graph is not None:  # `if x.device.type != "cuda": return fn(x)` before `torch.cuda.CUDAGraph()`
            self._graph_switches.update((literal, graph) for literal in literals)
        if callee is not None:
            self._kernel_switches.update((literal, callee) for literal in literals)
        if literals and (cuda_required(node) or contiguous_workaround(node)):
            # `if device_type != "cuda": print("FP8 requires CUDA") else: <FP8>`; transformers' SDPA
            # `if query.device.type == "cuda": query = query.contiguous()`: nothing to ask of the NPU
            self._says_cuda_only.update(literals)
        elif literals and (refusal := gpu_refusal(self.ctx, node)):
            self._says_gpu_only.update((literal, refusal) for literal in literals)

    def _feature_exit(self, node: cst.If) -> bool:
        """``if input.device.type != "cuda": return False`` in the body of a function named for a CUDA-only
        feature (StyleGAN's conv2d_gradfix ``_should_use_custom_op``, rounds 59 and 63: its custom op reads
        torch.cuda's compute capability and cuDNN's weight-gradient kernel, and EG3D's and StyleGAN-XL's copies
        have no torch-version exit before it): the test answers whether that feature runs, "no" on an NPU host."""
        function = TreeIndex.of(self.ctx).enclosing_function(node)
        return (
            function is not None
            and isinstance(function.body, cst.IndentedBlock)
            and node in function.body.body
            and feature_word(function.name.value) is not None
            and no_cuda_branch(self.ctx, node) == [node.body]
            and leaves(node.body, (cst.Return,))
        )

    def _flag_kernel_switch(self, node: cst.Assign) -> None:
        """``cuda_applicable = os.environ["RWKV_CUDA_ON"] == "1" and "cuda" in str(dev)`` then ``if
        cuda_applicable: ATT = self.cuda_att_seq`` (ChatRWKV, round 28): a flag holding a device test
        that an ``if`` of the same function reads to choose a CUDA kernel is a kernel switch, as the
        test would be in that ``if``; its "cuda" stays, unreported also where the flag switches another
        library's CUDA path (``GradCAM(..., use_cuda=use_cuda)``: :func:`library_flag_use`)."""
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        literals = cuda_type_literals(node.value, functools.partial(device_side, self.ctx))
        if not literals:
            return
        flag = node.targets[0].target.value
        scope = TreeIndex.of(self.ctx).function.get(self.ctx.statement) or self.ctx.module
        if library_flag_use(self.ctx, scope, flag):  # mmpretrain's `use_cuda = "cuda" in args.device` for GradCAM
            self._seen.update(literals)  # kept as written: the library's CUDA path stays off on an NPU host
            return
        for branch in iter_nodes(scope, cst.If):
            if isinstance(branch.test, cst.Name) and branch.test.value == flag:
                callee = kernel_call(self.ctx, branch) or cuda_named_choice(branch.body)
                if callee is not None:
                    self._kernel_switches.update((literal, callee) for literal in literals)
                    return

    def _kept_choice(self, literal: cst.CSTNode) -> bool:
        """``literal`` is the CUDA side of ``"cuda" if torch.cuda.is_available() else "cpu"`` whose test stays
        CUDA's (a feature switch: cuda_api), as for a device only faster-whisper reads: it never runs on an NPU."""
        choice = TreeIndex.of(self.ctx).parents.get(literal)
        return isinstance(choice, cst.IfExp) and choice.body is literal and self._availability_switch(choice) is True

    def _availability_switch(self, node: cst.IfExp) -> bool | None:
        """None where ``node``'s test calls no ``torch.cuda.is_available()`` (nor a function of the file
        returning it); else whether the choice is a feature switch cuda_api keeps, with its "cuda"
        (``gated_cuda_use``; once per expression)."""
        if node not in self._availability_switches:
            flags = cuda_flags(self.ctx)  # helm's `def is_cuda_available(): return torch.cuda.is_available()`
            tests = any(
                self.resolver.qualified_name(call.func) == "torch.cuda.is_available"
                or (isinstance(call.func, cst.Name) and call.func.value in flags)
                for call in calls_in(node.test)
            )
            self._availability_switches[node] = gated_cuda_use(self.ctx, node) is not None if tests else None
        return self._availability_switches[node]

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._says_cuda_only.update(capability_device_test(self.ctx, node.test))  # left whole (cuda_api)
        if self._availability_switch(node) is False:
            self._rewrite(node, why="`torch.cuda.is_available()` conditional")

    def visit_List(self, node: cst.List) -> None:
        """A command line or a key-value option list: the value after a key naming a device (``["--device",
        "cuda"]``, detectron2's ``("--opts", "MODEL.DEVICE", "cuda")`` given to ``parse_args`` or
        ``merge_from_list``: IDM-VTON's demo, round 56) is that device."""
        for key, value in zip(node.elements, node.elements[1:]):
            name = (string_value(key.value) or "").lstrip("-").rpartition(".")[2]
            if name and DEVICE_NAME.search(name) and isinstance(value.value, (cst.SimpleString, cst.FormattedString)):
                self._rewrite(value.value, why=f"option value (after `{string_value(key.value)}`)")

    visit_Tuple = visit_List

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._per_device(node)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._per_device(node)

    def _per_device(self, node: cst.ListComp | cst.GeneratorExp) -> None:
        """``[f"cuda:{i}" for i in range(torch.cuda.device_count())]`` (h2o-llmstudio's device choices):
        one device per device the migrated count counts; also where the count decides the range
        (vLLM's kernel tests: ``range(1 if torch.cuda.device_count() == 1 else 2)``, round 31)."""
        clause = node.for_in
        while clause is not None:
            call = clause.iter
            if (
                isinstance(call, cst.Call)
                and isinstance(call.func, cst.Name)
                and call.func.value == "range"
                and len(call.args) == 1
                and any(
                    self.resolver.qualified_name(count.func) == "torch.cuda.device_count"
                    for count in iter_nodes(call.args[0].value, cst.Call)
                )
            ):
                self._rewrite(node.elt, why="device per counted device")
                return
            clause = clause.inner_for_in

    def visit_For(self, node: cst.For) -> None:
        target = node.target
        if looks_like_device(target) or (isinstance(target, cst.Name) and target.value in self._device_variables):
            if not any(gated_cuda_use(self.ctx, choice) for choice in iter_nodes(node.iter, cst.IfExp)):
                self._rewrite(node.iter, why="loop over devices")  # else its CUDA device runs CUDA-only code

    def visit_Assign(self, node: cst.Assign) -> None:
        self._flag_kernel_switch(node)
        for target in node.targets:
            self._assignment(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._assignment(node.target, node.value)

    def _assignment(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        word = feature_word(target.value) if isinstance(target, cst.Name) and value is not None else None
        if word:  # nanoGPT's `use_fused = fused_available and device_type == "cuda"`: a feature switch
            self._feature_switches.update(
                (literal, f"`{target.value}`: {word}")
                for literal in cuda_type_literals(value, functools.partial(device_side, self.ctx))
            )
        if platform_label(self.ctx, target):
            return  # vLLM's `VLLM_TARGET_DEVICE`: a build target
        if code_of(target) in self._other_vocabulary:
            return  # gpt4all's `backend = "cuda"` next to `backend = "kompute"`: another library's backend name
        if looks_like_device(target):
            if not _keyed_in_test(value):
                self._rewrite(field_default(value), why="device variable")
        elif value is None or not (device_literals(value) or is_device_string(value)):
            return  # neither branch below could report: spare the pre-pass (most assignments)
        elif isinstance(target, cst.Name) and target.value in self._device_variables:
            self._rewrite(value, why="device variable")
        elif not self._enum_member():
            self._ambiguous(value, "assigned to a variable")

    def _enum_member(self) -> bool:
        """The statement is a member of an ``Enum`` class (``class TimerType(Enum): CUDA = "cuda"``):
        a label the code compares, not a device it moves anything to."""
        owner = TreeIndex.of(self.ctx).enclosing_class(self.ctx.statement)
        return (
            owner is not None
            and isinstance(owner.body, cst.IndentedBlock)
            and self.ctx.statement in owner.body.body
            and any((self.resolver.qualified_name(base.value) or "").startswith("enum.") for base in owner.bases)
        )

    def visit_Param(self, node: cst.Param) -> None:
        if node.default is None or not device_literals(node.default):
            return
        role = param_role(self.ctx, node)
        if role == "runtime":
            body = TreeIndex.of(self.ctx).parents[TreeIndex.of(self.ctx).parents[node]].body
            provider = ort_provider(body) if picks_ort_provider(body, node.name.value) else None  # else passed on
            self.report("NPU109", node.default, _ort_message(provider), tier=Tier.REVIEW)
        elif role == "device" or (role == "unread" and is_stub(self.ctx, node)):
            # an abstract method's stub states the interface and parses no device: no `import torch_npu`
            self._rewrite(node.default, why="device parameter default", unparsed=role == "unread")
        elif role == "unread":
            self._seen.update(device_literals(node.default))  # a default nothing reads: no edit changes a run (stark)
        elif role == "label" or node.name.value in IMPLEMENTATION_NAMES:
            # `impl="cuda"` only compared with strings (`impl == "cuda"`, `impl in ["ref", "cuda"]`), or named for
            # an implementation (StyleGAN's `filter2d(..., impl="cuda")` passing it on to `upfirdn2d`): a label
            return
        elif role == "key":
            self._ambiguous(
                node.default, "as the default of a parameter used as a registry key", indexed_is_device=False
            )
        else:
            self._ambiguous(node.default, "as a parameter default")

    def visit_Dict(self, node: cst.Dict) -> None:
        """``{"cpu": 50, "mps": 50, "cuda": 100}``: settings by device type, read with the type the run
        is on (LitServe's benchmark: ``CONF[device]``); its ``"cuda"`` entry is the NPU's once device
        strings say "npu" (else KeyError). Only where every key is a device type (or the file reads the
        table by a device's type, LightGlue's ``self.pruning_keypoint_thresholds[device.type]`` beside its
        ``"flash"`` entry, round 62), none is "npu" and every value is plain data (a table of CUDA
        implementations is no setting), in a file that compares nothing with "npu" (one that does may map
        the NPU to the "cuda" entry itself)."""
        keys = [string_value(e.key) if isinstance(e, cst.DictElement) else None for e in node.elements]
        if "cuda" not in keys or "npu" in keys or len(set(keys) & DEVICE_TYPES) < 2:
            return
        if not set(keys) <= DEVICE_TYPES and not self._read_by_device_type(node):
            return
        if self._compared_with_npu:  # the file tells the NPU apart itself (maps "npu" to the "cuda" entry)
            return
        if all(plain_data(e.value) for e in node.elements):
            self._rewrite(node.elements[keys.index("cuda")].key, why="device-type table key", unparsed=True)

    def _read_by_device_type(self, node: cst.Dict) -> bool:
        """The dict is assigned to a name the file subscripts with a device's type (``table[x.device.type]``,
        ``self.table[device.type]``)."""
        parent = TreeIndex.of(self.ctx).parents.get(node)
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1):
            return False
        name = (dotted_name(parent.targets[0].target) or "").rpartition(".")[2]
        return bool(name) and any(
            (dotted_name(subscript.value) or "").rpartition(".")[2] == name
            and len(subscript.slice) == 1
            and isinstance(index := subscript.slice[0].slice, cst.Index)
            and isinstance(index.value, cst.Attribute)
            and index.value.attr.value == "type"
            for subscript in iter_nodes(self.ctx.module, cst.Subscript)
        )

    def visit_DictElement(self, node: cst.DictElement) -> None:
        key = string_value(node.key)
        if key is not None and DEVICE_NAME.search(key):
            self._rewrite(node.value, why="`device` entry")

    def leave_Call(self, original_node: cst.Call) -> None:
        """``self.assertEqual(actual, expected)``: on leaving, once the input's literals in ``actual``
        (``f(m, {"k": "cuda:0"})``) are rewritten."""
        if isinstance(original_node.func, cst.Attribute) and original_node.func.attr.value in ASSERT_EQUAL:
            positional = [a.value for a in original_node.args if a.keyword is None]
            if len(positional) >= 2:
                self._expected(positional[0], positional[1])
                self._expected(positional[1], positional[0])

    def leave_Assert(self, original_node: cst.Assert) -> None:
        """``assert f(m, {"k": "cuda:0"}) == {"k": "cuda:0"}``: on leaving, once the input's literals are rewritten."""
        for comparison in iter_nodes(original_node.test, cst.Comparison):
            for first, second in compared_pairs(comparison):
                self._expected(first, second)
                self._expected(second, first)

    def _expected(self, expected: cst.BaseExpression, actual: cst.BaseExpression) -> None:
        """``m = {"k": "cuda:0"}`` rewritten as a device map, then ``assert f(m) == {"k": "cuda:0"}``
        (ktransformers): the compared literal is the test's expected value, made of the input; it is
        rewritten as the input was (the input may go to a device, so it stays rewritten; a test
        comparing the two spellings would fail on every host)."""
        if not self._rewritten or is_device_type_expr(actual) or is_device_type_expr(expected):
            return  # `assert x.device.type == "cuda"`: a device comparison (visit_Comparison)
        literals = [s for s in iter_nodes(expected, cst.SimpleString) if is_device_string(s) and s not in self._seen]
        if not literals:
            return
        inputs = {string_value(literal) for literal in self._input_literals(actual) if literal in self._rewritten}
        for literal in literals:
            if string_value(literal) in inputs:
                self._settled.add(literal)  # changes with its input
                self._rewrite(literal, why="test's expected value (its input holds the same device)", unparsed=True)

    def _input_literals(self, actual: cst.BaseExpression) -> list[cst.SimpleString]:
        """The strings of ``actual`` and of the values assigned, in its function (or the module), to the
        names it reads, followed back ``INPUT_DEPTH`` assignments (``resolved = f(device_map)`` →
        ``device_map = {...}``)."""
        scope = TreeIndex.of(self.ctx).function.get(self.ctx.statement) or self.ctx.module
        found: list[cst.SimpleString] = []
        pending, followed = [actual], set()
        for _ in range(INPUT_DEPTH):
            following = []
            for expr in pending:
                found.extend(iter_nodes(expr, cst.SimpleString))
                for name in iter_nodes(expr, cst.Name):
                    if name.value not in followed:
                        followed.add(name.value)
                        following.extend(assigned_values(scope, name.value) or [])
            pending = following
        return found

    def visit_Return(self, node: cst.Return) -> None:
        if device_getter(self.ctx, node):
            self._rewrite(node.value, why="device getter's return")
        else:
            self._ambiguous(node.value, "returned")

    def visit_Subscript(self, node: cst.Subscript) -> None:
        """``allocations["cuda:0"]``: a table keyed by device names (ParlAI), whose keys change with
        the devices they were made from."""
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            key = node.slice[0].slice.value
            if indexed_device(key):
                self._rewrite(key, why="device-keyed item")


def _ort_message(provider: str | None) -> str:
    """NPU109's message for onnxruntime's device: the provider it picks, or where it goes (None)."""
    where = (
        f"it picks `{provider}`"
        if provider
        else "passed on to a class of this file that picks onnxruntime's provider by it"
    )
    return ORT_DEVICE.format(provider=where)


def _after_original(arm: cst.If, updated: cst.If) -> cst.If:
    """``arm`` as written, then ``updated`` (its NPU version) as an ``elif``."""
    return updated.with_changes(test=arm.test, body=arm.body, orelse=updated.with_changes(leading_lines=()))


def _npu_after(updated: cst.List | cst.Tuple | cst.Set, index: int):
    """The sequence with ``"npu"`` after its CUDA element ``index``."""
    elements = list(updated.elements)
    cuda = elements[index]
    npu = cuda.with_changes(value=replace_word(cuda.value, "cuda", "npu"))
    elements[index : index + 1] = [cuda.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), npu]
    return updated.with_changes(elements=elements)


def _with_npu(updated: cst.SimpleString) -> cst.Tuple:
    """``"cuda"`` → ``("cuda", "npu")``."""
    return cst.Tuple([cst.Element(updated), cst.Element(replace_word(updated, "cuda", "npu"))])


def _keyed_in_test(value: cst.BaseExpression | None) -> bool:
    """``"cuda" if rng.get("cuda") is not None else None``: the conditional's test reads a mapping by the
    same string it gives (``.get("cuda")``, ``rng["cuda"]``), so the string is the mapping's key, which old
    checkpoints saved under "cuda" (SpecForge's ``_set_rng_state``, round 38). Not ``"cuda" in x``: that is
    as often a device string test (``"cuda" if "cuda" in args.device else "cpu"``)."""
    if not isinstance(value, cst.IfExp):
        return False
    keys = {
        string_value(node.slice[0].slice.value)
        for node in iter_nodes(value.test, cst.Subscript)
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index)
    }
    keys |= {
        string_value(call.args[0].value)
        for call in iter_nodes(value.test, cst.Call)
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("get", "pop") and call.args
    }
    return any(string_value(branch) in keys for branch in (value.body, value.orelse) if string_value(branch))
