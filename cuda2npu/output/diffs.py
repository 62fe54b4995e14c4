"""Unified diffs of migrated files, as ``patch`` / ``git apply`` take them, coloured as git colours them."""

from __future__ import annotations

import difflib
import re

from cuda2npu.core.decoding import decode
from cuda2npu.output import style

NO_NEWLINE = "\\ No newline at end of file\n"


def _patch_lines(text: str) -> list[str]:
    """Lines as `patch` sees them: split after "\\n" only (not at form feeds or U+2028)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def unified_diff(path: str, old: bytes | None, new: bytes) -> str:
    """A unified diff that `patch`/`git apply` accept, with the "No newline at end of file" marker.

    ``old=None``: a new file (``--- /dev/null``).
    """
    name = path.lstrip("/")
    old_lines, old_name = ([], "/dev/null") if old is None else (_patch_lines(decode(old)), f"a/{name}")
    lines = _unified_lines(old_lines, _patch_lines(decode(new)), old_name, f"b/{name}")
    return "".join(line if line.endswith("\n") else line + "\n" + NO_NEWLINE for line in lines)


def _unified_lines(a: list[str], b: list[str], old_name: str, new_name: str, context: int = 3):
    """``difflib.unified_diff`` without its "popular line" heuristic (autojunk), which in a file of more
    than 200 lines treats frequent lines (``eps=1e-4,``, blank lines) as junk and shows them removed and
    added again around a change."""
    groups = difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context)
    for index, group in enumerate(groups):
        if index == 0:
            yield f"--- {old_name}\n"
            yield f"+++ {new_name}\n"
        (_, i1, _, j1, _), (_, _, i2, _, j2) = group[0], group[-1]
        yield f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@\n"
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                yield from (" " + line for line in a[a1:a2])
                continue
            yield from ("-" + line for line in a[a1:a2])
            yield from ("+" + line for line in b[b1:b2])


def _range(start: int, stop: int) -> str:
    """A hunk range as unified diffs write it (``3``, ``3,4``, an empty range ``2,0``)."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def color_diff(diff: str) -> str:
    """A unified diff coloured as git colours it (file headers bold, hunks cyan, - red, + green)."""
    if not style.enabled():
        return diff
    colours = (
        ("--- ", {"bold": True}),
        ("+++ ", {"bold": True}),
        ("@@", {"fg": "cyan"}),
        ("-", {"fg": "red"}),
        ("+", {"fg": "green"}),
    )
    lines = []
    for line in diff.splitlines(keepends=True):
        body, end = (line[:-1], "\n") if line.endswith("\n") else (line, "")
        look = next((look for prefix, look in colours if body.startswith(prefix)), None)
        lines.append((style.paint(body, True, **look) if look else body) + end)
    return "".join(lines)
