"""The per-rule prefilter: a trigger's search form finds every file the trigger itself matches."""

from __future__ import annotations

import re

import pytest
from helpers import dedent
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda2npu.core.catalogue import all_rules
from cuda2npu.core.diagnostics import PREFILTER_REASON
from cuda2npu.core.options import Options
from cuda2npu.core.prefilter import build, search_form, trigger
from cuda2npu.families import enabled_rules
from cuda2npu.filekinds.python import triggered

RULES = enabled_rules(Options(fix=False))
TRIGGERS = sorted({trigger for rule in RULES for trigger in (*rule.triggers, *rule.requires)})
TEXTS = [dedent(example.before) for doc in all_rules().values() for example in doc.examples] + [
    dedent(text) for doc in all_rules().values() for text in doc.valid
]


@pytest.mark.parametrize("trigger", TRIGGERS)
def test_search_form_matches_wherever_the_trigger_does(trigger):
    exact = re.compile(trigger.encode())
    matched = [text for text in TEXTS if exact.search(text.encode())]
    missed = [text for text in matched if not re.search(search_form(trigger).encode(), text.encode())]
    assert not missed


def test_search_form_drops_only_a_leading_boundary_quote_class_or_lookbehind():
    assert search_form(r"\bamp\b") == r"amp\b"
    assert search_form(r"""["']apex\.""") == r"apex\."
    assert search_form(r"\.cuda\b") == r"\.cuda\b"  # starts with a literal already
    assert search_form(r"(?<!re\.)\bcompile\b") == r"compile\b"


PIECES = [
    "cuda",
    "CUDA_",
    "VISIBLE",
    "_cuda",
    "nccl",
    "NCCL",
    "apex",
    "amp",
    "compile",
    "re.",
    "float64",
    "step(",
    "backward",
    "(",
    "transformer_engine",
    "triton",
    "'",
    '"',
    "_",
    ".",
    " ",
    "x",
    "\n",
    "#",
    "noqa",
]


@given(st.lists(st.sampled_from(PIECES), max_size=12))
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
def test_the_prefilter_answers_as_the_alternation_of_the_triggers(pieces):
    prefilter = build(RULES, Options(fix=False))
    text = "".join(pieces).encode()
    exact = prefilter.exact.search(text)
    found = prefilter.search(text)
    assert (found is None) == (exact is None)
    assert found is None or prefilter.exact.match(text, found.start())
    for pattern in TRIGGERS:  # each rule's own triggers are searched the same way
        assert (trigger(pattern).search(text) is None) == (re.search(pattern.encode(), text) is None)


def test_the_prefilter_answers_as_the_alternation_on_every_example():
    prefilter = build(RULES, Options(fix=False))
    for text in TEXTS:
        assert (prefilter.search(text.encode()) is None) == (prefilter.exact.search(text.encode()) is None)


def test_a_rule_runs_only_where_its_triggers_occur():
    text = b"import torch\nx = torch.float64\n"
    names = {rule.__name__ for rule in triggered(RULES, text, Options())}
    assert "Advisories" in names  # float64
    assert not any("Apex" in name or "Colossal" in name for name in names)


def test_every_rule_module_is_listed_in_families():
    from cuda2npu.core.rulebase import REGISTRY
    from cuda2npu.families import FAMILIES

    listed = {f"cuda2npu.families.{family}" for family in FAMILIES}
    assert {cls.__module__ for cls in REGISTRY} <= listed


def test_rules_run_in_families_order_however_the_modules_were_imported():
    import subprocess
    import sys

    script = (
        "import cuda2npu.families.{first}\n"
        "from cuda2npu.families import enabled_rules\n"
        "from cuda2npu.core.options import Options\n"
        "print(' '.join(c.__name__ for c in enabled_rules(Options())))\n"
    )
    orders = {
        subprocess.run(
            [sys.executable, "-c", script.format(first=first)], capture_output=True, text=True, check=True
        ).stdout
        for first in ("advisories", "transformer_engine.rules", "device.env_vars")
    }
    assert len(orders) == 1
    assert orders.pop().split() == [cls.__name__ for cls in RULES]


@pytest.mark.parametrize(
    "text",
    [
        # Megatron's own classes and helpers of apex's names: the apex rules run only where apex is imported
        "from megatron.core.fusions.fused_layer_norm import FusedLayerNorm\nnorm = FusedLayerNorm(8)\n",
        "import torch\nbn = torch.nn.SyncBatchNorm(8)\nddp = torch.nn.parallel.DistributedDataParallel(m)\n",
        "from megatron.core.utils import local_multi_tensor_applier as multi_tensor_applier\n",
        # advisories: a host sync outside any training loop, `re.compile`, DistributedDataParallel
        "import re\nPATTERN = re.compile('x')\ndef f(t):\n    return t.item()\n",
    ],
)
def test_files_no_rule_could_report_on_are_not_parsed(text):
    from cuda2npu.project.runner import _pattern

    assert _pattern(Options(fix=False)).search(text.encode()) is None


@pytest.mark.parametrize(
    "text",
    [
        "from apex.normalization import FusedLayerNorm\n",
        "import amp_C\n",
        "for x in loader:\n    loss.backward()\n    print(loss.item())\n",
        "from torch import compile\nmodel = compile(model)\n",
        "model = torch.nn.DataParallel(model)\n",
        "x = t.double()\n",
    ],
)
def test_files_a_rule_may_report_on_are_parsed(text):
    from cuda2npu.project.runner import _pattern

    assert _pattern(Options(fix=False)).search(text.encode()) is not None
    assert triggered(RULES, text.encode(), Options(fix=False))


@pytest.mark.parametrize(
    "text",
    [
        # NPU804 needs a training call and a host sync: a scheduler's `.step(` alone is not parsed
        "class Scheduler:\n    def __init__(self):\n        self.step(0)\n",
        "for epoch in range(3):\n    scheduler.step()\n",
    ],
)
def test_a_file_whose_trigger_lacks_what_its_rule_requires_is_not_parsed(text, monkeypatch):
    from cuda2npu.filekinds import python

    monkeypatch.setattr(python, "parse", lambda source: pytest.fail("parsed"))
    result = python.migrate_source(text.encode(), "x.py", Options(fix=False))
    assert (result.status, result.reason) == ("skipped", PREFILTER_REASON)
