"""README.md opens with the two set-up commands (.ci/run runs the second one verbatim), stays an entry
point, and its links and those of docs/ lead somewhere."""

from __future__ import annotations

import re

from cli_helpers import REPO


def _setup_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    return re.findall(r"```bash\n(.*?)\n```", text, re.DOTALL)[:2]


def test_readme_starts_with_one_sentence_and_two_commands():
    text = (REPO / "README.md").read_text()
    first_block = text.index("```bash")
    title, sentence = text[:first_block].strip().split("\n\n")
    assert title == "# cuda2npu" and sentence.count(". ") == 0 and sentence.endswith(".")
    install_and_run, install_and_test = _setup_commands()
    assert "cuda2npu migrate fixtures/projects/" in install_and_run
    assert "pytest" in install_and_test


def test_ci_runs_the_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text()
    assert _setup_commands()[1] in ci.splitlines()


def test_local_pre_commit_hooks_match_the_published_ones():
    """docs/ci-integration.md's `repo: local` hooks run what .pre-commit-hooks.yaml runs."""
    text = (REPO / "docs" / "ci-integration.md").read_text()
    local = re.search(r"repo: local\n(.*?)```", text, re.DOTALL).group(1)
    published = (REPO / ".pre-commit-hooks.yaml").read_text()
    entries = re.findall(r"entry: (cuda2npu .*)", published)
    assert len(entries) == 2 and all(entry in local for entry in entries)


README_MAX_LINES = 250
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _links(text: str) -> list[str]:
    """Markdown link targets outside fenced code blocks and inline code."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    prose = re.sub(r"`[^`\n]*`", "", prose)
    return LINK.findall(prose)


def test_readme_is_an_entry_point_and_every_relative_link_resolves():
    readme = REPO / "README.md"
    assert len(readme.read_text(encoding="utf-8").splitlines()) <= README_MAX_LINES
    pages = [readme, *sorted((REPO / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in _links(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http(s), mailto, ...
                continue
            path = target.split("#", 1)[0]
            if path and not (page.parent / path).exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert not broken, "links to files that do not exist:\n" + "\n".join(broken)
