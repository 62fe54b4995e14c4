"""Copies of transformers' modular model sources (``modular_<model>.py``, from which ``modeling_<model>.py``
is generated; a project fact, cuda2npu/analysis/modular_sources.py): skipped with the reason where the
modeling file lies beside them and nothing imports them; the modeling file is migrated."""

from __future__ import annotations

import json

from cli_helpers import cli, write

MODEL = "import torch\n\n\ndef rotate(x):\n    return x.to('cuda')\n"


def test_an_unimported_modular_source_beside_its_modeling_file_is_skipped(tmp_path):
    """VLM2Vec (round 38): `vlm_backbone/qwen2_5_vl/modular_qwen2_5_vl.py` is imported by nothing. Near misses:
    a modular file something imports, and one without a modeling file beside it, are migrated."""
    modular = write(tmp_path / "backbone" / "qwen" / "modular_qwen.py", MODEL)
    modeling = write(tmp_path / "backbone" / "qwen" / "modeling_qwen.py", MODEL)
    imported = write(tmp_path / "backbone" / "llava" / "modular_llava.py", MODEL)
    write(tmp_path / "backbone" / "llava" / "modeling_llava.py", MODEL)
    write(tmp_path / "train.py", "from backbone.llava.modular_llava import rotate\n")
    alone = write(tmp_path / "backbone" / "phi" / "modular_phi.py", MODEL)
    out = tmp_path.parent / f"{tmp_path.name}-out"
    cli("migrate", tmp_path, "--out", out)
    report = json.loads((out / "cuda2npu_report.json").read_text())
    skipped = {f["path"].rsplit("/", 1)[-1]: f.get("reason", "") for f in report["files"] if f["status"] == "skipped"}
    assert "modeling_qwen.py" in skipped["modular_qwen.py"] and "nothing imports it" in skipped["modular_qwen.py"]
    assert (out / modular.relative_to(tmp_path)).read_text() == MODEL
    for migrated in (modeling, imported, alone):
        assert "'npu'" in (out / migrated.relative_to(tmp_path)).read_text(), migrated
