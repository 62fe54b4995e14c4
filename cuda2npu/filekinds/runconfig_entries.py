"""The keys and scalar values of a run configuration (YAML, JSON, TOML), with where their text is.

No YAML or TOML library: a line reader for YAML block mappings with plain or quoted scalars, a
line reader for TOML ``key = "string"`` lines under ``[table]`` headers, and a scanner over JSON
text (checked with ``json.loads`` first), which also reads a YAML document that is one flow
mapping (JSON-like, with comments, trailing commas and plain scalars). What the readers do not
understand (flow collections inside block mappings, anchors, aliases, tags, block and multi-line
scalars, escapes) is listed as not editable, and the keys under it are not listed at all.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    """One ``key: value`` of a mapping. ``path``: the keys from the root (list items add nothing),
    the entry's own last. ``value``: the scalar's text (a string, even for YAML's ``true``; JSON:
    its Python value), None for a container. ``start:end``: the value's text, quotes included."""

    path: tuple[str, ...]
    value: object
    start: int
    end: int
    quote: str  # '"', "'" or "" (a plain YAML scalar, a JSON number or literal)
    line: int
    column: int
    line_start: int  # offset of the key's line: where a marker line goes
    editable: bool  # a scalar whose text is the quoted or plain value itself (no escapes)

    @property
    def key(self) -> str:
        return self.path[-1]

    def replaced(self, new: str) -> tuple[int, int, str]:
        """The edit giving the scalar the string ``new`` in its own quoting."""
        return self.start, self.end, f"{self.quote}{new}{self.quote}"


def mapping_at(entries: list[Entry], prefix: tuple[str, ...] = ()) -> dict[str, Entry | None]:
    """The keys of the mapping at ``prefix`` (the top: ``()``): their scalar entry, or None for a mapping or
    list below (known by its children)."""
    keys: dict[str, Entry | None] = {}
    depth = len(prefix)
    for entry in entries:
        if entry.path[:depth] != prefix or len(entry.path) == depth:
            continue
        if len(entry.path) == depth + 1:
            keys[entry.key] = entry
        else:
            keys.setdefault(entry.path[depth], None)
    return keys


def physical_lines(text: str) -> list[tuple[int, str]]:
    """(offset, line without its line break) of each line (``\n``-separated, as the line numbers count)."""
    result, offset = [], 0
    for raw in text.split("\n"):
        result.append((offset, raw.rstrip("\r")))
        offset += len(raw) + 1
    return result


# --- YAML -------------------------------------------------------------------------------------

YAML_KEY = re.compile(
    r"""(?P<indent>[ ]*)(?P<dash>(?:-[ ]+)*)(?P<key>[A-Za-z_][\w.-]*|"[^"\\]*"|'[^']*')[ ]*:(?:[ ]+(?P<rest>.*))?$"""
)
YAML_DASH = re.compile(r"(?P<indent>[ ]*)-(?:[ ]+(?P<rest>.*))?$")
YAML_QUOTED = re.compile(r"""(?P<q>["'])(?P<v>[^"'\\]*)(?P=q)[ ]*(?:#.*)?$""")
YAML_PLAIN = re.compile(r"""(?P<v>[^\s&*!|>{\[%@`"'#,][^#]*?)[ ]*(?:[ ]#.*)?$""")


def yaml_entries(text: str) -> list[Entry]:
    """The keys of a YAML text's block mappings (every document's), or of its one flow mapping
    (:func:`yaml_flow_entries`)."""
    flow = yaml_flow_entries(text) if text.lstrip().startswith(("{", "#")) else None
    if flow is not None:
        return flow
    entries: list[Entry] = []
    stack: list[tuple[int, tuple[str, ...]]] = []  # (indent, path) of the open mappings' keys
    under: int | None = None  # lines indented deeper than this belong to the last scalar/opaque value
    owner: int | None = None  # the index of the entry whose value that is (None: a list item's)
    for line_no, (offset, line) in enumerate(physical_lines(text), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        if under is not None and indent > under:
            if owner is not None:
                entries[owner] = _not_editable(entries[owner])  # a multi-line scalar
            continue
        under = owner = None
        if line.startswith(("---", "...", "%")) or line[indent : indent + 1] == "\t":
            stack = []
            continue
        match = YAML_KEY.match(line)
        if match is None:
            dash = YAML_DASH.match(line)
            if dash is not None and (dash.group("rest") or "#").lstrip()[:1] != "#":
                under = indent  # a scalar list item
            continue
        depth = indent + len(match.group("dash"))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        key = match.group("key").strip("\"'") if match.group("key")[0] in "\"'" else match.group("key")
        path = (stack[-1][1] if stack else ()) + (key,)
        rest = match.group("rest") or ""
        if not rest or rest.startswith("#"):
            stack.append((depth, path))  # a mapping or a list opens (or a null)
            continue
        start = offset + match.start("rest")
        entries.append(_yaml_scalar(path, rest, start, line_no, offset))
        under, owner = depth, len(entries) - 1
    return entries


def _yaml_scalar(path: tuple[str, ...], rest: str, start: int, line: int, line_start: int) -> Entry:
    column = start - line_start + 1
    quoted = YAML_QUOTED.match(rest)
    if quoted is not None:
        end = start + quoted.end("v") + 1
        return Entry(path, quoted.group("v"), start, end, quoted.group("q"), line, column, line_start, True)
    plain = YAML_PLAIN.match(rest)
    if plain is not None and ": " not in plain.group("v"):
        return Entry(path, plain.group("v"), start, start + plain.end("v"), "", line, column, line_start, True)
    return Entry(path, None, start, start + len(rest), "", line, column, line_start, False)


def _not_editable(entry: Entry) -> Entry:
    return Entry(entry.path, None, entry.start, entry.end, "", entry.line, entry.column, entry.line_start, False)


# --- YAML flow documents ----------------------------------------------------------------------

FLOW_STRING = re.compile(r""""(?:[^"\\]|\\.)*"|'(?:[^']|'')*'""", re.S)
FLOW_PLAIN = re.compile(r"[^\s,\[\]{}#:'\"](?:[^,\[\]{}#:\n]|:(?=[^\s,\]}]))*")


def yaml_flow_entries(text: str) -> list[Entry] | None:
    """The keys of a YAML document that is one flow mapping (``{ "key": value, ... }`` with comments,
    trailing commas, plain scalars such as ``True``: gpt-neox's configs); None when it is not one.
    Scalars are read as the block reader reads them (their text; quoted ones without the quotes)."""
    blanked = _blank_flow_comments(text)
    start = JSON_SPACE.match(blanked).end()
    if blanked[start : start + 1] != "{":
        return None
    spans: list[tuple] = []
    try:
        end = _json_value(blanked, start, (), spans, flow=True)
    except (ValueError, IndexError, RecursionError):
        return None
    if blanked[end:].strip():
        return None
    entries = []
    for path, _, _, value_start, value_end in spans:
        line_start = text.rfind("\n", 0, value_start) + 1
        line, column = text.count("\n", 0, value_start) + 1, value_start - line_start + 1
        source = blanked[value_start:value_end].rstrip()  # a plain scalar ends before blanked commas and spaces
        value_end = value_start + len(source)
        if source[0] in "{[":
            entries.append(Entry(path, None, value_start, value_end, "", line, column, line_start, False))
            continue
        quote = source[0] if source[0] in "\"'" else ""
        editable = not quote or ("\\" not in source and quote * 2 not in source[1:-1])
        value = _flow_text(source) if editable else None
        entries.append(Entry(path, value, value_start, value_end, quote, line, column, line_start, editable))
    return entries


def _flow_text(source: str) -> str:
    """A flow scalar's text: without its quotes (and YAML's escapes), or a plain scalar's trimmed text."""
    if source[:1] == '"':
        return json.loads(source)
    if source[:1] == "'":
        return source[1:-1].replace("''", "'")
    return source.strip()


def _blank_flow_comments(text: str) -> str:
    """``text`` with its comments (outside quoted scalars) and trailing commas blanked, offsets kept."""
    chars, i, quote = list(text), 0, ""
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\" and quote == '"':
                i += 2
                continue
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "#" and (i == 0 or text[i - 1] in " \t\r\n"):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            chars[i:end] = " " * (end - i)
            i = end
            continue
        i += 1
    blanked = "".join(chars)
    return re.sub(r",(?=\s*[}\]])", " ", blanked)


# --- TOML -------------------------------------------------------------------------------------

TOML_HEADER = re.compile(r"[ \t]*\[\[?[ \t]*([A-Za-z0-9_.\- \t]+?)[ \t]*\]\]?[ \t]*(?:#.*)?$")
TOML_KEY = re.compile(
    r"""[ \t]*(?P<key>[A-Za-z0-9_-]+(?:[ \t]*\.[ \t]*[A-Za-z0-9_-]+)*)[ \t]*=[ \t]*(?P<q>["'])(?P<v>[^"'\\\n]*)(?P=q)[ \t]*(?:#.*)?$"""
)


def toml_entries(text: str) -> list[Entry]:
    """The ``key = "string"`` lines of a TOML text (bare keys; a multi-line array or string
    before them ends the reading: its lines could look like keys)."""
    entries: list[Entry] = []
    table: tuple[str, ...] = ()
    for line_no, (offset, line) in enumerate(physical_lines(text), start=1):
        if '"""' in line or "'''" in line or line.rstrip().endswith(("[", "{", ",")):
            break
        header = TOML_HEADER.match(line)
        if header is not None:
            table = tuple(part.strip() for part in header.group(1).split("."))
            continue
        match = TOML_KEY.match(line)
        if match is None:
            continue
        path = table + tuple(part.strip() for part in match.group("key").split("."))
        start, end = offset + match.start("q"), offset + match.end("v") + 1
        entries.append(
            Entry(path, match.group("v"), start, end, match.group("q"), line_no, start - offset + 1, offset, True)
        )
    return entries


# --- JSON -------------------------------------------------------------------------------------

JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
JSON_ATOM = re.compile(r"-?(?:\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|Infinity)|true|false|null|NaN")
JSON_SPACE = re.compile(r"\s*")


@dataclass(frozen=True)
class Member:
    """A JSON object member: its entry and the span of its ``"key"``."""

    entry: Entry
    key_start: int
    key_end: int


def json_members(text: str) -> list[Member] | None:
    """Every member of every object of a JSON text, in text order (None: not valid JSON)."""
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return None
    spans: list[tuple] = []  # (path, key start, key end, value start, value end)
    try:
        _json_value(text, JSON_SPACE.match(text, 0).end(), (), spans)
    except (ValueError, RecursionError):
        return None
    members, line, line_start, scanned = [], 1, 0, 0
    for path, key_start, key_end, start, end in spans:  # in text order: one sweep counts the lines
        breaks = text.count("\n", scanned, start)
        if breaks:
            line, line_start = line + breaks, text.rfind("\n", scanned, start) + 1
        scanned = start
        members.append(Member(_json_entry(text, path, start, end, line, line_start), key_start, key_end))
    return members


def json_entries(text: str) -> list[Entry] | None:
    members = json_members(text)
    return None if members is None else [m.entry for m in members]


def _json_value(text: str, i: int, path: tuple[str, ...], spans: list[tuple], flow: bool = False) -> int:
    """Scan the value at ``i`` (the spans of its members into ``spans``); the offset past it.
    ``flow``: YAML's flow syntax (single quotes, plain scalars and keys) instead of JSON's."""
    char = text[i : i + 1]
    scalar = (FLOW_STRING, FLOW_PLAIN) if flow else (JSON_STRING, JSON_ATOM)
    if char in "{[":
        closing, i = "}" if char == "{" else "]", JSON_SPACE.match(text, i + 1).end()
        while text[i : i + 1] != closing:
            if char == "{":
                key = scalar[0].match(text, i) or (scalar[1].match(text, i) if flow else None)
                if key is None or text[JSON_SPACE.match(text, key.end()).end()] != ":":
                    raise ValueError(f"unexpected key at {i}")
                colon = JSON_SPACE.match(text, key.end()).end()
                value_start = JSON_SPACE.match(text, colon + 1).end()
                name = _flow_text(key.group(0)) if flow else json.loads(key.group(0))
                index = len(spans)
                spans.append(())  # the member comes before the members of its value
                value_end = _json_value(text, value_start, path + (name,), spans, flow)
                spans[index] = (path + (name,), *key.span(), value_start, value_end)
                i = value_end
            else:
                i = _json_value(text, i, path, spans, flow)
            i = JSON_SPACE.match(text, i).end()
            if text[i : i + 1] == ",":
                i = JSON_SPACE.match(text, i + 1).end()
            elif text[i : i + 1] != closing:
                raise ValueError(f"unexpected text at {i}")
        return i + 1
    match = scalar[0].match(text, i) or scalar[1].match(text, i)
    if match is None:
        raise ValueError(f"unexpected JSON text at {i}")
    return match.end()


def _json_entry(text: str, path: tuple[str, ...], start: int, end: int, line: int, line_start: int) -> Entry:
    column = start - line_start + 1
    source = text[start:end]
    if source[0] in "{[":
        return Entry(path, None, start, end, "", line, column, line_start, False)
    value = json.loads(source)
    plain = source[0] == '"' and "\\" not in source
    return Entry(path, value, start, end, '"' if source[0] == '"' else "", line, column, line_start, plain)
