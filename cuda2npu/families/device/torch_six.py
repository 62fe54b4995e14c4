"""NPU116: ``torch._six``, removed from torch 2.0, imported.

Every maintained torch_npu is built for torch 2.1 or later (docs/reference/torch_npu.md §7), and torch
2.0 removed ``torch._six`` (pytorch/pytorch#94709): ``from torch._six import inf`` (MAE's and DeiT's
``util/misc.py``, round 36) raises ModuleNotFoundError on an NPU host. Its names are the standard
library's (torch 1.6's ``torch/_six.py``): ``inf`` and ``nan`` are ``math``'s, ``string_classes`` is
``(str, bytes)``, ``int_classes`` is ``int``, ``container_abcs`` is ``collections.abc``. A
``from torch._six import ...`` of only those names becomes them (exact, on any torch); another name, or
``torch._six`` used as a module, is a manual item. Not an import a ``try`` falls back from.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.imports import catches_import_error
from cuda2npu.core.names import dotted_name
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex

MODULE = "torch._six"
# name -> the statement binding it as `torch._six` did (`{alias}`: the name it is bound to)
REPLACEMENTS = {
    "inf": "from math import inf as {alias}",
    "nan": "from math import nan as {alias}",
    "string_classes": "{alias} = (str, bytes)",
    "int_classes": "{alias} = int",
    "container_abcs": "import collections.abc as {alias}",
}
REMOVED = "`torch._six` was removed in torch 2.0 and every maintained torch_npu needs torch 2.1 or later"


@register
class TorchSix(Rule):
    codes = ("NPU116",)
    triggers = (r"torch\._six\b|\b_six\b",)
    requires = (r"_six",)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if len(node.body) != 1 or not isinstance(node.body[0], cst.ImportFrom):
            return
        statement = node.body[0]
        if statement.relative or dotted_name(statement.module) != MODULE or self._tried(node):
            return
        if isinstance(statement.names, cst.ImportStar):
            self._manual(node, "`from torch._six import *`")
            return
        names = [
            (dotted_name(a.name), a.asname.name.value if a.asname else dotted_name(a.name)) for a in statement.names
        ]
        unknown = [name for name, _ in names if name not in REPLACEMENTS]
        if unknown:
            self._manual(node, f"`{', '.join(unknown)}` of `torch._six`")
            return
        lines = [
            REPLACEMENTS[name].format(alias=alias).replace(f"import {name} as {name}", f"import {name}")
            for name, alias in names
        ]
        self.report(
            "NPU116",
            node,
            f"{REMOVED}: {'; '.join(f'`{line}`' for line in lines)} (the standard library's, as torch._six had them)",
            fix=lambda original: _replaced(original, lines),
            needs_torch_npu=False,
        )

    def visit_Import(self, node: cst.Import) -> None:
        if any(dotted_name(alias.name) == MODULE for alias in node.names) and not self._tried(node):
            self._manual(node, "`import torch._six`")

    def _tried(self, node: cst.CSTNode) -> bool:
        """``node`` is in the body of a ``try`` with a handler for a failed import (its fallback)."""
        index = TreeIndex.of(self.ctx)
        child, parent = node, index.parents.get(node)
        while parent is not None:
            if isinstance(parent, cst.Try) and child is parent.body:
                if any(catches_import_error(handler) for handler in parent.handlers):
                    return True
            child, parent = parent, index.parents.get(parent)
        return False

    def _manual(self, node: cst.CSTNode, what: str) -> None:
        self.report(
            "NPU116",
            node,
            f"{REMOVED}: {what} fails at import there; use the standard library's names (`math.inf`, "
            "`(str, bytes)`, `int`, `collections.abc`) or torch's own",
            tier=Tier.MANUAL,
            needs_torch_npu=False,
        )


def _replaced(line: cst.SimpleStatementLine, lines: list[str]) -> cst.SimpleStatementLine | cst.FlattenSentinel:
    """The import line replaced by one statement per name, its comments kept on the first."""
    statements = [cst.parse_statement(text) for text in lines]
    first = statements[0].with_changes(leading_lines=line.leading_lines, trailing_whitespace=line.trailing_whitespace)
    return first if len(statements) == 1 else cst.FlattenSentinel([first, *statements[1:]])
