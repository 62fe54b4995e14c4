"""The plan of one flash-attn call's rewrite and its rendering: the layout q/k/v are held in before a
transpose to BSND (:data:`SOURCE_LAYOUTS`), the causal mode, window, hoisted operands, and the
``torch_npu.npu_fusion_attention`` source :func:`render` writes from them (docs/reference/torch_npu.md §1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from cuda2npu.analysis.kernel_rewrites import (
    CAUSAL_MASK_HELPER,
    NO_LIMIT,
    call_source,
    may_be_none,
    one_minus,
)
from cuda2npu.core.literals import literal
from cuda2npu.core.nodes import atom, code_of
from cuda2npu.families.attention.flash_api import OP, QKV, FlashSpec


@dataclass(frozen=True)
class SourceLayout:
    """A layout q/k/v are held in before a transpose to BSND, and how the NPU call takes them as they are."""

    name: str
    input_layout: str
    operand: str  # template over {x}, the untransposed tensor
    head_num: str  # template over the parameter names
    output: str  # after ``[0]``: turns the NPU output back into flash-attn's BSND
    how: str  # for the report


SOURCE_LAYOUTS: dict[tuple[int, ...], SourceLayout] = {
    (1, 0, 2, 3): SourceLayout(
        "SBND",
        "SBH",
        "{x}.flatten(2)",
        "{q}.shape[2]",
        ".unflatten(-1, ({q}.shape[2], -1)).transpose(0, 1).contiguous()",
        'passed as "SBH" without the transpose (heads merged by `flatten(2)`, a view) and the [S, B, N*D] '
        "output turned back into contiguous BSND by `.unflatten(-1, (N, -1)).transpose(0, 1).contiguous()`",
    ),
    (0, 2, 1, 3): SourceLayout(
        "BNSD",
        "BNSD",
        "{x}",
        "{q}.shape[1]",
        ".transpose(1, 2).contiguous()",
        'passed as "BNSD" without the transpose and the output turned back into contiguous BSND by '
        "`.transpose(1, 2).contiguous()`",
    ),
}

HOIST_NAMES = {"q": "query", "qkv": "qkv_packed", "kv": "kv_packed", "cu_seqlens": "cu_seqlens_npu"}


def _is_dim(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -4 <= value < 4


def swap_order(first: object, second: object) -> tuple[int, ...] | None:
    """The dimension order of ``X.transpose(first, second)`` for a 4-D ``X``."""
    if not (_is_dim(first) and _is_dim(second)) or first % 4 == second % 4:
        return None
    order = [0, 1, 2, 3]
    order[first % 4], order[second % 4] = order[second % 4], order[first % 4]
    return tuple(order)


def permute_order(dims: tuple) -> tuple[int, ...] | None:
    """The dimension order of ``X.permute(*dims)`` for a 4-D ``X``."""
    if len(dims) != 4 or not all(_is_dim(d) for d in dims):
        return None
    order = tuple(d % 4 for d in dims)
    return order if sorted(order) == [0, 1, 2, 3] else None


def rearrange_order(pattern: str) -> tuple[int, ...] | None:
    """The dimension order of a pure einops permutation of a 4-D tensor (``"s b h d -> b s h d"``,
    ``"s b ... -> b s ..."``); None for patterns that group, split or add axes."""
    left, arrow, right = pattern.partition("->")
    if not arrow:
        return None
    sides = []
    for side in (left.split(), right.split()):
        named = [axis for axis in side if axis != "..."]
        if len(side) - len(named) > 1 or len(set(named)) != len(named) or not all(a.isidentifier() for a in named):
            return None
        if "..." in side:  # the axes it stands for, under names no axis can have
            index = side.index("...")
            side[index : index + 1] = [f"...{i}" for i in range(4 - len(named))]
        if len(side) != 4:
            return None
        sides.append(side)
    left_axes, right_axes = sides
    if set(left_axes) != set(right_axes):
        return None
    return tuple(left_axes.index(axis) for axis in right_axes)


def untransposed(call: cst.Call) -> cst.BaseExpression:
    """X of a transpose that ``FlashAttention._order_of`` recognised: ``X.transpose(..)``,
    ``X.permute(..)`` or ``rearrange(X, pattern)``."""
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("transpose", "permute"):
        return call.func.value
    return call.args[0].value


class Manual(Exception):
    """The call cannot be rewritten faithfully; the message says why and what to do."""


@dataclass
class Plan:
    spec: FlashSpec
    function: str
    causal: object  # False | True | "expr"
    window: bool
    hoist: dict[str, str] = field(default_factory=dict)  # parameter → variable name
    notes: list[str] = field(default_factory=list)
    source: SourceLayout | None = None  # q/k/v are transposed to BSND from this layout

    def operand(self, param: str, arg: cst.Arg) -> cst.BaseExpression:
        """The expression the rewrite uses for ``param``: without its transpose when q/k/v lose theirs."""
        if self.source is not None and param in QKV:
            return untransposed(arg.value)  # type: ignore[arg-type]
        return arg.value


def _window_parts(node: cst.BaseExpression) -> tuple[object, object]:
    """(left, right) of a window: ints for literals, source text for expressions."""
    if isinstance(node, (cst.Tuple, cst.List)):
        return tuple(_side(e.value) for e in node.elements)  # type: ignore[return-value]
    base = code_of(atom(node))
    return (f"{base}[0]", f"{base}[1]")


def _side(node: cst.BaseExpression) -> object:
    value = literal(node)
    return value if isinstance(value, int) and not isinstance(value, bool) else code_of(atom(node))


def _tockens(side: object) -> str:
    """flash-attn's window side (-1 = unbounded) as pre_tockens/next_tockens."""
    if isinstance(side, int):
        return str(NO_LIMIT if side < 0 else side)
    return f"{side} if {side} >= 0 else {NO_LIMIT}"


def render(plan: Plan, bound: dict[str, cst.Arg]) -> str:
    """The replacement source for a flash-attn call whose (updated) arguments are ``bound``."""
    spec = plan.spec
    codes = {p: (plan.hoist[p] if p in plan.hoist else code_of(atom(plan.operand(p, a)))) for p, a in bound.items()}
    fmt = lambda template: template.format(**codes)  # noqa: E731
    base = codes[spec.base]
    dim = f"{base}.shape[-1]"
    mask = f"{CAUSAL_MASK_HELPER}({base}.device)"
    causal = codes.get("causal")
    keywords: list[tuple[str, str]] = []
    if plan.window or plan.causal is True:
        keywords.append(("atten_mask", mask))
    elif plan.causal == "expr":
        keywords.append(("atten_mask", f"{mask} if {causal} else None"))

    scale = bound.get("softmax_scale")
    if scale is None or literal(scale.value) is None:
        keywords.append(("scale", f"{dim} ** -0.5"))
    elif may_be_none(scale.value):
        keywords.append(
            ("scale", f"{codes['softmax_scale']} if {codes['softmax_scale']} is not None else {dim} ** -0.5")
        )
    else:
        keywords.append(("scale", code_of(scale.value)))
    dropout = bound.get("dropout_p")
    keywords.append(("keep_prob", "1.0" if dropout is None else one_minus(dropout.value)))

    if plan.window:
        left, right = _window_parts(bound["window_size"].value)
        keywords.append(("pre_tockens", _tockens(left)))
        if plan.causal is True:
            keywords.append(("next_tockens", "0"))
        elif plan.causal == "expr":
            keywords.append(("next_tockens", f"0 if {causal} else {_maybe_paren(_tockens(right))}"))
        else:
            keywords.append(("next_tockens", _tockens(right)))
    if spec.cu_seqlens:
        cu_q, cu_k = (codes[name] for name in spec.cu_seqlens)
        keywords.append(("actual_seq_qlen", f"{cu_q}[1:].tolist()"))
        keywords.append(("actual_seq_kvlen", f"{cu_k}[1:].tolist()"))
    if plan.window:
        keywords.append(("sparse_mode", "4"))
    elif plan.causal is True:
        keywords.append(("sparse_mode", "3"))
    elif plan.causal == "expr":
        keywords.append(("sparse_mode", f"3 if {causal} else 0"))
    source = plan.source
    if source is None:
        tensors = [fmt(spec.q), fmt(spec.k), fmt(spec.v)]
        head_num, layout, output = fmt(spec.head_num), spec.layout, ""
    else:
        tensors = [source.operand.format(x=codes[p]) for p in QKV]
        head_num, layout, output = fmt(source.head_num), source.input_layout, fmt(source.output)
    positional = [*tensors, head_num, f'"{layout}"']
    return call_source(f"torch_npu.{OP}", positional, keywords, "[0]" + output)


def dispatch_base(plan: Plan, bound: dict[str, cst.Arg]) -> str:
    """The tensor whose device decides the portable dispatch (q, or the packed qkv), named as render names it."""
    name = plan.spec.base
    return plan.hoist.get(name) or code_of(atom(plan.operand(name, bound[name])))


def with_hoisted(plan: Plan, bound: dict[str, cst.Arg], call: cst.Call) -> cst.Call:
    """The original call reading the hoisted variables instead of the expressions they hold."""
    for param, name in plan.hoist.items():
        value = bound[param].value
        hoisted = plan.operand(param, bound[param])
        new = cst.Name(name) if hoisted is value else value.deep_replace(hoisted, cst.Name(name))
        call = call.deep_replace(value, new)
    return call


def _maybe_paren(text: str) -> str:
    return f"({text})" if " if " in text else text
