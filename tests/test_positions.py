"""Positions of chosen nodes equal what libcst's PositionProvider gives for them."""

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from cuda2npu.core.positions import positions_for, positions_of
from cuda2npu.core.traversal import iter_nodes

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted(ROOT.glob("cuda2npu/**/*.py"))[::7] + sorted(ROOT.glob("fixtures/rules/**/*.py"))[::9]


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_positions_match_the_provider(path):
    module = cst.parse_module(path.read_bytes())
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    assert positions_of(module) == dict(expected)
    nodes = list(iter_nodes(module))
    for stride, offset in ((1, 0), (7, 3), (29, 11)):
        chosen = nodes[offset::stride]
        found = positions_for(module, chosen)
        assert found.keys() == set(chosen)
        assert all(found[node] == expected[node] for node in chosen)


def test_positions_for_nothing_is_empty():
    assert positions_for(cst.parse_module("x = 1\n"), []) == {}
