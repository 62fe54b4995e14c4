"""Code only a torch older than every maintained torch_npu runs: never on an NPU host.

Such code is the branch a ``version.parse(torch.__version__) < version.parse("1.6")`` test takes (the
``else`` of ``>= "1.6"``; ``LooseVersion``, ``Version``, ``parse_version`` too), and the ``if`` blocks
a module flag opens that only such a branch sets (``_use_apex = False`` at module level,
``_use_apex = True`` in the branch, ``if fp16 and _use_apex:``). The oldest torch a maintained
torch_npu release is built for is 2.1.0 (docs/reference/torch_npu.md §7); the end-of-life ones
went back to torch 1.5.0.
"""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.core.bindings import assigned_values
from cuda2npu.core.literals import literal, string_value
from cuda2npu.core.names import dotted_name
from cuda2npu.core.traversal import iter_nodes

OLDEST_TORCH = (2, 1, 0)  # the torch of the oldest maintained torch_npu (2.1.0.post10, §7)
PARSERS = ("parse", "Version", "LooseVersion", "StrictVersion", "parse_version")
TORCH_VERSION = "torch.__version__"
# the blocks `torch < X` rules out when X is at most (`<`, `>=`) or below (`<=`, `>`) the oldest torch
DEAD_BLOCK = {
    cst.LessThan: "body",
    cst.LessThanEqual: "body",
    cst.GreaterThanEqual: "orelse",
    cst.GreaterThan: "orelse",
}
INCLUSIVE = (cst.LessThan, cst.GreaterThanEqual)


def old_torch_code(ctx) -> frozenset[cst.CSTNode]:
    """Every node of the file of ``ctx`` that runs only under a torch older than every maintained
    torch_npu (computed once per file)."""
    return ctx.file_state(_old_torch_nodes)


def old_torch_only(ctx, node: cst.CSTNode) -> bool:
    """Whether ``node`` runs only under a torch older than every maintained torch_npu."""
    return node in old_torch_code(ctx)


def _old_torch_nodes(ctx) -> frozenset[cst.CSTNode]:
    if ctx.text is not None and b"__version__" not in ctx.text:
        return frozenset()
    blocks = [block for branch in iter_nodes(ctx.module, cst.If) for block in _old_torch_block(branch)]
    if not blocks:
        return frozenset()
    flags = _old_torch_flags(ctx.module, blocks)
    blocks += [branch.body for branch in iter_nodes(ctx.module, cst.If) if _opened_by(branch.test, flags)]
    return frozenset(node for block in blocks for node in iter_nodes(block))


def _old_torch_block(branch: cst.If) -> list[cst.CSTNode]:
    """The block of ``branch`` that runs only under an old torch (none or one)."""
    test = branch.test
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1 or not _parsed(test.left, TORCH_VERSION):
        return []
    comparison = test.comparisons[0]
    role = DEAD_BLOCK.get(type(comparison.operator))
    bound = _version(comparison.comparator)
    if role is None or bound is None:
        return []
    older = bound <= OLDEST_TORCH if isinstance(comparison.operator, INCLUSIVE) else bound < OLDEST_TORCH
    block = branch.body if role == "body" else branch.orelse
    return [block] if older and block is not None else []


def _parsed(node: cst.BaseExpression, text: str | None = None) -> cst.BaseExpression | None:
    """The argument of ``version.parse(x)`` (any of PARSERS), when it is ``text`` if given."""
    if not isinstance(node, cst.Call) or len(node.args) != 1:
        return None
    name = (dotted_name(node.func) or "").rpartition(".")[2]
    argument = node.args[0].value
    return argument if name in PARSERS and (text is None or dotted_name(argument) == text) else None


def _version(node: cst.BaseExpression) -> tuple[int, ...] | None:
    """``(1, 6, 0)`` for ``version.parse("1.6")``."""
    argument = _parsed(node)
    match = re.match(r"\d+(\.\d+)*", (string_value(argument) if argument is not None else None) or "")
    return (tuple(int(part) for part in match.group().split(".")) + (0, 0))[:3] if match else None


def _old_torch_flags(module: cst.Module, blocks: list[cst.CSTNode]) -> set[str]:
    """The names ``blocks`` set truthy that are only ``False`` / ``None`` everywhere else."""
    inside: dict[str, list[cst.BaseExpression]] = {}
    for block in blocks:
        for node in iter_nodes(block, cst.Assign):
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    inside.setdefault(target.target.value, []).append(node.value)
    flags = set()
    for name, set_there in inside.items():
        values = assigned_values(module, name)
        elsewhere = [value for value in values or () if not any(value is there for there in set_there)]
        on_there = any(literal(value) not in (False, None) for value in set_there)
        if values is not None and on_there and all(literal(value) in (False, None) for value in elsewhere):
            flags.add(name)
    return flags


def _opened_by(test: cst.BaseExpression, flags: set[str]) -> bool:
    """``flag`` or ``... and flag and ...``: the test is false while ``flag`` is."""
    if isinstance(test, cst.Name):
        return test.value in flags
    return (
        isinstance(test, cst.BooleanOperation)
        and isinstance(test.operator, cst.And)
        and (_opened_by(test.left, flags) or _opened_by(test.right, flags))
    )
