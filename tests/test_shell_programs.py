"""The programs a shell launch script runs (cuda2npu/filekinds/shell_programs.py): `pip install` of a
CUDA-only distribution (NPU701), `python -c` device counts (NPU103), `docker run --gpus` (NPU715) and
Slurm GPU requests (NPU716)."""

from __future__ import annotations

import json

import pytest
from cli_helpers import cli, write

from cuda2npu.filekinds.shell_programs import (
    DOCKER_MESSAGE,
    LMDEPLOY_ADVICE,
    LMDEPLOY_PYTORCH,
    LMDEPLOY_TURBOMIND,
    SLURM_MESSAGE,
)
from cuda2npu.filekinds.torch_index import NIGHTLY_NOTE

FLASH = (
    "`{req}`: `flash-attn` is CUDA-only (use torch_npu.npu_fusion_attention (cuda2npu migrates flash_attn "
    "calls)); on an NPU host the install fails or installs nothing usable (a `set -e` script stops there): drop "
    "it, or install it on CUDA hosts only"
)
NPU_COUNT = "'import torch, torch_npu; print(torch.npu.device_count())'"

CASES = {
    # a CUDA-only distribution installed by a launcher: kept, marked (as NPU701 in a requirements file)
    "set -e\npip install packaging ninja\npip install flash-attn==2.5.9.post1 --no-build-isolation\n": (
        "set -e\npip install packaging ninja\n"
        f"# TODO(cuda2npu): NPU701 review: {FLASH.format(req='pip install flash-attn==2.5.9.post1')}\n"
        "pip install flash-attn==2.5.9.post1 --no-build-isolation\n"
    ),
    # options and their values skipped, a quoted requirement and a pinned variable read; one marker per
    # command, listing the packages (r9: slime's 15 stacked markers on one pip command)
    'python3 -m pip install -U --index-url https://x/simple "flash_attn>=2" \\\n    "xformers==$XF"\n': (
        "# TODO(cuda2npu): NPU701 review: `pip install` of 2 CUDA-only distributions: `flash_attn>=2` (use "
        "torch_npu.npu_fusion_attention (cuda2npu migrates flash_attn calls)); `xformers==$XF` (xformers has no "
        "Ascend build; use F.scaled_dot_product_attention or torch_npu.npu_fusion_attention); on an NPU host the "
        "install fails or installs nothing usable (a `set -e` script stops there): drop them, or install them on "
        "CUDA hosts only\n"
        'python3 -m pip install -U --index-url https://x/simple "flash_attn>=2" \\\n    "xformers==$XF"\n'
    ),
    # the device count torchrun is given: exactly this inline code is rewritten, the quotes kept
    "GPUS=$(python -c 'import torch; print(torch.cuda.device_count())')\ntorchrun --nproc_per_node $GPUS x.py\n": (
        f"GPUS=$(python -c {NPU_COUNT})\ntorchrun --nproc_per_node $GPUS x.py\n"
    ),
    'N=`python3 -u -c "import torch;print(torch.cuda.device_count());"`\n': (
        'N=`python3 -u -c "import torch, torch_npu; print(torch.npu.device_count())"`\n'
    ),
    # other inline code on torch.cuda: a manual item
    "if python -c 'import torch; assert torch.cuda.is_available()'; then echo gpu; fi\n": (
        "# TODO(cuda2npu): NPU103 inline Python calls `torch.cuda`, which finds no device on an NPU host "
        "(`device_count()` is 0, `is_available()` False): use `torch.npu` after `import torch_npu`\n"
        "if python -c 'import torch; assert torch.cuda.is_available()'; then echo gpu; fi\n"
    ),
    # the CUDA version read to pick a CUDA build (DB-GPT's llama_cpp_install.sh, round 51): no `torch.npu`
    # advice, the CPU branch is what an NPU host takes
    """V=`python -c "import torch;print(torch.version.cuda if torch.cuda.is_available() else '')"`\n""": (
        "# TODO(cuda2npu): NPU103 inline Python reads `torch.version.cuda` to pick a CUDA build: on an NPU host "
        "it is None (and `torch.cuda.is_available()` False), so the script takes its non-CUDA branch; where what "
        "it installs has an Ascend (CANN) build, choose that one there\n"
        """V=`python -c "import torch;print(torch.version.cuda if torch.cuda.is_available() else '')"`\n"""
    ),
    # a command run from a quoted string, by ssh or `bash -c` (minRF's per-host check, round 53; KnowLM's
    # Dockerfile, round 51): its findings marked at the command, nothing edited inside the string
    """ssh -o X=no $host "python -c 'import torch; print(torch.randn(100).cuda())'"\n""": (
        "# TODO(cuda2npu): NPU101 in the command string: inline Python moves a tensor or model with `.cuda()`, "
        "which raises on an NPU host (no CUDA): `.npu()` after `import torch_npu`\n"
        """ssh -o X=no $host "python -c 'import torch; print(torch.randn(100).cuda())'"\n"""
    ),
    'bash -c "pip install torch==1.13.1+cu116"\n': (
        "# TODO(cuda2npu): NPU702 review: in the command string: `torch==1.13.1+cu116` is a CUDA build: the CPU "
        "build (`torch==1.13.1`), which torch_npu runs on\n"
        'bash -c "pip install torch==1.13.1+cu116"\n'
    ),
    # PyTorch's CUDA index (as NPU702 in a requirements file): the CPU index
    "pip install torch==2.4.0 --index-url https://download.pytorch.org/whl/cu121\n": (
        "pip install torch==2.4.0 --index-url https://download.pytorch.org/whl/cpu\n"
    ),
    # a nightly one is marked (round 40): no torch_npu matches a nightly torch
    'pip3 install -U torch "--extra-index-url=https://download.pytorch.org/whl/nightly/cu128" x\n': (
        f"# TODO(cuda2npu): NPU702 {NIGHTLY_NOTE}\n"
        'pip3 install -U torch "--extra-index-url=https://download.pytorch.org/whl/nightly/cu128" x\n'
    ),
    # r9: pins of CUDA builds change with the index (slime's build_conda.sh): the `+cuXXX` local version
    # dropped, which the CPU index serves as `+cpu`; an exact pin read from a variable, or a CUDA wheel's
    # URL, marked
    (
        "set -ex\npip install --no-deps \\\n  torch==2.11.0+cu129 torchaudio==2.11.0+cu129 \\\n"
        "  --index-url https://download.pytorch.org/whl/cu129\n"
    ): (
        "set -ex\npip install --no-deps \\\n  torch==2.11.0 torchaudio==2.11.0 \\\n"
        "  --index-url https://download.pytorch.org/whl/cpu\n"
    ),
    'pip install "torch==$TV" --index-url https://download.pytorch.org/whl/cu121\n': (
        '# TODO(cuda2npu): NPU702 review: `pip install "torch==$TV"` installs from PyTorch\'s CPU index '
        "(`/whl/cpu`): a CUDA build's local version set in the variable (`+cu129`) matches nothing there; drop it "
        "where it is set\n"
        'pip install "torch==$TV" --index-url https://download.pytorch.org/whl/cpu\n'
    ),
    # r10: a CUDA build's local version written after the variable (AReaL's Dockerfile): dropped with it
    'uv pip install --index-url https://download.pytorch.org/whl/cu129 "torch==${TV}+cu129" torchvision\n': (
        'uv pip install --index-url https://download.pytorch.org/whl/cpu "torch==${TV}" torchvision\n'
    ),
    # a range read from a variable: no local version there, the index alone changes
    'pip install "torch>=$TV" --index-url https://download.pytorch.org/whl/cu121\n': (
        'pip install "torch>=$TV" --index-url https://download.pytorch.org/whl/cpu\n'
    ),
    "pip install https://download.pytorch.org/whl/cu118/torch-2.1.0%2Bcu118-cp310-cp310-linux_x86_64.whl\n": (
        "# TODO(cuda2npu): NPU702 `pip install https://download.pytorch.org/whl/cu118/torch-2.1.0%2Bcu118-cp310-"
        "cp310-linux_x86_64.whl` installs a CUDA wheel: install the CPU build of its release with torch_npu\n"
        "pip install https://download.pytorch.org/whl/cu118/torch-2.1.0%2Bcu118-cp310-cp310-linux_x86_64.whl\n"
    ),
    # conda's CUDA build of pytorch (as NPU702 in an environment file): marked, kept
    "set -eo pipefail\nconda install -y pytorch torchvision pytorch-cuda=11.8 -c pytorch -c nvidia\n": (
        "set -eo pipefail\n# TODO(cuda2npu): NPU702 `conda install pytorch-cuda` installs CUDA for a CUDA build of "
        "pytorch: torch_npu runs on the CPU build of torch (install torch and torch_npu with pip)\n"
        "conda install -y pytorch torchvision pytorch-cuda=11.8 -c pytorch -c nvidia\n"
    ),
    "mamba install 'nvidia::cudatoolkit>=11'\n": (
        "# TODO(cuda2npu): NPU702 `conda install cudatoolkit` installs CUDA for a CUDA build of pytorch: "
        "torch_npu runs on the CPU build of torch (install torch and torch_npu with pip)\n"
        "mamba install 'nvidia::cudatoolkit>=11'\n"
    ),
    # a container started with NVIDIA GPUs: marked above the command's first line
    "sudo docker run --gpus all --rm \\\n    -it img:cu117 python cli.py\n": (
        f"# TODO(cuda2npu): NPU715 `docker run --gpus all` {DOCKER_MESSAGE}\n"
        "sudo docker run --gpus all --rm \\\n    -it img:cu117 python cli.py\n"
    ),
    "docker run --runtime nvidia img\n": (
        f"# TODO(cuda2npu): NPU715 `docker run --runtime nvidia` {DOCKER_MESSAGE}\ndocker run --runtime nvidia img\n"
    ),
    # Slurm: a directive line and an srun option, marked for review
    "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gres=gpu:8  # per node\nsrun --gpus-per-node=8 python x.py\n": (
        "#!/bin/bash\n#SBATCH --nodes=2\n"
        f"# TODO(cuda2npu): NPU716 review: `--gres=gpu:8` {SLURM_MESSAGE}\n"
        "#SBATCH --gres=gpu:8  # per node\n"
        f"# TODO(cuda2npu): NPU716 review: `--gpus-per-node=8` {SLURM_MESSAGE}\n"
        "srun --gpus-per-node=8 python x.py\n"
    ),
    # round 24 (pythia's sbatch): a task count per GPU asks for GPUs too
    "#SBATCH --gpus=512\n#SBATCH --ntasks-per-gpu=1\nsrun --cpus-per-gpu 8 python x.py\n": (
        f"# TODO(cuda2npu): NPU716 review: `--gpus` {SLURM_MESSAGE}\n#SBATCH --gpus=512\n"
        f"# TODO(cuda2npu): NPU716 review: `--ntasks-per-gpu` {SLURM_MESSAGE}\n#SBATCH --ntasks-per-gpu=1\n"
        f"# TODO(cuda2npu): NPU716 review: `--cpus-per-gpu` {SLURM_MESSAGE}\nsrun --cpus-per-gpu 8 python x.py\n"
    ),
    'ARGS="--nodes=$N --gres=gpu:$G"\n': (
        f'# TODO(cuda2npu): NPU716 review: `--gres=gpu:$G` {SLURM_MESSAGE}\nARGS="--nodes=$N --gres=gpu:$G"\n'
    ),
    # near-misses: other packages, an uninstall, a requirements file (NPU701 reads it itself), inline code
    # that is not torch.cuda's, the launched program's own --gpus flag, a container given NPUs, NPUs
    # asked of Slurm, a commented-out directive, noqa
    "pip install '.[train]' packaging\npip uninstall -y flash-attn\npip install -r requirements.txt\n": None,
    "pip install torch --index-url https://download.pytorch.org/whl/cpu\npip install -i https://pypi.org/simple x\n": None,
    "pip install torch==2.4.0+cpu torchvision==$TV --index-url https://download.pytorch.org/whl/cpu\n": None,
    "conda install -y pytorch cpuonly -c pytorch\nconda remove pytorch-cuda\nconda install pytorch-cudnn-extra\n": None,
    "python -c 'import torch; print(torch.__version__)'\npython -c \"import torch, torch_npu; print(torch.npu.device_count())\"\n": None,
    "srun -p a -n 4 python x.py --gpus 2\ndocker run --rm img python x.py --gpus 2\ndocker build -t x .\n": None,
    "docker run --device /dev/davinci0 --device /dev/davinci_manager img\n": None,
    "#SBATCH --gres=npu:8\n# SBATCH --gres=gpu:8\n##SBATCH --gpus=8\n": None,
    "#SBATCH --gres=gpu:8  # noqa: NPU716\npip install xformers  # noqa: NPU701\n": None,
}


@pytest.mark.parametrize("name", ["launch.sh", "job.slurm"])
@pytest.mark.parametrize("case", list(CASES))
def test_program_shapes(tmp_path, case, name):
    script = tmp_path / name
    script.write_text(case)
    expected = case if CASES[case] is None else CASES[case]
    cli("migrate", tmp_path)
    assert script.read_text() == expected
    cli("migrate", tmp_path)
    assert script.read_text() == expected  # once


def test_codes_tiers_and_positions(tmp_path):
    write(
        tmp_path / "run.sh",
        """
        #SBATCH --gres=gpu:4
        pip install flash-attn
        N=$(python -c 'import torch; print(torch.cuda.device_count())')
        docker run --gpus=all img
        """,
    )
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    got = [(d["line"], d["column"], d["code"], d["tier"], d["fixable"]) for d in data["diagnostics"]]
    assert got == [
        (1, 9, "NPU716", "review", False),
        (2, 13, "NPU701", "review", False),
        (3, 15, "NPU103", "exact", True),
        (4, 12, "NPU715", "manual", False),
    ]
    assert cli("check", tmp_path, "--ignore", "NPU7,NPU103").exit_code == 0


def test_apex_is_kept_for_ascends_fork(tmp_path):
    script = write(tmp_path / "setup.sh", "pip install apex\n")
    cli("migrate", tmp_path, "--apex", "ascend")
    assert script.read_text() == "pip install apex\n"
    cli("migrate", tmp_path)
    assert script.read_text().startswith("# TODO(cuda2npu): NPU701 review: `pip install apex`")


def test_no_review_markers_keeps_the_manual_ones(tmp_path):
    script = write(tmp_path / "run.sh", "#SBATCH --gres=gpu:1\ndocker run --gpus 1 img\n")
    cli("migrate", tmp_path, "--no-review-markers")
    assert script.read_text() == (
        f"#SBATCH --gres=gpu:1\n# TODO(cuda2npu): NPU715 `docker run --gpus 1` {DOCKER_MESSAGE}\ndocker run --gpus 1 img\n"
    )


def test_portable_output_keeps_the_cuda_count(tmp_path):
    case = "N=$(python -c 'import torch; print(torch.cuda.device_count())')\n"
    script = write(tmp_path / "run.sh", case)
    cli("migrate", tmp_path, "--portable")
    assert script.read_text() == (
        "# TODO(cuda2npu): NPU103 review: inline Python calls `torch.cuda`, kept for CUDA hosts (portable "
        "output): on Ascend hosts `torch.cuda.device_count()` is 0; use `torch.npu` after `import torch_npu` there\n"
        + case
    )


# round 8 (mistral-inference's deploy/Dockerfile): CUDA-only build steps given as a URL or as build flags
MEGABLOCKS = (
    "`megablocks` is CUDA-only (MegaBlocks needs its CUDA extension, Triton, stanford-stk and grouped_gemm; use "
    "MindSpeed's MoE or torch_npu.npu_grouped_matmul); on an NPU host the install fails or installs nothing usable "
    "(a `set -e` script stops there): drop it, or install it on CUDA hosts only"
)
APEX = "`apex` is CUDA-only (Ascend keeps apex only as its own fork (built from source; see --apex ascend))"
APEX_BUILD = (
    "# TODO(cuda2npu): NPU701 review: `{flag}` builds apex's CUDA extensions (amp_C, fused_layer_norm_cuda, "
    "syncbn, ...) with nvcc: apex's setup.py stops where there is none (\"--cuda_ext was requested, but nvcc was "
    f'not found"); {APEX}: drop the build, or build it on CUDA hosts only\n'
)
VLLM_SOURCE = (
    "# TODO(cuda2npu): NPU701 review: `pip install {req}` builds `vllm` from source: vLLM's source build compiles "
    "its CUDA kernels unless VLLM_TARGET_DEVICE names another target (the default is cuda: the build needs nvcc, "
    "and stops next to the CPU build of torch that torch_npu runs on); on Ascend install a vLLM release and the "
    "vllm-ascend release made for it, or build vLLM with VLLM_TARGET_DEVICE=empty and add vllm-ascend\n"
)
R8_CASES = {
    # a VCS URL names its repository's distribution; `-e` takes one too
    'pip3 install "git+https://github.com/stanford-futuredata/megablocks.git@v0.5.1"\n': (
        "# TODO(cuda2npu): NPU701 review: `pip install git+https://github.com/stanford-futuredata/megablocks.git"
        f'@v0.5.1`: {MEGABLOCKS}\npip3 install "git+https://github.com/stanford-futuredata/megablocks.git@v0.5.1"\n'
    ),
    "pip install -e git+https://github.com/NVIDIA/apex.git#egg=apex\n": (
        "# TODO(cuda2npu): NPU701 review: `pip install git+https://github.com/NVIDIA/apex.git#egg=apex`: "
        f"{APEX}; on an NPU host the install fails or installs nothing usable (a `set -e` script stops there): "
        "drop it, or install it on CUDA hosts only\npip install -e git+https://github.com/NVIDIA/apex.git#egg=apex\n"
    ),
    # a repository whose distribution is named otherwise, and a wheel's file name
    "pip install --no-build-isolation git+https://github.com/Dao-AILab/flash-attention.git\n": (
        "# TODO(cuda2npu): NPU701 review: `pip install git+https://github.com/Dao-AILab/flash-attention.git`: "
        + FLASH.format(req="pip install git+https://github.com/Dao-AILab/flash-attention.git").split(": ", 1)[1]
        + "\npip install --no-build-isolation git+https://github.com/Dao-AILab/flash-attention.git\n"
    ),
    "pip install https://h/flash_attn-2.6.3+cu123torch2.4-cp311-cp311-linux_x86_64.whl\n": (
        "# TODO(cuda2npu): NPU701 review: "
        + FLASH.format(req="pip install https://h/flash_attn-2.6.3+cu123torch2.4-cp311-cp311-linux_x86_64.whl")
        + "\npip install https://h/flash_attn-2.6.3+cu123torch2.4-cp311-cp311-linux_x86_64.whl\n"
    ),
    # vLLM built from source targets CUDA
    'RUN=1\npip install "git+https://github.com/vllm-project/vllm.git"\n': (
        "RUN=1\n"
        + VLLM_SOURCE.format(req="git+https://github.com/vllm-project/vllm.git")
        + 'pip install "git+https://github.com/vllm-project/vllm.git"\n'
    ),
    "pip install 'vllm @ git+https://github.com/vllm-project/vllm.git@v0.9.1'\n": (
        VLLM_SOURCE.format(req="vllm @ git+https://github.com/vllm-project/vllm.git@v0.9.1")
        + "pip install 'vllm @ git+https://github.com/vllm-project/vllm.git@v0.9.1'\n"
    ),
    # apex's CUDA extensions asked for by flag or variable, once per command
    "git clone https://github.com/NVIDIA/apex && cd apex && \\\n    python3 setup.py install --cpp_ext --cuda_ext\n": (
        APEX_BUILD.format(flag="--cuda_ext")
        + "git clone https://github.com/NVIDIA/apex && cd apex && \\\n    python3 setup.py install --cpp_ext --cuda_ext\n"
    ),
    'pip install -v --config-settings "--build-option=--cpp_ext" --config-settings "--build-option=--cuda_ext" ./\n': (
        APEX_BUILD.format(flag="--build-option=--cuda_ext")
        + 'pip install -v --config-settings "--build-option=--cpp_ext" --config-settings "--build-option=--cuda_ext" ./\n'
    ),
    'pip install --global-option="--cuda_ext" git+https://github.com/NVIDIA/apex\n': (
        APEX_BUILD.format(flag="--global-option=--cuda_ext")
        + 'pip install --global-option="--cuda_ext" git+https://github.com/NVIDIA/apex\n'
    ),
    "APEX_CPP_EXT=1 APEX_CUDA_EXT=1 pip install -v --no-build-isolation .\n": (
        APEX_BUILD.format(flag="APEX_CUDA_EXT=1")
        + "APEX_CPP_EXT=1 APEX_CUDA_EXT=1 pip install -v --no-build-isolation .\n"
    ),
    # near-misses: vLLM built for the plugin (its target set here or earlier), vLLM releases, a VCS
    # package that runs on Ascend, local builds, apex without its CUDA extensions, the flag elsewhere
    "VLLM_TARGET_DEVICE=empty pip install git+https://github.com/vllm-project/vllm.git@v0.9.1\n": None,
    "export VLLM_TARGET_DEVICE=empty\npip install -e 'git+https://github.com/vllm-project/vllm.git#egg=vllm'\n": None,
    "pip install vllm==0.9.1 vllm-ascend==0.9.1\npip install git+https://github.com/huggingface/transformers.git\n": None,
    "pip install -e .\npip install -v --no-build-isolation ./\npython setup.py install --cpp_ext\n": None,
    "echo --cuda_ext\nAPEX_CUDA_EXT=0 pip install .\npip install git+https://github.com/NVIDIA/apex  # noqa: NPU701\n": None,
}


# round 8: Open-Reasoner-Zero's `pip install ... vllm==0.6.5` (no vllm-ascend release for it, NPU705),
# LatentSync's onnxruntime-gpu (renamed to the CPU build of the same module), whisper's triton (not reported)
VLLM_OLD = (
    "# TODO(cuda2npu): NPU705 review: `{req}` allows no vllm release from 0.7.1 on, vLLM runs on Ascend through "
    "vllm-ascend, whose first release (v0.7.1rc1, 2025-02-19) is made for vLLM 0.7.1; no plugin exists for an "
    "older vLLM: move to a vLLM release that has a vllm-ascend release of the same version (0.7.3, 0.8.4, 0.9.1, "
    "...: vllm-ascend's release compatibility matrix) and install that vllm-ascend (and check what the newer "
    "release changes)\n"
)
ACCELERATE_OLD = (
    "# TODO(cuda2npu): NPU705 review: `accelerate==0.20.3` allows no accelerate release from 0.21.0 on, the first "
    "accelerate release that knows the NPU (`is_npu_available`); an older Accelerator runs on the CPU of an NPU "
    "host: raise the requirement to >=0.21.0 (and check what the newer release changes)\n"
)
R8_PIN_CASES = {
    "pip install loguru ray==2.40.0 deepspeed==0.16.0 vllm==0.6.5 peft\n": (
        VLLM_OLD.format(req="vllm==0.6.5") + "pip install loguru ray==2.40.0 deepspeed==0.16.0 vllm==0.6.5 peft\n"
    ),
    "python3 -m pip install -U 'vllm[audio]>=0.6,<0.7'\n": (
        VLLM_OLD.format(req="vllm[audio]>=0.6,<0.7") + "python3 -m pip install -U 'vllm[audio]>=0.6,<0.7'\n"
    ),
    # transformers' entry depends on what the project's code uses (a Trainer): not read in a script
    "pip install transformers==4.28.1 accelerate==0.20.3\n": (
        ACCELERATE_OLD + "pip install transformers==4.28.1 accelerate==0.20.3\n"
    ),
    # the same module in its CPU build: renamed, extras dropped, no marker; a wheel URL is marked
    "pip install insightface==0.7.3 onnxruntime-gpu==1.21.0\n": "pip install insightface==0.7.3 onnxruntime==1.21.0\n",
    'pip3 install "onnxruntime_gpu[cuda,cudnn]>=1.19"\n': 'pip3 install "onnxruntime>=1.19"\n',
    "pip install 'onnxruntime-gpu @ https://h/onnxruntime_gpu-1.21.0-cp311-cp311-manylinux_2_28_x86_64.whl'\n": (
        "# TODO(cuda2npu): NPU701 review: `pip install onnxruntime-gpu @ https://h/onnxruntime_gpu-1.21.0-cp311-cp311-"
        "manylinux_2_28_x86_64.whl`: `onnxruntime-gpu` is CUDA-only (onnxruntime-gpu is ONNX Runtime's CUDA and "
        "TensorRT build, without Linux aarch64 wheels before 1.29.0; an NPU host runs `onnxruntime` (the CPU build of "
        "the same module, the same release numbers) or `onnxruntime-cann` (the build with Ascend's "
        "CANNExecutionProvider)) → `onnxruntime`\n"
        "pip install 'onnxruntime-gpu @ https://h/onnxruntime_gpu-1.21.0-cp311-cp311-manylinux_2_28_x86_64.whl'\n"
    ),
    # near-misses: releases vllm-ascend is made for, an unread pin, Triton (its import works there,
    # Triton-Ascend installs the same module), onnxruntime's own builds
    "pip install vllm==0.9.1 'vllm>=0.7.3' \"vllm==$VLLM_VERSION\" vllm\n": None,
    "pip install 'triton>=2; platform_machine==\"x86_64\"' triton==3.1.0 triton-ascend==3.2.0\n": None,
    "pip install onnxruntime==1.21.0 onnxruntime-cann==1.22.1\n": None,
}


@pytest.mark.parametrize("case", list(R8_PIN_CASES))
def test_r8_old_pins_onnxruntime_gpu_and_triton(tmp_path, case):
    script = tmp_path / "setup.sh"
    script.write_text(case)
    expected = case if R8_PIN_CASES[case] is None else R8_PIN_CASES[case]
    cli("migrate", tmp_path)
    assert script.read_text() == expected
    cli("migrate", tmp_path)
    assert script.read_text() == expected  # once


@pytest.mark.parametrize("case", list(R8_CASES))
def test_r8_url_requirements_and_cuda_builds(tmp_path, case):
    script = tmp_path / "setup.sh"
    script.write_text(case)
    expected = case if R8_CASES[case] is None else R8_CASES[case]
    cli("migrate", tmp_path)
    assert script.read_text() == expected
    cli("migrate", tmp_path)
    assert script.read_text() == expected  # once


def test_r8_apex_urls_are_kept_for_ascends_fork_but_not_its_cuda_build(tmp_path):
    script = write(tmp_path / "setup.sh", "pip install git+https://github.com/NVIDIA/apex\n")
    build = write(tmp_path / "build.sh", "python setup.py install --cuda_ext\n")
    cli("migrate", tmp_path, "--apex", "ascend")
    assert script.read_text() == "pip install git+https://github.com/NVIDIA/apex\n"
    assert build.read_text() == APEX_BUILD.format(flag="--cuda_ext") + "python setup.py install --cuda_ext\n"


# round 15 (VL-RLHF's scripts/eval/*.sh): lmdeploy's GPT-judge server started on its CUDA engine, marked
# above the command (the backend and the model's support are the user's to check), never rewritten
LMDEPLOY_DEFAULT = "`cuda`, the default of `--device`"


def _lmdeploy_marker(shown: str, engine: str, device: str = LMDEPLOY_DEFAULT) -> str:
    return f"# TODO(cuda2npu): NPU935 review: `{shown}` {engine.format(device=device)}: {LMDEPLOY_ADVICE}\n"


R15_LMDEPLOY_CASES = {
    "lmdeploy serve api_server ${judger_path} --server-port ${judger_port} --tp ${judger_tp}  > ${workdir}/server.log 2>&1 &\n": (
        _lmdeploy_marker("lmdeploy serve api_server", LMDEPLOY_TURBOMIND)
        + "lmdeploy serve api_server ${judger_path} --server-port ${judger_port} --tp ${judger_tp}  > ${workdir}/server.log 2>&1 &\n"
    ),
    # after environment assignments and wrappers; the PyTorch engine chosen, no device named, `python -m`
    "LMDEPLOY_LOG_LEVEL=INFO nohup lmdeploy serve api_server m --tp 2 &\n": (
        _lmdeploy_marker("lmdeploy serve api_server", LMDEPLOY_TURBOMIND)
        + "LMDEPLOY_LOG_LEVEL=INFO nohup lmdeploy serve api_server m --tp 2 &\n"
    ),
    "python -m lmdeploy chat internlm/internlm2_5-7b-chat --backend=pytorch\n": (
        _lmdeploy_marker("lmdeploy chat", LMDEPLOY_PYTORCH)
        + "python -m lmdeploy chat internlm/internlm2_5-7b-chat --backend=pytorch\n"
    ),
    # near misses: the Ascend device named (also as `--device=ascend`), a device read from a variable,
    # other lmdeploy commands (its quantization's own `--device npu`), the word elsewhere, noqa
    "lmdeploy serve api_server --backend pytorch --device ascend internlm/internlm2_5-7b-chat\n": None,
    'lmdeploy chat m --backend pytorch --device=ascend\nlmdeploy serve api_server m --device "$DEVICE"\n': None,
    "lmdeploy lite auto_awq $HF_MODEL --work-dir $WORK_DIR --device npu\nlmdeploy convert internlm2 m\n": None,
    "echo lmdeploy chat\npip install lmdeploy\nlmdeploy serve api_server m  # noqa: NPU935\n": None,
}


@pytest.mark.parametrize("case", list(R15_LMDEPLOY_CASES))
def test_r15_lmdeploy_on_its_cuda_engine(tmp_path, case):
    script = tmp_path / "eval.sh"
    script.write_text(case)
    expected = case if R15_LMDEPLOY_CASES[case] is None else R15_LMDEPLOY_CASES[case]
    cli("migrate", tmp_path)
    assert script.read_text() == expected
    cli("migrate", tmp_path)
    assert script.read_text() == expected  # once


def test_r15_lmdeploy_code_tier_and_position(tmp_path):
    write(tmp_path / "judge.sh", "export X=1\nnohup lmdeploy serve api_server m --tp 2 &\n")
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    got = [(d["line"], d["column"], d["code"], d["tier"], d["fixable"]) for d in data["diagnostics"]]
    assert got == [(2, 7, "NPU935", "review", False)]


def test_r15_lmdeploy_cuda_device_named(tmp_path):
    """``--device cuda`` given: marked with the device it names, and only by NPU935 (lmdeploy's device
    is a platform name, `ascend`: the launch flags' NPU104 `npu` note does not apply)."""
    case = "set -e\nlmdeploy serve gradio $MODEL \\\n    --backend pytorch --device cuda\n"
    script = write(tmp_path / "demo.sh", case)
    cli("migrate", tmp_path)
    assert script.read_text() == (
        "set -e\n" + _lmdeploy_marker("lmdeploy serve gradio --device cuda", LMDEPLOY_PYTORCH, "`cuda`") + case[7:]
    )


def test_r49_no_marker_goes_inside_a_here_document(tmp_path):
    """octopack (round 49): a Slurm job script written by `cat <<EOT > $eval_script` got NPU716 markers inside
    the here-document; its backquotes ran as commands and broke the generated script. Markers of the
    here-document's lines go above the command opening it, once; its body is written unchanged."""
    body = (
        "#!/bin/bash\n#SBATCH --job-name=eval\n#SBATCH --gres=gpu:1\n#SBATCH --nodes=1\n"
        "srun --gpus-per-node=1 python eval.py\n"
    )
    script = write(
        tmp_path / "val.sh",
        "for i in 1 2; do\n"
        '  eval_script="./eval_$i.slurm"\n'
        f"  cat <<EOT > $eval_script\n{body}EOT\n"
        "  sbatch $eval_script\ndone\n",
    )
    cli("migrate", tmp_path)
    text = script.read_text()
    assert body in text  # the job script as written
    head = text.split("cat <<EOT", 1)[0]
    assert head.count("TODO(cuda2npu): NPU716") == 1
    assert head.splitlines()[-2].startswith("  # TODO(cuda2npu): NPU716")  # right above, indented like it
    assert cli("migrate", tmp_path).stdout == cli("migrate", tmp_path).stdout
    assert script.read_text() == text  # idempotent
