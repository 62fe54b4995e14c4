"""Dockerfiles (cuda2npu/filekinds/dockerfiles.py): a stage built on a CUDA image (NPU717) and the
shell of the RUN instructions, read with a launch script's checks (NPU701, NPU702, NPU712)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from cli_helpers import cli, write

from cuda2npu.filekinds.dockerfiles import is_dockerfile

DOCKERFILE = r"""
# syntax=docker/dockerfile:1
ARG CUDA=12.1.0
ARG BASE=nvidia/cuda:${CUDA}-cudnn8-devel-ubuntu22.04
FROM ${BASE} AS build
ENV CUDA_VISIBLE_DEVICES=0
RUN --mount=type=cache,target=/root/.cache \
    pip install --no-cache-dir packaging ninja && \
    pip install flash-attn==2.5.9.post1 --no-build-isolation
RUN conda install -y pytorch pytorch-cuda=12.1 -c pytorch -c nvidia
RUN <<EOF
set -e
nvidia-smi
EOF
RUN cat <<EOF > /requirements.txt
flash-attn
EOF
COPY <<EOF /etc/motd
nvidia-smi
EOF
RUN ["pip", "install", "xformers"]
RUN pip install xformers  # noqa: NPU701

FROM build AS dev
FROM python:3.11-slim
"""

MIGRATED = r"""
# syntax=docker/dockerfile:1
ARG CUDA=12.1.0
ARG BASE=nvidia/cuda:${CUDA}-cudnn8-devel-ubuntu22.04
# TODO(cuda2npu): NPU717 `FROM ${BASE}` (`nvidia/cuda:12.1.0-cudnn8-devel-ubuntu22.04` with its ARG defaults) builds on a CUDA image: CUDA libraries (and a CUDA build of torch, in the PyTorch images) with neither CANN nor torch_npu, made for NVIDIA's container runtime: build on a CANN image (`quay.io/ascend/cann:8.3.rc1-910b-ubuntu22.04-py3.11`; Ascend publishes `<cann>-<chip>-<os>-<python>` tags as `quay.io/ascend/cann` and `ascendai/cann`), then install torch's CPU wheel and its torch_npu there
FROM ${BASE} AS build
ENV CUDA_VISIBLE_DEVICES=0
# TODO(cuda2npu): NPU701 review: `pip install flash-attn==2.5.9.post1`: `flash-attn` is CUDA-only (use torch_npu.npu_fusion_attention (cuda2npu migrates flash_attn calls)); on an NPU host the install fails or installs nothing usable (a `set -e` script stops there): drop it, or install it on CUDA hosts only
RUN --mount=type=cache,target=/root/.cache \
    pip install --no-cache-dir packaging ninja && \
    pip install flash-attn==2.5.9.post1 --no-build-isolation
# TODO(cuda2npu): NPU702 `conda install pytorch-cuda` installs CUDA for a CUDA build of pytorch: torch_npu runs on the CPU build of torch (install torch and torch_npu with pip)
RUN conda install -y pytorch pytorch-cuda=12.1 -c pytorch -c nvidia
RUN <<EOF
set -e
# TODO(cuda2npu): NPU712 `nvidia-smi` is not installed on an Ascend host (a GPU count read from it is 0): use `npu-smi info` (`npu-smi info -l` lists the NPUs), or count the devices with `python -c 'import torch, torch_npu; print(torch.npu.device_count())'`
nvidia-smi
EOF
RUN cat <<EOF > /requirements.txt
flash-attn
EOF
COPY <<EOF /etc/motd
nvidia-smi
EOF
RUN ["pip", "install", "xformers"]
RUN pip install xformers  # noqa: NPU701

FROM build AS dev
FROM python:3.11-slim
"""


def diagnostics(root):
    data = json.loads(cli("check", root, "--format", "json").stdout)
    return [(d["path"].rsplit("/", 1)[-1], d["line"], d["column"], d["code"], d["tier"]) for d in data["diagnostics"]]


def test_check_reports_the_base_image_and_the_run_shell(tmp_path):
    dockerfile = write(tmp_path / "docker" / "Dockerfile", DOCKERFILE)
    before = dockerfile.read_text()
    assert diagnostics(tmp_path) == [
        ("Dockerfile", 4, 6, "NPU717", "manual"),
        ("Dockerfile", 8, 17, "NPU701", "review"),
        ("Dockerfile", 9, 30, "NPU702", "manual"),
        ("Dockerfile", 12, 1, "NPU712", "manual"),
    ]
    assert dockerfile.read_text() == before  # check writes nothing


def test_migrate_marks_above_the_instruction_once(tmp_path):
    dockerfile = write(tmp_path / "Dockerfile", DOCKERFILE)
    cli("migrate", tmp_path)
    assert dockerfile.read_text() == textwrap.dedent(MIGRATED).lstrip("\n")
    cli("migrate", tmp_path)
    assert dockerfile.read_text() == textwrap.dedent(MIGRATED).lstrip("\n")


@pytest.mark.parametrize(
    "line",
    [
        "FROM nvidia/cuda:12.1.0-devel-ubuntu22.04",
        "FROM --platform=linux/amd64 docker.io/nvidia/cuda:11.8.0-runtime-ubuntu22.04 AS base",
        "FROM pytorch/pytorch:2.1.0-cuda12.1-cudnn8-devel",
        "FROM nvcr.io/nvidia/pytorch:24.01-py3",
        "from nvcr.io/nvidia/tritonserver:24.01-py3@sha256:0123abcd",
        "FROM ghcr.io/example/trainer:main-py3.11-cu121-2.2.1",
        "ARG TAG=2.1.0-cuda12.1-cudnn8-runtime\nFROM pytorch/pytorch:$TAG",
        "ARG VERSION\nFROM nvidia/cuda:${VERSION}-devel-ubuntu22.04",
        "from vllm/vllm-openai:v0.9.1",  # dots.ocr (round 42): vLLM's image is built on nvidia/cuda
        "FROM lmsysorg/sglang:latest",
    ],
)
def test_cuda_images(tmp_path, line):
    write(tmp_path / "Dockerfile", line + "\n")
    assert [d[3] for d in diagnostics(tmp_path)] == ["NPU717"]


def test_the_vllm_image_points_to_the_vllm_ascend_image(tmp_path):
    write(tmp_path / "Dockerfile", "from vllm/vllm-openai:v0.9.1\n")
    message = json.loads(cli("check", tmp_path, "--format", "json").stdout)["diagnostics"][0]["message"]
    assert "`quay.io/ascend/vllm-ascend:<tag>`" in message and "build on a CANN image" in message


@pytest.mark.parametrize(
    "text",
    [
        "FROM python:3.11-slim\n",
        "FROM quay.io/ascend/cann:8.3.rc1-910b-ubuntu22.04-py3.11\n",
        "FROM ubuntu:22.04 AS cuda\nFROM cuda\n",  # a stage named cuda
        "FROM pytorch/pytorch:latest\n",  # the tag says nothing
        "FROM ${BASE_IMAGE}\n",  # an ARG with no default
        "FROM ubuntu:22.04\nARG BASE=nvidia/cuda:12.1.0-base-ubuntu22.04\nFROM ${BASE}\n",  # a stage's own ARG
        "# noqa: NPU717\nFROM nvidia/cuda:12.1.0-devel-ubuntu22.04\n",  # above: FROM cannot carry a comment
        "FROM rocm/pytorch:rocm6.0_ubuntu22.04_py3.10_pytorch_2.1.1\n",
    ],
)
def test_other_images_are_left_alone(tmp_path, text):
    dockerfile = write(tmp_path / "Dockerfile", text)
    assert diagnostics(tmp_path) == []
    cli("migrate", tmp_path)
    assert dockerfile.read_text() == text


def test_no_markers_reports_without_writing_them(tmp_path):
    text = "FROM nvidia/cuda:12.1.0-devel-ubuntu22.04\nRUN nvidia-smi\n"
    dockerfile = write(tmp_path / "Dockerfile.cuda", text)
    cli("migrate", tmp_path, "--no-markers")
    assert dockerfile.read_text() == text
    assert [d[3] for d in diagnostics(tmp_path)] == ["NPU717", "NPU712"]


def test_ignore_noqa_reports_what_the_comment_line_hides(tmp_path):
    write(tmp_path / "train.Dockerfile", "# noqa: NPU717\nFROM nvidia/cuda:12.1.0-devel-ubuntu22.04\n")
    data = json.loads(cli("check", tmp_path, "--ignore-noqa", "--format", "json").stdout)
    assert [d["code"] for d in data["diagnostics"]] == ["NPU717"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Dockerfile", True),
        ("dockerfile", True),
        ("Dockerfile.legacy", True),
        ("Dockerfile-cu121", True),
        ("train.Dockerfile", True),
        ("Containerfile", True),
        ("Dockerfile.dockerignore", False),
        ("dockerfile.py", False),
        ("Dockerfile.md", False),
        ("dockerfiles.txt", False),
        ("build_dockerfile.sh", False),
    ],
)
def test_which_files_are_dockerfiles(name, expected):
    assert is_dockerfile(Path("docker") / name) is expected


def test_windows_newlines_are_kept(tmp_path):
    dockerfile = write(tmp_path / "Dockerfile", "FROM nvidia/cuda:12.1.0-base-ubuntu22.04\nRUN nvidia-smi\n", "\r\n")
    cli("migrate", tmp_path)
    lines = dockerfile.read_bytes().split(b"\r\n")
    assert [line[:26] for line in lines] == [
        b"# TODO(cuda2npu): NPU717 `",
        b"FROM nvidia/cuda:12.1.0-ba",
        b"# TODO(cuda2npu): NPU712 `",
        b"RUN nvidia-smi",
        b"",
    ]
    before = dockerfile.read_bytes()
    cli("migrate", tmp_path)
    assert dockerfile.read_bytes() == before


def test_r8_source_builds_in_run_instructions(tmp_path):
    """mistral-inference's deploy/Dockerfile shape: CUDA-only packages built from VCS URLs and apex's
    CUDA extensions are NPU701 at their RUN (the FROM marker does not say these steps cannot be kept);
    a vLLM build whose target the Dockerfile sets (ENV) is left alone."""
    write(
        tmp_path / "Dockerfile",
        """
        FROM ubuntu:22.04
        RUN pip3 install "git+https://github.com/stanford-futuredata/megablocks.git"
        RUN pip3 install "git+https://github.com/vllm-project/vllm.git"
        RUN git clone https://github.com/NVIDIA/apex && \\
            cd apex && \\
            python3 setup.py install --cpp_ext --cuda_ext
        """,
    )
    write(
        tmp_path / "ascend" / "Dockerfile",
        """
        FROM quay.io/ascend/cann:8.3.rc1-910b-ubuntu22.04-py3.11
        ENV VLLM_TARGET_DEVICE=empty
        RUN pip3 install "git+https://github.com/vllm-project/vllm.git@v0.9.1"
        """,
    )
    assert [d[:4] for d in diagnostics(tmp_path)] == [
        ("Dockerfile", 2, 18, "NPU701"),
        ("Dockerfile", 3, 18, "NPU701"),
        ("Dockerfile", 6, 40, "NPU701"),
    ]


def test_r8_old_vllm_and_onnxruntime_gpu_in_run_instructions(tmp_path):
    """Open-Reasoner-Zero's docker/Dockerfile shape: a vLLM release older than vllm-ascend's first (0.7.1)
    is NPU705 at its RUN; onnxruntime-gpu becomes onnxruntime; triton is not reported."""
    dockerfile = write(
        tmp_path / "docker" / "Dockerfile",
        """
        FROM python:3.10-slim
        RUN pip install loguru tqdm \\
                transformers==4.48.1 onnxruntime-gpu==1.21.0 \\
                ray==2.40.0 deepspeed==0.16.0 vllm==0.6.5 triton==3.1.0 peft
        RUN pip install vllm==0.8.5.post1
        """,
    )
    assert [d[1:] for d in diagnostics(tmp_path)] == [(3, 30, "NPU701", "review"), (4, 39, "NPU705", "review")]
    cli("migrate", tmp_path)
    text = dockerfile.read_text()
    assert text.count("# TODO(cuda2npu): NPU705 review: `vllm==0.6.5` allows no vllm release from 0.7.1 on") == 1
    assert "transformers==4.48.1 onnxruntime==1.21.0 \\\n" in text and "triton==3.1.0 peft\n" in text
    assert text.index("NPU705") < text.index("RUN pip install loguru")
    cli("migrate", tmp_path)
    assert dockerfile.read_text() == text


def test_r20_cuda_system_packages_in_run_instructions(tmp_path):
    """yuren-baichuan-7b's Dockerfile: `apt install ... libcudnn8 libcupt-common cuda-cupti-11-7` is one
    NPU714 at the first CUDA package (apt's own `libcupt-common` is not one); other installs are not."""
    dockerfile = write(
        tmp_path / "Dockerfile",
        """
        FROM ubuntu:22.04
        RUN apt update && \\
            apt install --fix-missing -y git curl \\
                libcudnn8 libcupt-common cuda-cupti-11-7
        RUN yum install -y gcc python3-devel
        """,
    )
    assert diagnostics(tmp_path) == [("Dockerfile", 4, 9, "NPU714", "manual")]
    cli("migrate", tmp_path)
    text = dockerfile.read_text()
    assert "apt install` of CUDA packages from NVIDIA's repository (`libcudnn8`, `cuda-cupti-11-7`)" in text
    assert text.count("# TODO(cuda2npu): NPU714") == 1 and text.index("NPU714") < text.index("RUN apt update")


def test_r25_apk_adds_cuda_packages_named_through_variables(tmp_path):
    """h2o-llmstudio's Chainguard image: `apk add ... nvidia-cudnn-8-cuda-${CUDA_MAJOR_VERSION}
    cuda-toolkit-${V}-dev` is one NPU714, the versions read from variables; `apk add wget` is none."""
    dockerfile = write(
        tmp_path / "Dockerfile",
        """
        FROM cgr.dev/chainguard/wolfi-base
        RUN apk update && apk add wget
        RUN apk add --no-cache \\
            nvidia-cudnn-8-cuda-${CUDA_MAJOR_VERSION} \\
            cuda-toolkit-${CUDA_MAJOR_VERSION}.${CUDA_MINOR_VERSION}-dev
        """,
    )
    assert diagnostics(tmp_path) == [("Dockerfile", 4, 5, "NPU714", "manual")]
    cli("migrate", tmp_path)
    assert "`apk add` of CUDA packages from NVIDIA's repository (`nvidia-cudnn-8-cuda-${CUDA_MAJOR_VERSION}`" in (
        dockerfile.read_text()
    )


def test_r21_container_files_kept_for_another_platform_are_left_alone(tmp_path):
    """LLaMA-Factory's docker/ (vendored by LIMO): `docker-cuda/` beside `docker-npu/` and `docker-rocm/`
    are the other platforms' builds, not migrated; a CUDA variant with no NPU sibling still is."""
    cuda = "FROM nvidia/cuda:12.1.0-devel-ubuntu22.04\nRUN pip install flash-attn==2.5.9.post1\n"
    compose = "services:\n  app:\n    build: .\n    deploy:\n      resources:\n        reservations:\n          devices:\n            - driver: nvidia\n"
    for variant in ("docker-cuda", "docker-rocm"):
        write(tmp_path / "shipped" / variant / "Dockerfile", cuda)
        write(tmp_path / "shipped" / variant / "docker-compose.yml", compose)
    write(tmp_path / "shipped" / "docker-npu" / "Dockerfile", "FROM ascendai/cann:8.0.0-910b-ubuntu22.04-py3.10\n")
    write(tmp_path / "alone" / "docker-cuda" / "Dockerfile", cuda)
    found = {(d[0], d[3]) for d in diagnostics(tmp_path)}
    assert found == {("Dockerfile", "NPU717"), ("Dockerfile", "NPU701")}
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    assert {d["path"].split("/")[-3] for d in data["diagnostics"]} == {"alone"}


def test_a_ci_services_container_files_are_its_runners(tmp_path):
    """mmpretrain's and mmocr's `.circleci/docker/Dockerfile` (rounds 64, 65): built by CircleCI's GPU job only, not
    migrated; the project's own `docker/Dockerfile` is."""
    cuda = "FROM nvidia/cuda:11.7.1-devel-ubuntu22.04\n"
    write(tmp_path / ".circleci" / "docker" / "Dockerfile", cuda)
    write(tmp_path / "docker" / "Dockerfile", cuda)
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    assert [d["path"].split("/")[-2] for d in data["diagnostics"]] == ["docker"]


def test_a_run_instruction_through_bash_c_is_read(tmp_path):
    """KnowLM (round 51): `RUN /bin/bash -c "... pip install torch==1.13.1+cu116 ..."` gets the checks of the
    command string, marked above the instruction; nothing inside the string is edited."""
    run = 'RUN /bin/bash -c "source ~/.bashrc && pip install torch==1.13.1+cu116"\n'
    dockerfile = write(tmp_path / "Dockerfile", "FROM python:3.10\n" + run)
    cli("migrate", tmp_path)
    lines = dockerfile.read_text().splitlines(keepends=True)
    assert lines[-1] == run
    assert lines[-2].startswith("# TODO(cuda2npu): NPU702 review: in the command string: `torch==1.13.1+cu116`")
