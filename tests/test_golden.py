"""Golden files: ``fixtures/rules/<family>/<case>.py`` migrates to ``<case>.out.py``.

Run ``pytest --update-golden`` to regenerate the ``.out.py`` files after an intended change,
then review the diff. ``fixtures/rules/<family>/variants.toml`` migrates an existing input again
under other options (``[<name>] input = "<case>.py", options = {...}`` → ``<name>.out.py``), so
the same script is not copied once per option set. Properties checked on every case: the output parses, a second run is a
no-op, and a case with nothing to change stays byte-identical.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
import tomllib
from helpers import migrate_text, options_from, options_of

from cuda2npu.core.options import Options

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "rules"


def _cases() -> list[tuple[str, Path, Options]]:
    """(name, input file, options) for every input file and every declared variant."""
    cases = []
    for path in sorted(p for p in ROOT.rglob("*.py") if not p.name.endswith(".out.py")):
        cases.append((path.stem, path, options_from(path.read_text(encoding="utf-8"))))
    for table in sorted(ROOT.rglob("variants.toml")):
        for name, variant in tomllib.loads(table.read_text(encoding="utf-8")).items():
            options = {key: _tuples(v) for key, v in variant["options"].items()}
            cases.append((name, table.parent / variant["input"], options_of(**options)))
    return cases


def _tuples(value):
    """TOML lists as Options' tuples, nested ones too (``pins = [["torch", "==2.4.0"]]``)."""
    return tuple(_tuples(item) for item in value) if isinstance(value, list) else value


CASES = _cases()


@pytest.mark.parametrize(
    ("name", "case", "options"), CASES, ids=[f"{case.parent.name}/{name}" for name, case, _ in CASES]
)
def test_golden(name: str, case: Path, options: Options, update_golden: bool):
    source = case.read_text(encoding="utf-8")
    migrated, result = migrate_text(source, options, path=case.name)
    golden = case.with_name(f"{name}.out.py")
    if update_golden:
        golden.write_text(migrated, encoding="utf-8")
    assert golden.exists(), f"missing golden {golden}; run pytest --update-golden"
    assert migrated == golden.read_text(encoding="utf-8")
    cst.parse_module(migrated)
    again, _ = migrate_text(migrated, options, path=case.name)
    assert again == migrated, "second migrate changed the output"
    if result.status == "unchanged":
        assert migrated == source
