"""benchmarks/first_reads.py: the first-read registry, its totals in docs/precision.md, and the
hunks → verdicts → record round trip on a small project."""

from __future__ import annotations

import importlib.util
import re
import shutil

import pytest
from cli_helpers import REPO, write

SCRIPT = REPO / "benchmarks" / "first_reads.py"


@pytest.fixture(scope="module")
def first_reads():
    spec = importlib.util.spec_from_file_location("first_reads", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_precision_doc_rows_are_the_registry_totals(first_reads):
    """Each first-read row of docs/precision.md states its round's hunks, wrong and noise as summed
    from benchmarks/first_reads.toml."""
    doc = (REPO / "docs" / "precision.md").read_text()
    totals = first_reads.totals(first_reads.load()["read"])
    for name, label in {
        "3": "3 (LLM stack)",
        "3'": "3 (LLM stack, after its rules)",
        "3b": "3b ",
        "3c": "3c ",
        "4": "4 ",
        "5": "5 ",
        "6": "6 ",
        "7": "7 ",
        "8": "8 ",
        "9": "9 ",
        "10": "10 ",
        "11": "11 ",
        "12": "12 ",
    }.items():
        row = next(line for line in doc.splitlines() if line.startswith(f"| {label}"))
        hunks, wrong, noise = (int(re.match(r"\s*(\d+)", cell).group(1)) for cell in row.split("|")[4:7])
        assert (hunks, wrong, noise) == tuple(totals[name][k] for k in ("hunks", "wrong", "noise")), name


def test_candidates_are_not_read_yet(first_reads):
    registry = first_reads.load()
    read = {r["project"].lower() for r in registry["read"]}
    assert not read & {c.lower() for c in registry["candidates"]}
    assert first_reads.unread(registry) == registry["candidates"]


def test_hunks_then_record_then_no_second_first_read(first_reads, tmp_path, monkeypatch):
    registry = tmp_path / "first_reads.toml"
    shutil.copy(first_reads.REGISTRY, registry)
    monkeypatch.setattr(first_reads, "REGISTRY", registry)
    source = tmp_path / "toy"
    write(source / "train.py", "import torch\n\nmodel = torch.nn.Linear(2, 2).cuda()\ntorch.cuda.synchronize()\n")
    write(source / "notes.py", "print('no cuda here')\n")
    hunks_file, verdicts_file = first_reads.write_hunks(source)
    assert "train.py" in hunks_file.read_text() and "notes.py" not in hunks_file.read_text()
    count = len(re.findall(r"^\[hunk\.\d+\]$", verdicts_file.read_text(), re.M))
    assert count >= 1
    with pytest.raises(SystemExit, match="without a verdict"):
        first_reads.record(source, "someone/toy", "abc1234", "toy", "HEAD")
    filled = verdicts_file.read_text().replace('verdict = ""', 'verdict = "correct"', count - 1)
    verdicts_file.write_text(filled.replace('verdict = ""', 'verdict = "noise"'))
    line = first_reads.record(source, "someone/toy", "abc1234", "toy", "HEAD")
    assert line == f"someone/toy: hunks {count}, wrong 0, noise 1, import_failing 0, import_failing_unmarked 0"
    assert first_reads.totals(first_reads.load()["read"])["toy"]["hunks"] == count
    with pytest.raises(SystemExit, match="read before"):
        first_reads.record(source, "someone/toy", "abc1234", "toy", "HEAD")


def test_a_missing_project_writes_nothing_and_an_empty_verdicts_file_is_renewed(first_reads, tmp_path):
    """A reader's typo must not leave an empty verdicts file that the real run then keeps (round 20)."""
    with pytest.raises(SystemExit, match="no such project directory"):
        first_reads.write_hunks(tmp_path / "toy")
    assert list(tmp_path.iterdir()) == []
    write(tmp_path / "toy" / "train.py", "import torch\n\nx = torch.ones(2).cuda()\n")
    write(tmp_path / "toy.verdicts.toml", "import_failing = 0\nimport_failing_unmarked = 0\n")
    _, verdicts_file = first_reads.write_hunks(tmp_path / "toy")
    assert "[hunk.1]" in verdicts_file.read_text()


def test_a_last_line_without_a_newline_stays_a_line_of_its_own(first_reads, tmp_path):
    """DeepSeek-Coder's eval.sh (round 13): the removed and the added last line were run together."""
    write(tmp_path / "a" / "eval.sh", "export CUDA_VISIBLE_DEVICES=0")
    write(tmp_path / "b" / "eval.sh", "export ASCEND_RT_VISIBLE_DEVICES=0")
    [(path, hunk)] = first_reads.changed_hunks(tmp_path / "a", tmp_path / "b")
    assert path == "eval.sh"
    assert hunk.splitlines()[1:] == [
        "-export CUDA_VISIBLE_DEVICES=0",
        "\\ No newline at end of file",
        "+export ASCEND_RT_VISIBLE_DEVICES=0",
        "\\ No newline at end of file",
    ]
