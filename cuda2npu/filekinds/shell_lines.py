"""The lines of a shell script as its checks read them: comment lines left out, each line's code
(up to its comment) and the ``# noqa`` directive of its comment."""

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
