"""Reading and building libcst nodes: the one set of node helpers every rule family uses.

Builders format what they make like hand-written code (``name=value`` without spaces, one
space after a comma) and keep the layout of whatever they take from the original source.
"""

from __future__ import annotations

from typing import Sequence

import libcst as cst

_EMPTY_MODULE = cst.Module(body=[])
_NO_SPACE = cst.SimpleWhitespace("")


# --- source text ---------------------------------------------------------------------------


def code_of(node: cst.CSTNode) -> str:
    """Source text of a node (an updated node too: rendering needs no positions)."""
    return _EMPTY_MODULE.code_for_node(node)


def expression(source: str) -> cst.BaseExpression:
    return cst.parse_expression(source)


def statement(source: str) -> cst.BaseStatement:
    return cst.parse_statement(source)


# --- expressions ---------------------------------------------------------------------------

ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float, cst.SimpleString)


def atom(node: cst.BaseExpression) -> cst.BaseExpression:
    """``node`` usable before ``.attr`` / ``[i]`` and as an operand: parenthesised unless an atom."""
    if isinstance(node, ATOMS) or node.lpar:
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def is_pure(node: cst.BaseExpression) -> bool:
    """True for expressions that are cheap and side-effect free to evaluate twice (or not at all).

    Names, attribute chains, literals, subscripts with such indices and operators over them;
    never a call, lambda, comprehension or walrus.
    """
    if isinstance(node, (cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.Ellipsis)):
        return True
    if isinstance(node, cst.Attribute):
        return is_pure(node.value)
    if isinstance(node, cst.Subscript):
        return is_pure(node.value) and all(_pure_slice(e.slice) for e in node.slice)
    if isinstance(node, cst.UnaryOperation):
        return is_pure(node.expression)
    if isinstance(node, (cst.BinaryOperation, cst.BooleanOperation)):
        return is_pure(node.left) and is_pure(node.right)
    if isinstance(node, cst.Comparison):
        return is_pure(node.left) and all(is_pure(c.comparator) for c in node.comparisons)
    if isinstance(node, (cst.Tuple, cst.List)):
        return all(not isinstance(e, cst.StarredElement) and is_pure(e.value) for e in node.elements)
    return False


def _pure_slice(item: cst.BaseSlice) -> bool:
    if isinstance(item, cst.Index):
        return is_pure(item.value)
    if isinstance(item, cst.Slice):
        return all(part is None or is_pure(part) for part in (item.lower, item.upper, item.step))
    return False


def named_params(function: cst.FunctionDef | cst.Lambda) -> list[cst.Param]:
    """The parameters a caller can fill by position or name, in order (positional-only, ordinary,
    keyword-only; not ``*args`` / ``**kwargs``)."""
    params = function.params
    return [*params.posonly_params, *params.params, *params.kwonly_params]


def root_name(node: cst.BaseExpression) -> cst.Name | None:
    """``a`` in ``a.b.c``."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return node if isinstance(node, cst.Name) else None


def attribute_chain(dotted: str) -> cst.BaseExpression:
    """``a.b.c`` as Name/Attribute nodes."""
    parts = dotted.split(".")
    node: cst.BaseExpression = cst.Name(parts[0])
    for part in parts[1:]:
        node = cst.Attribute(node, cst.Name(part))
    return node


def string(value: str) -> cst.SimpleString:
    return cst.SimpleString(f'"{value}"')


def assign(target: cst.BaseAssignTargetExpression, value: cst.BaseExpression) -> cst.Assign:
    return cst.Assign(targets=[cst.AssignTarget(target)], value=value)


# --- call arguments ------------------------------------------------------------------------


def keyword_arg(name: str, value: cst.BaseExpression | str) -> cst.Arg:
    """``name=value`` (``value`` a node or source text)."""
    node = expression(value) if isinstance(value, str) else value
    return cst.Arg(value=node, keyword=cst.Name(name), equal=cst.AssignEqual(_NO_SPACE, _NO_SPACE))


def as_keyword(arg: cst.Arg, name: str) -> cst.Arg:
    """``arg`` passed as ``name=...`` (positional turned keyword, or a keyword renamed); the
    formatting of its value and its comma are kept."""
    if arg.keyword is not None:
        return arg if arg.keyword.value == name else arg.with_changes(keyword=cst.Name(name))
    return arg.with_changes(keyword=cst.Name(name), equal=cst.AssignEqual(_NO_SPACE, _NO_SPACE))


def as_positional(arg: cst.Arg) -> cst.Arg:
    """``arg`` passed by position."""
    return arg.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT)


def _without_comments(comma: cst.Comma) -> cst.Comma:
    """A copied separator keeps its line break and indentation, not the comment after it (which
    belongs to the argument it followed)."""
    after = comma.whitespace_after
    if not isinstance(after, cst.ParenthesizedWhitespace):
        return comma
    first = after.first_line.with_changes(comment=None, whitespace=cst.SimpleWhitespace(""))
    return comma.with_changes(whitespace_after=after.with_changes(first_line=first, empty_lines=()))


def with_args(call: cst.Call, args: Sequence[cst.Arg]) -> cst.Call:
    """``call`` with a new argument list; commas are normalised, the original style is kept.

    An argument whose value comes from the original call keeps the comma it had between arguments
    (and so its line break); other separators copy the original first separator. A trailing comma
    stays where there was one.
    """
    original = list(call.args)
    trailing = bool(original) and isinstance(original[-1].comma, cst.Comma)
    middle = {a.value: a.comma for a in original[:-1] if isinstance(a.comma, cst.Comma)}
    separator = _without_comments(next(iter(middle.values()), cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))))
    # the space before ``)`` (a line break in a call laid out one argument per line) goes with the
    # last argument, whichever it is now
    closing = original[-1].whitespace_after_arg if original else cst.SimpleWhitespace("")
    result: list[cst.Arg] = []
    for index, arg in enumerate(args):
        last = index == len(args) - 1
        if not last:
            comma = middle.get(arg.value, separator)
        else:
            comma = original[-1].comma if trailing else cst.MaybeSentinel.DEFAULT
        if original and (last or arg.value is original[-1].value):
            arg = arg.with_changes(whitespace_after_arg=closing if last else cst.SimpleWhitespace(""))
        result.append(arg.with_changes(comma=comma))
    return call.with_changes(args=result)
