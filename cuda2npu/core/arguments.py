"""Binding a call's arguments to a library signature (refusing to guess), reading the bound
values, and laying the arguments out again for a new callee."""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

import libcst as cst

from cuda2npu.core.literals import literal
from cuda2npu.core.nodes import as_keyword


class Unbindable(Exception):
    """The call's arguments cannot be mapped to the signature without guessing."""


def bind(
    call: cst.Call,
    params: Sequence[str],
    *,
    max_positional: int | None = None,
    positional_check: Callable[[int, cst.Arg], str | None] | None = None,
    open_keywords: bool = False,
) -> dict[str, cst.Arg]:
    """``{parameter: Arg}`` for ``call`` against ``params`` (in signature order).

    ``open_keywords``: the signature ends in ``**kwargs``, so a keyword not in ``params`` is bound
    under its own name instead of refused.
    ``max_positional``: positions beyond it differ between library releases and are refused,
    unless ``positional_check(index, arg)`` accepts them (returns None) — e.g. a tuple literal
    in the position of flash-attn's ``window_size``.
    """
    bound: dict[str, cst.Arg] = {}
    position = 0
    for arg in call.args:
        if arg.star:
            raise Unbindable(f"`{arg.star}` arguments hide which parameters are passed")
        if arg.keyword is None:
            if position >= len(params):
                raise Unbindable(f"more positional arguments than the signature has ({len(params)})")
            if max_positional is not None and position >= max_positional:
                reason = positional_check(position, arg) if positional_check else "refused"
                if reason is not None:
                    raise Unbindable(
                        f"positional argument {position + 1} (`{params[position]}` in the newest release) "
                        f"means different parameters in different releases; pass it by keyword"
                    )
            bound[params[position]] = arg
            position += 1
        else:
            name = arg.keyword.value
            if name not in params and not open_keywords:
                raise Unbindable(f"unknown keyword `{name}=`")
            if name in bound:
                raise Unbindable(f"`{name}` passed twice")
            bound[name] = arg
    return bound


def try_bind(call: cst.Call, params: Sequence[str], **options) -> dict[str, cst.Arg] | None:
    """:func:`bind`, or None where it refuses."""
    try:
        return bind(call, params, **options)
    except Unbindable:
        return None


def arg_value(bound: dict[str, cst.Arg], name: str) -> cst.BaseExpression | None:
    arg = bound.get(name)
    return None if arg is None else arg.value


def literal_arg(bound: dict[str, cst.Arg], name: str, default):
    """The literal value of a bound argument, ``default`` when absent, NOT_LITERAL otherwise."""
    value = arg_value(bound, name)
    return default if value is None else literal(value)


def positional_count(call: cst.Call) -> int:
    return sum(1 for a in call.args if a.keyword is None and not a.star)


def has_star(call: cst.Call) -> bool:
    return any(a.star for a in call.args)


def remap_args(
    call: cst.Call,
    params: Sequence[str],
    *,
    drop: Iterable[str] = (),
    rename: dict[str, str] | None = None,
    positional: int = 0,
) -> list[cst.Arg]:
    """``call``'s arguments for a new callee, in their original order and layout.

    The first ``positional`` parameters have the same position in the new signature and may stay
    positional; later positional arguments become keywords (named per ``rename``), and so does
    every positional argument after a dropped one. Arguments of ``drop`` disappear.
    """
    rename = rename or {}
    drop = set(drop)
    kept: list[cst.Arg] = []
    position = 0
    shifted = False
    for arg in call.args:
        if arg.keyword is None:
            name = params[position]
            position += 1
            if name in drop:
                shifted = True
            elif position <= positional and not shifted:
                kept.append(arg)
            else:
                shifted = True
                kept.append(as_keyword(arg, rename.get(name, name)))
        elif arg.keyword.value not in drop:
            name = arg.keyword.value
            kept.append(as_keyword(arg, rename[name]) if name in rename else arg)
    return kept
