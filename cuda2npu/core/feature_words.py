"""The words of a name that make it a CUDA feature switch (``HAS_CUDA_KERNELS``, ``enable_fused_norm``,
``use_triton``: rules/tables/torch_cuda_api.toml ``feature_switches``) and the operands a boolean
test is made of: what the CUDA gates, the kernel switches and the precision rules read."""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.core.catalogue import table

_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
CUDA_WORD = re.compile(r"(?:^|_)cuda(?:_|$)", re.IGNORECASE)  # `is_cuda`, `HAS_CUDA_KERNELS`, `dtw_cuda`


def name_tokens(name: str) -> list[str]:
    """``HAS_CUDA_KERNELS`` → [has, cuda, kernels]; ``enableFusedNorm`` → [enable, fused, norm]."""
    return [t.lower() for part in re.split(r"[^A-Za-z0-9]+", name) for t in _CAMEL.findall(part)]


def feature_word(name: str | None) -> str | None:
    """The word or phrase of ``name`` that names a CUDA-only feature, else None."""
    if not name:
        return None
    switches = table("torch_cuda_api")["feature_switches"]
    tokens = name_tokens(name)
    joined = f"_{'_'.join(tokens)}_"
    for phrase in switches["phrases"]:
        if f"_{phrase}_" in joined:
            return phrase
    return next((t for t in tokens if t in switches["words"]), None)


def cuda_library(qualified: str | None) -> str | None:
    """The CUDA-only library a qualified name belongs to (``apex.normalization.X`` → apex)."""
    if not qualified:
        return None
    root = qualified.split(".")[0]
    return root if root in table("torch_cuda_api")["feature_switches"]["libraries"] else None


def boolean_parts(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands a boolean value is made of: through ``and``/``or``/``not``, conditional
    expressions and comparisons (``x == True``)."""
    if isinstance(expr, cst.BooleanOperation):
        return boolean_parts(expr.left) + boolean_parts(expr.right)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        return boolean_parts(expr.expression)
    if isinstance(expr, cst.IfExp):
        return boolean_parts(expr.test) + boolean_parts(expr.body) + boolean_parts(expr.orelse)
    if isinstance(expr, cst.Comparison):
        return boolean_parts(expr.left) + [p for c in expr.comparisons for p in boolean_parts(c.comparator)]
    return [expr]


def implies(test: cst.BaseExpression, truth: bool, leaf) -> bool:
    """Whether ``test`` being ``truth`` means a condition holds, through ``not``/``and``/``or``;
    ``leaf(expr)``: True where ``expr`` being true means it holds, False where ``expr`` being false
    does, None where ``expr`` says nothing."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return implies(test.expression, not truth, leaf)
    if isinstance(test, cst.BooleanOperation):
        sides = (implies(test.left, truth, leaf), implies(test.right, truth, leaf))
        both = isinstance(test.operator, cst.And) != truth  # `and` false, `or` true: each side must say so
        return all(sides) if both else any(sides)
    found = leaf(test)
    return found is not None and found == truth
