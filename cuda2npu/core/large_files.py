"""Large files, statement by statement: a file above :data:`LARGE_FILE_BYTES` is reduced to the
top-level statements the rules can act on, and the migrated result is spliced back.

libcst needs about 1 GB of memory and 10 s per MB it parses (a generated 5 MB file with one
``.cuda()``: 55 s and 4.3 GB for the parse alone). The reduction keeps the top-level statements
that import something, contain a rule's trigger or a file-level noqa directive, the module-level
functions taking a device, and the module's docstring; the lines between kept statements stay as they are (the coding cookie, file-level
directives). Each run of other statements becomes one placeholder line ``__cuda2npu_elided_<n>__``,
a name expression, so the reduced text parses where the file does. Names bound in an elided
statement are not followed (docs/limitations.md).

The statements are told apart by one scan of the bytes, not by ``ast`` (10 s and 1.1 GB for the
same 5 MB): strings, comments, brackets and backslash continuations are skipped, and a logical
line that starts at column 0 with code starts a statement, unless it continues one (``else``,
``elif``, ``except``, ``finally``; the ``def``/``class`` after decorator lines). Where the scan
cannot tell (unbalanced brackets, an unterminated string, lone carriage returns, bytes that are
not UTF-8) there is no reduction.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from cuda2npu.core.prefilter import trigger

LARGE_FILE_BYTES = 1 << 20  # above: statement by statement
MAX_PARSED_BYTES = 8 << 20  # above, in what would be parsed: refused (about 8 GB of memory)
# kept besides the rules' triggers: imports, file-level noqa directives (on a line of their own), and
# module-level functions with a parameter named like a device (a call's "cuda" there is a device: SpinQuant's
# `hadamard_matrix(had_dim, "cuda")` in its 1.98 MB hadamard_utils.py, rounds 33 and 34)
KEPT = (
    r"\bimport\b",
    r"#[ \t]*(?i:cuda2npu|ruff|flake8)[ \t]*:[ \t]*(?i:noqa)",
    r"(?m:^)(?:async[ \t]+)?def[ \t]+\w+[ \t]*\([^)]*\b(?:\w+_)?device(?:_\w+)?\b",
)

_TOKEN = re.compile(rb"'''|\"\"\"|['\"#()\[\]{}\n]|\\\r?\n")
_STRING_END = {  # the rest of a one-line string, its closing quote included
    ord("'"): re.compile(rb"[^'\\\n]*(?:\\(?:\r\n|.)[^'\\\n]*)*'", re.DOTALL),
    ord('"'): re.compile(rb'[^"\\\n]*(?:\\(?:\r\n|.)[^"\\\n]*)*"', re.DOTALL),
}
_OPEN, _CLOSE, _QUOTES = frozenset(b"([{"), frozenset(b")]}"), frozenset(b"'\"")
_NO_CODE = frozenset(b" \t\f#\r\n")  # a logical line starting with one is indented, blank or a comment
_CONTINUES = re.compile(rb"(?:else|elif|except|finally)\b")
_DECORATED = re.compile(rb"(?:def|class|async)\b")
_DOCSTRING = re.compile(rb"[rRuUbBfF]{0,2}['\"]")  # kept: an import placed above it would end its role
_DIRECTIVE = re.compile(rb"noqa|cuda2npu", re.IGNORECASE)  # a comment line that stays visible
_PLACEHOLDER = re.compile(rb"(?:^|(?<=\A\xef\xbb\xbf))__cuda2npu_elided_(\d+)__(?=\r?\n|\Z)", re.MULTILINE)


@dataclass
class Reduction:
    """``text``: the reduced source; ``elided``: the byte range of ``source`` each placeholder
    stands for, in order; ``statements``, ``kept``: how many top-level statements there are, and
    are kept; ``shifts``: (first reduced line, original line - reduced line from there)."""

    source: bytes
    text: bytes
    elided: list[tuple[int, int]]
    statements: int
    kept: int
    shifts: list[tuple[int, int]]

    def line(self, reduced: int) -> int:
        """The original line of a 1-based line of ``text`` (a placeholder's: its statement's first)."""
        return reduced + self.shifts[bisect_right(self.shifts, (reduced, float("inf"))) - 1][1]

    def splice(self, migrated: bytes) -> bytes | None:
        """``migrated`` (the migrated ``text``) with each placeholder back to its statement's bytes;
        None where the placeholders are not each found once, in order, as a whole line."""
        found = list(_PLACEHOLDER.finditer(migrated))
        if [int(match.group(1)) for match in found] != list(range(len(self.elided))):
            return None
        pieces, position = [], 0
        for match, (start, end) in zip(found, self.elided):
            pieces += [migrated[position : match.start()], self.source[start:end]]
            position = match.end()
        pieces.append(migrated[position:])
        return b"".join(pieces)

    def warning(self, path: str) -> str:
        return (
            f"{path}: {len(self.source) / (1 << 20):.1f} MB: analysed statement by statement ({self.kept:,} of "
            f"{self.statements:,} top-level statements: the imports and those naming a rule's trigger; libcst "
            "needs about 1 GB per MB parsed); names bound in the other statements are not followed"
        )


def too_large(size: int, statement_wise: bool) -> str:
    """The NPU001 message of a file whose ``size`` bytes to parse are above :data:`MAX_PARSED_BYTES`."""
    what = "its statements to analyse come to" if statement_wise else "its statements cannot be told apart, and it has"
    return (
        f"cannot analyse: {what} {size / (1 << 20):.1f} MB, above the {MAX_PARSED_BYTES >> 20} MB limit "
        "(libcst needs about 1 GB of memory per MB parsed); split the file, or leave it out (--extend-exclude)"
    )


def reduce(source: bytes, triggers: list[str]) -> Reduction | None:
    """``source`` reduced to its top-level statements that import or contain one of ``triggers``
    (None: its statements cannot be told apart). A run of other statements becomes one placeholder,
    the comment lines between them too, unless one of those names ``noqa`` or ``cuda2npu``."""
    statements = top_level_statements(source)
    if statements is None:
        return None
    kept = _kept(source, statements, [*KEPT, *triggers])
    if statements and _DOCSTRING.match(source, statements[0][0]):
        kept.add(0)  # the module's docstring
    runs: list[list[int]] = []
    for index, (start, end) in enumerate(statements):
        if index in kept:
            continue
        if runs and index - 1 not in kept and not _DIRECTIVE.search(source, runs[-1][1], start):
            runs[-1][1] = end
        else:
            runs.append([start, end])
    pieces, shifts, position, shift = [], [(1, 0)], 0, 0
    reduced_line = 1  # the line of ``text`` where ``position`` of ``source`` lands
    for number, (start, end) in enumerate(runs):
        pieces += [source[position:start], f"__cuda2npu_elided_{number}__".encode()]
        reduced_line += source.count(b"\n", position, start)
        shift += source.count(b"\n", start, end)
        shifts.append((reduced_line + 1, shift))
        position = end
    pieces.append(source[position:])
    elided = [(start, end) for start, end in runs]
    return Reduction(source, b"".join(pieces), elided, len(statements), len(kept), shifts)


def top_level_statements(source: bytes) -> list[tuple[int, int]] | None:
    """The byte range of each top-level statement of ``source``, from its first byte to the end of
    its last line of code (its line break and the comment lines after it excluded); None where the
    scan cannot tell."""
    if b"\r" in source.replace(b"\r\n", b""):
        return None  # lone carriage returns end lines for CPython, not for the scan
    try:
        source.decode("utf-8")
    except UnicodeDecodeError:
        return None
    starts = _logical_lines(source)
    if starts is None:
        return None
    statements: list[list[int]] = []
    decorated = False  # the last statement so far is decorator lines
    for start, end in zip(starts, [*starts[1:], len(source)]):
        if start == end:
            continue
        first = source[start]
        if first in _NO_CODE:
            if source[start:end].strip(b" \t\f\r\n")[:1] not in (b"", b"#") and statements:
                statements[-1][1] = _line_end(source, end)  # an indented line
            continue
        if statements and (
            _CONTINUES.match(source, start) or (decorated and (first == ord("@") or _DECORATED.match(source, start)))
        ):
            decorated = decorated and first == ord("@")
        else:
            statements.append([start, 0])
            decorated = first == ord("@")
        statements[-1][1] = _line_end(source, end)
    return [(start, end) for start, end in statements]


def _line_end(source: bytes, end: int) -> int:
    """``end`` (where a logical line ends) before the line break."""
    if end and source[end - 1] == ord("\n"):
        end -= 2 if end > 1 and source[end - 2] == ord("\r") else 1
    return end


def _logical_lines(source: bytes) -> list[int] | None:
    """The offsets where logical lines start, outside brackets, strings and continuations."""
    position = 3 if source.startswith(b"\xef\xbb\xbf") else 0
    starts, depth, search = [position], 0, _TOKEN.search
    while (match := search(source, position)) is not None:
        position = match.end()
        first = source[match.start()]
        if first == ord("\n"):
            if not depth:
                starts.append(position)
        elif first in _QUOTES:
            position = _string_end(source, position, match.group())
            if position < 0:
                return None
        elif first == ord("#"):
            position = source.find(b"\n", position) % (len(source) + 1)  # at the line break, or the end
        elif first in _OPEN:
            depth += 1
        elif first in _CLOSE:
            depth -= 1
            if depth < 0:
                return None
    return None if depth else starts


def _string_end(source: bytes, position: int, quote: bytes) -> int:
    """Where the string whose content starts at ``position`` ends (-1: it does not)."""
    if len(quote) == 1:
        match = _STRING_END[quote[0]].match(source, position)
        return -1 if match is None else match.end()
    content = position
    while (found := source.find(quote, position)) >= 0:
        escapes = found
        while escapes > content and source[escapes - 1] == ord("\\"):
            escapes -= 1
        if (found - escapes) % 2 == 0:
            return found + 3
        position = found + 1
    return -1


def _kept(source: bytes, statements: list[tuple[int, int]], triggers: list[str]) -> set[int]:
    """The indexes of the statements where one of ``triggers`` occurs. Each trigger is searched on
    its own (their alternation runs at 1 MB/s on a generated file: no literal to scan for), its
    candidates found by its search form and confirmed by the trigger itself."""
    starts = [start for start, _ in statements]
    kept: set[int] = set()
    for pattern in triggers:
        exact = trigger(pattern).exact
        candidates = trigger(pattern).candidates or exact
        position = 0
        while (candidate := candidates.search(source, position)) is not None:
            at = candidate.start()
            position = at + 1
            if candidates is not exact and not (exact.match(source, at) or (at and exact.match(source, at - 1))):
                continue
            index = bisect_right(starts, at) - 1
            if index >= 0 and at < statements[index][1]:
                kept.add(index)
                position = statements[index][1]  # the rest of a kept statement need not be searched
    return kept
