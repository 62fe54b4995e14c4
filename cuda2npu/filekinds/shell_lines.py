"""The lines of a shell script as its checks read them: comment lines left out, each line's code
(up to its comment) and the ``# noqa`` directive of its comment; Slurm's ``#SBATCH`` directive
lines apart; a command's words, split into its simple commands."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cuda2npu.core.noqa import Directive, parse_comment

COMMENT = re.compile(r"(?:^|\s)#")
HEREDOC = re.compile(r"""(?<!<)<<(?!<)-?[ \t]*(['"]?)([A-Za-z_]\w*)\1""")  # `<<EOF`, `<<-'END'` (not `<<<`)


@dataclass
class ShellLine:
    number: int
    start: int  # offset of the line in the text
    code: str  # the line up to its comment
    directive: Directive | None  # its ``# noqa``, if any
    open_quote: str | None = None  # the quote (``"`` / ``'``) left open at its end: the command goes on
    heredoc: int | None = None  # in a here-document's body (or its end line): the number of the line opening it


def shell_lines(text: str, ignore_noqa: bool = False) -> list[ShellLine]:
    """Every line that is not a comment line, in order (``ignore_noqa``: with no directive). A ``#``
    inside quotes starts no comment, also in a string that spans lines; a here-document's lines are
    read one by one (their quotes are text)."""
    lines = []
    offset = 0
    quote = heredoc = opener = None
    for number, raw in enumerate(text.splitlines(keepends=True), start=1):
        line = raw.rstrip("\r\n")
        start, offset = offset, offset + len(raw)
        inside = opener
        if heredoc is not None and line.strip() == heredoc:
            heredoc = opener = None
        elif heredoc is not None:
            comment = COMMENT.search(line)
            end = comment.start() if comment else len(line)
        if quote is None and line.lstrip().startswith("#"):
            continue
        if heredoc is None:
            end, quote = _code_end(line, quote)
            opened = HEREDOC.search(line, 0, end) if quote is None else None
            heredoc, opener = (opened.group(2), number) if opened else (None, None)
        code = line[:end]
        directive = parse_comment(line[end:].lstrip()) if end < len(line) and not ignore_noqa else None
        lines.append(ShellLine(number, start, code, directive, quote, inside))
    return lines


def heredoc_openers(lines: list[ShellLine]) -> dict[int, int]:
    """The number of each line of a here-document's body (comment lines too) → the number of the line
    opening it, from the script's :func:`shell_lines`: text for another program (a Slurm job script
    ``cat <<EOT > job.sh`` writes), where no line may be inserted."""
    ends = {}
    for line in lines:
        if line.heredoc is not None:
            ends[line.heredoc] = max(ends.get(line.heredoc, 0), line.number)
    return {number: opener for opener, end in ends.items() for number in range(opener + 1, end + 1)}


def _code_end(line: str, quote: str | None) -> tuple[int, str | None]:
    """Where the line's comment starts (its length: none), and the quote still open at its end,
    given the one open at its start."""
    position = 0
    while position < len(line):
        char = line[position]
        if quote == "'":
            quote = None if char == "'" else quote
        elif char == "\\":
            position += 1  # an escaped character, outside quotes or in double quotes
        elif quote == '"':
            quote = None if char == '"' else quote
        elif char in "\"'":
            quote = char
        elif char == "#" and (position == 0 or line[position - 1].isspace()):
            return position, None
        position += 1
    return len(line), quote


def shell_commands(text: str, ignore_noqa: bool = False) -> list[list[ShellLine]]:
    """The script's commands (lines joined by a trailing backslash or a quote left open, as
    ``ARGS="\\n --fp16\\n"``), comment lines left out."""
    commands: list[list[ShellLine]] = []
    current: list[ShellLine] = []
    for line in shell_lines(text, ignore_noqa):
        current.append(line)
        if line.open_quote is None and not line.code.rstrip().endswith("\\"):
            commands.append(current)
            current = []
    if current:
        commands.append(current)
    return commands


SBATCH = re.compile(r"[ \t]*#SBATCH(?=\s)")
WORD = re.compile(r"""(?:"(?:[^"\\]|\\.)*"|'[^']*'|\\.|[^\s;&|()`"'\\])+|(?P<sep>&&|\|\||[;&|()`])""")
UNQUOTE = re.compile(r"""'([^']*)'|"((?:[^"\\]|\\.)*)"|\\(.)""")


@dataclass
class ShellWord:
    line: ShellLine
    start: int  # offset in ``line.code``
    end: int
    text: str  # as written, quotes kept

    @property
    def value(self) -> str | None:
        """The word with its quotes removed; None where it expands anything (``$N``, ``$(...)``)."""
        if "$" in self.text:
            return None
        return UNQUOTE.sub(lambda m: next(g for g in m.groups() if g is not None), self.text)


def sbatch_lines(text: str, ignore_noqa: bool = False) -> list[ShellLine]:
    """The ``#SBATCH`` directive lines of a Slurm batch script (comment lines, which
    :func:`shell_lines` leaves out), each's code ending at a further comment."""
    lines = []
    offset = 0
    for number, raw in enumerate(text.splitlines(keepends=True), start=1):
        line = raw.rstrip("\r\n")
        start, offset = offset, offset + len(raw)
        directive = SBATCH.match(line)
        if directive is None:
            continue
        comment = COMMENT.search(line, directive.end())
        code = line[: comment.start()] if comment else line
        noqa = parse_comment(line[comment.end() - 1 :]) if comment and not ignore_noqa else None
        lines.append(ShellLine(number, start, code, noqa))
    return lines


def simple_commands(command: list[ShellLine]) -> list[list[ShellWord]]:
    """The words of a command, split into its simple commands at ``;``, ``&&``, ``|``, parentheses
    and backquotes (``N=$(python -c ...)`` gives ``N=$`` and ``python -c ...``)."""
    found: list[list[ShellWord]] = [[]]
    for line in command:
        for match in WORD.finditer(line.code):
            if match.group("sep"):
                found.append([])
            else:
                found[-1].append(ShellWord(line, match.start(), match.end(), match.group()))
    return [words for words in found if words]
