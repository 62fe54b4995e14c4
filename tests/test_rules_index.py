"""rules/INDEX.md is the output of `cuda2npu rules --format markdown` for the current catalogue.

Regenerate it after adding or changing a rule:

    cuda2npu rules --format markdown > rules/INDEX.md
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from cuda2npu.commands.cli import main
from cuda2npu.core.catalogue import all_rules

INDEX = Path(__file__).resolve().parent.parent / "rules" / "INDEX.md"


def test_rules_index_is_current():
    result = CliRunner().invoke(main, ["rules", "--format", "markdown"], catch_exceptions=False)
    assert result.exit_code == 0
    assert INDEX.read_text(encoding="utf-8") == result.stdout, (
        "rules/INDEX.md is stale: run `cuda2npu rules --format markdown > rules/INDEX.md`"
    )


def test_every_rule_has_a_heading_for_its_help_uri():
    text = INDEX.read_text(encoding="utf-8")
    for doc in all_rules().values():
        assert f"\n## {doc.code} {doc.name}\n" in text, doc.code


def test_rules_json_lists_every_rule():
    data = json.loads(CliRunner().invoke(main, ["rules", "--format", "json"]).stdout)
    assert [r["code"] for r in data] == list(all_rules())
