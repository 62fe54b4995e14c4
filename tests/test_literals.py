"""String literal values: the fast path agrees with Python's own evaluation."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from cuda2npu.core.literals import simple_string_value, string_value
from cuda2npu.core.traversal import iter_nodes

ROOT = Path(__file__).resolve().parent.parent
CASES = [
    "'a'",
    '"cuda:0"',
    "r'\\d+'",
    'R"\\n"',
    "u'x'",
    "'\\n'",
    "'\\x6epu'",
    '"""line\nline"""',
    "'''q'''",
    '"""a\r\nb"""',  # Python normalises the newline
    "'a\\\nb'",  # a backslash-newline continuation
    "''",
    '""""""',
    "b'bytes'",
    "Rb'\\d'",
    "'{x}'",
]


@pytest.mark.parametrize("source", CASES)
def test_fast_value_matches_literal_eval(source):
    expected = cst.parse_expression(source).evaluated_value
    assert simple_string_value(source) == (expected if isinstance(expected, str) else None)


def test_every_string_literal_of_the_project_evaluates_as_python_does():
    checked = 0
    for path in sorted(ROOT.glob("cuda2npu/**/*.py"))[::3]:
        for node in iter_nodes(cst.parse_module(path.read_bytes()), cst.SimpleString):
            expected = node.evaluated_value
            assert string_value(node) == (expected if isinstance(expected, str) else None), node.value
            checked += 1
    assert checked > 1000
