"""Tests that switch a CUDA kernel on: ``if x.is_cuda: _C.box_iou(...)`` (NPU102),
``if impl == "cuda" and x.device.type == "cuda": _bias_act_cuda(...)`` (NPU104), ``if not
x.is_cuda: return F.layer_norm(...)`` followed by apex's ``FusedLayerNormAffineFunction.apply``
(gpt-neox), ``if x.is_cuda: return ball_query_cuda.forward(...)`` or ``import knn_cuda`` in the
branch (any CUDA-only code of ``analysis/cuda_gates.py``). Rewritten to the NPU they would send NPU
tensors into a kernel that is not there; they stay CUDA's (review), and the other branch, usually
the portable one, runs on the NPU as it did before the migration."""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.analysis.cuda_gates import cuda_branch, cuda_only_use
from cuda2npu.analysis.cuda_only_modules import APEX_EXTENSIONS, APEX_ROOTS, is_cuda_extension
from cuda2npu.core.bindings import self_assignments
from cuda2npu.core.feature_words import CUDA_WORD, feature_word, name_tokens
from cuda2npu.core.names import dotted_name, module_qualified, target_names
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes

# The feature words (rules/tables/torch_cuda_api.toml) that name a GPU kernel when a callee carries
# them; flash/xformers/te/fp8 name APIs the migration rewrites, nvtx and the vendor words no kernel.
KERNEL_WORDS = {
    "fused",
    "fuse",
    "fusion",
    "triton",
    "cudnn",
    "nvfuser",
    "cutlass",
    "kernel",
    "kernels",
    "liger",
    "bnb",
    "bitsandbytes",
    "megablocks",
    "cuda_kernel",
    "cuda_kernels",
    "cuda_ext",
    "cuda_extension",
    "custom_op",
}
TRITON_DECORATORS = {"triton.jit", "triton.autotune", "triton.heuristics"}
TORCH_OPS = ("aten", "prims", "npu", "c10d", "profiler", "higher_order")  # torch's and torch_npu's own torch.ops
EXTENSION_LOADERS = {"torch.utils.cpp_extension.load", "torch.utils.cpp_extension.load_inline"}
EXT_NAME = re.compile(r"[A-Za-z0-9]\w*_ext")  # `pointops_ext`; a bare `_ext` is one when setup.py builds it


def kernel_call(ctx, node: cst.If | cst.IfExp) -> str | None:
    """The first CUDA kernel in the branch ``node``'s test selects (``calls_kernel``); else the first
    CUDA-only import, call or reference there (``cuda_gates.cuda_only_use``)."""
    return first_kernel(ctx, cuda_branch(ctx, node))


def first_kernel(ctx, parts) -> str | None:
    """The name of the first CUDA kernel the code ``parts`` calls (``calls_kernel``), else of the
    first CUDA-only import, call or reference there (``cuda_gates.cuda_only_use``); None: none."""
    for part in parts:
        for call in iter_nodes(part, cst.Call):
            if calls_kernel(ctx, call):
                return dotted_name(call.func) or ""
    found = cuda_only_use(ctx, parts)
    return found[0].strip("`") if found else None


def calls_kernel(ctx, call: cst.Call) -> bool:
    """Whether ``call`` calls a CUDA kernel: a custom operator (``torch.ops.my_ext.gemm``, not torch's or
    torch_npu's namespaces), a callee other than torch's with a ``cuda`` word (not ``.cuda()``) or named
    for a GPU kernel technology (``_triton_entropy(x)``, ``fused_scale(x)``: ``KERNEL_WORDS``), a function
    of a compiled extension (a ``_C`` module of the project's, one its setup.py builds with
    CUDAExtension, a ``<name>_cuda`` module), of a module-level object named like a kernel
    (``my_kernel.forward(x)``: ``_kernel_receiver``) or of apex (its kernels are not migrated where they
    are called this way), or a Triton kernel of the file or a function of the file launching one
    (lit-llama's ``qlinear_4bit_weight(...)``: :func:`triton_functions`), or a class or function of
    the file that calls one of those unconditionally (GroundingDINO's
    ``MultiScaleDeformableAttnFunction.apply(...)``, whose ``forward`` calls ``_C``: :func:`kernel_wrappers`)."""
    return _calls_kernel_directly(ctx, call) or _wrapped(call.func) in kernel_wrappers(ctx)


def _calls_kernel_directly(ctx, call: cst.Call) -> bool:
    """``calls_kernel`` without the file's wrappers."""
    name = dotted_name(call.func) or ""
    qualified = ctx.resolver.qualified_name(call.func) or name
    if qualified.startswith("torch.ops."):
        return qualified.split(".")[2] not in TORCH_OPS
    if qualified.split(".")[0] in ("torch", "torch_npu"):
        return False
    last = name.rpartition(".")[2]
    module = qualified.rpartition(".")[0]
    return bool(
        (CUDA_WORD.search(last) and last != "cuda" and not _moves_to_cuda(last) and name not in _string_getters(ctx))
        or (feature_word(last) or "") in KERNEL_WORDS
        or qualified.split(".")[0] in APEX_ROOTS + APEX_EXTENSIONS
        or (
            module
            and (module.rpartition(".")[2] == "_C" or is_cuda_extension(module, ctx.options.project.cuda_extensions))
            and not _local(ctx, module.partition(".")[0], imports=False)
        )
        or _kernel_receiver(ctx, call.func)
        or _extension_receiver(ctx, call.func)
        or _kernel_attribute(ctx, call.func)
        or _launched(call.func) in triton_functions(ctx)
    )


def _string_getters(ctx) -> frozenset[str]:
    """The file's module-level functions that call nothing and return string literals only (SUPIR's
    ``get_cuda_device_string()``, which returns ``"cuda"``): named for CUDA or not, they run no kernel."""
    return ctx.file_state(_string_getter_functions)


def _string_getter_functions(ctx) -> frozenset[str]:
    found = set()
    for statement in ctx.module.body:
        if not isinstance(statement, cst.FunctionDef) or next(iter_nodes(statement.body, cst.Call), None) is not None:
            continue
        returned = [r.value for r in iter_nodes(statement.body, cst.Return)]
        if returned and all(isinstance(value, cst.SimpleString) for value in returned):
            found.add(statement.name.value)
    return frozenset(found)


def _moves_to_cuda(name: str) -> bool:
    """``name`` is a helper moving data to the GPU (``to_cuda``, ``batch_to_cuda``, co-tracker's
    ``dataclass_to_cuda_``, round 46), not a kernel: its ``cuda`` follows ``to``."""
    tokens = name_tokens(name)
    return any(token == "cuda" and index > 0 and tokens[index - 1] == "to" for index, token in enumerate(tokens))


def _wrapped(func: cst.BaseExpression) -> str | None:
    """The file-level name a call goes through: ``f(...)``, ``Cls(...)``, ``Cls.apply(...)`` → its name."""
    if isinstance(func, cst.Attribute) and func.attr.value in ("apply", "forward"):
        func = func.value
    return func.value if isinstance(func, cst.Name) else None


def kernel_wrappers(ctx) -> frozenset[str]:
    """The module-level functions and classes of the file that call a CUDA kernel outside any ``if`` or
    ``try`` (an autograd ``Function`` whose ``forward`` calls ``_C.ms_deform_attn_forward``): calling
    them calls the kernel. One level: a wrapper of a wrapper is not followed."""
    return ctx.file_state(_kernel_wrappers)


def _kernel_wrappers(ctx) -> frozenset[str]:
    found = set()
    for statement in ctx.module.body:
        if isinstance(statement, cst.ClassDef):
            bodies = [f.body for f in statement.body.body if isinstance(f, cst.FunctionDef)]
        elif isinstance(statement, cst.FunctionDef):
            bodies = [statement.body]
        else:
            continue
        unconditional = [s for body in bodies for s in body.body if not isinstance(s, (cst.If, cst.Try))]
        if any(_calls_kernel_directly(ctx, call) for part in unconditional for call in iter_nodes(part, cst.Call)):
            found.add(statement.name.value)
    return frozenset(found)


def _launched(func: cst.BaseExpression) -> str | None:
    """The name a call calls: ``f(...)`` → ``f``, a Triton launch ``kernel[grid](...)`` → ``kernel``."""
    if isinstance(func, cst.Subscript):
        func = func.value
    return func.value if isinstance(func, cst.Name) else None


def triton_functions(ctx) -> frozenset[str]:
    """The file's Triton kernels (``@triton.jit``, ``@triton.autotune(...)``, also where a failed import
    binds ``triton = None``) and the file's functions launching one (``kernel[grid](...)``), by name:
    tuned for CUDA GPUs; Triton on an NPU host is triton-ascend, if installed, where they are untested."""
    return ctx.file_state(_triton_functions)


def _triton_functions(ctx) -> frozenset[str]:
    if ctx.text is not None and b"triton" not in ctx.text:
        return frozenset()
    functions = TreeIndex.of(ctx).functions
    kernels = {f.name.value for f in functions if any(_triton_decorator(ctx, d) for d in f.decorators)}
    launchers = {
        function.name.value
        for function in functions
        if any(
            isinstance(call.func, cst.Subscript) and _launched(call.func) in kernels
            for call in iter_nodes(function.body, cst.Call)
        )
    }
    return frozenset(kernels | launchers)


def _triton_decorator(ctx, decorator: cst.Decorator) -> bool:
    """``@triton.jit``, ``@triton.autotune(...)``, ``@triton.heuristics(...)``."""
    expr = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
    qualified = module_qualified(ctx.resolver.module_scope, expr) or dotted_name(expr) or ""
    return qualified in TRITON_DECORATORS


def _extension_receiver(ctx, func: cst.BaseExpression) -> bool:
    """``ext_module.ms_deform_attn_forward(...)`` where the file binds ``ext_module =
    ext_loader.load_ext("_ext", [...])`` (mmcv) or ``torch.utils.cpp_extension.load(...)`` at module
    level: a function of a compiled extension, whatever the object is named."""
    receiver = dotted_name(func.value) if isinstance(func, cst.Attribute) else None
    return receiver is not None and receiver in ctx.file_state(_extension_objects)


def _extension_objects(ctx) -> frozenset[str]:
    """The module-level names the file binds to a compiled extension it loads."""
    if ctx.text is not None and b"load" not in ctx.text:
        return frozenset()
    found = set()
    for statement in ctx.module.body:
        for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Assign) and isinstance(small.value, cst.Call):
                name = dotted_name(small.value.func) or ""
                qualified = ctx.resolver.qualified_name(small.value.func) or name
                if name.rpartition(".")[2] == "load_ext" or qualified in EXTENSION_LOADERS:
                    found.update(n for t in small.targets if (n := dotted_name(t.target)))
    return frozenset(found)


def _kernel_attribute(ctx, func: cst.BaseExpression) -> bool:
    """``self.norm_fn.apply(...)`` where the file binds ``self.norm_fn = FusedRMSNormAffineFunction``,
    an apex function (gpt-neox's MixedFusedRMSNorm): the method of an attribute holding a kernel."""
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Attribute)):
        return False
    if dotted_name(func.value.value) != "self":
        return False
    values = [value for _, value in self_assignments(ctx).get(func.value.attr.value, [])]
    names = {dotted_name(value) for value in values}
    if len(names) != 1 or None in names:
        return False  # an attribute assigned something else than one name
    return _calls_kernel_directly(ctx, cst.Call(func=cst.Attribute(values[0], func.attr)))


def _kernel_receiver(ctx, func: cst.BaseExpression) -> bool:
    """``func`` is a method of a module-level object named like a kernel or an extension module
    (``my_kernel.forward``, ``ops.nms_cuda.run``, ``pointops_ext.group``: a ``cuda`` word, a
    ``KERNEL_WORDS`` one, an ``_ext`` suffix after a name) whose first name no function or class of
    the file binds: an import, a module-level binding (``my_kernel = load(...)``) or a name the file
    never binds. Not ``kernel.cuda()`` on a local tensor named ``kernel``, nor a loop's or comprehension's
    variable."""
    receiver = dotted_name(func.value) if isinstance(func, cst.Attribute) else None
    if receiver is None:
        return False
    root, _, _ = receiver.partition(".")
    part = receiver.rpartition(".")[2]
    if not (CUDA_WORD.search(part) or (feature_word(part) or "") in KERNEL_WORDS or EXT_NAME.fullmatch(part)):
        return False
    return not _local(ctx, root)


def _local(ctx, name: str, imports: bool = True) -> bool:
    """``name`` is bound in a function or class of the file (by an import there too, with ``imports``),
    or by a loop or comprehension (``[rng_cuda.manual_seed(s) for rng_cuda in self.rng_cuda]``): a
    local, not a module."""
    if name in ctx.file_state(_loop_targets):
        return True
    module = ctx.resolver.module_scope
    scopes = [s for s in ctx.resolver.scopes.values() if s is not module]
    return any((imports and name in s.imports) or name in s.others for s in scopes)


def _loop_targets(ctx) -> frozenset[str]:
    """The names the file's ``for`` statements and comprehensions bind (consistency_models' CUDA
    generators, ``for i, rng_cuda in enumerate(self.rng_cuda)``, round 37)."""
    return frozenset(
        name for node in iter_nodes(ctx.module, (cst.For, cst.CompFor)) for name in target_names(node.target)
    )
