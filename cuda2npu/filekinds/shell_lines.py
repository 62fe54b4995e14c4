"""The lines of a shell script as its checks read them: comment lines left out, each line's code
(up to its comment) and the ``# noqa`` directive of its comment; Slurm's ``#SBATCH`` directive
lines apart; a command's words, split into its simple commands."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cuda2npu.core.noqa import Directive, parse_comment

COMMENT = re.compile(r"(?:^|\s)#")


@dataclass
class ShellLine:
    number: int
    start: int  # offset of the line in the text
    code: str  # the line up to its comment
    directive: Directive | None  # its ``# noqa``, if any


def shell_lines(text: str, ignore_noqa: bool = False) -> list[ShellLine]:
    """Every line that is not a comment line, in order (``ignore_noqa``: with no directive)."""
    lines = []
    offset = 0
    for number, raw in enumerate(text.splitlines(keepends=True), start=1):
        line = raw.rstrip("\r\n")
        start, offset = offset, offset + len(raw)
        if line.lstrip().startswith("#"):
            continue
        comment = COMMENT.search(line)
        code = line[: comment.start()] if comment else line
        directive = parse_comment(line[comment.end() - 1 :]) if comment and not ignore_noqa else None
        lines.append(ShellLine(number, start, code, directive))
    return lines


def shell_commands(text: str, ignore_noqa: bool = False) -> list[list[ShellLine]]:
    """The script's commands (lines joined by a trailing backslash), comment lines left out."""
    commands: list[list[ShellLine]] = []
    current: list[ShellLine] = []
    for line in shell_lines(text, ignore_noqa):
        current.append(line)
        if not line.code.rstrip().endswith("\\"):
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
