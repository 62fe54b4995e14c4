"""What a device test gates: code that runs only where CUDA does (a feature switch, not a device check).

``if torch.cuda.is_available(): from knn_cuda import KNN``, ``if x.is_cuda: return
ball_query_cuda.forward(x)``, ``HAS_KNN = torch.cuda.is_available()`` … ``if HAS_KNN:
knn_cuda.knn(...)``, ``if torch.cuda.is_available(): subprocess.run(["nvcc", "--version"])``,
``if x.device.type == "cuda": return torch.cuda.current_stream().cuda_stream`` (a raw CUDA stream
handle for native code), ``if x.is_cuda: from pkg.route_kernels import scatter_rows`` (a Triton
kernel of another file of the project, or a function launching one: ``ProjectFacts.triton_functions``):
rewritten to the NPU, the test would run that code on an NPU host, where the module is not
installed (a compiled CUDA extension, TensorRT-LLM, Triton, cupy, ...) or the CUDA toolkit is
missing. Left as written, the test is False there and the fallback runs. NPU103 (a
``torch.cuda.is_available()`` test or flag), NPU102/NPU104 (``.is_cuda``, ``x.device.type ==
"cuda"``, through ``kernel_switch.py``) keep such tests and report them; NPU604/NPU606 take
an import in the branch they keep for guarded. A test's skip guard is such a test too:
``@pytest.mark.skipif(not torch.cuda.is_available(), ...)`` over a test importing ``my_cuda_ext``
(or ``if not torch.cuda.is_available(): pytest.skip(...)`` before the import) stays CUDA's, so the
test is skipped on an NPU host.

Libraries the migration rewrites (apex, flash-attn, TransformerEngine) do not count here: their
calls in the branch become NPU code, which the rewritten test must reach. A branch that only runs an
NVIDIA diagnostic (``check_nvlink_connectivity(fabric)``: :func:`nvidia_checks_only`) has nothing
to run on an NPU host either; NPU103 leaves its test as written without a report.
"""

from __future__ import annotations

import functools
import re
from typing import Iterable, Iterator

import libcst as cst

from cuda2npu.analysis.cuda_only_modules import (
    CUDA_LIBRARIES,
    EXTENSION_NAME,
    MIGRATED,
    cuda_call,
    cuda_module,
)
from cuda2npu.analysis.extension_devices import extension_device_choice
from cuda2npu.analysis.runtime_devices import runtime_device_choice, torchserve_gpu_id
from cuda2npu.core.bindings import assigned_values
from cuda2npu.core.catalogue import table
from cuda2npu.core.feature_words import name_tokens
from cuda2npu.core.literals import string_value
from cuda2npu.core.names import dotted_name, module_qualified
from cuda2npu.core.nodes import code_of
from cuda2npu.core.statements import TreeIndex, leaves
from cuda2npu.core.traversal import iter_nodes

SHELL_CALLS = {
    "subprocess.run",
    "subprocess.call",
    "subprocess.check_call",
    "subprocess.check_output",
    "subprocess.getoutput",
    "subprocess.getstatusoutput",
    "subprocess.Popen",
    "os.system",
    "os.popen",
}
CUDA_TOOLS = re.compile(r"(?<![\w-])(?:nvcc|nvidia-smi|nsys|ncu)(?![\w-])")  # CUDA toolkit / driver programs
IS_AVAILABLE = "torch.cuda.is_available"
CUDA_EXTENSION_BUILDER = "torch.utils.cpp_extension.CUDAExtension"
# the CUDA compute capability's readers: torch_npu answers None (docs/reference/torch_npu.md §4.2)
CAPABILITY_QUERIES = {"torch.cuda.get_device_capability", "torch.cuda.get_device_properties"}
# and NPU103's renames of them, still None there (a flag set from one stays never true after the rename)
NPU_CAPABILITY_QUERIES = {"torch.npu.get_device_capability", "torch_npu.npu.get_device_capability"}
EXTENSION = "a compiled CUDA extension"
# a function of the project reading GPUtil or NVML (ProjectFacts.gpu_monitors)
GPU_MONITOR = "reads NVIDIA's GPU monitoring (GPUtil, NVML), which finds no GPU on an NPU host"
CUDA_GRAPH_APIS = frozenset({"torch.cuda.CUDAGraph", "torch.cuda.graph", "torch.cuda.make_graphed_callables"})
# torch's CUDA-only objects the rules keep as written (NPU601): a branch using one never runs on an NPU host
CUDA_ONLY_TORCH = {
    **dict.fromkeys(
        CUDA_GRAPH_APIS | {"torch.cuda.graph_pool_handle"},
        "a CUDA graph, which stays torch.cuda's (NPU601; torch.npu.NPUGraph captures inference-only graphs)",
    ),
    "torch.distributed.ProcessGroupNCCL": "NCCL's process group, absent from the torch build torch_npu runs on",
    **dict.fromkeys(
        (f"torch.nn.attention.flex_attention.{name}" for name in ("flex_attention", "create_block_mask")),
        "FlexAttention, which raises for an NPU tensor (docs/reference/run_configs.md; Ascend/pytorch#147)",
    ),  # Show-o's `if torch.cuda.is_available(): flex_attention = torch.compile(flex_attention)`, round 41
}
# a string choosing CUDA-graph capture: torch.compile's mode, lightning-thunder's plugin
CUDA_GRAPH_MODES = {"reduce-overhead": "CUDA-graph capture (`reduce-overhead`), which the CUDA branch turns on"}
# a library base class's method reading torch.cuda (on an NPU host it answers 0 or raises): the method name →
# (the package of the base class, why); mmcv 1.x `mmcv/runner/hooks/logger/text.py` TextLoggerHook._get_max_memory
INHERITED_CUDA_QUERIES = {
    "_get_max_memory": (
        "mmcv.",
        "mmcv's TextLoggerHook._get_max_memory reads torch.cuda.max_memory_allocated, 0 on an NPU host",
    ),
}
# a Triton kernel of the project, a function launching one, or one calling its compiled extension's operators
PROJECT_KERNEL = "a kernel of the project, written for CUDA GPUs"
STREAM_HANDLE = (  # torch_npu/csrc/npu/Stream.cpp: THNPStream_properties has `npu_stream`, no `cuda_stream`
    "a CUDA stream's raw cudaStream_t, for native code; a torch_npu stream has no `.cuda_stream`, "
    "its handle is `.npu_stream`, an aclrtStream: docs/reference/torch_npu.md §4.2"
)
NVIDIA_TOOL_WORDS = {"nvlink", "nvml", "nvidia", "nvsmi"}  # a function so named asks NVIDIA's driver or tools
# skip decorators of a test -> whether a true condition skips it (`skipUnless`: a true one runs it)
SKIP_DECORATORS = {"pytest.mark.skipif": True, "unittest.skipIf": True, "unittest.skipUnless": False}
# a skip reason saying the test is for CUDA alone ("silu_and_mul op is CUDA-only", "helion + CUDA only")
CUDA_ONLY_TEST = re.compile(r"\bCUDA[- ]only\b|\bCUDA\s+only\b|\bonly\s+(?:on|with|for|supports?)\s+CUDA\b", re.I)
SKIP_CALLS = {"pytest.skip"}  # raises Skipped in a test: an exit, as `self.skipTest(...)`


def _module_reason(module: str, options) -> str | None:
    """Why ``module`` (or a package above it) exists only on CUDA hosts, for a gate (the first clause
    of the table's note), or is a project module failing at import there (``ProjectFacts.failing_modules``);
    else None."""
    parts = module.split(".")
    if parts[0] in MIGRATED or parts[0] in options.file.local_modules:
        return None
    fails = _failing_modules(options.project.failing_modules).get(module)
    if fails is not None:  # Chinese-CLIP's `from cn_clip.deploy.tensorrt_utils import TensorRTModel`
        return f"a module of the project that imports `{fails}`, which fails on an NPU host"
    libraries = table("torch_cuda_api")["feature_switches"]["libraries"]
    for end in range(1, len(parts) + 1):
        prefix = ".".join(parts[:end])
        found = cuda_module(prefix, options.project.cuda_extensions, options.file.local_modules)
        note = found[1] if found is not None else None
        if note is None and prefix in CUDA_LIBRARIES:
            note = CUDA_LIBRARIES[prefix]
        if note is None and prefix in libraries:
            note = "a library that runs on CUDA only"
        if note is not None:
            return note.split("; ")[0]
    return None


@functools.cache
def _failing_modules(failing: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """``ProjectFacts.failing_modules`` as a mapping: module → what fails at the end of its imports."""
    return dict(failing)


def _relative_bindings(ctx) -> dict[str, str]:
    """Names bound by relative imports (``from . import knn_cuda``, ``from .knn_cuda import KNN``) →
    the last module name of what they import (the resolver leaves them unqualified)."""
    found: dict[str, str] = {}
    if ctx.text is not None and b"from ." not in ctx.text:
        return found
    for node in iter_nodes(ctx.module, cst.ImportFrom):
        if not node.relative or isinstance(node.names, cst.ImportStar):
            continue
        module = (dotted_name(node.module) or "").rpartition(".")[2] if node.module is not None else ""
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            bound = dotted_name(alias.asname.name) if alias.asname is not None else name
            if bound:
                found[bound] = name if not module else module
    return found


def _import_use(ctx, node: cst.Import | cst.ImportFrom) -> tuple[str, str] | None:
    options = ctx.options
    if isinstance(node, cst.Import):
        for alias in node.names:
            module = dotted_name(alias.name) or ""
            note = _module_reason(module, options)
            if note:
                return _spelled(node, f"import {module}"), note
        return None
    names = [] if isinstance(node.names, cst.ImportStar) else [dotted_name(a.name) or "" for a in node.names]
    module = dotted_name(node.module) if node.module is not None else ""
    if node.relative:  # a compiled extension of the package: `from . import knn_cuda`
        candidates = [module.rpartition(".")[2]] if module else names
        for candidate in candidates:
            if EXTENSION_NAME.fullmatch(candidate):
                return _spelled(node, f"import {candidate}"), EXTENSION
        if module and any(_project_triton(ctx, f"{module}.{n}", relative=True) for n in names):
            return _spelled(node, f"from .{module} import ..."), PROJECT_KERNEL
        return None
    for candidate in [module, *(f"{module}.{n}" for n in names)]:
        note = _module_reason(candidate, options)
        if note:
            return _spelled(node, f"from {module} import ..."), note
    if any(_project_triton(ctx, f"{module}.{n}") for n in names):
        return _spelled(node, f"from {module} import ..."), PROJECT_KERNEL
    return None


def _project_triton(ctx, name: str, relative: bool = False) -> bool:
    """``name`` (``pkg.kernels.launch``) is a Triton kernel of the project or a function launching one,
    or a function of the project calling its compiled extension's operators (detectron2's
    ``nms_rotated``: CPU and CUDA kernels only), defined in another file (``ProjectFacts.triton_functions``,
    ``extension_functions``); ``relative``: a relative import's ``kernels.launch``, which ends such a name."""
    project = ctx.options.project
    functions = (*project.triton_functions, *project.extension_functions)
    return name in functions or (relative and any(f.endswith(f".{name}") for f in functions))


def _own_method(ctx, node: cst.Attribute) -> str | None:
    """``Class.method`` for ``self.method`` read in a method of ``Class`` (None for anything else)."""
    if not (isinstance(node.value, cst.Name) and node.value.value == "self"):
        return None
    index = TreeIndex.of(ctx)
    owner = index.enclosing_class(index.statement_of(node))
    return f"{owner.name.value}.{node.attr.value}" if owner is not None else None


def inherited_cuda_query(ctx, node: cst.Attribute) -> tuple[str, str] | None:
    """``(what, why)`` for ``self.<method>`` where the enclosing class inherits ``method`` from a library
    class that reads torch.cuda in it (:data:`INHERITED_CUDA_QUERIES`; ConvNeXt's
    ``CustomizedTextLoggerHook(TextLoggerHook)``: ``if torch.cuda.is_available(): log_dict['memory'] =
    self._get_max_memory(runner)``, round 41), and does not define it itself."""
    if not (isinstance(node.value, cst.Name) and node.value.value == "self") or node.attr.value not in (
        INHERITED_CUDA_QUERIES
    ):
        return None
    index = TreeIndex.of(ctx)
    owner = index.enclosing_class(index.statement_of(node))
    if owner is None or any(
        isinstance(member, cst.FunctionDef) and member.name.value == node.attr.value for member in owner.body.body
    ):
        return None
    package, why = INHERITED_CUDA_QUERIES[node.attr.value]
    bases = (ctx.resolver.qualified_name(base.value) or "" for base in owner.bases)
    return (f"`self.{node.attr.value}`", why) if any(base.startswith(package) for base in bases) else None


def _spelled(node: cst.CSTNode, short: str) -> str:
    """``node``'s code for a message, or ``short`` when it is long or spans lines."""
    text = code_of(node).strip()
    return f"`{text}`" if len(text) <= 60 and "\n" not in text else f"`{short}`"


def _call_use(ctx, node: cst.Call) -> tuple[str, str] | None:
    """A CUDA toolkit program run through a shell (``nvcc --version``), ``importlib.import_module`` of
    a CUDA-only module, a call only a library's CUDA build has (``faiss.StandardGpuResources()``,
    the table's ``calls``), or a function named for nvcc (``get_nvcc_version()``)."""
    name = dotted_name(node.func) or ""
    qualified = ctx.resolver.qualified_name(node.func) or name
    only_cuda = cuda_call(qualified)
    if only_cuda is not None and only_cuda[0] == "calls":
        return f"`{qualified}`", only_cuda[1].split(": ")[0]
    if qualified in SHELL_CALLS:
        for string in iter_nodes(node, (cst.SimpleString, cst.FormattedStringText)):
            value = string_value(string) if isinstance(string, cst.SimpleString) else string.value
            tool = CUDA_TOOLS.search(value or "")
            if tool:
                return f"`{tool.group()}`", "a CUDA toolkit program, not installed on NPU hosts"
    if qualified == "importlib.import_module" and node.args and node.args[0].keyword is None:
        module = string_value(node.args[0].value)
        note = _module_reason(module, ctx.options) if module else None
        if note:
            return f"`{module}`", note
    if "nvcc" in re.split(r"[^a-z0-9]+", name.rpartition(".")[2].lower()):
        return f"`{name}`", "runs nvcc, which is not installed on NPU hosts"
    return None


def stream_handle(ctx, node: cst.Attribute) -> bool:
    """``node`` reads the raw handle of a torch CUDA stream (``torch.cuda.current_stream().cuda_stream``,
    ``stream.cuda_stream``): not a method call, and not an attribute of that name the file assigns
    or defines itself (``self.cuda_stream = torch.cuda.Stream()``: :func:`_own_cuda_streams`)."""
    if node.attr.value != "cuda_stream" or dotted_name(node) in ctx.file_state(_own_cuda_streams):
        return False
    parent = TreeIndex.of(ctx).parents.get(node)
    return not (isinstance(parent, cst.Call) and parent.func is node)


def _own_cuda_streams(ctx) -> frozenset[str]:
    """The ``cuda_stream`` attributes the file assigns (``self.cuda_stream = ...``: ``"self.cuda_stream"``)
    or defines in a class (a method, property or class attribute: ``"self.cuda_stream"``)."""
    if ctx.text is not None and b"cuda_stream" not in ctx.text:
        return frozenset()
    found = set()
    for node in iter_nodes(ctx.module, (cst.AssignTarget, cst.AnnAssign, cst.FunctionDef)):
        target = node.name if isinstance(node, cst.FunctionDef) else node.target
        if isinstance(target, cst.Attribute) and target.attr.value == "cuda_stream":
            found.add(dotted_name(target))
        elif isinstance(target, cst.Name) and target.value == "cuda_stream" and _in_class(ctx, node):
            found.add("self.cuda_stream")
    return frozenset(found)


def _in_class(ctx, node: cst.CSTNode) -> bool:
    """``node`` is a member of a class body (``def cuda_stream(self)``, ``cuda_stream = None``)."""
    parents = TreeIndex.of(ctx).parents
    statement = node if isinstance(node, cst.FunctionDef) else parents.get(parents.get(node))
    return isinstance(parents.get(parents.get(statement)), cst.ClassDef)


def nvidia_checks_only(blocks: list[cst.CSTNode]) -> bool:
    """Whether ``blocks`` do nothing but call functions named for NVIDIA's driver tools (``if
    torch.cuda.is_available() and devices > 1: check_nvlink_connectivity(fabric)``, also
    ``_check_nvidia_smi()``): a diagnostic with nothing to run on an NPU host, where the test, left
    as written, stays False as before."""
    called = False
    for small in _small_statements(blocks):
        call = small.value if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) else None
        words = set(name_tokens((dotted_name(call.func) or "").rpartition(".")[2])) if call else set()
        if not words & NVIDIA_TOOL_WORDS:
            return False
        called = True
    return called


def cudnn_settings_only(blocks: list[cst.CSTNode]) -> bool:
    """Whether ``blocks`` do nothing but set cuDNN's switches (``torch.backends.cudnn.deterministic = True``,
    ``.benchmark = False``: OpenELM's seeding helper, round 54), which an NPU host ignores: renamed, the test
    would run them there to no effect; as written it stays False, as before."""
    assigned = False
    for small in _small_statements(blocks):
        targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else []
        if not targets or not all((dotted_name(t) or "").startswith("torch.backends.cudnn.") for t in targets):
            return False
        assigned = True
    return assigned


def _small_statements(blocks: list[cst.CSTNode]) -> Iterator[cst.CSTNode]:
    """The statements of ``blocks`` (a branch's bodies, an ``else``, or statements following an exit), each
    line's small statements one by one, a compound statement as itself."""
    for block in blocks:
        block = block.body if isinstance(block, cst.Else) else block
        for statement in block.body if isinstance(block, cst.BaseSuite) else [block]:
            yield from statement.body if isinstance(statement, cst.SimpleStatementLine) else [statement]


def cuda_only_use(ctx, nodes: Iterable[cst.CSTNode]) -> tuple[str, str] | None:
    """``(what, why)`` for the first code among ``nodes`` (and their descendants) that runs only on
    a CUDA host: an import of a CUDA-only module (rules/tables/cuda_only_packages.toml, a compiled
    extension, pycuda/cupy/numba.cuda, the CUDA-only libraries of the feature switches' table), a
    call or a reference through a name bound to one, a CUDA toolkit program run through a shell, a
    read of a CUDA stream's raw handle (``stream.cuda_stream``: :func:`stream_handle`), an import or a
    use of a Triton kernel another file of the project defines, or of a function launching one
    (``ProjectFacts.triton_functions``: slime's ``from .deterministic_route_kernels import
    scatter_routes_forward``), or torch's ``CUDAExtension`` (a setup.py building CUDA sources)."""
    relative: dict[str, str] | None = None
    for root in nodes:
        skipped = {a.attr for a in iter_nodes(root, cst.Attribute)}
        skipped |= {arg.keyword for arg in iter_nodes(root, cst.Arg) if arg.keyword is not None}
        for node in iter_nodes(root, (cst.Import, cst.ImportFrom, cst.Call, cst.Name, cst.Attribute, cst.SimpleString)):
            if isinstance(node, cst.SimpleString):
                mode = string_value(node)
                chosen = mode in CUDA_GRAPH_MODES and not _under_inner_if(ctx, node, root)
                found = (f"`{code_of(node)}`", CUDA_GRAPH_MODES[mode]) if chosen else None
            elif isinstance(node, (cst.Import, cst.ImportFrom)):
                found = _import_use(ctx, node)
            elif isinstance(node, cst.Call):
                found = _call_use(ctx, node)
            elif isinstance(node, cst.Attribute):
                found = (_spelled(node, ".cuda_stream"), STREAM_HANDLE) if stream_handle(ctx, node) else None
                found = found or inherited_cuda_query(ctx, node)  # `self._get_max_memory(runner)`
                qualified = ctx.resolver.qualified_name(node) if found is None else None
                named = _named_use(ctx, qualified)  # `torch.cuda.CUDAGraph`, `kernels.launch(x)`, `utils.f()`
                if named is not None:
                    found = named
                elif (
                    found is None and (method := _own_method(ctx, node)) and _project_triton(ctx, method, relative=True)
                ):
                    found = f"`{code_of(node)}`", PROJECT_KERNEL  # `self._optimized_apply_rotary(...)`
            elif node in skipped:
                continue
            else:
                qualified = ctx.resolver.qualified_name(node) or module_qualified(ctx.resolver.module_scope, node)
                named = _named_use(ctx, qualified)  # `launch(x)`, `get_gpu_usage()`, imported
                if named is not None:
                    found = named
                elif qualified == CUDA_EXTENSION_BUILDER:  # setup.py: `extension = CUDAExtension`
                    found = "`CUDAExtension`", "builds CUDA sources with nvcc, which an NPU host does not have"
                elif qualified:
                    note = None if qualified.split(".")[0] == "torch" else _module_reason(qualified, ctx.options)
                    found = (f"`{qualified}`", note) if note else None
                elif node.value in ctx.options.file.own_extension_functions:
                    found = f"`{node.value}`", PROJECT_KERNEL  # pytorch3d's `gather_scatter = GatherScatter.apply`
                elif (made := _made_by_project_kernel(ctx, node)) is not None:
                    found = made  # `op = ROIAlignRotated(...)` ... `op.forward(x)`
                else:
                    relative = _relative_bindings(ctx) if relative is None else relative
                    module = relative.get(node.value, "")
                    if module and EXTENSION_NAME.fullmatch(module):
                        found = f"`{node.value}`", EXTENSION
                    elif module and _project_triton(ctx, f"{module}.{node.value}", relative=True):
                        found = f"`{node.value}`", PROJECT_KERNEL  # `from .kernels import launch`
                    else:
                        found = None
            if found:
                return found
    return None


def _made_by_project_kernel(ctx, name: cst.Name) -> tuple[str, str] | None:
    """``(what, why)`` where ``name`` is a local of its function that only ever holds what a project class or
    function calling a compiled extension returns (detectron2's test: ``op = ROIAlignRotated(...)``, then
    ``op.forward(input.cuda(), rois.cuda())``, round 52): its calls reach CPU and CUDA kernels only."""
    index = TreeIndex.of(ctx)
    function = index.function.get(index.statement_of(name))
    values = assigned_values(function, name.value) if function is not None else None
    if not values or not all(isinstance(value, cst.Call) for value in values):
        return None
    for value in values:
        found = _named_use(ctx, ctx.resolver.qualified_name(value.func))
        if found is None or found[1] != PROJECT_KERNEL:
            return None
    return found


def _under_inner_if(ctx, node: cst.CSTNode, root: cst.CSTNode) -> bool:
    """``node`` lies under an ``if`` inside ``root``: PixArt-sigma's app loads its pipeline under ``if
    torch.cuda.is_available():`` and compiles it with ``mode="reduce-overhead"`` only under ``if
    USE_TORCH_COMPILE:`` (round 45): the branch does more than turn CUDA graphs on."""
    parents = TreeIndex.of(ctx).parents
    current = parents.get(node)
    while current is not None and current is not root:
        if isinstance(current, cst.If):
            return True
        current = parents.get(current)
    return False


def _named_use(ctx, qualified: str | None) -> tuple[str, str] | None:
    """``(what, why)`` for a qualified name that runs only on a CUDA host: torch's CUDA-only objects
    (:data:`CUDA_ONLY_TORCH`), a function of the project reading GPUtil or NVML (project fact
    ``gpu_monitors``), or a Triton kernel of the project or a function launching one."""
    if not qualified:
        return None
    if qualified in CUDA_ONLY_TORCH:
        return f"`{qualified}`", CUDA_ONLY_TORCH[qualified]
    if qualified in ctx.options.project.gpu_monitors:
        return f"`{qualified}`", GPU_MONITOR
    if _project_triton(ctx, qualified):
        return f"`{qualified}`", PROJECT_KERNEL
    return None


def cuda_branch(ctx, node: cst.If | cst.IfExp) -> list[cst.CSTNode]:
    """What runs only when the test says CUDA: the body when the test being true means CUDA
    (``torch.cuda.is_available() and x``), the ``else`` branch (or, when the body ends in
    ``return``/``raise`` and there is none, the statements after the ``if``) when its being false
    does (``not x.is_cuda``, ``not HAS_KNN or y``); the body too when its CUDA tests all count for it
    without deciding it (``CUDA_HOME is not None and (torch.cuda.is_available() or arch_list)``: CUDA
    opens it); nothing when neither (``x and not torch.cuda.is_available()``). A test with no CUDA
    test in it (a flag set from ``.is_cuda``) is taken as one, negated by a leading ``not``."""
    true, false = _means_cuda(ctx, node.test)
    if true is None:  # no CUDA test recognized
        true, false = not _negated(node.test), _negated(node.test)
    if true or (not false and _cuda_signs(ctx, node.test) == {True}):  # `ext and (torch.cuda.is_available() or arch)`
        return [node.body]
    if not false:
        return []
    if isinstance(node, cst.IfExp) or node.orelse is not None:
        return [node.orelse]
    return TreeIndex.of(ctx).following(node) if leaves(node.body) or skips(ctx, node.body) else []


def skips(ctx, block: cst.BaseSuite) -> bool:
    """The block ends in a call that skips the test (``pytest.skip("needs CUDA")``, ``self.skipTest(...)``)."""
    last = block.body[-1] if block.body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1]
    call = last.value if isinstance(last, cst.Expr) else None
    if not isinstance(call, cst.Call):
        return False
    name = dotted_name(call.func) or ""
    return name.endswith(".skipTest") or ctx.resolver.qualified_name(call.func) in SKIP_CALLS


def skipped_cuda_use(ctx, call: cst.Call) -> tuple[str, str] | None:
    """``(what, why)`` for the CUDA-only code of the test a skip decorator guards, when the test runs
    only where its condition says CUDA (``@pytest.mark.skipif(not torch.cuda.is_available(), ...)``
    over a test importing a compiled CUDA extension; ``unittest.skipIf``/``skipUnless`` alike, on a
    test function or class): the decorator is a feature switch, False on an NPU host, which skips the
    test there (see :func:`cuda_only_use`)."""
    definition = _decorated(ctx, call)
    if definition is None or not _runs_on_cuda_only(ctx, call):
        return None
    return cuda_only_use(ctx, [definition.body, *_methods_called(ctx, definition)])


def _runs_on_cuda_only(ctx, call: cst.Call) -> bool:
    """``call`` is a skip decorator (:data:`SKIP_DECORATORS`) whose positional condition lets the test
    run only where CUDA is (``skipif(not torch.cuda.is_available())``, ``skipUnless(torch.cuda.is_available())``)."""
    skips_when_true = SKIP_DECORATORS.get(ctx.resolver.qualified_name(call.func) or "")
    if skips_when_true is None or not call.args or call.args[0].keyword is not None:
        return False
    true, false = _means_cuda(ctx, call.args[0].value)
    return bool(false if skips_when_true else true)


def _methods_called(ctx, definition: cst.FunctionDef | cst.ClassDef) -> list[cst.CSTNode]:
    """The bodies of the methods of its class a test method calls through ``self`` (detectron2's
    ``def test_nms_cuda(self): self.test_nms_cpu(device="cuda")``)."""
    owner = TreeIndex.of(ctx).parents.get(TreeIndex.of(ctx).parents.get(definition))
    if not isinstance(definition, cst.FunctionDef) or not isinstance(owner, cst.ClassDef):
        return []
    called = {
        call.func.attr.value
        for call in iter_nodes(definition.body, cst.Call)
        if isinstance(call.func, cst.Attribute) and dotted_name(call.func.value) == "self"
    }
    return [
        method.body
        for method in owner.body.body
        if isinstance(method, cst.FunctionDef) and method.name.value in called and method is not definition
    ]


def _decorated(ctx, call: cst.Call) -> cst.FunctionDef | cst.ClassDef | None:
    """The function or class ``call`` decorates (``@call`` over it), else None."""
    parents = TreeIndex.of(ctx).parents
    decorator = parents.get(call)
    definition = parents.get(decorator) if isinstance(decorator, cst.Decorator) else None
    return definition if isinstance(definition, (cst.FunctionDef, cst.ClassDef)) else None


def _negated(test: cst.BaseExpression) -> bool:
    return isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)


def no_cuda_branch(ctx, node: cst.If) -> list[cst.CSTNode]:
    """What runs only when the test says no CUDA: the body when the test being true means no CUDA
    (``not torch.cuda.is_available() and backend != "torch"``), the ``else`` branch when its being
    false does (``torch.cuda.is_available()``); nothing when neither (``torch.cuda.is_available() and x``)."""
    true, false = _means_cuda(ctx, node.test, cuda=False)
    if true:
        return [node.body]
    return [node.orelse] if false and node.orelse is not None else []


def _means_cuda(ctx, test: cst.BaseExpression, cuda: bool = True) -> tuple[bool | None, bool]:
    """(test true ⇒ CUDA, test false ⇒ CUDA), with ``cuda=False`` (test true ⇒ no CUDA, test false ⇒
    no CUDA); (None, False) when the test holds no CUDA test."""
    found = [False]

    def polarity(expr: cst.BaseExpression) -> tuple[bool, bool]:
        if _negated(expr):
            true, false = polarity(expr.expression)
            return false, true
        if isinstance(expr, cst.BooleanOperation):
            (t1, f1), (t2, f2) = polarity(expr.left), polarity(expr.right)
            if isinstance(expr.operator, cst.And):
                return t1 or t2, f1 and f2
            return t1 and t2, f1 or f2
        if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
            operator = expr.comparisons[0].operator
            if "cuda" in (string_value(expr.left), string_value(expr.comparisons[0].comparator)):
                found[0] = True  # `x.device.type == "cuda"`, `"cuda" in str(x.device)`
                positive = isinstance(operator, (cst.Equal, cst.In, cst.Is))
                negative = isinstance(operator, (cst.NotEqual, cst.NotIn, cst.IsNot))
                return (positive, negative) if cuda else (negative, positive)
            return False, False
        if _cuda_atom(ctx, expr):
            found[0] = True
            return cuda, not cuda
        return False, False

    true, false = polarity(test)
    return (true, false) if found[0] else (None, False)


def _cuda_signs(ctx, test: cst.BaseExpression) -> set[bool]:
    """Whether each CUDA test in ``test`` counts for it (True) or against it (False, under a ``not``)."""
    if _negated(test):
        return {not sign for sign in _cuda_signs(ctx, test.expression)}
    if isinstance(test, cst.BooleanOperation):
        return _cuda_signs(ctx, test.left) | _cuda_signs(ctx, test.right)
    return {True} if _cuda_atom(ctx, test) else set()


def _cuda_atom(ctx, expr: cst.BaseExpression) -> bool:
    """``torch.cuda.is_available()``, ``x.is_cuda``, a flag set from ``torch.cuda.is_available()``
    (``HAS_KNN``, ``self.use_knn``, a call of a function so named)."""
    if _is_available(ctx, expr) or (isinstance(expr, cst.Attribute) and expr.attr.value == "is_cuda"):
        return True
    name = dotted_name(expr.func if isinstance(expr, cst.Call) else expr)
    return bool(name) and name.rpartition(".")[2] in cuda_flags(ctx)


def gated_cuda_use(ctx, node: cst.If | cst.IfExp) -> tuple[str, str] | None:
    """``(what, why)`` for the CUDA-only code the CUDA branch of ``node`` runs (see :func:`cuda_only_use`),
    also through a loop over the devices it chooses: ``for device in ["cpu"] + (["cuda"] if
    torch.cuda.is_available() else []):`` runs its body on the CUDA device (detectron2's tests of its
    compiled operators, which have CPU and CUDA kernels only); or a conditional expression choosing the
    device of a runtime without an NPU backend (analysis/runtime_devices.py), a read of TorchServe's
    ``gpu_id``, or a choice of the device of the project's compiled operators (analysis/extension_devices.py)."""
    blocks = cuda_branch(ctx, node)
    loop = _loop_over(ctx, node) if blocks else None
    found = cuda_only_use(ctx, [*blocks, loop.body] if loop is not None else blocks)
    if found is None and blocks and isinstance(node, cst.IfExp):
        found = runtime_device_choice(ctx, node)  # `device = "cuda" if ... else "cpu"` for faster-whisper
    if found is None and blocks:
        found = torchserve_gpu_id(blocks) or extension_device_choice(ctx, node, blocks)  # mmpretrain; pytorch3d
    return found


def paired_gate(ctx, node: cst.If | cst.IfExp) -> tuple[str, str] | None:
    """``(what, why)`` of another gate of the same class, with the same test, kept for an inherited CUDA
    query (:func:`inherited_cuda_query`): ConvNeXt's ``_log_info`` shows ``log_dict["memory"]`` under the
    ``torch.cuda.is_available()`` that ``log`` sets it under; renamed alone, it raises KeyError."""
    if ctx.text is not None and not any(name.encode() in ctx.text for name in INHERITED_CUDA_QUERIES):
        return None
    index = TreeIndex.of(ctx)
    owner = index.enclosing_class(index.statement_of(node))
    test, inherited = code_of(node.test), {why for _, why in INHERITED_CUDA_QUERIES.values()}
    for other in iter_nodes(owner, cst.If) if owner is not None else ():
        if other is not node and code_of(other.test) == test:
            found = gated_cuda_use(ctx, other)
            if found is not None and found[1] in inherited:
                return found
    return None


def _loop_over(ctx, node: cst.IfExp | cst.If) -> cst.For | None:
    """The ``for`` loop whose iterable holds the conditional expression ``node`` (inside a list
    concatenation or a tuple), else None."""
    parents = TreeIndex.of(ctx).parents
    child, parent = node, parents.get(node)
    while isinstance(parent, (cst.BinaryOperation, cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
        child, parent = parent, parents.get(parent)
    return parent if isinstance(parent, cst.For) and parent.iter is child else None


# --- which tests stay CUDA's: the blocks NPU604/NPU606 take for guarded ---------------------------


def _parts(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of ``and``/``or``/``not`` and comparisons."""
    if isinstance(expr, cst.BooleanOperation):
        return _parts(expr.left) + _parts(expr.right)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        return _parts(expr.expression)
    if isinstance(expr, cst.Comparison):
        return _parts(expr.left) + [p for c in expr.comparisons for p in _parts(c.comparator)]
    return [expr]


def _is_available(ctx, expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and (
        ctx.resolver.qualified_name(expr.func) == IS_AVAILABLE
        or module_qualified(ctx.resolver.module_scope, expr.func) == IS_AVAILABLE
    )


def cuda_flags(ctx) -> frozenset[str]:
    """Names (last parts of attribute targets too) assigned a value made of ``torch.cuda.is_available()``
    in the file (``HAS_KNN = torch.cuda.is_available()``, ``self.use_knn = ... and ...``), and the
    functions returning one (``def has_gpu(): return torch.cuda.is_available()``)."""
    return ctx.file_state(_cuda_flags)


def _cuda_flags(ctx) -> frozenset[str]:
    if ctx.text is not None and b"is_available" not in ctx.text:
        return frozenset()
    names: set[str] = set()
    for node in iter_nodes(ctx.module, (cst.Assign, cst.AnnAssign)):
        if node.value is None or not any(_is_available(ctx, p) for p in _parts(node.value)):
            continue
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        names.update((dotted_name(t) or "").rpartition(".")[2] for t in targets)
    for function in iter_nodes(ctx.module, cst.FunctionDef):
        returned = (r.value for r in iter_nodes(function.body, cst.Return) if r.value is not None)
        if any(_is_available(ctx, p) for value in returned for p in _parts(value)):
            names.add(function.name.value)
    names.discard("")
    return frozenset(names)


def tests_cuda(ctx, test: cst.BaseExpression) -> bool:
    """``test`` holds a CUDA test (``torch.cuda.is_available()``, ``x.is_cuda``, ``x.device.type == "cuda"``, a
    flag set from one)."""
    return _means_cuda(ctx, test)[0] is not None


def kept_cuda_blocks(ctx, node: cst.If) -> list[cst.CSTNode]:
    """The blocks of ``node`` (or, after an early exit, the statements that follow it) that only run
    on CUDA hosts once migrated: its CUDA branch when its test is a CUDA test the migration keeps
    because that branch runs CUDA-only code or chooses the device of the project's compiled operators."""
    if not tests_cuda(ctx, node.test):
        return []
    branch = cuda_branch(ctx, node)
    if not branch or (cuda_only_use(ctx, branch) is None and extension_device_choice(ctx, node, branch) is None):
        return []
    return [b.body if isinstance(b, cst.Else) else b for b in branch]


def renamed_cuda_test(ctx, statement: cst.CSTNode) -> bool:
    """``statement`` runs in the CUDA branch of an enclosing ``if`` whose CUDA test the migration renames
    (its branch runs no CUDA-only code): that branch runs on NPU hosts once migrated."""
    for owner, role in TreeIndex.of(ctx).enclosing(statement):
        if (
            isinstance(owner, cst.If)
            and role == "body"
            and _means_cuda(ctx, owner.test)[0]
            and gated_cuda_use(ctx, owner) is None
        ):
            return True
    return False


def kept_cuda_test(ctx, definition: cst.FunctionDef | cst.ClassDef) -> bool:
    """Whether a skip decorator of ``definition`` is a CUDA test the migration keeps (see
    :func:`skipped_cuda_use`, :func:`cuda_only_skip_reason`): its body runs on CUDA hosts only."""
    return any(
        isinstance(d.decorator, cst.Call)
        and (skipped_cuda_use(ctx, d.decorator) is not None or cuda_only_skip_reason(ctx, d.decorator) is not None)
        for d in definition.decorators
    )


def cuda_only_skip_reason(ctx, call: cst.Call) -> str | None:
    """The reason of a skip decorator whose condition says CUDA and whose reason says the test is for
    CUDA alone (torchtitan's ``skipUnless(torch.cuda.is_available(), "silu_and_mul op is CUDA-only")``
    over a custom op registered for CUDA tensors): the test stays skipped on an NPU host. None otherwise."""
    if not _runs_on_cuda_only(ctx, call):
        return None
    positional = [arg.value for arg in call.args if arg.keyword is None]
    reason = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "reason"), None)
    reason = reason or (positional[1] if len(positional) > 1 else None)
    text = string_value(reason) if reason is not None else None
    return text if text and CUDA_ONLY_TEST.search(text) else None


def names_fallback(value: cst.BaseExpression) -> bool:
    """``Backend.torch``, ``"sdpa"``, ``EagerAttention()``: a value named for a pure-PyTorch
    implementation (``[feature_switches] fallbacks``; not ``torch.float32``, whose last name decides)."""
    func = value.func if isinstance(value, cst.Call) else value
    name = (
        func.attr.value
        if isinstance(func, cst.Attribute)
        else func.value
        if isinstance(func, cst.Name)
        else string_value(func)
        if isinstance(func, cst.SimpleString)
        else None
    )
    words = table("torch_cuda_api")["feature_switches"]["fallbacks"]
    return bool(name) and re.fullmatch(r"[\w-]+", name) is not None and any(t in words for t in name_tokens(name))
