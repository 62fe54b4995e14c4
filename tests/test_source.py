"""``core/source.py``: the parse without libcst's per-node validation gives libcst's own tree."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from cuda2npu.core.source import SourceError, parse, parse_module

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

TRICKY = [
    b"x = (  # c\n    1 +\\\n  2)\n",
    b"async def f(*, a: 'int' = 1, **k) -> None:\n    async with a as (b, c):\n        yield\n",
    b'print(f"{x!r:>{w}} {{}}", rb"\\d", """doc\n""")\n',
    b"match p:\n    case [1, *rest] if rest:\n        pass\n    case {'k': v, **kw}:\n        pass\n",
    b"try:\n    pass\nexcept* (A, B) as e:\n    raise\n",
    b"\xef\xbb\xbfclass A(B, metaclass=M):\n\n    @d\n    def f(self, /, a, *b): return lambda: (yield)\n",
    b"x = [i for i in range(3) if i if not i] ; y = {**a, 'b': 1}\r\nz = a[1:2, ::3, ...]\r\n",
]


@pytest.mark.parametrize("source", TRICKY)
def test_unvalidated_parse_gives_libcsts_tree(source):
    module = parse_module(source)
    assert module.deep_equals(cst.parse_module(source))
    assert module.bytes == source


def _parsed_by_libcst(path: Path) -> cst.Module | None:
    try:
        return cst.parse_module(path.read_bytes())
    except Exception:  # noqa: BLE001 - the fixtures hold undecodable and unparsable files on purpose
        return None


def test_unvalidated_parse_of_the_fixtures():
    expected = {path: _parsed_by_libcst(path) for path in sorted(FIXTURES.rglob("*.py"))}
    parsed = {path: module for path, module in expected.items() if module is not None}
    assert len(parsed) > 50
    for path, module in parsed.items():
        assert parse_module(path.read_bytes()).deep_equals(module), path


def test_nodes_built_after_a_parse_are_still_validated():
    parse_module(b"x = 1\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")


def test_validation_comes_back_when_the_parse_fails():
    with pytest.raises(cst.ParserSyntaxError):
        parse_module(b"def f(:\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")


def test_parse_reports_a_syntax_error_with_cpythons_position():
    with pytest.raises(SourceError) as caught:
        parse(b"x = 1\ndef f(:\n")
    assert (caught.value.line, str(caught.value).startswith("cannot parse")) == (2, True)
