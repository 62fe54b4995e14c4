"""Docker Compose files (cuda2npu/filekinds/compose_files.py): a service asking for NVIDIA GPUs (NPU715)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from cli_helpers import cli, write

from cuda2npu.filekinds.compose_files import is_compose_file, reads_as_compose_file

COMPOSE = """
version: "3.6"
services:
  api:  # ChatGLM3's openai_api_demo
    image: python:3.10.13-slim
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu]
  worker:
    runtime: nvidia
    deploy:
      resources:
        reservations:
          devices:
            - driver: ${GPU_DRIVER-nvidia}
              capabilities:
                - gpu
  quiet:
    deploy:
      resources:
        reservations:
          devices:
            - capabilities: ["gpu"]  # noqa: NPU715
  sensevoice:  # SenseVoice (round 44): Compose's short form
    build: .
    gpus: all
  cpu_only:
    image: redis
    deploy:
      resources:
        limits:
          cpus: "0.5"
networks:
  backend:
    driver: bridge
"""


def _migrate(tmp_path: Path, name: str = "docker-compose.yml") -> tuple[Path, dict]:
    path = write(tmp_path / "demo" / name, COMPOSE)
    report = tmp_path / "report.json"
    cli("migrate", tmp_path / "demo", "--no-cache", "--report", report)
    return path, json.loads(report.read_text())


def test_gpu_reservations_and_the_nvidia_runtime_are_marked(tmp_path: Path):
    path, report = _migrate(tmp_path)
    text = path.read_text()
    lines = text.splitlines()
    marked = [lines[i + 1].strip() for i, line in enumerate(lines) if "TODO(cuda2npu): NPU715" in line]
    assert marked == ["- driver: nvidia", "runtime: nvidia", "- driver: ${GPU_DRIVER-nvidia}", "gpus: all"]
    assert yaml.safe_load(text) == yaml.safe_load(COMPOSE)  # markers are comments: the file means the same
    findings = [m for f in report["files"] for m in f["manual"] if m["code"] == "NPU715"]
    assert [f["line"] for f in findings] == [9, 13, 18, 29]  # positions in the original file
    assert all("Ascend Docker Runtime" in f["message"] for f in findings)


def test_marking_twice_changes_nothing(tmp_path: Path):
    path, _ = _migrate(tmp_path, "compose.yaml")
    once = path.read_text()
    cli("migrate", path.parent, "--no-cache")
    assert path.read_text() == once


def test_compose_file_names():
    named = ["docker-compose.yml", "compose.yaml", "docker-compose.gpu.yaml", "docker-compose-dev.yml"]
    assert all(is_compose_file(Path(name)) for name in named)
    assert not any(is_compose_file(Path(n)) for n in ["compose.py", "composer.yaml", "my-compose.yml"])


def test_r20_a_compose_file_named_otherwise_is_read_by_its_services(tmp_path: Path):
    """AgentTuning's `docker/agentlm-70b.yml`: the file's top-level `services:` with an `image:` make it
    a Compose file whatever its name; a run config with a `services` key and no image stays a run config."""
    path, report = _migrate(tmp_path, "agentlm-70b.yml")
    assert path.read_text().count("TODO(cuda2npu): NPU715") == 4
    config = write(tmp_path / "cfg" / "train.yaml", "services:\n  logger: wandb\ndevice: cuda\n")
    assert not reads_as_compose_file(config)
    assert reads_as_compose_file(path) and not reads_as_compose_file(tmp_path / "missing.yml")
