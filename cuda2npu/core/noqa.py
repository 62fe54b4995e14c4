"""``# noqa`` suppression comments, ruff-compatible.

- ``# noqa`` (any case) suppresses every finding on its line; ``# noqa: NPU101, NPU2`` (or
  ``# noqa : NPU101``) only the listed codes or code prefixes (codes are separated by commas and/or
  spaces). The directive may follow other comment text (``# reason  # noqa: NPU101``);
  ``# noqa:`` without codes and lowercase codes (``# noqa: npu101``) are not directives, as in ruff.
- ``# cuda2npu: noqa`` on a line of its own exempts the whole file; ``# cuda2npu: noqa: NPU101``,
  ``# ruff: noqa: NPU101`` and ``# flake8: noqa: NPU101`` exempt it from those codes only, as in
  ruff. A blanket ``# ruff: noqa`` / ``# flake8: noqa`` does not: it is written for the other
  tool's style rules (a first read found one hiding a whole file's CUDA code).
- A bare ``# noqa`` on an import line does not hide a manual finding about that import (it fails
  on an NPU host): it is flake8/ruff's unused-import silencer (``import transformer_engine  # noqa``).
- A finding is suppressed by a directive on its own line. When that line cannot carry a comment
  (it ends inside a multi-line string or with a ``\\`` continuation), the directive goes on the
  line where that string or continuation ends, as in ruff.
- Suppressed findings are neither reported nor fixed (the engine filters them before fixing).
- With the opt-in rule NPU005 (``unused-noqa``) enabled, a directive naming one of our codes
  (``NPU…``) that suppressed nothing is reported (unused, non-enabled, or unknown: no such code).
  Blanket ``# noqa`` and other tools' codes are left alone.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass

from cuda2npu.core.catalogue import rule as rule_doc
from cuda2npu.core.diagnostics import Finding, Tier
from cuda2npu.core.imports import is_import_line

UNUSED_CODE = "NPU005"
DIRECTIVE = re.compile(r"#\s*noqa", re.IGNORECASE)
CODE = re.compile(r"[A-Z]+[0-9]*")
# from each "# noqa" (overlapping: one in a string does not hide the comment after it) to the line's
# end; [\s\x1c-\x1f] is str's \s in ASCII
QUICK = re.compile(rb"(?=(#[\s\x1c-\x1f]*(?:(?:cuda2npu|ruff|flake8)[ \t]*:[ \t]*)?noqa[^\r\n]*))", re.IGNORECASE)
FILE_DIRECTIVE = re.compile(r"#\s*(cuda2npu|ruff|flake8)\s*:\s*noqa(?:\s*:\s*([A-Z0-9,\s]+))?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Directive:
    """One ``# noqa`` comment: ``codes`` None is blanket. Columns are 0-based within the line."""

    line: int
    column: int  # where the "#" of the directive starts
    end: int  # where the directive (with its codes) ends
    codes: tuple[str, ...] | None

    def matches(self, code: str) -> bool:
        return self.codes is None or any(code.startswith(c) for c in self.codes)


def parse_comment(comment: str, line: int = 0, offset: int = 0) -> Directive | None:
    """The noqa directive in a comment's text (``comment`` starts with ``#``), if any."""
    for match in DIRECTIVE.finditer(comment):
        rest_start = match.end()
        rest = comment[rest_start:]
        spaces = len(rest) - len(rest.lstrip())
        if rest[spaces:].startswith(":"):  # "# noqa: X", and "# noqa : X" as ruff reads it
            rest_start += spaces
            rest = rest[spaces:]
        elif not rest or rest[0].isspace() or rest[0] == "#":
            return Directive(line, offset + match.start(), offset + rest_start, None)
        else:
            continue  # "# noqa123", "# noqanything"
        pos = 1
        codes: list[str] = []
        end = rest_start + 1
        while True:
            while pos < len(rest) and (rest[pos].isspace() or rest[pos] == ","):
                pos += 1
            found = CODE.match(rest, pos)
            if not found:
                break
            after = found.end()
            if after < len(rest) and not (rest[after].isspace() or rest[after] == ","):
                break
            codes.append(found.group())
            pos = after
            end = rest_start + after
        if codes:
            return Directive(line, offset + match.start(), offset + end, tuple(codes))
    return None


def suppresses(comment: str | None, code: str, options) -> bool:
    """Whether ``comment`` (a line's ``# noqa: ...``, or None) suppresses ``code``, unless the run ignores
    ``# noqa`` (the line-oriented file kinds: Compose and Cog files, Dockerfiles)."""
    if options.ignore_noqa or not comment:
        return False
    directive = parse_comment(comment)
    return directive is not None and directive.matches(code)


def parse_file_comment(comment: str, line: int = 0) -> Directive | None:
    """A file-level exemption on a line of its own: ``# cuda2npu: noqa`` (blanket), or with codes
    (``# cuda2npu: noqa: NPU101``, ``# ruff: noqa: NPU101``, ``# flake8: noqa: NPU1``), as ruff reads
    them. A blanket ``# ruff: noqa`` / ``# flake8: noqa`` is not one: projects put it on generated or
    vendored files for the other tool's style rules, and it must not hide CUDA code from a migration."""
    match = FILE_DIRECTIVE.match(comment)
    if match is None or (match.group(2) or "") != (match.group(2) or "").upper():
        return None  # lowercase codes: not a directive (ruff warns about it)
    codes = tuple(CODE.findall(match.group(2) or ""))
    if not codes and match.group(1).lower() != "cuda2npu":
        return None
    return Directive(line, 0, len(comment), codes or None)


@dataclass
class NoqaMap:
    """The directives of one source text and where each line's directive lives."""

    directives: dict[int, Directive]
    comment_lines: list[int]  # sorted lines that can carry a trailing comment
    exemption: Directive | None = None  # a file-level ``# ruff: noqa`` (blanket or with codes)

    @classmethod
    def from_text(cls, text: str) -> "NoqaMap":
        directives: dict[int, Directive] = {}
        safe: set[int] = set()
        exemption = None
        try:
            for token in tokenize.generate_tokens(io.StringIO(text).readline):
                if token.type == tokenize.COMMENT:
                    own_line = not token.line[: token.start[1]].strip()
                    found = parse_file_comment(token.string, token.start[0]) if own_line else None
                    exemption = exemption or found
                    directive = None if found else parse_comment(token.string, token.start[0], token.start[1])
                    if directive is not None:
                        directives[token.start[0]] = directive
                elif token.type in (tokenize.NEWLINE, tokenize.NL):
                    safe.add(token.start[0])
        except (tokenize.TokenError, SyntaxError, IndentationError):
            directives = {}
            for number, line in enumerate(split_lines(text), start=1):
                index = line.find("#")
                directive = parse_comment(line[index:].rstrip("\r\n"), number, index) if index >= 0 else None
                if directive is not None:
                    directives[number] = directive
            safe = set(range(1, len(split_lines(text)) + 2))
        return cls(directives, sorted(safe), exemption)

    def comment_line(self, line: int) -> int:
        """The line whose trailing comment applies to a finding on ``line``."""
        import bisect

        index = bisect.bisect_left(self.comment_lines, line)
        return self.comment_lines[index] if index < len(self.comment_lines) else line

    def directive_for(self, line: int) -> Directive | None:
        if self.exemption is not None:
            return self.exemption
        own = self.directives.get(line)
        if own is not None:
            return own
        return self.directives.get(self.comment_line(line))

    def suppresses(self, line: int, code: str) -> Directive | None:
        directive = self.directive_for(line)
        return directive if directive is not None and directive.matches(code) else None


def line_directives(text: str, ignore: bool = False) -> dict[int, Directive]:
    """The directive of each line of a non-Python text (requirements, run configs): the first ``#``
    on the line that starts one (no tokenizer: these formats have no multi-line strings to skip);
    none with ``ignore`` (--ignore-noqa)."""
    directives = {}
    if ignore:
        return directives
    for number, line in enumerate(text.splitlines(), start=1):
        if "noqa" not in line.lower():
            continue
        for match in re.finditer("#", line):
            directive = parse_comment(line[match.start() :], number, match.start())
            if directive is not None:
                directives[number] = directive
                break
    return directives


EXAMPLE = "(e.g., `# noqa: NPU101, NPU103`)"


def malformed(text: str) -> list[tuple[int, str]]:
    """``(line, why)`` of each comment that starts a ``# noqa`` directive but is none, which ruff warns
    about and then ignores: ``# noqa:`` without codes (or with lowercase ones), ``# noqa'd`` /
    ``# noqaNPU101``. ``text`` is Python source; an untokenizable text has no warnings (NPU001 says why)."""
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type != tokenize.COMMENT or parse_comment(token.string) is not None:
                continue
            if parse_file_comment(token.string) is not None:
                continue
            for match in DIRECTIVE.finditer(token.string):
                rest = token.string[match.end() :].lstrip()
                if rest.startswith(":"):
                    found.append((token.start[0], f"expected a comma-separated list of codes {EXAMPLE}"))
                    break
                if token.string[match.end() : match.end() + 1] not in ("", " ", "\t", "#"):
                    found.append(
                        (token.start[0], f"expected `:` followed by a comma-separated list of codes {EXAMPLE}")
                    )
                    break
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    return found


def split_lines(text: str) -> list[str]:
    """Physical lines with their endings (``\\n``, ``\\r\\n`` or ``\\r``), as Python's tokenizer sees them."""
    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text)


def may_concern_us(source: bytes) -> bool:
    """Cheap test: can this text hold a directive that suppresses or names one of our codes?

    Each ``# noqa`` of the raw text is read as the comment it would start (comments end at ``\r``
    or ``\n``), a superset of the comments the tokenizer finds: only a blanket directive or one
    naming an ``NPU`` code or a prefix of one (``N``) can matter, so a file whose directives are all
    ``# noqa: F401`` is not tokenized. A line that is not ASCII is taken to matter (its encoding
    is not known here).
    """
    for match in QUICK.finditer(source):
        comment = match.group(1)
        if not comment.isascii():
            return True
        text = comment.decode("ascii")
        directive = parse_file_comment(text) or parse_comment(text)
        if directive is not None and (directive.codes is None or any(_ours(c) for c in directive.codes)):
            return True
    return False


def _ours(code: str) -> bool:
    """Whether a directive's code (or code prefix) can match one of our ``NPU…`` codes."""
    return code.startswith("NPU") or "NPU".startswith(code)


# --- the engine's part ---------------------------------------------------------------------


def unused_enabled(options) -> bool:
    return options.code_enabled(UNUSED_CODE, rule_doc(UNUSED_CODE).opt_in)


def suppress(
    text: str, positions: dict, reports: list, options, path: str, first_round: bool
) -> tuple[list, list[Finding]]:
    """(reports not suppressed by a directive, NPU005 findings for unused directives).

    ``text`` is the code the reports were found in, ``positions`` the ranges of their nodes.
    """
    noqa_map = NoqaMap.from_text(text)
    if not noqa_map.directives and noqa_map.exemption is None:
        return reports, []
    kept = []
    used: dict[int, set[str]] = {}
    for report in reports:
        line = positions[report.node].start.line
        directive = noqa_map.suppresses(line, report.code)
        if directive is not None and _failing_import(directive, noqa_map, report):
            directive = None
        if directive is None:
            kept.append(report)
        else:
            used.setdefault(directive.line, set()).add(report.code)
    unused = unused_findings(noqa_map, used, options, path) if first_round and unused_enabled(options) else []
    return kept, unused


def _failing_import(directive: Directive, noqa_map: NoqaMap, report) -> bool:
    """A bare line ``# noqa`` on an import that fails on an NPU host (a manual finding at an import
    line) does not hide that finding: it was written for flake8/ruff's unused-import warning
    (``import transformer_engine as te  # noqa``), and the import still stops the program."""
    return (
        directive.codes is None
        and directive is not noqa_map.exemption
        and report.tier == Tier.MANUAL
        and is_import_line(report.statement)
    )


def unused_findings(noqa_map: NoqaMap, used: dict[int, set[str]], options, path: str) -> list[Finding]:
    """NPU005 for each of our codes in a directive that matched no finding."""
    doc = rule_doc(UNUSED_CODE)
    findings = []
    for line, directive in sorted(noqa_map.directives.items()):
        if directive.codes is None or any(c and UNUSED_CODE.startswith(c) for c in directive.codes):
            continue  # blanket, or the directive silences NPU005 itself
        matched = used.get(line, set())
        unused = [c for c in directive.codes if c.startswith("NPU") and not any(m.startswith(c) for m in matched)]
        if not unused:
            continue
        unknown = [c for c in unused if not _known(c)]
        disabled = [c for c in unused if c not in unknown and not _any_enabled(c, options)]
        active = [c for c in unused if c not in unknown and c not in disabled]
        parts = []
        if active:
            parts.append("unused: " + ", ".join(active))
        if disabled:
            parts.append("non-enabled: " + ", ".join(disabled))
        if unknown:
            parts.append("unknown: " + ", ".join(unknown))
        message = f"Unused `noqa` directive ({'; '.join(parts)})"
        findings.append(Finding(path, line, directive.column + 1, UNUSED_CODE, doc.name, message, doc.tier, False))
    return findings


def _known(prefix: str) -> bool:
    """Whether a directive's ``NPU…`` code is one of the catalogue's codes or a prefix of one."""
    from cuda2npu.core.catalogue import all_rules

    return any(code.startswith(prefix) for code in all_rules())


def _any_enabled(prefix: str, options) -> bool:
    from cuda2npu.core.catalogue import all_rules

    return any(code.startswith(prefix) and options.code_enabled(code, doc.opt_in) for code, doc in all_rules().items())


# --- --add-noqa ------------------------------------------------------------------------------


def add_noqa(text: str, codes_by_line: dict[int, set[str]]) -> tuple[str, int]:
    """``text`` with ``# noqa: CODES`` on each given line (merged into an existing directive).

    Returns the new text and the number of directives added or extended. A finding on a line
    that cannot carry a comment gets its directive where that line's statement part ends.
    """
    noqa_map = NoqaMap.from_text(text)
    lines = split_lines(text)
    wanted: dict[int, set[str]] = {}
    for line, codes in codes_by_line.items():
        target = line if line in noqa_map.comment_lines or line in noqa_map.directives else noqa_map.comment_line(line)
        missing = {
            c for c in codes if noqa_map.directive_for(line) is None or not noqa_map.directive_for(line).matches(c)
        }
        if missing:
            wanted.setdefault(target, set()).update(missing)
    count = 0
    for line, codes in sorted(wanted.items()):
        if not 1 <= line <= len(lines):
            continue
        raw = lines[line - 1]
        body = raw.rstrip("\r\n")
        ending = raw[len(body) :]
        directive = noqa_map.directives.get(line)
        ordered = ", ".join(sorted(codes))
        if directive is not None and directive.codes is not None:
            body = body[: directive.end] + ", " + ordered + body[directive.end :]
        elif directive is None:
            body = f"{body.rstrip()}  # noqa: {ordered}" if body.strip() else body
        else:
            continue
        lines[line - 1] = body + ending
        count += 1
    return "".join(lines), count


def write_noqa(findings: list[Finding], files: dict[str, object]) -> tuple[int, int]:
    """``check --add-noqa``: add directives in the Python files of ``findings`` (display -> path).

    Files are decoded and re-encoded in their own encoding (BOM and coding cookie kept), newline
    style kept, and written atomically. Engine diagnostics (NPU001-NPU004), notebooks and
    project files (requirements, shell scripts) are skipped. Returns (directives, files changed).
    """
    from cuda2npu.core.decoding import SourceError, decode
    from cuda2npu.core.fileio import atomic_write

    per_file: dict[str, dict[int, set[str]]] = {}
    for finding in findings:
        if finding.code in ("NPU001", "NPU002", "NPU003", "NPU004") or not finding.path.endswith((".py", ".pyi")):
            continue
        per_file.setdefault(finding.path, {}).setdefault(finding.line, set()).add(finding.code)
    added = changed = 0
    for display, codes_by_line in sorted(per_file.items()):
        path = files[display]
        data = path.read_bytes()
        try:
            text = decode(data)
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except (SourceError, SyntaxError):
            continue
        new_text, count = add_noqa(text, codes_by_line)
        if count:
            atomic_write(path, new_text.encode(encoding))
            added += count
            changed += 1
    return added, changed
