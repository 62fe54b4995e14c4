"""The shipped tree cites upstream sources and its own docs, never a path outside the repository.

References go to upstream repositories/URLs or to ``docs/reference/torch_npu.md §N`` and
``docs/design.md §N`` (see docs/writing-rules.md).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECKED = ["cuda2npu", "rules", "docs", "tests", "benchmarks", "README.md"]
OUTSIDE = re.compile(r"\.\./shared|shared/reference|shared/design")


def _project_files() -> list[str]:
    """Tracked files plus untracked ones git does not ignore, under the checked paths."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *CHECKED],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    this = Path(__file__).resolve().relative_to(ROOT).as_posix()
    return sorted({name for name in out.split("\0") if name and name != this})


def test_no_reference_outside_the_repository():
    offenders = []
    for name in _project_files():
        path = ROOT / name
        if not path.is_file():  # deleted in the working tree, not yet in the index
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{name}:{number}: {line.strip()[:120]}")
    assert not offenders, "references outside the repository:\n" + "\n".join(offenders)


CITATION = re.compile(r"(docs/reference/torch_npu\.md|docs/design\.md)((?:,? ?§[\d.]+(?:[–-][\d.]+)?)+)")
SECTION = re.compile(r"^#{2,3} (\d+(?:\.\d+)?)[. ]", re.MULTILINE)


def test_cited_sections_exist():
    """``docs/reference/torch_npu.md §1.3`` must name a section that the document has."""
    sections = {
        doc: set(SECTION.findall((ROOT / doc).read_text(encoding="utf-8")))
        for doc in ("docs/reference/torch_npu.md", "docs/design.md")
    }
    missing = []
    for name in _project_files():
        path = ROOT / name
        if not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        for doc, cited in CITATION.findall(text):
            for number in re.findall(r"§(\d+(?:\.\d+)?)", cited):
                if number not in sections[doc]:
                    missing.append(f"{name}: {doc} §{number}")
    assert not missing, "citations of sections that do not exist:\n" + "\n".join(sorted(set(missing)))
