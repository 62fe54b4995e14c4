"""The apex names the generated ``apex_npu_optimizers.py`` provides (``cuda2npu/templates``), and how
the apex rules point a reference there (NPU301, NPU302, NPU304, NPU306).

The generated file holds apex's optimizers without a torch counterpart and amp_C's multi-tensor
kernels, in plain PyTorch with apex's arguments, math and state layout. A reference
(``FusedLAMB``, ``apex.optimizers.FusedLAMB``, ``amp_C.multi_tensor_l2norm``) becomes
``apex_npu_optimizers.<name>``; the file then imports ``apex_npu_optimizers`` (``from . import
apex_npu_optimizers`` inside a package, added by NPU330's finalizer), its apex import goes once nothing
else uses it, and ``migrate`` writes the file next to it (``cuda2npu/project/companions.py``).
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.imports import bound_name, import_root
from cuda2npu.core.names import NameUses
from cuda2npu.core.nodes import expression, root_name
from cuda2npu.core.traversal import iter_nodes, walk
from cuda2npu.families.apex.common import APEX_ROOTS, FileEdits, enabled, import_guarded

COMPANION = "apex_npu_optimizers.py"
MODULE = "apex_npu_optimizers"
# apex optimizers whose every reference goes to the generated class of the same name (FusedAdam's
# calls go there only when no torch_npu/torch class computes them: NPU301)
OPTIMIZERS = {
    "apex.optimizers.FusedLAMB": "NPU302",
    "apex.optimizers.FusedNovoGrad": "NPU304",
    "apex.optimizers.FusedMixedPrecisionLamb": "NPU304",
}
KERNELS = {  # amp_C kernels and apex.multi_tensor_apply names -> the generated module's
    "amp_C.multi_tensor_l2norm": "multi_tensor_l2norm",
    "amp_C.multi_tensor_scale": "multi_tensor_scale",
    "amp_C.multi_tensor_axpby": "multi_tensor_axpby",
    "apex.multi_tensor_apply.multi_tensor_applier": "multi_tensor_applier",
    "apex.multi_tensor_apply.MultiTensorApply": "MultiTensorApply",
    "apex.multi_tensor_apply.multi_tensor_apply.MultiTensorApply": "MultiTensorApply",
}


def point_to_generated(rule, code: str, node: cst.BaseExpression, name: str, message: str) -> None:
    """Report ``node`` (an expression naming an apex object) rewritten to ``apex_npu_optimizers.<name>``."""
    if not enabled(rule.ctx, code):  # nothing is rewritten: the apex import must stay
        return
    tier = Tier.REVIEW
    rule.edits.drop_ref(root_name(node), tier)
    module, obj = (".", MODULE) if rule.options.file.in_package else (MODULE, None)
    rule.edits.need_import(code, tier, module, obj)
    rule.report(
        code,
        node,
        message,
        lambda _: expression(f"{MODULE}.{name}"),
        tier=tier,
        needs_torch_npu=False,
        companion=COMPANION,
    )


class ApexBindings:
    """The names a file's apex imports bind: the Name nodes that read them, and whether an import
    binding a name sits in a ``try`` that catches ImportError (the file's own fallback for apex)."""

    def __init__(self, ctx) -> None:
        self._statements: dict[str, list[cst.CSTNode]] = {}
        for statement, small in _apex_imports(ctx.module):
            for name in _bound(small):
                self._statements.setdefault(name, []).append(statement)
        uses = NameUses(set(self._statements), ctx.resolver.scopes)
        walk(ctx.module, uses)
        self.reads = {node for nodes in uses.uses.values() for node in nodes}
        self._index = FileEdits.of(ctx).index

    @classmethod
    def of(cls, ctx) -> "ApexBindings":
        """The file's bindings, shared by the apex rules of the traversal."""
        return ctx.file_state(cls)

    def reads_apex(self, node: cst.BaseExpression) -> bool:
        """``node``'s root name reads a name an apex import binds."""
        return root_name(node) in self.reads

    def guarded(self, name: str) -> bool:
        return any(import_guarded(self._index, statement) for statement in self._statements.get(name, []))


def _apex_imports(module: cst.Module):
    """(statement, import) for every apex/amp_C import of the file, functions and blocks included."""
    return [
        (line, small)
        for line in iter_nodes(module, (cst.SimpleStatementLine, cst.SimpleStatementSuite))
        for small in line.body
        if isinstance(small, (cst.Import, cst.ImportFrom)) and import_root(small) in APEX_ROOTS
    ]


def _bound(node: cst.Import | cst.ImportFrom) -> list[str]:
    """The names an apex import binds (none for a star import)."""
    if isinstance(node, cst.ImportFrom) and isinstance(node.names, cst.ImportStar):
        return []
    return [bound_name(alias, node) for alias in node.names]
