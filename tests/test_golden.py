"""Golden files: ``fixtures/rules/<family>/<case>.py`` migrates to ``<case>.out.py``.

Run ``pytest --update-golden`` to regenerate the ``.out.py`` files after an intended change,
then review the diff. Properties checked on every case: the output parses, a second run is a
no-op, and a case with nothing to change stays byte-identical.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from helpers import migrate_text, options_from

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "rules"
CASES = sorted(p for p in ROOT.rglob("*.py") if not p.name.endswith(".out.py"))


@pytest.mark.parametrize("case", CASES, ids=[c.relative_to(ROOT).as_posix() for c in CASES])
def test_golden(case: Path, update_golden: bool):
    source = case.read_text(encoding="utf-8")
    options = options_from(source)
    migrated, result = migrate_text(source, options, path=case.name)
    golden = case.with_name(case.name[: -len(".py")] + ".out.py")
    if update_golden:
        golden.write_text(migrated, encoding="utf-8")
    assert golden.exists(), f"missing golden {golden}; run pytest --update-golden"
    assert migrated == golden.read_text(encoding="utf-8")
    cst.parse_module(migrated)
    again, _ = migrate_text(migrated, options, path=case.name)
    assert again == migrated, "second migrate changed the output"
    if result.status == "unchanged":
        assert migrated == source
