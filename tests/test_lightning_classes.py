"""The project's subclasses of Lightning's Fabric/LightningLite (analysis/lightning_classes.py, NPU951)."""

from __future__ import annotations

import json

from cli_helpers import cli, write

from cuda2npu.analysis.lightning_classes import lightning_classes


def test_r16_a_projects_lightning_lite_subclass_is_a_lightning_constructor(tmp_path):
    """RWKV-v4: `class Trainer(LightningLite)` in src/trainer.py, built in train.py with
    `accelerator="gpu"` (which names no Lightning); transformers' Trainer elsewhere is not it."""
    write(
        tmp_path / "src" / "trainer.py",
        "from pytorch_lightning.lite import LightningLite\n\n\nclass Trainer(LightningLite):\n    def run(self):\n        pass\n",
    )
    write(tmp_path / "src" / "__init__.py", "")
    train = write(
        tmp_path / "train.py",
        'from src.trainer import Trainer\n\ntrainer = Trainer(devices=1, accelerator="gpu", precision="bf16")\n',
    )
    hf = write(tmp_path / "hf.py", "from transformers import Trainer\n\ntrainer = Trainer(model=None, args=None)\n")
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    found = [(d["path"].rsplit("/", 1)[-1], d["code"]) for d in data["diagnostics"] if d["code"] == "NPU951"]
    assert found == [(train.name, "NPU951")]
    assert hf.name not in {path for path, _ in found}


def test_a_lightning_lite_subclass_built_in_its_own_file_is_one_too(tmp_path):
    """co-tracker (round 46): `class Lite(LightningLite)` and `Lite(..., accelerator="gpu")` below it in
    train_on_kubric.py, where the class has no import to resolve it through."""
    train = write(
        tmp_path / "train_on_kubric.py",
        "from pytorch_lightning.lite import LightningLite\n\n\nclass Lite(LightningLite):\n"
        "    def run(self, args):\n        return args\n\n\n"
        'Lite(strategy="ddp", devices=8, accelerator="gpu", precision=32).run(None)\n',
    )
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    assert [(d["path"].rsplit("/", 1)[-1], d["line"], d["code"]) for d in data["diagnostics"]] == [
        (train.name, 9, "NPU951")
    ]


def test_the_fact_follows_subclasses_and_needs_a_lightning_import(tmp_path):
    texts = {
        tmp_path / "a.py": b"import lightning as L\nclass Base(L.Fabric):\n    pass\nclass Mine(Base):\n    pass\n",
        tmp_path / "b.py": b"class Fabric:\n    pass\nclass Other(Fabric):\n    pass\n",  # no Lightning import
    }
    assert lightning_classes(texts) == ("Base", "Mine")
