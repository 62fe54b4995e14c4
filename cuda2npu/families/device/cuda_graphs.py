"""Code that captures CUDA graphs (``torch.cuda.CUDAGraph()``, ``with torch.cuda.graph(g):``,
``torch.cuda.make_graphed_callables(...)``). NPU601 leaves it as written (torch_npu's NPU graphs are
inference-only, ported by hand), so a device test that switches it on stays CUDA's: rewritten to
``"npu"`` it would run the kept torch.cuda capture on NPU tensors (NPU104, ``device_strings``).
Type annotations (``graph: torch.cuda.CUDAGraph``) capture nothing: no NPU601 there either, the
capture itself is marked."""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.core.names import dotted_name
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes

GRAPH_APIS = (  # rules/tables/torch_cuda_api.toml [unsupported]: the NPU601 graph entries
    "torch.cuda.CUDAGraph",
    "torch.cuda.graph",
    "torch.cuda.graphs",
    "torch.cuda.graph_pool_handle",
    "torch.cuda.make_graphed_callables",
)
GRAPH_TEXT = re.compile(rb"[Gg]raph")


def annotated(ctx, node: cst.CSTNode) -> bool:
    """``node`` is part of a type annotation (``graph: torch.cuda.CUDAGraph``, ``-> CUDAGraph``): a
    name nothing calls there."""
    return node in ctx.file_state(_annotation_nodes)


def _annotation_nodes(ctx) -> frozenset[cst.CSTNode]:
    return frozenset(n for a in iter_nodes(ctx.module, cst.Annotation) for n in iter_nodes(a))


def _direct_use(ctx, root: cst.CSTNode) -> str | None:
    """The first CUDA-graph API ``root`` reads outside type annotations (its qualified name)."""
    for node in iter_nodes(root, (cst.Attribute, cst.Name)):
        qualified = ctx.resolver.qualified_name(node) or ""
        if (qualified in GRAPH_APIS or qualified.startswith("torch.cuda.graphs.")) and not annotated(ctx, node):
            return qualified
    return None


def graph_functions(ctx) -> dict[str, str]:
    """The file's functions and methods that capture a CUDA graph themselves: name → the API."""
    return ctx.file_state(_graph_functions)


def _graph_functions(ctx) -> dict[str, str]:
    if ctx.text is not None and GRAPH_TEXT.search(ctx.text) is None:
        return {}
    found = {}
    for function in TreeIndex.of(ctx).functions:
        api = _direct_use(ctx, function.body)
        if api is not None:
            found.setdefault(function.name.value, api)
    return found


def graph_use(ctx, roots) -> str | None:
    """What in ``roots`` captures a CUDA graph, for a message: a graph API, or a call of the file's
    function (``_capture(...)``, ``self._capture(...)``) that uses one; None: nothing."""
    functions = graph_functions(ctx)
    if not functions:
        return None
    for root in roots:
        api = _direct_use(ctx, root)
        if api is not None:
            return f"`{api}`"
        for call in iter_nodes(root, cst.Call):
            callee = dotted_name(call.func) or ""
            name = callee.removeprefix("self.").removeprefix("cls.")
            if name in functions:
                return f"`{callee}`, which uses `{functions[name]}`"
    return None


def graph_classes(ctx) -> dict[cst.ClassDef, str]:
    """The file's classes with a method capturing a CUDA graph (directly or through the file's own
    function): class → what captures (:func:`graph_use`)."""
    return ctx.file_state(_graph_classes)


def _graph_classes(ctx) -> dict[cst.ClassDef, str]:
    if not graph_functions(ctx):
        return {}
    found = {}
    for node in iter_nodes(ctx.module, cst.ClassDef):
        use = graph_use(ctx, [m.body for m in node.body.body if isinstance(m, cst.FunctionDef)])
        if use is not None:
            found[node] = use
    return found
