"""Jupyter notebooks (``.ipynb``): check and migrate the code cells, nothing else.

The code cells of a Python notebook are joined into one module (so an import in cell 1 resolves a
call in cell 5), with a separator comment line before each cell, and run through the engine
like a ``.py`` file. IPython lines — line magics (``%time``), shell escapes (``!pip``),
assignments from them (``files = !ls``), help (``obj?``) — are replaced by a placeholder
statement of the same indentation before and restored afterwards, so they are never touched
(lines continued with a backslash go with their magic); a cell indented as a whole is dedented
as IPython's ``leading_indent`` transform does and re-indented afterwards;
a cell magic (``%%bash``) hides its whole cell, except the Python-bodied ``%%time``,
``%%timeit``, ``%%capture`` and ``%%prun`` whose first line only is hidden.

Shell escapes (``!CUDA_VISIBLE_DEVICES=0 python train.py``, with their backslash-continued lines), the
package magics ``%pip`` / ``%conda`` (``%pip install faiss-gpu``) and ``%%bash`` / ``%%sh`` cells are shell script: they go through the shell file kind
(cuda2npu/filekinds/shellscripts.py, launch flags included), its renames made in place and its
markers written as comment lines above the command, whether or not the Python code needs anything.

Findings are :class:`NotebookFinding`: ``cell`` is the 1-based index among all cells of the
notebook (markdown cells count, as in the Jupyter UI), ``line``/``column`` are within the cell.

A migrated notebook changes only the ``source`` of the code cells that changed (kept as a list
of lines or a string, as it was); outputs, execution counts and metadata are untouched. The JSON
is written back with the file's own indentation, key order, ``ensure_ascii`` style, newline
style and trailing newline; a notebook whose formatting cannot be reproduced exactly is
reported and left unchanged rather than reformatted.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

from cuda2npu.core.catalogue import rule as rule_doc
from cuda2npu.core.diagnostics import PREFILTER_REASON, FileResult, Finding
from cuda2npu.core.markers import MARKER_PREFIX

SEPARATOR = "# cuda2npu-notebook-cell {index}"
SEPARATOR_RE = re.compile(r"^# cuda2npu-notebook-cell (\d+)$")
PLACEHOLDER = "pass  # cuda2npu-notebook-magic {index}"
PLACEHOLDER_RE = re.compile(r"^[ \t]*pass  # cuda2npu-notebook-magic (\d+)$")
MAGIC = re.compile(r"^[ \t]*(?:[%!]|\?|[\w.]+\?{1,2}[ \t]*$|[\w.,\[\] \t]+=[ \t]*[%!])")
PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun"}
# `!cmd` (not `!!cmd` captures, nor `x = !cmd`), and the package magics `%pip` / `%conda` / `%mamba`,
# which run `pip` / `conda` as the shell would
SHELL_ESCAPE = re.compile(r"^([ \t]*)(!(?!=)|%(?=(?:pip|conda|mamba)\b))(.*)$")
SHELL_CELL_MAGICS = {"bash", "sh"}


@dataclass(frozen=True)
class NotebookFinding(Finding):
    """A finding in a notebook: ``line`` and ``column`` are within cell ``cell`` (1-based)."""

    cell: int = 0

    def sort_key(self) -> tuple:
        return (self.path, self.cell, self.line, self.column, self.code)

    def to_json(self) -> dict:
        return {**super().to_json(), "cell": self.cell}


def is_notebook(path: Path) -> bool:
    return path.suffix == ".ipynb"


def _source_text(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _is_python(notebook: dict) -> bool:
    metadata = notebook.get("metadata") or {}
    language = (metadata.get("language_info") or {}).get("name") or (metadata.get("kernelspec") or {}).get("language")
    return language is None or str(language).lower() in ("python", "python3", "ipython")


def cell_lines(data: bytes) -> dict[int, list[str]]:
    """cell index (1-based) -> its source lines, for showing findings in context."""
    try:
        notebook = json.loads(data.decode("utf-8-sig"))
    except (ValueError, UnicodeDecodeError):
        return {}
    return {
        index: _source_text(cell).splitlines()
        for index, cell in enumerate(notebook.get("cells", []), start=1)
        if isinstance(cell, dict) and cell.get("cell_type") == "code"
    }


@dataclass
class _Joined:
    text: str
    starts: dict[int, int]  # cell index -> first line of its code in the joined text
    magics: dict[int, str]  # placeholder index -> original line (without newline)
    opaque: set[int]  # cells hidden whole (cell magics, and the cells of ``broken``)
    indents: dict[int, str]  # cell index -> the leading indentation IPython strips from it
    broken: dict[int, tuple[str, int, int]]  # cell index -> why its code does not parse, and where (left as written)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _hide(line: str, magics: dict[int, str], indent: str | None = None) -> str:
    """The placeholder for ``line``, at ``indent`` (a continuation line takes its magic's) or its own."""
    body = line.rstrip("\r\n")
    indent = _indent(body) if indent is None else indent
    key = len(magics)
    magics[key] = body
    return indent + PLACEHOLDER.format(index=key)


def _dedent(line: str, indent: str) -> str:
    """``line`` without the cell's leading indentation, as IPython runs it (its
    ``inputtransformer2.leading_indent``: the first line's indentation is removed from every line
    that starts with it); blank lines are kept as they are."""
    return line[len(indent) :] if indent and line.strip() and line.startswith(indent) else line


def _join(cells: list[dict]) -> _Joined:
    lines: list[str] = []
    starts: dict[int, int] = {}
    magics: dict[int, str] = {}
    opaque: set[int] = set()
    indents: dict[int, str] = {}
    broken: dict[int, tuple[str, int, int]] = {}
    for index, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = _source_text(cell)
        lines.append(SEPARATOR.format(index=index))
        starts[index] = len(lines) + 1
        cell_lines_ = source.splitlines()
        first = next((line for line in cell_lines_ if line.strip()), "")
        indents[index] = _indent(first)
        cell_lines_ = [_dedent(line, indents[index]) for line in cell_lines_]
        first = first.strip()
        if first.startswith("%%"):
            name = first[2:].split()[0] if len(first) > 2 else ""
            if name not in PYTHON_CELL_MAGICS:
                opaque.add(index)
                lines += [_hide(line, magics) if line.strip() else "" for line in cell_lines_]
                continue
        continued_from = None  # the indentation of the magic whose line ended with a backslash
        code: list[str] = []
        for line in cell_lines_:
            if continued_from is not None or (MAGIC.match(line) and not line.lstrip().startswith("#")):
                indent = _indent(line) if continued_from is None else continued_from
                code.append(_hide(line, magics, indent))
                continued_from = indent if line.rstrip().endswith("\\") else None
            else:
                code.append(line)
        problem = _syntax_problem("\n".join(code))
        if problem is not None:  # a fragment meant for pasting elsewhere: the other cells still migrate
            opaque.add(index)
            broken[index] = problem
            code = [_hide(line, magics, "") if line.strip() else "" for line in cell_lines_]
        lines += code
    return _Joined("\n".join(lines) + "\n", starts, magics, opaque, indents, broken)


def _syntax_problem(code: str) -> tuple[str, int, int] | None:
    """Why a cell's code (magics hidden) is not Python, and where (line, column in the cell); None
    when it is (top-level ``await`` is IPython's)."""
    try:
        compile(code, "<cell>", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    except SyntaxError as exc:
        return exc.msg, exc.lineno or 1, exc.offset or 1
    except ValueError as exc:  # a null byte
        return str(exc), 1, 1
    return None


def _split(text: str, joined: _Joined) -> dict[int, str]:
    """Cell index -> migrated code text (magics restored, no trailing newline added)."""
    cells: dict[int, list[str]] = {}
    current = None
    for line in (text[:-1] if text.endswith("\n") else text).split("\n"):
        match = SEPARATOR_RE.match(line)
        if match:
            current = int(match.group(1))
            cells[current] = []
            continue
        if current is None:
            continue
        placeholder = PLACEHOLDER_RE.match(line)
        cells[current].append(joined.magics[int(placeholder.group(1))] if placeholder else line)
    return {
        index: "\n".join(joined.indents.get(index, "") + line if line.strip() else line for line in lines)
        for index, lines in cells.items()
    }


def _locate(line: int, starts: dict[int, int]) -> tuple[int, int]:
    """(cell, line within cell) for a line of the joined text."""
    cell, first = 0, 1
    for index, start in starts.items():
        if start <= line:
            cell, first = index, start
    return cell, max(line - first + 1, 1)


# Colab writes an empty list over lines (`"text": [\n\n          ]`), which json.dumps writes `[]`
SPREAD_EMPTY_LIST = re.compile(r"\[\n\n[ \t]*\]")
# an empty list json.dumps writes (indented): after a key, or alone on its line; never inside a string
DUMPED_EMPTY_LIST = re.compile(r'(?:(?<!\\)": |^[ \t]*)\[\](?=,?$)', re.M)


def _dump_like(notebook: dict, original: str) -> str | None:
    """``notebook`` serialized exactly as ``original`` was, or None if that style is unknown."""
    newline = "\r\n" if "\r\n" in original else "\n"
    body = original.replace("\r\n", "\n")
    parsed = json.loads(original)
    style = _style(parsed, body)
    if style is not None:
        return _dump(notebook, style).replace("\n", newline)
    flat, spread = _flattened(body)  # Colab's spread empty lists: dump plainly, then spread them as the original does
    style = _style(parsed, flat) if spread else None
    if style is None or _spread_empty_lists(_dump(parsed, style), spread) != body:
        return None
    return _spread_empty_lists(_dump(notebook, style), spread).replace("\n", newline)


def _style(parsed: dict, body: str) -> tuple | None:
    """(indent, ensure_ascii, trailing whitespace) with which json.dumps writes ``parsed`` as ``body``
    (``\n`` newlines), or None."""
    trailing = body[len(body.rstrip()) :]
    indent_match = re.match(r"\{\n([ \t]+)\"", body)
    indents = [indent_match.group(1)] if indent_match else []
    indents += [i for i in (1, 2, 4, " ", "  ", "    ", "\t", None) if i not in indents]
    for indent in indents:
        for ensure_ascii in (False, True):
            if _dump(parsed, (indent, ensure_ascii, trailing)) == body:
                return indent, ensure_ascii, trailing
    return None


def _dump(notebook: dict, style: tuple) -> str:
    indent, ensure_ascii, trailing = style
    separators = (",", ": ") if indent is not None else None
    return json.dumps(notebook, indent=indent, ensure_ascii=ensure_ascii, separators=separators) + trailing


def _flattened(body: str) -> tuple[str, dict[int, str]]:
    """``body`` with its spread empty lists written ``[]``, and {the index among the empty lists of that
    text (:data:`DUMPED_EMPTY_LIST`) of each spread one: how it was written}."""
    parts, at, places = [], 0, {}
    for match in SPREAD_EMPTY_LIST.finditer(body):
        parts.append(body[at : match.start()])
        places[sum(map(len, parts))] = match.group(0)
        parts.append("[]")
        at = match.end()
    flat = "".join(parts) + body[at:]
    lists = [match.end() - 2 for match in DUMPED_EMPTY_LIST.finditer(flat)]
    spread = {index: places[where] for index, where in enumerate(lists) if where in places}
    return flat, spread if len(spread) == len(places) else {}


def _spread_empty_lists(text: str, spread: dict[int, str]) -> str:
    """``text`` with the empty lists ``spread`` numbers (among all of its empty lists) written as it says."""
    parts, at = [], 0
    for index, match in enumerate(DUMPED_EMPTY_LIST.finditer(text)):
        if index in spread:
            parts += [text[at : match.end() - 2], spread[index]]
            at = match.end()
    return "".join(parts) + text[at:]


@dataclass
class _ShellRewrite:
    """One shell escape (or a shell cell's body) of a cell: its lines before and after the migration."""

    cell: int
    before: list[str]
    after: list[str]


def _shell_pass(cells: list, path: Path, display: str, options) -> tuple[list[NotebookFinding], list[_ShellRewrite]]:
    """The findings of the notebook's shell escapes and shell cells, and their rewritten lines."""
    from cuda2npu.filekinds.shellscripts import check_shell_file

    findings: list[NotebookFinding] = []
    rewrites: list[_ShellRewrite] = []
    for index, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        lines = _source_text(cell).splitlines()
        shell_cell = _is_shell_cell(lines)
        for block in _shell_blocks(lines, shell_cell):
            found, new = check_shell_file(block.script, path, display, options)
            for finding in found:
                fields = {k: getattr(finding, k) for k in Finding.__dataclass_fields__}
                bang = 1 if finding.line == block.comments + 1 and not shell_cell else 0  # the `!` or `%` before it
                line, column = block.start + finding.line, finding.column + len(block.indent) + bang
                findings.append(NotebookFinding(**{**fields, "line": line, "column": column}, cell=index))
            if new != block.script:
                rewrites.append(_ShellRewrite(index, block.lines, block.rebuilt(new, shell_cell)))
    return findings, rewrites


def _is_shell_cell(lines: list[str]) -> bool:
    """The cell starts with ``%%bash`` or ``%%sh``."""
    first = next((line.strip() for line in lines if line.strip()), "")
    return first.startswith("%%") and first[2:].split()[:1] in ([m] for m in SHELL_CELL_MAGICS)


@dataclass
class _ShellBlock:
    """A shell escape of a cell (the ``# TODO(cuda2npu)`` lines just above it, its ``!`` line and the
    lines its backslashes continue it onto), or the body of a ``%%bash`` cell."""

    start: int  # the index of its first line in the cell (0-based)
    lines: list[str]
    indent: str
    comments: int  # marker lines above the command
    script: str  # the shell script it runs (``!`` or ``%`` and indentation removed)
    sigil: str = "!"  # what runs it: ``!``, or ``%`` of a package magic (``%pip install ...``)

    def rebuilt(self, script: str, shell_cell: bool) -> list[str]:
        """The block once its script became ``script``: the marker lines above the command, then the
        command, with its ``!`` and indentation back in place."""
        lines = script.rstrip("\n").split("\n")
        if shell_cell:
            return lines
        command = len(lines) - (len(self.lines) - self.comments)
        above = [self.indent + line for line in lines[:command]]
        continued = [
            (self.indent if before.startswith(self.indent) else "") + line
            for before, line in zip(self.lines[self.comments + 1 :], lines[command + 1 :])
        ]
        return [*above, self.indent + self.sigil + lines[command], *continued]


def _shell_blocks(lines: list[str], shell_cell: bool):
    """The cell's :class:`_ShellBlock` s."""
    if shell_cell:
        start = next(i for i, line in enumerate(lines) if line.strip()) + 1
        body = lines[start:]
        yield _ShellBlock(start, body, "", 0, "\n".join(body) + "\n")
        return
    index = 0
    while index < len(lines):
        match = SHELL_ESCAPE.match(lines[index])
        end = index
        while end < len(lines) - 1 and lines[end].rstrip().endswith("\\"):
            end += 1
        if match is not None and not lines[index].lstrip().startswith("!!"):
            indent = match.group(1)
            first = index
            while first > 0 and lines[first - 1].strip().startswith(MARKER_PREFIX):
                first -= 1
            comments = [_dedent(line, indent) for line in lines[first:index]]
            rest = [_dedent(line, indent) for line in lines[index + 1 : end + 1]]
            script = "\n".join([*comments, match.group(3), *rest]) + "\n"
            yield _ShellBlock(first, lines[first : end + 1], indent, index - first, script, match.group(2))
        index = end + 1


def _with_rewrites(source: str, rewrites: list[_ShellRewrite]) -> str:
    """``source`` (a cell's code, migrated or not) with its shell blocks replaced."""
    lines = source.split("\n")
    for rewrite in rewrites:
        size = len(rewrite.before)
        at = next((i for i in range(len(lines) - size + 1) if lines[i : i + size] == rewrite.before), None)
        if at is not None:  # not found: a rule moved the lines; they stay as the Python pass left them
            lines[at : at + size] = rewrite.after
    return "\n".join(lines)


def _broken_cell(display: str, cell: int, why: str, line: int, column: int) -> NotebookFinding:
    doc = rule_doc("NPU001")
    message = f"cell {cell} is not Python ({why}): left as written; the notebook's other cells are migrated"
    return NotebookFinding(display, line, column, "NPU001", doc.name, message, doc.tier, False, cell=cell)


def _engine_failure(display: str, message: str) -> FileResult:
    doc = rule_doc("NPU001")
    finding = NotebookFinding(display, 1, 1, "NPU001", doc.name, message, doc.tier, False, cell=0)
    return FileResult(display, "failed", message, [finding])


def process_notebook(data: bytes, path: Path, display: str, options, pattern=None) -> FileResult:
    """Check (``options.fix=False``) or migrate the code cells of one notebook's bytes (``path``: where
    it is, for the programs its shell escapes launch)."""
    from cuda2npu.filekinds.python import migrate_source

    try:
        original = data.decode("utf-8")
        notebook = json.loads(original)
    except (UnicodeDecodeError, ValueError) as exc:
        return _engine_failure(display, f"cannot parse notebook JSON: {exc}")
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        return _engine_failure(display, "not a Jupyter notebook (no cells list; nbformat 3 is not supported)")
    if not _is_python(notebook):
        return FileResult(display, "skipped", "not a Python notebook")
    shell_findings, rewrites = _shell_pass(cells, path, display, options)
    joined = _join(cells)
    source = joined.text.encode("utf-8")
    shell_findings += [  # a cell that is not Python is reported where a rule could have had work there
        _broken_cell(display, cell, why, line, column + len(joined.indents.get(cell, "")))
        for cell, (why, line, column) in joined.broken.items()
        if pattern is None or pattern.search(_source_text(cells[cell - 1]).encode("utf-8"))
    ]
    if pattern is not None and not pattern.search(source):
        if not shell_findings:
            return FileResult(display, "skipped", PREFILTER_REASON)
        result = FileResult(display, "unchanged")
    else:
        result = migrate_source(source, display, options)
    findings = list(shell_findings)
    for finding in result.findings:
        cell, line = _locate(finding.line, joined.starts)
        fields = {k: getattr(finding, k) for k in Finding.__dataclass_fields__}
        column = finding.column + len(joined.indents.get(cell, ""))  # the indentation IPython strips
        findings.append(NotebookFinding(**{**fields, "line": line, "column": column}, cell=cell))
    findings.sort(key=lambda f: f.sort_key())
    result = replace(result, findings=findings)
    if result.status == "failed":
        return result
    if (result.status != "changed" or result.new_source is None) and not rewrites:
        return replace(result, new_source=None)
    migrated = _split(result.new_source.decode("utf-8"), joined) if result.new_source is not None else {}
    for index, cell in enumerate(cells, start=1):
        here = [rewrite for rewrite in rewrites if rewrite.cell == index]
        if (index not in migrated or index in joined.opaque) and not here:
            continue
        before = _source_text(cell)
        code = migrated[index] if index in migrated and index not in joined.opaque else before.removesuffix("\n")
        after = _with_rewrites(code, here) + ("\n" if before.endswith("\n") else "")
        if after == before:
            continue
        cell["source"] = after.splitlines(keepends=True) if isinstance(cell.get("source"), list) else after
    text = _dump_like(notebook, original)
    if text is None:
        message = "notebook JSON formatting cannot be reproduced exactly; left unchanged (migrate it in Jupyter or normalize it with nbformat)"
        return FileResult(display, "failed", message, findings)
    new_source = text.encode("utf-8")
    if new_source == data:
        return FileResult(display, "unchanged", findings=findings)
    return FileResult(display, "changed", findings=findings, new_source=new_source, companions=result.companions)
