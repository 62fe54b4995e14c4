"""A project's vendored adapters for vLLM releases vllm-ascend does not support (verl's
``third_party/vllm/vllm_v_0_6_3``; a project fact, cuda2npu/analysis/vllm_adapters.py): their files
are skipped, with the reason, and left as written; an adapter for a supported release is migrated."""

from __future__ import annotations

import json
import os

from cli_helpers import cli, write

from cuda2npu.analysis.python_files import PythonFiles
from cuda2npu.analysis.vllm_adapters import legacy_vllm_adapters, own_vllm_release

WORKER = """\
import torch
import vllm


class Worker(vllm.worker.worker.Worker):
    def init_device(self):
        torch.cuda.set_device(self.local_rank)
"""


def test_legacy_adapter_directories_are_found_by_version(tmp_path):
    old = write(tmp_path / "verl/third_party/vllm/vllm_v_0_6_3/worker.py", WORKER)
    write(tmp_path / "verl/third_party/vllm/vllm_v_0_8_4/worker.py", WORKER)
    write(tmp_path / "verl/third_party/vllm/vllm_v_0_5_4/README.md", "notes\n")  # no Python file
    write(tmp_path / "tools/vllm_v_tools.py", "x = 1\n")
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert legacy_vllm_adapters(files) == ((os.path.realpath(old.parent), "0.6.3"),)


def test_migrate_skips_legacy_adapters_and_migrates_the_rest(tmp_path):
    project = tmp_path / "project"
    old = write(project / "verl/third_party/vllm/vllm_v_0_6_3/worker.py", WORKER)
    new = write(project / "verl/third_party/vllm/vllm_v_0_8_4/worker.py", WORKER)
    out = tmp_path / "out"
    result = cli("migrate", project, "--out", out, "--no-cache")
    assert result.exit_code == 0, result.output
    assert (out / "verl/third_party/vllm/vllm_v_0_6_3/worker.py").read_text() == old.read_text()
    assert "torch.npu.set_device" in (out / "verl/third_party/vllm/vllm_v_0_8_4/worker.py").read_text()
    assert new.read_text() == WORKER  # --out: the source tree untouched
    files = {f["path"]: f for f in json.loads((out / "cuda2npu_report.json").read_text())["files"]}
    skipped = files["verl/third_party/vllm/vllm_v_0_6_3/worker.py"]
    assert skipped["status"] == "skipped"
    assert "vLLM 0.6.3, which vllm-ascend does not support" in skipped["reason"]


def test_a_project_that_is_a_fork_of_vllm_gets_the_forks_note(tmp_path):
    """vllm-ltr (round 31) is vLLM 0.4.1 with its own scheduler: the plugin note ("install the
    vllm-ascend release for this vLLM") was false there; the note says what the fork needs."""
    write(tmp_path / "vllm" / "__init__.py", '"""vLLM."""\n\n__version__ = "0.4.1"\n')
    write(tmp_path / "vllm" / "engine" / "__init__.py", "")
    bench = write(tmp_path / "benchmarks" / "throughput.py", 'from vllm import LLM\n\nllm = LLM(model="m")\n')
    texts = {path: path.read_bytes() for path in tmp_path.rglob("*.py")}
    assert own_vllm_release(PythonFiles(texts, tmp_path)) == "0.4.1"
    assert own_vllm_release(PythonFiles({bench: bench.read_bytes()}, tmp_path)) == ""
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    notes = [d["message"] for d in data["diagnostics"] if d["code"] == "NPU931"]
    assert len(notes) == 1 and "carries its own vLLM (its `vllm` package, release 0.4.1)" in notes[0]
    assert "the first with 0.7.1" in notes[0]
    (tmp_path / "vllm" / "__init__.py").unlink()
    (tmp_path / "vllm" / "engine" / "__init__.py").unlink()
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    notes = [d["message"] for d in data["diagnostics"] if d["code"] == "NPU931"]
    assert len(notes) == 1 and "install the vllm-ascend release made for this vllm version" in notes[0]


def test_a_wrapper_module_named_vllm_is_no_fork(tmp_path):
    """lmms-eval (round 37): `lmms_eval/models/simple/vllm.py` lies in a directory without `__init__.py`
    (its module name is `vllm`), a wrapper of the released vLLM: no fork of it, so no fork's note."""
    write(tmp_path / "lmms_eval" / "__init__.py", "")
    write(tmp_path / "lmms_eval" / "models" / "simple" / "vllm.py", "from vllm import LLM\n")
    texts = {path: path.read_bytes() for path in tmp_path.rglob("*.py")}
    assert own_vllm_release(PythonFiles(texts, tmp_path)) == ""
