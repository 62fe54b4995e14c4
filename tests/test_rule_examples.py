"""Every example in the rule catalogue runs: it raises its rule and migrates to its ``after``."""

from __future__ import annotations

import pytest
from helpers import dedent, migrate_text, options_from

from cuda2npu.core.catalogue import all_rules

EXAMPLES = [
    pytest.param(doc.code, example, id=f"{doc.code}-{index}")
    for doc in all_rules().values()
    for index, example in enumerate(doc.examples)
]
VALID = [
    pytest.param(doc.code, text, id=f"{doc.code}-valid-{index}")
    for doc in all_rules().values()
    for index, text in enumerate(doc.valid)
]


@pytest.mark.parametrize(("code", "example"), EXAMPLES)
def test_example_reports_and_migrates(code, example):
    before = dedent(example.before)
    options = options_from(before, **example.options)
    after, result = migrate_text(before, options)
    assert code in {f.code for f in result.findings}
    expected = dedent(example.after) if example.after is not None else before
    assert after == expected
    again, second = migrate_text(after, options)
    assert again == after, "a second migrate must change nothing"
    assert not [f for f in second.findings if f.fixable], "no fixable finding may remain"


@pytest.mark.parametrize(("code", "text"), VALID)
def test_valid_code_is_untouched(code, text):
    source = dedent(text)
    after, result = migrate_text(source)
    assert after == source
    assert code not in {f.code for f in result.findings}


NON_PYTHON_FAMILIES = {"project"}  # dependency files and shell scripts: tested in test_depfiles.py


def test_every_fixable_rule_has_an_example_with_a_fix():
    for doc in all_rules().values():
        if doc.fixable and doc.family not in NON_PYTHON_FAMILIES:
            assert any(e.after is not None and dedent(e.after) != dedent(e.before) for e in doc.examples), doc.code


def test_every_rule_code_is_implemented_or_engine():
    from cuda2npu.core.options import Options
    from cuda2npu.core.rulebase import REGISTRY
    from cuda2npu.families import enabled_rules

    enabled_rules(Options())
    implemented = {code for cls in REGISTRY for code in cls.codes}
    documented = set(all_rules())
    engine = {code for code, doc in all_rules().items() if code.startswith("NPU0") or doc.family in NON_PYTHON_FAMILIES}
    assert implemented <= documented, implemented - documented
    assert documented - engine <= implemented, (documented - engine) - implemented
