"""Installed-distribution lookups of CUDA-only packages (NPU607): ``version("flash-attn")`` raises
where the package cannot be installed."""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.analysis.cuda_only_modules import (
    cuda_only_distribution,
    cuda_only_distributions,
)
from cuda2npu.core.imports import IMPORT_ERRORS, catches
from cuda2npu.core.literals import string_value
from cuda2npu.core.names import dotted_name
from cuda2npu.core.nodes import code_of
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import flat_tree, iter_nodes
from cuda2npu.families.custom_kernels.fallbacks import guards_import

# importlib.metadata and pkg_resources lookups of an installed distribution -> what they raise without it
DISTRIBUTION_LOOKUPS = {
    "importlib.metadata.version": "PackageNotFoundError",
    "importlib.metadata.distribution": "PackageNotFoundError",
    "importlib.metadata.metadata": "PackageNotFoundError",
    "importlib_metadata.version": "PackageNotFoundError",
    "importlib_metadata.distribution": "PackageNotFoundError",
    "pkg_resources.get_distribution": "DistributionNotFound",
}

LOOKUP_ERRORS = IMPORT_ERRORS | {"PackageNotFoundError", "DistributionNotFound"}  # ImportError: their base

DISTRIBUTIONS = cuda_only_distributions()


@register
class CudaOnlyDistributionLookups(Rule):
    """NPU607: ``version("flash-attn")`` and the like raise on an NPU host, where the distribution
    cannot be installed (gpt-neox checks flash-attn's version while reading its arguments)."""

    codes = ("NPU607",)
    # a quoted first word of a distribution in rules/tables/cuda_only_packages.toml ("flash-attn")
    triggers = (r"""["'](?:""" + "|".join(sorted({re.escape(re.split(r"[-*\[]", d)[0]) for d in DISTRIBUTIONS})) + ")",)
    requires = (r"\b(?:version|distribution|metadata|get_distribution)\s*\(",)

    def visit_Call(self, node: cst.Call) -> None:
        if not node.args or node.args[0].keyword is not None or node.args[0].star:
            return
        name = string_value(node.args[0].value)
        qualified = self.resolver.qualified_name(node.func) or ""
        if name is None or qualified not in DISTRIBUTION_LOOKUPS:
            return
        found = cuda_only_distribution(name)
        if found is None or self._guarded(node, found[0]):
            return
        error = DISTRIBUTION_LOOKUPS[qualified]
        self.report(
            "NPU607",
            node,
            f"`{code_of(node.func)}({name!r})` raises {error} where `{name}` is not installed, as on an NPU "
            f"host ({found[1].split(' (')[0]}): drop the check or answer it without the package",
        )

    def _guarded(self, node: cst.Call, modules: tuple[str, ...]) -> bool:
        """Inside a ``try`` that catches the lookup's error (or ImportError, its base), an ``if``
        that probes the package's availability, the right of such an ``and``
        (``is_bitsandbytes_available() and version("bitsandbytes")``) or the value such a conditional
        expression chooses when the probe is true, or in a function that imports
        the package first (Megatron's ``get_te_version_str``: the import is what fails)."""
        index = TreeIndex.of(self.ctx)
        child, parent = node, index.parents.get(node)
        while parent is not None and not isinstance(parent, cst.BaseStatement):
            if isinstance(parent, cst.BooleanOperation) and isinstance(parent.operator, cst.And):
                if child is parent.right and guards_import(parent.left):
                    return True
            if isinstance(parent, cst.IfExp) and child is parent.body and guards_import(parent.test):
                return True  # trl's `version("bitsandbytes") if is_bitsandbytes_available() else "not installed"`
            child, parent = parent, index.parents.get(parent)
        function = index.function.get(self.ctx.statement)
        tree, _, _ = flat_tree(self.ctx.module)
        if function is not None and any(
            (dotted_name(imported) or "").split(".")[0] in modules and tree.span(statement) < tree.span(node)
            for statement in iter_nodes(function.body, (cst.Import, cst.ImportFrom))
            for imported in (
                [a.name for a in statement.names] if isinstance(statement, cst.Import) else [statement.module]
            )
            if imported is not None
        ):
            return True
        for owner, role in index.enclosing(self.ctx.statement):
            if role != "body":
                continue
            if isinstance(owner, cst.Try) and any(catches(h, LOOKUP_ERRORS) for h in owner.handlers):
                return True
            if isinstance(owner, cst.If) and guards_import(owner.test):
                return True
        return False
