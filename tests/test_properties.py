"""Properties of ``migrate`` on random valid programs (hypothesmith) with CUDA fragments spliced in.

* it never raises; * its output parses (CPython) whenever the input did; * a second run changes
nothing; * a program without any trigger is not parsed, and no rule reports on it when run there.

The default budget keeps CI short; ``pytest -m slow tests/test_properties.py`` runs a long fuzz.
"""

from __future__ import annotations

import ast
import re
import warnings

import hypothesmith
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cuda2npu.core.options import Options
from cuda2npu.core.source import SourceError, parse
from cuda2npu.families import enabled_rules
from cuda2npu.filekinds.python import migrate_source, run_rules
from cuda2npu.project.runner import _pattern

FRAGMENTS = [
    "import torch\n",
    "import torch as th\n",
    "from torch import cuda\n",
    "from torch.cuda.amp import autocast, GradScaler\n",
    "x = torch.ones(3).cuda()\n",
    "y = th.zeros(2, device='cuda:0')\n",
    "torch.cuda.synchronize()\n",
    "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n",
    "model.to('cuda')\n",
    "if x.is_cuda:\n    torch.cuda.empty_cache()\n",
    "dist.init_process_group(backend='nccl')\n",
    "torch.backends.cuda.matmul.allow_tf32 = True\n",
    "with torch.cuda.amp.autocast():\n    pass\n",
    "os.environ['CUDA_VISIBLE_DEVICES'] = '0'\n",
    "def f(t, device='cuda'):\n    return t.to(device).cuda(non_blocking=True)\n",
    "scaler = GradScaler()\n",
    "from apex import amp\nmodel, opt = amp.initialize(model, opt, opt_level='O1')\n",
    "from flash_attn import flash_attn_func\nout = flash_attn_func(q, k, v, causal=True)\n",
    "import transformer_engine.pytorch as te\nlayer = te.Linear(4, 4)\n",
]
OPTIONS = Options()
PROGRAMS = hypothesmith.from_grammar()  # built once: each call compiles a lark parser (seconds)
FUZZ = settings(
    max_examples=100, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None
)
SLOW = settings(FUZZ, max_examples=3000, derandomize=False)


@pytest.fixture
def long_run(request):
    """The long fuzz runs only when asked for: ``pytest -m slow``."""
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("long fuzz: run with `pytest -m slow`")


def compiles(source: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings of random programs
            ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def top_level_starts(source: str) -> list[int]:
    """0-based line numbers where a top-level statement (with its decorators) begins, plus the end."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    starts = [min([n.lineno for n in getattr(s, "decorator_list", [])] + [s.lineno]) - 1 for s in tree.body]
    return sorted(set(starts)) + [len(LINES.findall(source))]


@st.composite
def spliced_programs(draw) -> str:
    """A random valid module with CUDA fragments inserted before or after its top-level statements."""
    program = draw(PROGRAMS)
    starts = top_level_starts(program)
    assume(starts)
    lines = LINES.findall(program)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n"
    inserts = draw(st.lists(st.tuples(st.sampled_from(starts), st.sampled_from(FRAGMENTS)), min_size=1, max_size=4))
    for position, fragment in sorted(inserts, key=lambda item: -item[0]):
        lines.insert(position, fragment)
    source = "".join(lines)
    assume(compiles(source))  # e.g. a fragment after a line ending in a backslash
    return source


def check_migration(source: str) -> None:
    data = source.encode("utf-8", "surrogatepass")
    result = migrate_source(data, "fuzz.py", OPTIONS)  # must not raise
    if result.status != "changed":
        assert result.new_source is None
        return
    new = result.new_source
    assert compiles(new.decode("utf-8")), new.decode("utf-8", "replace")
    again = migrate_source(new, "fuzz.py", OPTIONS)
    assert again.status != "changed", (source, new, again.new_source)


def check_untouched(source: str) -> None:
    """Not parsed, and no rule would report there if it were: the triggers are what a report needs."""
    data = source.encode("utf-8", "surrogatepass")
    assume(not _pattern(OPTIONS).search(data))
    result = migrate_source(data, "fuzz.py", OPTIONS)
    assert result.status == "skipped" and result.new_source is None and not result.findings
    try:
        module = parse(data)
    except SourceError:
        return
    assert not run_rules(module, OPTIONS, enabled_rules(OPTIONS), data)


@FUZZ
@given(spliced_programs())
def test_migrate_is_safe_and_idempotent(source):
    check_migration(source)


@FUZZ
@given(PROGRAMS)
def test_code_without_triggers_is_returned_byte_identical(source):
    check_untouched(source)


@pytest.mark.slow
@pytest.mark.usefixtures("long_run")
@SLOW
@given(spliced_programs())
def test_migrate_is_safe_and_idempotent_long(source):
    check_migration(source)


@pytest.mark.slow
@pytest.mark.usefixtures("long_run")
@SLOW
@given(PROGRAMS)
def test_code_without_triggers_is_returned_byte_identical_long(source):
    check_untouched(source)
