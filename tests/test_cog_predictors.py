"""Cog predictors (a project fact, cuda2npu/project/cog_predictors.py): the files a `cog.yaml` with
`gpu: true` names as `predict:`/`train:` run only in Cog's CUDA image; skipped with the reason. Without
`gpu: true`, and any other file, migrated."""

from __future__ import annotations

import json

from cli_helpers import cli, write

PREDICTOR = 'import torch\nfrom cog import BasePredictor\n\n\nclass Predictor(BasePredictor):\n    def setup(self):\n        self.device = "cuda"\n'
COG = 'build:\n  gpu: true\n  python_version: "3.11"\npredict: "predict.py:Predictor"\n'


def test_the_predictor_of_a_cog_build_on_a_cuda_image_is_skipped(tmp_path):
    """PhotoMaker (round 52): `predict.py` runs only under Cog, in the CUDA image `gpu: true` asks for."""
    gpu = tmp_path / "gpu"
    write(gpu / "cog.yaml", COG)
    predictor = write(gpu / "predict.py", PREDICTOR)
    script = write(gpu / "app.py", PREDICTOR)
    cpu = tmp_path / "cpu"
    write(cpu / "cog.yaml", COG.replace("gpu: true", "gpu: false"))
    cpu_predictor = write(cpu / "predict.py", PREDICTOR)
    for project, skipped, migrated in ((gpu, predictor, script), (cpu, None, cpu_predictor)):
        out = tmp_path / f"{project.name}-out"
        cli("migrate", project, "--out", out)
        report = json.loads((out / "cuda2npu_report.json").read_text())
        reasons = {
            f["path"].rsplit("/", 1)[-1]: f.get("reason", "") for f in report["files"] if f["status"] == "skipped"
        }
        if skipped is not None:
            assert "a Cog predictor" in reasons[skipped.name]
            assert (out / skipped.name).read_text() == PREDICTOR
        assert '"npu"' in (out / migrated.name).read_text()
