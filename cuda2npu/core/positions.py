"""Source positions of libcst nodes, as libcst's ``PositionProvider`` computes them.

A file's findings need the positions of a few reported nodes; the provider records one for every
node of the file (two context managers and a range object per node, more than the code generation
itself). :func:`positions_for` runs the same code generation but records only the nodes asked for.
Both rely on libcst's code-generation state; if its internals move, they fall back to the public
``MetadataWrapper`` (same results, slower).
"""

from __future__ import annotations

from typing import Iterable

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

try:  # libcst internals (code generation with positions); absent: the public way, slower
    from libcst._nodes.internal import CodegenState
    from libcst.metadata.position_provider import NEWLINE_RE, PositionProvidingCodegenState
except ImportError:  # pragma: no cover
    CodegenState = PositionProvidingCodegenState = None


def positions_of(module: cst.Module) -> dict[cst.CSTNode, CodeRange]:
    """Node -> CodeRange for every node, as ``MetadataWrapper(module).resolve(PositionProvider)``.

    The wrapper follows the position codegen with a traversal of the whole tree for batchable
    providers even when there are none; the provider's own codegen is all positions need.
    """
    if PositionProvidingCodegenState is None:  # pragma: no cover
        return _public(module)
    try:
        provider = PositionProvider()
        state = PositionProvidingCodegenState(
            default_indent=module.default_indent, default_newline=module.default_newline, provider=provider
        )
        module._codegen(state)
        return provider._computed
    except (AttributeError, TypeError):  # libcst internals moved: the public way
        return _public(module)


def positions_for(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> dict[cst.CSTNode, CodeRange]:
    """Node -> CodeRange for ``nodes`` (nodes of ``module``) only; same ranges as :func:`positions_of`."""
    wanted = set(nodes)
    if not wanted:
        return {}
    if CodegenState is None:  # pragma: no cover
        return _public(module)
    try:
        state = _TargetedState(module, wanted)
        try:
            module._codegen(state)
        except _AllRecorded:
            pass
        if wanted <= state.ranges.keys():
            return {node: state.ranges[node] for node in wanted}
    except (AttributeError, TypeError):
        pass
    return _public(module)


def _public(module: cst.Module) -> dict[cst.CSTNode, CodeRange]:
    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)


class _Untracked:
    """The context of ``record_syntactic_position`` for a node nobody asked about."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        return None


_UNTRACKED = _Untracked()


class _AllRecorded(Exception):
    """Every wanted range is known: the rest of the file's code generation is not needed."""


class _TargetedState(CodegenState or object):
    """libcst's position-providing code generation, recording ranges for ``wanted`` nodes only.

    As in ``PositionProvidingCodegenState``: a node's syntactic range (``record_syntactic_position``,
    whose start or end may be hoisted from a child) wins over its whitespace-inclusive range
    (``before_codegen``/``after_codegen``); a hoisted child is tracked as soon as its parent asks.
    Generation stops (:class:`_AllRecorded`) once every wanted node has its range. Wanted nodes are
    told by ``id`` (a node's ``__hash__`` is a Python call, made for every node of the file).
    Tokens are appended at C speed; the line and column are worked out from the tokens generated
    since the last wanted node, only when one starts or ends.
    """

    def __init__(self, module: cst.Module, wanted: set[cst.CSTNode]) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.add_token = self.tokens.append  # shadows the method: no Python call per token
        self.wanted = {id(node) for node in wanted}
        self.line, self.column, self.counted = 1, 0, 0  # position after tokens[:counted]
        self.starts: dict[cst.CSTNode, CodePosition] = {}
        self.ranges: dict[cst.CSTNode, CodeRange] = {}

    def position(self) -> CodePosition:
        """Where the next token goes."""
        if self.counted < len(self.tokens):
            segments = NEWLINE_RE.split("".join(self.tokens[self.counted :]))
            if len(segments) > 1:
                self.line += len(segments) - 1
                self.column = len(segments[-1])
            else:
                self.column += len(segments[0])
            self.counted = len(self.tokens)
        return CodePosition(self.line, self.column)

    def before_codegen(self, node: cst.CSTNode) -> None:
        if id(node) in self.wanted:
            self.starts[node] = self.position()

    def after_codegen(self, node: cst.CSTNode) -> None:
        if id(node) in self.wanted and node not in self.ranges:
            self.record(node, CodeRange(self.starts[node], self.position()))

    def record(self, node: cst.CSTNode, where: CodeRange) -> None:
        self.ranges[node] = where
        if len(self.ranges) == len(self.wanted):  # ranges holds wanted nodes only
            raise _AllRecorded

    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        if id(node) not in self.wanted:
            return _UNTRACKED
        for child in (start_node, end_node):
            if child is not None:
                self.wanted.add(id(child))
        return _Syntactic(self, node, start_node, end_node)


class _Syntactic:
    """``record_syntactic_position`` for one wanted node."""

    def __init__(self, state: _TargetedState, node, start_node, end_node) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node

    def __enter__(self) -> None:
        self.start = self.state.position()

    def __exit__(self, *exc) -> None:
        state = self.state
        start = state.ranges[self.start_node].start if self.start_node is not None else self.start
        end = state.ranges[self.end_node].end if self.end_node is not None else state.position()
        state.record(self.node, CodeRange(start, end))
