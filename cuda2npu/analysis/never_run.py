"""Code an NPU host never runs: it stays as written (an edit there changes nothing anyone runs).

- the CUDA-only branches of the CUDA tests the migration keeps (``if torch.cuda.is_available():
  from knn_cuda import KNN``, what follows ``if not x.is_cuda: return fallback(x)`` over a CUDA
  kernel: :func:`cuda2npu.analysis.cuda_gates.kept_cuda_blocks`), and the bodies of the file's functions
  only kernel switches' CUDA branches call (StyleGAN's ``_filtered_lrelu_cuda``: :func:`_kernel_switch_code`);
- the body of ``if is_flash_attn_2_available():`` (a flash-attn probe, :mod:`flash_probes`) when the
  code has a fallback: an ``else``/``elif``, or the body ends in ``return``/``raise`` (what follows
  is the fallback); without one the branch is migrated, NPU408 at the probe (the attention rules);
- likewise the body of an ``if`` with a fallback whose test needs a name a failing CUDA-only import
  binds and its ``except ImportError`` leaves False or None (``raising_fallbacks.failed_import_names``:
  ``if flash_attn_func is not None:``), directly or through a flag the file only ever assigns from
  such a test (``self.using_flash = flash_if_available and flash_attn_func is not None``, then
  ``using_flash = self.using_flash and bias is None`` ... ``if using_flash:``; VAR's flash-attn and
  xFormers paths before an SDPA ``else``), in a file whose flash-attn imports are all guarded; also a
  name the module sets to None and rebinds only after such an import (Qwen's ``rms_norm = None`` set in
  ``_import_flash_attn()``: ``raising_fallbacks.none_on_npu_names``), whose test (``rms_norm is not
  None and x.is_cuda``) stays as written too: it is False there whatever else it tests. Not a
  flag of the ``try``'s own (``HAS_FLASH = True`` after the import): once the branch's calls are
  migrated the import goes, the flag is True on an NPU host and the branch runs there;
- a test function or class under a skip decorator the migration keeps CUDA's
  (``@pytest.mark.skipif(not torch.cuda.is_available(), ...)`` over CUDA-only code:
  :func:`cuda2npu.analysis.cuda_gates.kept_cuda_test`), or marked as needing CUDA
  (``@pytest.mark.requires_cuda``, ``@pytest.mark.gpu``) over a CUDA kernel call
  (:func:`cuda2npu.analysis.kernel_switch.first_kernel`: whisper's ``dtw_cuda(x)``): it fails on an
  NPU host with or without edits;
- one whose skip decorator skips where a CUDA-only package cannot be imported: a flag the file's
  ``except ImportError`` sets False after importing one (``skipif(not HAVE_MEGABLOCKS)``), a
  flash-attn probe (``skipif(not is_flash_attn_2_available())``) or a probe function named for such a
  package (``skipif(not is_flash_v2_installed())``, ``skipUnless(has_apex_available())``,
  ``skipUnless(_has_standard_flash_attention())``), its other
  decorators included (kvpress's ``skipif(not torch.cuda.is_available())`` stacked on such a skip:
  round 30);
- the statements of a test function after ``pytest.importorskip("flash_attn")`` or after a ``try``
  that imports a CUDA-only module and whose ImportError handler skips the test;
- the ImportError handlers of a ``try`` importing torch_npu (``except ImportError:`` holds the CUDA path);
- the branches taken only on a torch older than the targeted torch_npu's (transformers'
  ``is_torch_greater_or_equal_than_1_10`` false, ``is_torch_less_than_1_11`` true);
- the body of a script's function nothing in the project calls (project fact ``uncalled_functions``);
- in a project that never calls ``.parallelize()`` (transformers' naive model parallelism), the bodies
  of ``if self.model_parallel:`` and of the ``parallelize``/``deparallelize`` methods;
- a project's own FlashAttention2 class that only transformers' attention table builds, where the
  pin allows a transformers older than its NPU flash attention (analysis/flash_attention2_classes.py);
- the statements of a block after a ``raise`` or ``return`` (nothing runs them anywhere);
- the module statements after a module-level ``if CUDA_HOME is None: raise ...`` (or ``torch.version.cuda
  is None``): a build script refusing hosts without a CUDA toolkit;
- the body of a function launching a compiled kernel with raw pointers (``ctypes.c_void_p(w.data_ptr())``:
  ChatGLM's cpm_kernels quantization), whose CUDA device and stream code serves that kernel;
- the CUDA branch of a test of DeepSpeed's accelerator name (``if get_accelerator().device_name() ==
  "cuda":``): the accelerator names the NPU there;
- the body of an ``if`` true only on torch's CUDA or ROCm build (``if torch.version.hip is not None:``,
  ``if _is_cuda():`` for a project function answering that, ``if SYSTEM == "cuda":`` for a module
  constant set so on such a build alone: analysis/build_probes.py);
- a whole test module skipped where a CUDA-only package is missing or the CUDA compute capability is
  too low (``pytest.importorskip("transformer_engine")``, ``except ImportError: pytestmark =
  pytest.mark.skip(...)``, ``pytestmark = pytest.mark.skipif(not SM90_AVAILABLE, ...)``).
"""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.analysis.cuda_gates import (
    CAPABILITY_QUERIES,
    NPU_CAPABILITY_QUERIES,
    SKIP_DECORATORS,
    cuda_branch,
    kept_cuda_blocks,
    kept_cuda_test,
    skips,
    tests_cuda,
)
from cuda2npu.analysis.cuda_only_modules import cuda_only_module, unported_module
from cuda2npu.analysis.flash_attention2_classes import unselected_flash_attention2
from cuda2npu.analysis.flash_probes import file_probe_flags, find_probe, requires_probe
from cuda2npu.analysis.float16_models import method_name
from cuda2npu.analysis.kernel_switch import first_kernel
from cuda2npu.analysis.naive_model_parallel import METHODS as PARALLELIZE_METHODS
from cuda2npu.analysis.raising_fallbacks import (
    cuda_only_import,
    failed_import_flags,
    failed_import_names,
    lacks_flag,
    none_on_npu_names,
    requires_flag,
)
from cuda2npu.core.bindings import OTHER_BINDINGS
from cuda2npu.core.feature_words import implies, name_tokens
from cuda2npu.core.imports import catches_import_error, import_root
from cuda2npu.core.literals import string_value
from cuda2npu.core.names import NameUses, dotted_name, module_qualified
from cuda2npu.core.nodes import code_of
from cuda2npu.core.options import PACKAGE_API
from cuda2npu.core.statements import TreeIndex, leaves
from cuda2npu.core.traversal import iter_nodes, walk

TEST_GATE_TEXT = re.compile(rb"skip|mark\.\w*(?:cuda|gpu)", re.IGNORECASE)  # skips, `@pytest.mark.requires_cuda`
# `is_flash_v2_installed`, `has_apex_available`, `is_megablocks_imported`: a probe of a package
PROBE_NAME = re.compile(r"(?:is|has)_\w+_(?:installed|available|imported)", re.IGNORECASE)
HAS_NAME = re.compile(r"_?has_\w+", re.IGNORECASE)  # `_has_standard_flash_attention()` in a skip decorator
# the words of a probe's name that name a package which cannot be imported on an NPU host (not
# triton, bitsandbytes or liger: each has an Ascend build)
PACKAGE_WORDS = frozenset({"flash", "flashattn", "apex", "xformers", "megablocks", "te", "mamba"})
IMPORT_OR_SKIP = "pytest.importorskip"
DISTRIBUTED_TESTING = "torch.testing._internal.common_distributed."
CUDA_SKIPS = frozenset({"skip_if_lt_x_gpu", "skip_if_no_gpu", "requires_nccl"})  # :func:`_skips_without_cuda`
XFORMERS_PROBE = "is_xformers_available"  # diffusers' and transformers' probe (diffusers.utils.import_utils)
XFORMERS_PROBE_TEXT = re.compile(rb"is_xformers_available")
BUILD_FACTS = {"torch.version.cuda", "torch.version.hip"}  # None on the CPU build torch_npu runs on
FLASH_PACKAGES = ("flash_attn", "flash_attn_interface")
CUDA_MARK_WORDS = frozenset({"cuda", "gpu", "gpus"})  # `@pytest.mark.requires_cuda`, `@pytest.mark.gpu`
# a statement at the indentation of an indented `raise`/`return` line before it (past deeper lines, a closing
# bracket and blank or comment lines): a candidate of :func:`_after_leaving`. The repeats are possessive (a blank
# or comment line matches both alternatives: backtracking over them took 16 s on one file)
AFTER_LEAVING = re.compile(
    rb"^([ \t]+)(?:raise|return)\b.*\n(?:\1[ \t]+.*\n|[ \t]*(?:#.*)?\n)*+(?:\1[)\]}].*\n)?"
    rb"(?:[ \t]*(?:#.*)?\n)*+\1[^ \t\n#)\]}]",
    re.M,
)
INDENTED_IMPORT = re.compile(rb"^[ \t]+(?:from|import)[ \t]", re.M)  # an import in a function or branch
# transformers' pytorch_utils flags (`is_torch_greater_or_equal_than_1_10`, `is_torch_less_than_1_11`)
OLD_TORCH_FLAG = re.compile(r"is_torch_(less_than|greater_or_equal_than)_(\d+)_(\d+)")


def availability_with_build_test(ctx, test: cst.BaseExpression) -> cst.BaseExpression | None:
    """The ``torch.cuda.is_available()`` operand of ``torch.cuda.is_available() and (torch.version.cuda or
    torch.version.hip)`` (WhisperSpeech's device chooser, round 56), None for another test: the build test
    adds nothing (CUDA is available only on a CUDA or ROCm build), so the test is one of availability, not of
    the build (its branch runs on an NPU host once the test is migrated and the build test dropped)."""
    if not isinstance(test, cst.BooleanOperation) or not isinstance(test.operator, cst.And):
        return None
    for available, build in ((test.left, test.right), (test.right, test.left)):
        called = available.func if isinstance(available, cst.Call) and not available.args else None
        if called is not None and ctx.resolver.qualified_name(called) == "torch.cuda.is_available":
            sides = [build.left, build.right] if isinstance(build, cst.BooleanOperation) else []
            if isinstance(build.operator if sides else None, cst.Or) and _both_builds(ctx, sides):
                return available
    return None


def _both_builds(ctx, sides: list[cst.BaseExpression]) -> bool:
    """``torch.version.cuda`` and ``torch.version.hip``, each also as ``... is not None``."""
    read = set()
    for side in sides:
        if isinstance(side, cst.Comparison) and len(side.comparisons) == 1:
            target = side.comparisons[0]
            if isinstance(target.operator, cst.IsNot) and dotted_name(target.comparator) == "None":
                side = side.left
        read.add(ctx.resolver.qualified_name(side))
    return read == BUILD_FACTS


def in_never_run_code(ctx, node: cst.CSTNode) -> bool:
    """Whether ``node`` is in code an NPU host never runs."""
    return node in never_run_nodes(ctx)


def never_run_nodes(ctx) -> frozenset[cst.CSTNode]:
    """Every node of the file's code an NPU host never runs (gathered once per file)."""
    return ctx.file_state(_never_run_nodes)


def _never_run_nodes(ctx) -> frozenset[cst.CSTNode]:
    return frozenset(node for body in _never_run_code(ctx) for node in iter_nodes(body))


def _never_run_code(ctx) -> list[cst.CSTNode]:
    """The blocks (and statements) of the file an NPU host never runs."""
    found: list[cst.CSTNode] = []
    if ctx.text is None or b"cuda" in ctx.text:
        for node in iter_nodes(ctx.module, cst.If):
            found.extend(kept_cuda_blocks(ctx, node))
        found.extend(_kernel_switch_code(ctx))
    found.extend(_unreached_with_fallback(ctx))
    if ctx.text is None or INDENTED_IMPORT.search(ctx.text):
        found.extend(_after_failing_import(ctx))
    found.extend(_under_build_probes(ctx))
    if ctx.text is None or b"device_name" in ctx.text:
        found.extend(_accelerator_cuda_branches(ctx))
    if ctx.text is None or b"is_torch_" in ctx.text:
        found.extend(_old_torch_branches(ctx))
    if ctx.text is None or b"c_void_p" in ctx.text:
        found.extend(_raw_kernel_launchers(ctx))
    if ctx.options.project.parallelizes is False and (ctx.text is None or b"model_parallel" in ctx.text):
        found.extend(_naive_model_parallel(ctx))
    if ctx.text is None or b"FlashAttention2" in ctx.text:
        found.extend(unselected_flash_attention2(ctx))
    if ctx.text is None or b"CUDA_HOME" in ctx.text or b"version.cuda" in ctx.text:
        found.extend(_after_cuda_refusal(ctx))
    if ctx.text is None or AFTER_LEAVING.search(ctx.text):
        found.extend(_after_leaving(ctx))
    uncalled = ctx.options.file.uncalled_functions
    found.extend(s.body for s in ctx.module.body if isinstance(s, cst.FunctionDef) and s.name.value in uncalled)
    if ctx.text is None or XFORMERS_PROBE_TEXT.search(ctx.text):
        found.extend(_needs_xformers(ctx))
    if ctx.text is None or b"torch_npu" in ctx.text:
        found.extend(torch_npu_fallbacks(ctx.module))
    if ctx.text is not None and not TEST_GATE_TEXT.search(ctx.text):
        return found
    flags = failed_import_flags(ctx) | capability_flags(ctx)
    if any(_skips_without_package(ctx, mark, flags) for mark in _module_marks(ctx.module)) or any(
        _skips_module(ctx, statement) for statement in ctx.module.body
    ):
        return [ctx.module]  # `pytestmark = pytest.mark.skipif(not SM90_AVAILABLE, ...)`: the whole module
    for definition in iter_nodes(ctx.module, (cst.FunctionDef, cst.ClassDef)):
        if definition.decorators and any(
            _skips_without_package(ctx, d, flags) or _skips_without_cuda(ctx, d) for d in definition.decorators
        ):
            found.append(definition)  # its other skip decorators too: the package's absence skips it anyway
        elif definition.decorators and (kept_cuda_test(ctx, definition) or _marked_cuda_kernel_test(ctx, definition)):
            found.append(definition.body)
        elif isinstance(definition, cst.FunctionDef) and isinstance(definition.body, cst.IndentedBlock):
            found.extend(_after_package_skip(ctx, definition.body))
    return found


def _needs_xformers(ctx) -> list[cst.CSTNode]:
    """Code that runs only where xFormers is installed, never on an NPU host: the body of ``if
    is_xformers_available():`` (``pipe.enable_xformers_memory_efficient_attention()`` there), and after
    ``if not is_xformers_available(): raise ModuleNotFoundError(...)`` (diffusers' attention setters,
    copied into many projects) its ``elif``/``else`` branches and the statements that follow it (the
    ``torch.cuda.is_available()`` check and xFormers' test call there)."""
    index = TreeIndex.of(ctx)
    found: list[cst.CSTNode] = []
    for node in iter_nodes(ctx.module, cst.If):
        if implies(node.test, True, _xformers_probe):
            found.append(node.body)
        elif implies(node.test, False, _xformers_probe) and leaves(node.body, (cst.Raise,)):
            if node.orelse is not None:
                found.append(node.orelse)
            found.extend(index.following(node))
    return found


def _xformers_probe(test: cst.BaseExpression) -> bool | None:
    """True for ``is_xformers_available()`` (true where xFormers is installed), else None."""
    callee = dotted_name(test.func) if isinstance(test, cst.Call) else None
    return True if (callee or "").rpartition(".")[2] == XFORMERS_PROBE else None


def _kernel_switch_code(ctx) -> list[cst.CSTNode]:
    """The bodies of the file's module-level functions and classes that only the CUDA branches of its kernel switches (a
    CUDA test kept as written because its branch calls a CUDA kernel: StyleGAN's ``if impl == "cuda" and
    x.device.type == "cuda" and _init(): return _filtered_lrelu_cuda(...)``), or the functions themselves,
    name, and that no other file imports (``_filtered_lrelu_cuda``, whose CUDA streams serve the kernel:
    rounds 60 and 63). The branches themselves stay visible: their tests' review items are about them."""
    exports = ctx.options.file.exports
    if PACKAGE_API in exports or "*" in exports:
        return []
    branches = [
        block
        for node in iter_nodes(ctx.module, cst.If)
        if tests_cuda(ctx, node.test) and first_kernel(ctx, [node.body]) is not None
        for block in cuda_branch(ctx, node)
    ]
    if not branches:
        return []
    index = TreeIndex.of(ctx)
    inside = {node for block in branches for node in iter_nodes(block, cst.Name)}
    definitions = {  # functions and classes (GroundingDINO's `MultiScaleDeformableAttnFunction`)
        d.name.value: d
        for d in ctx.module.body
        if isinstance(d, (cst.FunctionDef, cst.ClassDef)) and d.name.value not in exports
    }
    reads = NameUses(set(definitions), ctx.resolver.scopes)
    walk(ctx.module, reads)
    return [
        definition.body
        for key, definition in definitions.items()
        if reads.uses[key] and all(use in inside or index.within(use, definition) for use in reads.uses[key])
    ]


def _after_failing_import(ctx) -> list[cst.CSTNode]:
    """The statements after an import, in a function or branch, of a module of a package nothing of which runs on
    an NPU host (the table's ``unported``: TensorRT), outside a ``try`` catching ImportError (YOLOX's ``if trt_file is not None: from torch2trt import
    TRTModule`` before ``x = torch.ones(...).cuda()``, round 63): the import raises first."""
    index = TreeIndex.of(ctx)
    found: list[cst.CSTNode] = []
    for line in iter_nodes(ctx.module, cst.SimpleStatementLine):
        if line in ctx.module.body or not any(isinstance(s, (cst.Import, cst.ImportFrom)) for s in line.body):
            continue
        module = cuda_only_import(ctx, line)
        if module is None or not unported_module(module) or _import_guarded(index, line):
            continue  # a module whose uses the migration ports (flash-attn, TransformerEngine) goes with them
        found.extend(index.following(line))
    return found


def _import_guarded(index: TreeIndex, statement: cst.CSTNode) -> bool:
    """``statement`` lies in the body of a ``try`` one of whose handlers catches ImportError."""
    return any(
        isinstance(owner, cst.Try) and role == "body" and any(catches_import_error(h) for h in owner.handlers)
        for owner, role in index.enclosing(statement)
    )


def _unreached_with_fallback(ctx) -> list[cst.CSTNode]:
    """The bodies of ``if`` statements with a fallback (an ``else``/``elif``, or a body that leaves)
    whose test needs a flash-attn probe or a failed import's name or a flag assigned from one (see the
    module docstring), and the ``else`` of a test of such a name's absence (lmms-eval's ``if
    flash_attn_func is None: <SDPA> else: flash_attn_func(...)``, round 37), in a file whose flash-attn
    imports are all guarded: an unguarded one fails at
    import on an NPU host, and migrating the branch's calls is what lets it go (NPU405)."""
    probes = file_probe_flags(ctx) if ctx.text is None or b"flash" in ctx.text else None
    none_only = none_on_npu_names(ctx)
    names = failed_import_names(ctx) | none_only
    if (probes is None and not names) or _imports_flash_unguarded(ctx.module):
        return []
    flags = _copied_flags(ctx, names) if names else ()

    def unreached(test: cst.BaseExpression) -> bool:
        return (probes is not None and requires_probe(test, probes)) or bool(flags and requires_flag(test, *flags))

    found = []
    for node in iter_nodes(ctx.module, cst.If):
        if (node.orelse is not None or leaves(node.body)) and unreached(node.test):
            found.append(node.body)
            if none_only and requires_flag(node.test, *none_only):  # `rms_norm is not None and x.is_cuda`
                found.append(node.test)  # False there whatever else it tests
        elif isinstance(node.orelse, cst.Else) and flags and lacks_flag(node.test, *flags):
            found.append(node.orelse.body)  # `if flash_attn_func is None: <SDPA> else: flash_attn_func(...)`
    return found


def _accelerator_cuda_branches(ctx) -> list[cst.CSTNode]:
    """The CUDA branch of a test of DeepSpeed's accelerator name (``if get_accelerator().device_name()
    == "cuda":``, Megatron-DeepSpeed's apex and fused-kernel paths): code written against the accelerator
    is left as it is, and on an NPU host the accelerator is named "npu"."""
    found: list[cst.CSTNode] = []
    for node in iter_nodes(ctx.module, cst.If):
        comparison = node.test
        if not (isinstance(comparison, cst.Comparison) and len(comparison.comparisons) == 1):
            continue
        sides = (comparison.left, comparison.comparisons[0].comparator)
        if any(_accelerator_name(ctx, side) for side in sides):
            found.extend(b.body if isinstance(b, cst.Else) else b for b in cuda_branch(ctx, node))
    return found


def _accelerator_name(ctx, expr: cst.BaseExpression) -> bool:
    """``get_accelerator().device_name()`` (DeepSpeed's ``deepspeed.accelerator.get_accelerator``)."""
    return (
        isinstance(expr, cst.Call)
        and not expr.args
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value == "device_name"
        and isinstance(expr.func.value, cst.Call)
        and (module_qualified(ctx.resolver.module_scope, expr.func.value.func) or "").endswith(
            "accelerator.get_accelerator"
        )
    )


def _under_build_probes(ctx) -> list[cst.CSTNode]:
    """The bodies of the ``if`` statements true only on a CUDA or ROCm build of torch (``if _is_cuda():``
    with xDiT's ``_is_cuda`` a probe of ``torch.version.cuda``, project fact ``build_probes``; ``if
    torch.version.hip is not None:``; ``if SYSTEM == "cuda":``, project fact ``build_constants``): both
    facts are None on the CPU build torch_npu runs on."""
    probes = ctx.options.project.build_probes
    constants = ctx.options.project.build_constants
    if ctx.text is not None and b"torch.version" not in ctx.text and not probes and not constants:
        return []
    local = {p.rpartition(".")[2] for p in probes}

    def build(leaf: cst.BaseExpression) -> bool | None:
        if isinstance(leaf, cst.Comparison) and len(leaf.comparisons) == 1:
            if _build_constant_test(ctx, leaf, constants):
                return True  # `SYSTEM == "cuda"`, SYSTEM set to "cuda" on a CUDA build alone
            if (
                isinstance(leaf.comparisons[0].operator, cst.IsNot)
                and dotted_name(leaf.comparisons[0].comparator) == "None"
            ):
                leaf = leaf.left
        if isinstance(leaf, cst.Call):
            qualified = ctx.resolver.qualified_name(leaf.func)
            name = leaf.func.value if isinstance(leaf.func, cst.Name) else None
            return True if qualified in probes or (qualified is None and name in local) else None
        return True if ctx.resolver.qualified_name(leaf) in BUILD_FACTS else None

    return [
        node.body
        for node in iter_nodes(ctx.module, cst.If)
        if implies(node.test, True, build) and availability_with_build_test(ctx, node.test) is None
    ]


def _build_constant_test(ctx, comparison: cst.Comparison, constants: tuple[str, ...]) -> bool:
    """``NAME == "value"`` (or ``"value" == NAME``) where the project's module constant ``NAME`` holds
    ``value`` on a CUDA or ROCm build alone (project fact ``build_constants``)."""
    if not constants or not isinstance(comparison.comparisons[0].operator, cst.Equal):
        return False
    left, right = comparison.left, comparison.comparisons[0].comparator
    for name, value in ((left, right), (right, left)):
        text = string_value(value)
        qualified = module_qualified(ctx.resolver.module_scope, name) if text is not None else None
        if qualified is not None and f"{qualified}={text}" in constants:
            return True
    return False


def _old_torch_branches(ctx) -> list[cst.CSTNode]:
    """The branches taken only on a torch older than the targeted torch_npu's (``--target-torch-npu``
    or the pins; the newest release when neither says): the ``else`` of ``if
    is_torch_greater_or_equal_than_1_10:`` and the body of ``if is_torch_less_than_1_11:``
    (transformers' pytorch_utils flags, in the Trainer copies of many projects)."""
    target = ctx.options.target.torch

    def old(leaf: cst.BaseExpression) -> bool | None:
        match = OLD_TORCH_FLAG.fullmatch((dotted_name(leaf) or "").rpartition(".")[2])
        if match is None or (target is not None and target[:2] < (int(match[2]), int(match[3]))):
            return None
        return match[1] == "less_than"  # true means old; `greater_or_equal` false means old

    found: list[cst.CSTNode] = []
    for node in iter_nodes(ctx.module, cst.If):
        if implies(node.test, True, old):
            found.append(node.body)
        elif node.orelse is not None and implies(node.test, False, old):
            found.append(node.orelse)
    return found


def _raw_kernel_launchers(ctx) -> list[cst.CSTNode]:
    """The bodies of the functions that launch a compiled kernel with raw pointers
    (``kernels.int4WeightCompression(gridDim, blockDim, 0, stream, [ctypes.c_void_p(w.data_ptr()), ...])``:
    ChatGLM's cpm_kernels quantization, copied into many projects): the CUDA device and stream code
    there serves that kernel, which no NPU runs (its import is marked: NPU606)."""
    found: list[cst.CSTNode] = []
    for function in iter_nodes(ctx.module, cst.FunctionDef):
        pointers = (
            call
            for call in iter_nodes(function.body, cst.Call)
            if (dotted_name(call.func) or "").endswith("c_void_p")
            and any(method_name(arg.value) == "data_ptr" for arg in call.args)
        )
        if next(pointers, None) is not None:
            found.append(function.body)
    return found


def torch_npu_fallbacks(module: cst.CSTNode) -> list[cst.CSTNode]:
    """The ImportError handlers of a ``try`` that imports torch_npu (``try: import torch_npu ...
    except ImportError: <the CUDA path>``): torch_npu imports on every NPU host."""
    return [
        handler.body
        for node in iter_nodes(module, cst.Try)
        if any(import_root(i) == "torch_npu" for i in iter_nodes(node.body, (cst.Import, cst.ImportFrom)))
        for handler in node.handlers
        if catches_import_error(handler)
    ]


def _copied_flags(ctx, flags: frozenset[str]) -> tuple[str, ...]:
    """``flags`` and the names and attributes (``self.using_flash``) every binding of which in the
    file assigns a value true only when one of them is (``requires_flag``), followed to a fixed point;
    a name bound otherwise too (a parameter, a loop, an unpacking, ``+=``) is none."""
    values: dict[str, list[cst.BaseExpression]] = {}
    other: set[str] = set()
    for node in iter_nodes(ctx.module, (cst.Assign, cst.AnnAssign, cst.Param, *OTHER_BINDINGS)):
        value = node.value if isinstance(node, (cst.Assign, cst.AnnAssign)) else None
        targets = _targets(node)
        if value is not None and len(targets) == 1 and (name := dotted_name(targets[0])):
            values.setdefault(name, []).append(value)
        else:
            other.update(name for target in targets for name in _bound_names(target))
    found = set(flags)
    while True:
        more = {
            name
            for name, assigned in values.items()
            if name not in found and name not in other and all(requires_flag(value, *found) for value in assigned)
        }
        if not more:
            return tuple(found)
        found |= more


def _targets(node: cst.CSTNode) -> list[cst.BaseExpression]:
    """The targets of a binding (``a = b = x``: both)."""
    if isinstance(node, cst.Assign):
        return [t.target for t in node.targets]
    if isinstance(node, (cst.AsName, cst.Param)):
        return [node.name]
    return [node.target]


def _bound_names(target: cst.BaseExpression) -> list[str]:
    """The dotted names a target binds (``a``, ``self.x``, ``a, (self.b, *c)``)."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for element in target.elements for n in _bound_names(element.value)]
    if isinstance(target, cst.StarredElement):
        return _bound_names(target.value)
    name = dotted_name(target)
    return [name] if name else []


def _imports_flash_unguarded(module: cst.Module) -> bool:
    """A statement of the module's own imports flash-attn (not under an ``if`` or a ``try``)."""
    return any(
        isinstance(small, (cst.Import, cst.ImportFrom)) and import_root(small) in FLASH_PACKAGES
        for line in module.body
        if isinstance(line, cst.SimpleStatementLine)
        for small in line.body
    )


def _marked_cuda_kernel_test(ctx, definition: cst.FunctionDef | cst.ClassDef) -> bool:
    """``@pytest.mark.requires_cuda`` (a pytest mark with a ``cuda`` or ``gpu`` word) over a test that
    calls a CUDA kernel."""
    marked = False
    for decorator in definition.decorators:
        expr = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
        mark = ctx.resolver.qualified_name(expr) or ""
        if mark.startswith("pytest.mark."):
            marked |= bool(CUDA_MARK_WORDS & set(name_tokens(mark.rpartition(".")[2])))
    return marked and first_kernel(ctx, [definition.body]) is not None


def _module_marks(module: cst.Module) -> list[cst.BaseExpression]:
    """The marks of a test module's ``pytestmark = ...`` (one mark or a list of them)."""
    marks: list[cst.BaseExpression] = []
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Assign) and any(dotted_name(t.target) == "pytestmark" for t in small.targets):
                value = small.value
                marks += [e.value for e in value.elements] if isinstance(value, (cst.List, cst.Tuple)) else [value]
    return marks


def capability_flags(ctx) -> frozenset[str]:
    """Names true only where the CUDA compute capability says so (``major, _ =
    torch.cuda.get_device_capability()``, then ``SM90_AVAILABLE = major >= 9``): torch_npu answers
    None for the capability, so they are never true on an NPU host (a ``False`` start aside)."""
    if ctx.text is not None and b"get_device_capability" not in ctx.text and b"get_device_properties" not in ctx.text:
        return frozenset()
    names: set[str] = set()
    assigns = list(iter_nodes(ctx.module, cst.Assign))
    while True:  # follow `major` into `SM90_AVAILABLE = major >= 9`, to a fixed point
        more = {
            name
            for assign in assigns
            if any(_reads_capability(ctx, node, names) for node in iter_nodes(assign.value, (cst.Call, cst.Name)))
            for target in assign.targets
            for name in _bound_names(target.target)
        } - names
        if not more:
            return frozenset(names)
        names |= more


def _reads_capability(ctx, node: cst.CSTNode, names: set[str]) -> bool:
    if isinstance(node, cst.Name):
        return node.value in names
    return (ctx.resolver.qualified_name(node.func) or "") in CAPABILITY_QUERIES | NPU_CAPABILITY_QUERIES


def _skips_without_package(ctx, decorator: cst.Decorator | cst.BaseExpression, flags: frozenset[str]) -> bool:
    """``@pytest.mark.skipif(not HAVE_X, ...)`` / ``@unittest.skipUnless(is_x_installed(), ...)``: the
    test runs only where a CUDA-only package imports, or where a capability flag is true."""
    call = decorator.decorator if isinstance(decorator, cst.Decorator) else decorator
    if not isinstance(call, cst.Call) or not call.args or call.args[0].keyword is not None:
        return False
    skips_when_true = SKIP_DECORATORS.get(ctx.resolver.qualified_name(call.func) or "")
    if skips_when_true is None:
        return False
    return implies(call.args[0].value, not skips_when_true, lambda leaf: _package_present(leaf, flags))


def _skips_without_cuda(ctx, decorator: cst.Decorator) -> bool:
    """torch's distributed test decorators that skip wherever no CUDA (HPU, XPU) device is
    (``torch/testing/_internal/common_distributed.py``, torch 2.13: ``skip_if_lt_x_gpu(n)`` counts
    ``torch.cuda``, HPU and XPU devices, ``skip_if_no_gpu`` likewise, ``requires_nccl()`` asks c10d for
    NCCL): the test never runs on an NPU host (modded-nanogpt's vendored distributed_shampoo tests,
    round 40: 50 edits); not ``skip_if_lt_x_gpu(n, allow_cpu=True)``, which runs on a host without them."""
    call = decorator.decorator
    qualified = ctx.resolver.qualified_name(call.func if isinstance(call, cst.Call) else call) or ""
    if not qualified.startswith(DISTRIBUTED_TESTING) or qualified.rpartition(".")[2] not in CUDA_SKIPS:
        return False
    allow_cpu = isinstance(call, cst.Call) and any(
        arg.keyword is not None and arg.keyword.value == "allow_cpu" and code_of(arg.value) != "False"
        for arg in call.args
    )
    return not allow_cpu


def _package_present(test: cst.BaseExpression, flags: frozenset[str]) -> bool | None:
    """True where ``test`` being true means a CUDA-only package is installed."""
    if isinstance(test, cst.Name) and test.value in flags:
        return True
    if find_probe(test) is test:
        return True
    callee = dotted_name(test.func) if isinstance(test, cst.Call) else dotted_name(test)
    name = (callee or "").rpartition(".")[2]
    if PROBE_NAME.fullmatch(name) and PACKAGE_WORDS & set(name_tokens(name)[1:-1]):
        return True
    if HAS_NAME.fullmatch(name) and PACKAGE_WORDS & set(name_tokens(name.lstrip("_"))[1:]):
        return True  # SpecForge's `skipUnless(_has_standard_flash_attention(), ...)` (round 38)
    return None


def _after_package_skip(ctx, body: cst.IndentedBlock) -> list[cst.CSTNode]:
    """The statements of a function body after its first skip when a CUDA-only package is missing."""
    for index, statement in enumerate(body.body):
        if _imports_or_skips(ctx, statement):
            return list(body.body[index + 1 :])
    return []


def _naive_model_parallel(ctx) -> list[cst.CSTNode]:
    """In a project that never turns on transformers' naive model parallelism
    (analysis/naive_model_parallel.py): the bodies of ``if self.model_parallel:`` (also as the first
    operand of an ``and``) and of the ``parallelize``/``deparallelize`` methods."""
    found: list[cst.CSTNode] = []
    for node in iter_nodes(ctx.module, (cst.If, cst.FunctionDef)):
        if isinstance(node, cst.FunctionDef):
            if node.name.value in PARALLELIZE_METHODS:
                found.append(node.body)
            continue
        test = (
            node.test.left
            if isinstance(node.test, cst.BooleanOperation) and isinstance(node.test.operator, cst.And)
            else node.test
        )
        if isinstance(test, cst.Attribute) and test.attr.value == "model_parallel":
            found.append(node.body)
    return found


def _after_leaving(ctx) -> list[cst.CSTNode]:
    """The statements of a block after one that ends in ``raise`` or ``return`` (ReLoRA's ``raise
    RuntimeError("We removed pipeline parallelism ...")`` over the code it replaced): nothing runs them."""
    found: list[cst.CSTNode] = []
    for block in iter_nodes(ctx.module, cst.IndentedBlock):
        for index, statement in enumerate(block.body[:-1]):
            if isinstance(statement, cst.SimpleStatementLine) and isinstance(
                statement.body[-1], (cst.Raise, cst.Return)
            ):
                found.extend(block.body[index + 1 :])
                break
    return found


def _after_cuda_refusal(ctx) -> list[cst.CSTNode]:
    """The module statements after a module-level ``if`` that raises where no CUDA toolkit is
    (``if CUDA_HOME is None: raise RuntimeError("Cannot find CUDA_HOME...")``, ``if torch.version.cuda
    is None: raise ...``): a test the migration keeps and an NPU host fails (SpargeAttn's setup.py,
    round 31: its nvcc-flag loop after it)."""
    for index, statement in enumerate(ctx.module.body):
        if (
            isinstance(statement, cst.If)
            and statement.orelse is None
            and _no_cuda_toolkit(ctx, statement.test)
            and isinstance(statement.body, cst.IndentedBlock)
            and isinstance(last := statement.body.body[-1], cst.SimpleStatementLine)
            and isinstance(last.body[-1], cst.Raise)
        ):
            return list(ctx.module.body[index + 1 :])
    return []


def _no_cuda_toolkit(ctx, test: cst.BaseExpression) -> bool:
    """``CUDA_HOME is None`` / ``not CUDA_HOME`` (torch.utils.cpp_extension's), ``torch.version.cuda is None``."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        subject = test.expression
    elif (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, (cst.Is, cst.Equal))
        and isinstance(none := test.comparisons[0].comparator, cst.Name)
        and none.value == "None"
    ):
        subject = test.left
    else:
        return False
    qualified = ctx.resolver.qualified_name(subject) or ""
    return qualified in ("torch.utils.cpp_extension.CUDA_HOME", "torch.version.cuda")


def _skips_module(ctx, statement: cst.CSTNode) -> bool:
    """A module-level skip of the whole test module where a CUDA-only package is missing:
    ``pytest.importorskip("transformer_engine")``, or ``try: import transformer_engine`` / ``except
    ImportError: pytestmark = pytest.mark.skip(...)`` (or ``pytest.skip(..., allow_module_level=True)``)."""
    if isinstance(statement, cst.Try):
        return cuda_only_import(ctx, statement.body) is not None and any(
            catches_import_error(h) and (skips(ctx, h.body) or _marks_skip(ctx, h.body)) for h in statement.handlers
        )
    return _imports_or_skips(ctx, statement)


def _marks_skip(ctx, body: cst.BaseSuite) -> bool:
    """``pytestmark = pytest.mark.skip(...)`` in ``body``."""
    return any(
        any(dotted_name(t.target) == "pytestmark" for t in assign.targets)
        and isinstance(assign.value, cst.Call)
        and ctx.resolver.qualified_name(assign.value.func) == "pytest.mark.skip"
        for assign in iter_nodes(body, cst.Assign)
    )


def _imports_or_skips(ctx, statement: cst.CSTNode) -> bool:
    """``x = pytest.importorskip("flash_attn")`` or ``try: import flash_attn`` / ``except ImportError:
    pytest.skip(...)``."""
    if isinstance(statement, cst.Try):
        return any(catches_import_error(h) and skips(ctx, h.body) for h in statement.handlers) and (
            cuda_only_import(ctx, statement.body) is not None
        )
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for call in iter_nodes(statement, cst.Call):
        if ctx.resolver.qualified_name(call.func) == IMPORT_OR_SKIP and call.args:
            module = string_value(call.args[0].value)
            options = ctx.options
            if module and cuda_only_module(module, options.project.cuda_extensions, options.file.local_modules):
                return True
    return False
