"""Binding a call's arguments to a library signature, refusing to guess."""

from __future__ import annotations

from typing import Callable, Sequence

import libcst as cst


class Unbindable(Exception):
    """The call's arguments cannot be mapped to the signature without guessing."""


def bind(
    call: cst.Call,
    params: Sequence[str],
    *,
    max_positional: int | None = None,
    positional_check: Callable[[int, cst.Arg], str | None] | None = None,
) -> dict[str, cst.Arg]:
    """``{parameter: Arg}`` for ``call`` against ``params`` (in signature order).

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
            if name not in params:
                raise Unbindable(f"unknown keyword `{name}=`")
            if name in bound:
                raise Unbindable(f"`{name}` passed twice")
            bound[name] = arg
    return bound
