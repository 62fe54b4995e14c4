"""Decoding a Python file's bytes (BOM, PEP 263 cookie) and CPython's verdict on its syntax, with
errors that carry 1-based positions. No libcst here: files the rules never parse are checked too."""

from __future__ import annotations

import ast
import io
import tokenize


class SourceError(Exception):
    """The file cannot be decoded or parsed; carries a 1-based position."""

    def __init__(self, message: str, line: int = 1, column: int = 1, end: tuple[int, int] | None = None) -> None:
        super().__init__(message)
        self.line = line
        self.column = column
        self.end = end  # (line, exclusive column) of the reported range, when known


def decode(source: bytes) -> str:
    """Text of a Python file, honouring a BOM and a PEP 263 coding cookie."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
        return source.decode(encoding)
    except UnicodeDecodeError as exc:
        line, column = position(source, exc.start)
        raise SourceError(
            f"cannot decode: {exc.reason} ({exc.encoding}, byte 0x{source[exc.start]:02x}); "
            "add a coding cookie (PEP 263) or re-encode as UTF-8",
            line,
            column,
        ) from None
    except (SyntaxError, LookupError) as exc:
        raise SourceError(f"cannot decode: {exc}") from None


def position(source: bytes, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a byte offset; lines end at LF, CRLF or a lone CR, as in CPython."""
    lines = source[:offset].splitlines(keepends=True)
    if not lines or lines[-1].endswith((b"\n", b"\r")):
        return len(lines) + 1, 1
    return len(lines), len(lines[-1]) + 1


def cpython_syntax_error(text: str) -> SourceError | None:
    """CPython's message and position of a syntax error in ``text`` (None: CPython accepts it)."""
    try:
        ast.parse(text)
    except SyntaxError as exc:
        line, column = exc.lineno or 1, exc.offset or 1
        end_line, end_column = getattr(exc, "end_lineno", None), getattr(exc, "end_offset", None)
        end = (end_line, end_column) if end_line == line and end_column and end_column > column else None
        return SourceError(f"cannot parse: {exc.msg}", line, column, end)
    except (ValueError, RecursionError, MemoryError):
        return None
    return None


def syntax_error(source: bytes) -> SourceError | None:
    """Why CPython could not compile the file (decoding or syntax), else None.

    For the files the rules skip unparsed (no trigger): syntax and decoding errors are reported
    whatever rules are selected, as ruff reports them; ``ast`` parses about ten times faster than libcst.
    """
    try:
        text = decode(source)
    except SourceError as exc:
        return exc
    if "\0" in text:
        return SourceError("cannot parse: source code contains null bytes", *position(source, source.index(b"\0")))
    return cpython_syntax_error(text)
