"""Round 9 (slime's launch and build scripts): NVLink probes that already answer "none" without
`nvidia-smi` (NPU712 not reported), one NPU701 finding per `pip install` listing its CUDA-only
packages, and nvidia-modelopt, which installs on an NPU host."""

from __future__ import annotations

import json

import pytest
from cli_helpers import cli, write

from cuda2npu.analysis.cuda_only_modules import cuda_only_distribution
from cuda2npu.filekinds.shellscripts import NVIDIA_SMI_MESSAGE
from cuda2npu.filekinds.torch_index import NIGHTLY_NOTE

ORT_ADVICE = cuda_only_distribution("onnxruntime-gpu")[1]

SMI = f"# TODO(cuda2npu): NPU712 {NVIDIA_SMI_MESSAGE}\n"
RUNTIME = "an NVIDIA CUDA runtime wheel; CANN provides the runtime on Ascend"

CASES = {
    # NVLink probes whose pipeline ends in `wc` (0 without nvidia-smi), is an `if` test or has `|| ...`:
    # "no NVLink" is the Ascend answer, nothing to mark
    "set -ex\nLINKS=$(nvidia-smi topo -m 2>/dev/null | grep -o 'NV[0-9][0-9]*' | wc -l)\n": None,
    'LINKS=$(nvidia-smi | grep -o "NVLink" | wc -l)\nif [ "$LINKS" -gt 0 ]; then export FAST=1; fi\n': None,
    "if nvidia-smi nvlink --status >/dev/null 2>&1; then export FAST=1; fi\n": None,
    "LINKS=$(nvidia-smi topo -m | grep -c NV || echo 0)\n": None,
    "while ! nvidia-smi topo -m | grep -q NV; do sleep 1; done\n": None,
    # an existence check: the count read under it is what gets the marker
    "if command -v nvidia-smi >/dev/null 2>&1; then\n  N=$(nvidia-smi -L | wc -l)\nfi\n": (
        f"if command -v nvidia-smi >/dev/null 2>&1; then\n  {SMI}  N=$(nvidia-smi -L | wc -l)\nfi\n"
    ),
    # RAGEN's setup script (round 55): the CUDA branch of a probe with an `else` (what a host without
    # nvidia-smi runs) asks nothing, also through a function of the script probing it
    (
        "check_cuda() {\n    if command -v nvidia-smi &> /dev/null; then\n        return 0\n    fi\n    return 1\n}\n"
        "if check_cuda; then\n    conda install -c nvidia cuda-toolkit -y\n    "
        "pip install torch==2.4.0 --index-url https://download.pytorch.org/whl/cu121\n"
        "else\n    pip install torch==2.4.0\nfi\n"
    ): None,
    # near-misses: a device count, a probe under pipefail (the assignment fails, `set -e` stops), one
    # ending in grep (status 1 when nothing matches), a topology dump shown to the user
    "N=$(nvidia-smi -L 2>/dev/null | wc -l)\n": SMI + "N=$(nvidia-smi -L 2>/dev/null | wc -l)\n",
    "set -eo pipefail\nLINKS=$(nvidia-smi topo -m | grep -o NV1 | wc -l)\n": (
        "set -eo pipefail\n" + SMI + "LINKS=$(nvidia-smi topo -m | grep -o NV1 | wc -l)\n"
    ),
    "set -e\nLINKS=$(nvidia-smi topo -m | grep -c NV)\n": "set -e\n"
    + SMI
    + "LINKS=$(nvidia-smi topo -m | grep -c NV)\n",
    # a command of its own, its output only in the log (ProLong's and DejaVu's Slurm scripts, round 33):
    # "command not found" is all it does, unless the script stops at a failing command
    "nvidia-smi topo -m\n": None,
    "echo start\nnvidia-smi\npython train.py\n": None,
    "#!/bin/bash\nset -e\nnvidia-smi -L\n": "#!/bin/bash\nset -e\n" + SMI + "nvidia-smi -L\n",
    "#!/bin/bash -e\nnvidia-smi\n": "#!/bin/bash -e\n" + SMI + "nvidia-smi\n",
    # one marker per pip command, listing its CUDA-only packages by reason
    "pip install --no-deps \\\n  nvidia-cublas-cu12 \\\n  nvidia-nccl-cu12==2.27.3 \\\n  flash-attn\n": (
        "# TODO(cuda2npu): NPU701 review: `pip install` of 3 CUDA-only distributions: `nvidia-cublas-cu12`, "
        f"`nvidia-nccl-cu12==2.27.3` ({RUNTIME}); `flash-attn` (use torch_npu.npu_fusion_attention (cuda2npu "
        "migrates flash_attn calls)); on an NPU host the install fails or installs nothing usable (a `set -e` "
        "script stops there): drop them, or install them on CUDA hosts only\n"
        "pip install --no-deps \\\n  nvidia-cublas-cu12 \\\n  nvidia-nccl-cu12==2.27.3 \\\n  flash-attn\n"
    ),
    # one package: its own message, as before
    "pip install nvidia-cudnn-cu12==9.1.0.70\n": (
        "# TODO(cuda2npu): NPU701 review: `pip install nvidia-cudnn-cu12==9.1.0.70`: `nvidia-cudnn-cu12` is "
        f"CUDA-only ({RUNTIME}); on an NPU host the install fails or installs nothing usable (a `set -e` script "
        "stops there): drop it, or install it on CUDA hosts only\n"
        "pip install nvidia-cudnn-cu12==9.1.0.70\n"
    ),
    # the script exits where nvidia-smi is missing (SpecForge's CI kill script, round 38): nothing after the
    # guard runs on an Ascend host, its messages included; near miss: a guard that does not exit
    'set -e\nif ! command -v nvidia-smi > /dev/null 2>&1; then\n  echo "nvidia-smi not found"\n  exit 0\nfi\n'
    "PIDS=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader)\n": None,
    "set -e\ncommand -v nvidia-smi >/dev/null || exit 0\nnvidia-smi -L\n": None,
    'set -e\nif ! command -v nvidia-smi; then\n  echo "no GPU"\nfi\nnvidia-smi -L\n': (
        'set -e\nif ! command -v nvidia-smi; then\n  echo "no GPU"\nfi\n' + SMI + "nvidia-smi -L\n"
    ),
    # a nightly CUDA index (modded-nanogpt's Dockerfile, round 40): no torch_npu matches a nightly torch, so the
    # index is not rewritten to `/whl/nightly/cpu` but marked; a release index is rewritten
    "pip install --pre torch --index-url https://download.pytorch.org/whl/nightly/cu126\n": (
        f"# TODO(cuda2npu): NPU702 {NIGHTLY_NOTE}\n"
        "pip install --pre torch --index-url https://download.pytorch.org/whl/nightly/cu126\n"
    ),
    "pip install torch --index-url https://download.pytorch.org/whl/cu126\n": (
        "pip install torch --index-url https://download.pytorch.org/whl/cpu\n"
    ),
    # a CUDA-only distribution with an NPU build, installed from an index of CUDA builds (Step-Audio's
    # Dockerfile, round 41): not renamed (it may serve only the CUDA build), a review item; from PyPI or a
    # mirror of it: renamed
    "pip install onnxruntime-gpu==1.17.0 --index-url=https://pkgs.example.com/onnxruntime-cuda-12/pypi/simple\n": (
        "# TODO(cuda2npu): NPU701 review: `pip install onnxruntime-gpu==1.17.0`: `onnxruntime-gpu` is CUDA-only "
        f"({ORT_ADVICE}) → `onnxruntime`, but this command installs from "
        "`https://pkgs.example.com/onnxruntime-cuda-12/pypi/simple`, which may serve only the CUDA build: install the "
        "NPU one from PyPI (drop the index, or the line where another requirement installs it already)\n"
        "pip install onnxruntime-gpu==1.17.0 --index-url=https://pkgs.example.com/onnxruntime-cuda-12/pypi/simple\n"
    ),
    "pip install onnxruntime-gpu==1.17.0\n": "pip install onnxruntime==1.17.0\n",
    "pip install onnxruntime-gpu==1.17.0 -i https://pypi.tuna.tsinghua.edu.cn/simple\n": (
        "pip install onnxruntime==1.17.0 -i https://pypi.tuna.tsinghua.edu.cn/simple\n"
    ),
    # nvidia-modelopt ships py3-none-any / aarch64 wheels without a CUDA dependency: not reported
    'pip install "nvidia-modelopt[torch]>=0.37.0" nvidia-modelopt-core==0.33.1\n': None,
}


@pytest.mark.parametrize("case", list(CASES))
def test_r9_script_shapes(tmp_path, case):
    script = tmp_path / "run.sh"
    script.write_text(case)
    expected = case if CASES[case] is None else CASES[case]
    cli("migrate", tmp_path)
    assert script.read_text() == expected
    cli("migrate", tmp_path)
    assert script.read_text() == expected  # once


def test_r9_one_finding_per_pip_command(tmp_path):
    write(tmp_path / "setup.sh", "pip install xformers flash-attn\npip install nvidia-modelopt\n")
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    got = [(d["line"], d["column"], d["code"]) for d in data["diagnostics"]]
    assert got == [(1, 13, "NPU701")]
    assert "`xformers`" in data["diagnostics"][0]["message"] and "`flash-attn`" in data["diagnostics"][0]["message"]


def test_r9_dockerfile_nvlink_probe(tmp_path):
    dockerfile = write(
        tmp_path / "Dockerfile",
        "FROM ubuntu:22.04\nRUN LINKS=$(nvidia-smi topo -m 2>/dev/null | grep -o 'NV[0-9]*' | wc -l) && echo $LINKS\n",
    )
    before = dockerfile.read_text()
    cli("migrate", tmp_path)
    assert dockerfile.read_text() == before


def test_r33_a_quoted_export_is_renamed(tmp_path):
    """LongWriter's train scripts: `export 'PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:32'`, quoted as a
    whole, is an assignment too; a quoted `echo` argument is not."""
    script = write(
        tmp_path / "train.sh",
        "export 'PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:32'\nexport \"CUDA_VISIBLE_DEVICES=0,1\"\n"
        "echo 'CUDA_HOME=/usr/local/cuda'\n",
    )
    cli("migrate", tmp_path)
    assert script.read_text() == (
        "export 'PYTORCH_NPU_ALLOC_CONF=max_split_size_mb:32'\nexport \"ASCEND_RT_VISIBLE_DEVICES=0,1\"\n"
        "echo 'CUDA_HOME=/usr/local/cuda'\n"
    )


def test_r35_a_command_held_in_a_variable_is_renamed(tmp_path):
    """MoA's `scripts/pipeline/validate.sh`: `command="CUDA_VISIBLE_DEVICES=0 python ..."; eval $command`."""
    script = write(
        tmp_path / "validate.sh",
        'command="CUDA_VISIBLE_DEVICES=0 python validate.py --model $MODEL"\neval $command\n',
    )
    cli("migrate", tmp_path)
    assert (
        script.read_text() == 'command="ASCEND_RT_VISIBLE_DEVICES=0 python validate.py --model $MODEL"\neval $command\n'
    )
