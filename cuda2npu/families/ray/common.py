"""Helpers shared by the Ray rules: whether the file uses Ray, whether the project's Ray knows the
"NPU" resource, keyword arguments, literal resource dicts."""

from __future__ import annotations

import functools
import re

import libcst as cst

from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import string_value
from cuda2npu.core.pins import pin_predates
from cuda2npu.core.traversal import iter_nodes

NPU = "NPU"  # Ray's resource name of Ascend cards (python/ray/_private/accelerators/npu.py)
FIRST_NPU_RAY = "2.9.0"  # the first release detecting Ascend cards as "NPU" (docs/reference/ray.md §1)
RAY_IMPORT = re.compile(rb"^\s*(?:import|from)\s+ray\b", re.MULTILINE)


def imports_ray(ctx) -> bool:
    """Whether the file imports Ray (computed once per file)."""
    return ctx.file_state(_imports_ray)


def _imports_ray(ctx) -> bool:
    if ctx.text is not None:
        return RAY_IMPORT.search(ctx.text) is not None
    for node in iter_nodes(ctx.module, (cst.Import, cst.ImportFrom)):
        names = [a.name for a in node.names] if isinstance(node, cst.Import) else [node.module]
        if any(_root(name) == "ray" for name in names if name is not None):
            return True
    return False


def _root(node: cst.BaseExpression) -> str:
    while isinstance(node, cst.Attribute):
        node = node.value
    return node.value if isinstance(node, cst.Name) else ""


def ray_without_npu(options) -> str | None:
    """The project's Ray pin (``ray==2.6.3``) when it allows no release with the "NPU" resource, else None."""
    spec = pin_predates(options.project.pins, "ray", FIRST_NPU_RAY)
    return f"ray{spec}" if spec else None


def report_npu(rule, code: str, node: cst.CSTNode, message: str, fix, statement=None, **kw) -> None:
    """``rule.report`` of a rewrite that asks Ray for "NPU"; a review item without the fix where
    the project pins a Ray that does not know that resource (the request would never be placed).
    ``statement``: where its marker goes when ``node`` is not in the statement the traversal is at."""
    report = rule.report if statement is None else functools.partial(rule.report_in, statement)
    pin = ray_without_npu(rule.options)
    if pin is None:
        report(code, node, message, fix, **kw)
        return
    kw.pop("imports", None)
    report(
        code,
        node,
        f'{message}; not rewritten: the pin `{pin}` predates Ray\'s "{NPU}" resource ({FIRST_NPU_RAY} detects '
        f"Ascend cards): upgrade Ray, or start every node with `--resources='{{\"{NPU}\": <cards>}}'`, then make the change",
        **{**kw, "tier": Tier.REVIEW},
    )


def has_double_star(call: cst.Call) -> bool:
    return any(a.star == "**" for a in call.args)


def literal_dict(node: cst.BaseExpression | None) -> cst.Dict | None:
    """``node`` if it is a dict display without ``**`` entries and with string keys only."""
    if not isinstance(node, cst.Dict):
        return None
    entries = node.elements
    if all(isinstance(e, cst.DictElement) and string_value(e.key) is not None for e in entries):
        return node
    return None


def entry(mapping: cst.Dict, key: str) -> cst.DictElement | None:
    return next((e for e in mapping.elements if string_value(e.key) == key), None)


def with_entry(mapping: cst.Dict, key: str, value: cst.BaseExpression) -> cst.Dict:
    """``mapping`` with ``"key": value`` appended (the separator of its first entry copied)."""
    elements = list(mapping.elements)
    new = cst.DictElement(cst.SimpleString(f'"{key}"'), value)
    if elements:
        comma = elements[0].comma if len(elements) > 1 else cst.MaybeSentinel.DEFAULT
        last = elements[-1]
        trailing = last.comma
        separator = comma if isinstance(comma, cst.Comma) else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        elements[-1] = last.with_changes(comma=separator)
        new = new.with_changes(comma=trailing)
    return mapping.with_changes(elements=[*elements, new])


def renamed_key(mapping: cst.Dict, old: str, new: str) -> cst.Dict:
    """``mapping`` with the key ``"old"`` spelled ``"new"`` (its quotes kept)."""
    elements = []
    for element in mapping.elements:
        if isinstance(element, cst.DictElement) and string_value(element.key) == old:
            quote = element.key.value[0] if isinstance(element.key, cst.SimpleString) else '"'
            element = element.with_changes(key=cst.SimpleString(f"{quote}{new}{quote}"))
        elements.append(element)
    return mapping.with_changes(elements=elements)
