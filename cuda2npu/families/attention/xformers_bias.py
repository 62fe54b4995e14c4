"""What an ``attn_bias`` argument of xFormers' ``memory_efficient_attention`` is, read from the file.

Kinds (docs/reference/xformers.md §3): ``none`` (absent or ``None``), ``top-left``
(``LowerTriangularMask()``), ``bottom-right`` (``LowerTriangularFromBottomRightMask()``),
``tensor`` (an additive ``torch.Tensor`` the file visibly builds), a :class:`Conditional` of the
two mask kinds and ``none`` (``LowerTriangularMask() if causal else None``), or a :class:`Unknown`
saying why the kind cannot be seen (then the call is marked, never guessed).

A name is followed to its one assignment in the enclosing function (else the module); a
parameter, a second assignment or any other binding of it makes it unknown.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import libcst as cst

from cuda2npu.core.bindings import assigned_values, single_value
from cuda2npu.core.literals import literal
from cuda2npu.core.nodes import code_of, is_pure

_PACKAGES = ("xformers.ops.", "xformers.ops.fmha.", "xformers.ops.fmha.attn_bias.")
MASKS = {
    **{f"{p}LowerTriangularMask": "top-left" for p in _PACKAGES},
    "xformers.ops.fmha.attn_bias.LowerTriangularFromBottomRightMask": "bottom-right",
}
# torch functions and tensor methods that give a tensor (an AttentionBias has none of these methods but `to`)
TORCH_FACTORIES = {
    "zeros",
    "ones",
    "full",
    "empty",
    "rand",
    "randn",
    "tensor",
    "as_tensor",
    "where",
    "triu",
    "tril",
    "cat",
    "stack",
    "zeros_like",
    "ones_like",
    "full_like",
    "empty_like",
    "arange",
    "log",
}
TENSOR_METHODS = {
    "to",
    "float",
    "half",
    "bfloat16",
    "type_as",
    "masked_fill",
    "expand",
    "expand_as",
    "repeat",
    "view",
    "reshape",
    "unsqueeze",
    "contiguous",
    "triu",
    "tril",
    "log",
    "clone",
}


@dataclass(frozen=True)
class Unknown:
    """The bias's kind cannot be seen (or is one without a faithful rewrite): why."""

    reason: str


@dataclass(frozen=True)
class Conditional:
    """``<mask> if test else None`` (or the other way round): ``kind`` when ``test`` holds, else no mask."""

    kind: str
    test: cst.BaseExpression
    negated: bool  # the mask is the else branch


def bias_kind(rule, expr: cst.BaseExpression | None, scope: cst.CSTNode) -> str | Conditional | Unknown:
    """The kind of ``attn_bias=expr`` in ``scope`` (the enclosing function, or the module)."""
    if expr is None or literal(expr) is None:
        return "none"
    if isinstance(expr, cst.IfExp):
        return _conditional(rule, expr, scope)
    mask = _mask(rule, expr)
    if mask is not None:
        return mask
    if _visibly_tensor(rule, expr, scope):
        return "tensor"
    if isinstance(expr, cst.Name):
        value = single_value(rule.ctx.module, scope, expr.value)
        if value is not None and literal(value) is None:  # Otter's `attn_mask = None` before the call (round 38)
            return "none"
        if value is not None and (_mask(rule, value) is not None or isinstance(value, cst.IfExp)):
            return Unknown(
                f"`{expr.value}` holds an xFormers mask built elsewhere (`{code_of(value)}`): pass the mask "
                "in the call itself to have it rewritten, or migrate by hand"
            )
        if value is not None and isinstance(value, cst.Call):
            return Unknown(f"`{expr.value}` = {_unknown_reason(rule, value)}")
        values = assigned_values(scope, expr.value) if isinstance(scope, cst.FunctionDef) else None
        if values and len(values) > 1:  # PixArt's `attn_bias = None` then `if mask is not None: attn_bias = ...`
            return Unknown(_several_values(rule, expr.value, values, scope))
        return Unknown(
            f"what `{expr.value}` holds (None, a tensor or an xFormers AttentionBias) cannot be seen in this "
            "function: migrate by hand (a tensor: F.scaled_dot_product_attention with attn_mask=; "
            "LowerTriangularMask: sparse_mode=2; LowerTriangularFromBottomRightMask: sparse_mode=3)"
        )
    return Unknown(_unknown_reason(rule, expr))


def _several_values(rule, name: str, values: list[cst.BaseExpression], scope: cst.CSTNode) -> str:
    """Why a name assigned more than once in the function has no one kind: what each assignment gives (PixArt's
    ``attn_bias = None`` then ``if mask is not None: attn_bias = BlockDiagonalMask...``, round 45)."""
    kinds = [bias_kind(rule, value, scope) for value in values]
    each = [
        f"`{code_of(value)}`" if isinstance(kind, Unknown) else f"{kind} (`{code_of(value)}`)"
        for value, kind in zip(values, kinds)
    ]
    shown = "; ".join(each) if sum(len(k) for k in each) < 300 else f"{len(each)} different values"
    why = next((kind.reason for kind in kinds if isinstance(kind, Unknown)), None)
    return (
        f"`{name}` is assigned {len(values)} times in this function ({shown}): the call gets whichever ran last; "
        + (why if why else "migrate by hand (a tensor or None: F.scaled_dot_product_attention with attn_mask=)")
    )


def _unknown_reason(rule, expr: cst.BaseExpression) -> str:
    func = expr.func if isinstance(expr, cst.Call) else None
    name = rule.resolver.qualified_name(func) if func is not None else None
    if isinstance(expr, cst.Call) and name in MASKS:
        return f"`{code_of(expr)}` takes arguments this rewrite does not know; migrate by hand"
    block = next((part for part in (name or "").split(".") if part.startswith("BlockDiagonal")), None)
    if block:
        return (
            f"`{block}` (sequences concatenated along M with B = 1): npu_fusion_attention's "
            '"TND" layout with actual_seq_qlen/actual_seq_kvlen = the cumulative ends of q_seqinfo/k_seqinfo is its '
            "counterpart, but the per-sequence causal alignment in TND is INFERRED in docs/reference/torch_npu.md "
            "§1.3: migrate by hand"
        )
    add_bias = isinstance(func, cst.Attribute) and func.attr.value == "add_bias"
    if add_bias or (name or "").endswith("LowerTriangularMaskWithTensorBias"):
        return (
            "causal mask plus an additive tensor bias: F.scaled_dot_product_attention cannot take both "
            "is_causal and attn_mask, and npu_fusion_attention's `pse` (added before the scale) is UNVERIFIED "
            "on hardware (docs/reference/torch_npu.md §1.7); pass the bias with the causal -inf entries added "
            "as attn_mask of F.scaled_dot_product_attention"
        )
    return f"`{code_of(expr)}` is no attn_bias kind this rewrite knows (None, a tensor, LowerTriangularMask(), LowerTriangularFromBottomRightMask()); migrate by hand"


def _mask(rule, expr: cst.BaseExpression) -> str | None:
    """``top-left``/``bottom-right`` for an argument-free mask constructor call."""
    if isinstance(expr, cst.Call) and not expr.args:
        return MASKS.get(rule.resolver.qualified_name(expr.func) or "")
    return None


def _conditional(rule, expr: cst.IfExp, scope: cst.CSTNode) -> Conditional | Unknown:
    body, orelse = _mask(rule, expr.body), _mask(rule, expr.orelse)
    none_body, none_else = literal(expr.body) is None, literal(expr.orelse) is None
    if not is_pure(expr.test):
        return Unknown(
            "the test choosing the mask is needed twice (mask and sparse_mode); assign it to a variable first"
        )
    if body is not None and none_else:
        return Conditional(body, expr.test, negated=False)
    if orelse is not None and none_body:
        return Conditional(orelse, expr.test, negated=True)
    return Unknown(f"`{code_of(expr)}` chooses between biases of other kinds than one mask and None; migrate by hand")


def _visibly_tensor(rule, expr: cst.BaseExpression, scope: cst.CSTNode, depth: int = 0) -> bool:
    """A torch factory's result, a tensor method of one, a subscript or arithmetic over one, or a
    name assigned one once (followed a few assignments deep)."""
    visibly = functools.partial(_visibly_tensor, rule, scope=scope, depth=depth)
    if isinstance(expr, cst.Name) and depth < 4:
        value = single_value(rule.ctx.module, scope, expr.value)
        return value is not None and _visibly_tensor(rule, value, scope, depth + 1)
    if isinstance(expr, cst.Call):
        name = rule.resolver.qualified_name(expr.func) or ""
        if name.startswith("torch.") and name.rsplit(".", 1)[-1] in TORCH_FACTORIES and name.count(".") == 1:
            return True
        func = expr.func
        return isinstance(func, cst.Attribute) and func.attr.value in TENSOR_METHODS and visibly(func.value)
    if isinstance(expr, cst.Subscript):
        return visibly(expr.value)
    if isinstance(expr, cst.BinaryOperation):
        return visibly(expr.left) or visibly(expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return visibly(expr.expression)
    return False
