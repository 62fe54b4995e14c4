"""A project's directories of code for another accelerator (text-generation-inference's
``backends/gaudi/``; a project fact, cuda2npu/project/platform_dirs.py): their Python files are
skipped, with the reason, and left as written; the rest is migrated."""

from __future__ import annotations

import json
import os

from cli_helpers import cli, write

from cuda2npu.project.platform_dirs import other_platform_dirs

SERVER = """\
import torch

x = torch.zeros(2).cuda()
"""


def test_directories_named_for_another_accelerator_are_found_outermost(tmp_path):
    gaudi = write(tmp_path / "backends/gaudi/server/models/llama.py", SERVER).parent.parent.parent
    write(tmp_path / "backends/docker-rocm/run.py", SERVER)
    write(tmp_path / "backends/neuron/README.md", "notes\n")  # no Python file
    write(tmp_path / "backends/v3/server.py", SERVER)
    write(tmp_path / "rocm_utils/probe.py", SERVER)  # a word inside the name: not a platform's
    write(tmp_path / "library/ipex/hijacks.py", SERVER)  # Step1X-Edit's Intel-XPU shims (round 45)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert other_platform_dirs(files, tmp_path) == tuple(
        sorted(
            [
                (os.path.realpath(gaudi), "backends/gaudi"),
                (os.path.realpath(tmp_path / "backends/docker-rocm"), "backends/docker-rocm"),
                (os.path.realpath(tmp_path / "library/ipex"), "library/ipex"),
            ]
        )
    )
    assert other_platform_dirs(files, None) == ()


def test_migrate_skips_another_accelerators_code_and_migrates_the_rest(tmp_path):
    project = tmp_path / "tgi"
    write(project / "pyproject.toml", '[project]\nname = "tgi"\n')
    write(project / "backends/gaudi/server/model.py", SERVER)
    write(project / "server/model.py", SERVER)
    out = tmp_path / "out"
    result = cli("migrate", project, "--out", out, "--no-cache")
    assert result.exit_code == 0, result.output
    assert (out / "backends/gaudi/server/model.py").read_text() == SERVER
    assert ".npu()" in (out / "server/model.py").read_text()
    files = {f["path"]: f for f in json.loads((out / "cuda2npu_report.json").read_text())["files"]}
    skipped = files["backends/gaudi/server/model.py"]
    assert skipped["status"] == "skipped"
    assert (
        skipped["reason"]
        == "in `backends/gaudi/`, code for another accelerator or runtime: it never runs on an NPU host"
    )


def test_a_directory_of_tensorrt_deployment_code_is_skipped(tmp_path):
    """CosyVoice (round 40): `runtime/triton_trtllm/` holds Triton model repositories calling TensorRT(-LLM)
    engines, which an NPU host never runs; a directory merely mentioning TensorRT inside its name is kept."""
    trt = write(tmp_path / "runtime" / "triton_trtllm" / "model_repo" / "vocoder" / "1" / "model.py", SERVER)
    kept = write(tmp_path / "tensorrt_export_tools" / "export.py", SERVER)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert other_platform_dirs(files, tmp_path) == (
        (os.path.realpath(tmp_path / "runtime/triton_trtllm"), "runtime/triton_trtllm"),
    )
    cli("migrate", tmp_path)
    assert trt.read_text() == SERVER and kept.read_text() != SERVER


def test_the_launchers_containers_and_configs_of_such_a_directory_are_skipped_too(tmp_path):
    """Spark-TTS (round 58): `runtime/triton_trtllm/` also holds a launcher, a Dockerfile on NVIDIA's
    TensorRT-LLM image, a compose file reserving NVIDIA GPUs and a run config: skipped with the reason, as its
    Python files are; the same kinds of file elsewhere are migrated."""
    trt = tmp_path / "runtime" / "triton_trtllm"
    write(trt / "model_repo" / "1" / "model.py", SERVER)
    sources = {
        "run.sh": "CUDA_VISIBLE_DEVICES=0 python3 scripts/convert_checkpoint.py\n",
        "Dockerfile.server": "FROM nvcr.io/nvidia/tritonserver:25.02-trtllm-python-py3\n",
        "docker-compose.yml": (
            "services:\n  tts:\n    deploy:\n      resources:\n        reservations:\n          devices:\n"
            "            - driver: nvidia\n              count: all\n              capabilities: [gpu]\n"
        ),
        "config.yaml": 'device: "cuda"\n',
    }
    for name, text in sources.items():
        write(trt / name, text)
    launcher = write(tmp_path / "run.sh", "CUDA_VISIBLE_DEVICES=0 python3 webui.py\n")
    write(tmp_path / "webui.py", "import torch\nimport yaml\n\ncfg = yaml.safe_load(open('c.yaml'))\n" + SERVER)
    result = cli("migrate", tmp_path, "--report", tmp_path.parent / f"{tmp_path.name}-report.json")
    assert result.exit_code == 0, result.output
    for name, text in sources.items():
        assert (trt / name).read_text() == text
    assert "ASCEND_RT_VISIBLE_DEVICES" in launcher.read_text()
    report = json.loads((tmp_path.parent / f"{tmp_path.name}-report.json").read_text())
    skipped = {
        f["path"].rpartition("triton_trtllm/")[2]: f.get("reason", "")
        for f in report["files"]
        if f["status"] == "skipped"
    }
    assert {"run.sh", "Dockerfile.server", "docker-compose.yml", "model_repo/1/model.py"} <= set(skipped)
    assert "another accelerator or runtime" in skipped["run.sh"]
