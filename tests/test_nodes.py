"""core/nodes.with_args: a rewritten call keeps its layout, and a comment stays with its argument."""

from __future__ import annotations

import libcst as cst
import pytest

from cuda2npu.core.nodes import code_of, with_args

KEYWORD = cst.Arg(
    cst.Name("c"),
    keyword=cst.Name("k"),
    equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("f(a, b)", "f(a, b, k=c)"),
        ("f()", "f(k=c)"),
        # one argument per line: the new one on a line of its own, the comment stays with `a`
        ("f(\n    a,  # Mandatory arg\n    b\n)", "f(\n    a,  # Mandatory arg\n    b,\n    k=c\n)"),
        ("f(\n    a,  # Mandatory arg\n    b,\n)", "f(\n    a,  # Mandatory arg\n    b,\n    k=c,\n)"),
    ],
)
def test_an_added_argument_takes_the_layout_not_the_comments(source, expected):
    call = cst.parse_expression(source)
    assert code_of(with_args(call, [*call.args, KEYWORD])) == expected


def test_a_dropped_last_argument_leaves_the_closing_line_break():
    call = cst.parse_expression("f(\n    a,\n    b\n)")
    assert code_of(with_args(call, [call.args[0]])) == "f(\n    a\n)"
