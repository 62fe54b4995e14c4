"""Dependency files and shell scripts: reported by check, rewritten by migrate, untouched otherwise."""

from __future__ import annotations

import ast
import configparser
import json
import shutil
import textwrap
from pathlib import Path

import pytest
import tomllib
import yaml
from cli_helpers import cli, write
from packaging.requirements import Requirement

from cuda2npu.filekinds import poetry_deps
from cuda2npu.filekinds.depfiles import is_dependency_file
from cuda2npu.filekinds.requirement_urls import url_requirement

MIGRATED_CODE = "import torch\nimport torch_npu\n\nx = torch.ones(1).npu()\n"


def findings(path, only_project_files=True):
    """(file name, line, code) of the findings; by default those of the files this module handles
    (Python rules of other families may report on the test's Python files too)."""
    data = json.loads(cli("check", path, "--format", "json").stdout)
    found = [(d["path"].rsplit("/", 1)[-1], d["line"], d["code"]) for d in data["diagnostics"]]
    return [f for f in found if not only_project_files or f[2].startswith("NPU7")]


def test_requirements_txt_is_rewritten(tmp_path):
    write(tmp_path / "train.py", "import torch\nfrom mamba_ssm import Mamba\nimport triton\nx = torch.ones(1).cuda()\n")
    req = write(
        tmp_path / "requirements.txt",
        """
        # training
        --extra-index-url https://download.pytorch.org/whl/cu121
        torch==2.7.1+cu121 ; platform_system == "Linux"
        torchvision==0.22.1+cu121
        apex
        flash-attn>=2.5  # kernels
        nvidia-nccl-cu12==2.21.5
        mamba-ssm
        triton
        numpy>=1.24
        """,
    )
    assert findings(tmp_path) == [
        ("requirements.txt", 2, "NPU702"),
        ("requirements.txt", 3, "NPU702"),
        ("requirements.txt", 3, "NPU703"),
        ("requirements.txt", 4, "NPU702"),
        ("requirements.txt", 5, "NPU701"),
        ("requirements.txt", 6, "NPU701"),
        ("requirements.txt", 7, "NPU701"),
        ("requirements.txt", 8, "NPU701"),
    ]
    assert ("train.py", 4, "NPU101") in findings(tmp_path, only_project_files=False)
    assert cli("migrate", tmp_path).exit_code == 0
    assert req.read_text() == textwrap.dedent(
        """\
        # training
        --extra-index-url https://download.pytorch.org/whl/cpu
        torch==2.7.1 ; platform_system == "Linux"
        torch_npu==2.7.1.post8; platform_system == "Linux"
        torchvision==0.22.1
        # TODO(cuda2npu): NPU701 `mamba-ssm` is CUDA-only (mamba-ssm's selective-scan kernels are CUDA extensions); kept while the code imports it
        mamba-ssm
        triton
        numpy>=1.24
        """
    )  # mamba-ssm stays, marked: train.py still imports it; triton imports there (or is Triton-Ascend)
    assert [code for _, _, code in findings(tmp_path)] == ["NPU701"]
    assert cli("migrate", tmp_path, "--check").exit_code == 0


def test_requirements_for_another_accelerator_are_left_alone(tmp_path):
    """requirements-rocm.txt is the project's file for AMD hosts (requirements_macOS.txt for Macs): no
    torch_npu added, no pin read."""
    write(tmp_path / "train.py", "import torch\nx = torch.ones(1).cuda()\n")
    rocm = write(tmp_path / "requirements-rocm.txt", "torch==2.4.0\nflash-attn\n")
    write(tmp_path / "dcu-support" / "requirements.txt", "torch==2.1.0\nflash-attn\n")
    # ... nor for another operating system (LivePortrait's and seed-vc's macOS files, round 56)
    mac = write(
        tmp_path / "requirements_macOS.txt", "--extra-index-url https://download.pytorch.org/whl/cu121\ntorch\n"
    )
    write(tmp_path / "requirements-mac.txt", "torch==2.4.0\n")
    write(tmp_path / "requirements-windows.txt", "torch==2.4.0\n")
    write(tmp_path / "requirements.txt", "torch==2.4.0\n")
    assert {f[0] for f in findings(tmp_path)} == {"requirements.txt"}
    cli("migrate", tmp_path)
    assert rocm.read_text() == "torch==2.4.0\nflash-attn\n"
    assert "torch_npu" not in mac.read_text() and "cu121" in mac.read_text()
    assert "torch_npu" in (tmp_path / "requirements.txt").read_text()


def test_files_with_nothing_to_change_are_byte_identical_and_not_reported(tmp_path):
    write(tmp_path / "a.py", MIGRATED_CODE)
    contents = {
        "requirements.txt": "torch==2.1.0\r\ntorch_npu==2.1.0.post17\r\nnumpy  # comment\r\n",
        "requirements/dev.txt": "pytest\n-r ../requirements.txt\n",
        "pyproject.toml": '[project]\nname = "x"\ndependencies = ["torch>=2.1", "torch-npu"]\n',
        "setup.cfg": "[options]\ninstall_requires =\n    torch\n    torch_npu\n",
    }
    for name, text in contents.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(text.encode())
    result = cli("migrate", tmp_path)
    assert result.exit_code == 0
    for name, text in contents.items():
        assert (tmp_path / name).read_bytes() == text.encode(), name
    assert findings(tmp_path) == []


def test_pyproject_multi_line_and_inline_arrays(tmp_path):
    write(tmp_path / "pkg" / "m.py", MIGRATED_CODE)
    pyproject = write(
        tmp_path / "pyproject.toml",
        """
        [project]
        name = "demo"
        dependencies = [
            "torch==2.1.0",  # pinned
            "xformers",
            'transformer-engine[pytorch]>=1.0',
            "einops",
        ]

        [project.optional-dependencies]
        fast = ["causal-conv1d", "bitsandbytes>=0.43"]
        gpu = ["pynvml"]

        [tool.other]
        mention = ["xformers"]
        """,
    )
    assert cli("migrate", tmp_path).exit_code == 0
    assert pyproject.read_text() == textwrap.dedent(
        """\
        [project]
        name = "demo"
        dependencies = [
            "torch==2.1.0",  # pinned
            "torch_npu==2.1.0.post17",
            "einops",
        ]

        [project.optional-dependencies]
        fast = []
        gpu = []

        [tool.other]
        mention = ["xformers"]
        """
    )


def test_setup_py_and_setup_cfg(tmp_path):
    write(tmp_path / "pkg" / "__init__.py", "import torch\nfrom apex import amp\nx = torch.ones(1).cuda()\n")
    setup = write(
        tmp_path / "setup.py",
        """
        from setuptools import setup

        REQUIRES = ["torch==2.9.0", "apex", "nvidia-cudnn-cu12"]

        setup(name="demo", install_requires=REQUIRES, extras_require={"x": ["xformers", "rich"]})
        """,
    )
    cfg = write(
        tmp_path / "setup.cfg",
        """
        [metadata]
        name = demo

        [options]
        install_requires =
            torch==2.9.0
            cupy-cuda12x
        """,
    )
    codes = findings(tmp_path)
    assert ("setup.py", 3, "NPU701") in codes and ("setup.cfg", 7, "NPU701") in codes
    cli("migrate", tmp_path, "--apex", "ascend")
    text = setup.read_text()
    assert 'REQUIRES = ["torch==2.9.0", "torch_npu==2.9.0.post6", "apex"]' in text  # apex kept for Ascend's fork
    assert 'extras_require={"x": ["rich"]}' in text
    assert cfg.read_text().endswith("install_requires =\n    torch==2.9.0\n    torch_npu==2.9.0.post6\n")


def test_import_still_present_keeps_the_requirement_and_noqa_suppresses(tmp_path):
    write(tmp_path / "k.py", "from mamba_ssm import Mamba\n")
    req = write(tmp_path / "requirements.txt", "mamba-ssm==2.2.2\nbitsandbytes  # noqa: NPU701\n")
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    [finding] = [d for d in data["diagnostics"] if d["path"].endswith("requirements.txt")]  # noqa'd bitsandbytes: none
    assert finding["code"] == "NPU701" and not finding["fixable"] and "still imported by" in finding["message"]
    cli("migrate", tmp_path, "--no-markers")
    assert req.read_text() == "mamba-ssm==2.2.2\nbitsandbytes  # noqa: NPU701\n"
    cli("migrate", tmp_path)
    assert req.read_text().startswith("# TODO(cuda2npu): NPU701 `mamba-ssm` is CUDA-only")


def test_a_scripts_requirements_file_serves_the_directory_above(tmp_path):
    """imaginaire's scripts/requirements.txt, installed for the repository by scripts/install.sh (round 64): its
    pynvml is imported by imaginaire/utils/gpu_affinity.py, so it stays (a sub-project's own file would not)."""
    write(tmp_path / "imaginaire" / "__init__.py", "")
    write(tmp_path / "imaginaire" / "utils" / "gpu_affinity.py", "import pynvml\n\npynvml.nvmlInit()\n")
    req = write(tmp_path / "scripts" / "requirements.txt", "pynvml\nnumpy\n")
    cli("migrate", tmp_path, "--no-markers")
    assert req.read_text() == "pynvml\nnumpy\n"
    assert "still imported by" in cli("check", tmp_path).stdout


def test_a_cuda_build_beside_its_npu_build_is_removed_not_renamed(tmp_path):
    """yolov10's requirements.txt pins `onnxruntime==1.15.1` and `onnxruntime-gpu==1.18.0` (round 64): renamed,
    the second would pin onnxruntime twice, which pip refuses; removed, the file's own pin stays."""
    write(tmp_path / "export.py", "import onnxruntime\n")
    req = write(tmp_path / "requirements.txt", "onnx\nonnxruntime==1.15.1\nonnxruntime-gpu==1.18.0\n")
    cli("migrate", tmp_path)
    assert req.read_text() == "onnx\nonnxruntime==1.15.1\n"
    write(tmp_path / "other" / "requirements.txt", "onnxruntime-gpu==1.18.0\n")
    cli("migrate", tmp_path)
    assert (tmp_path / "other" / "requirements.txt").read_text() == "onnxruntime==1.18.0\n"


def test_kernel_libraries_from_the_one_table(tmp_path):
    """rules/tables/cuda_only_packages.toml: kernel libraries by distribution name; those that run on
    Ascend (liger-kernel, deepspeed, vllm) are not reported."""
    write(tmp_path / "m.py", "from ring_flash_attn import zigzag_ring_flash_attn_func\n")
    req = write(
        tmp_path / "requirements.txt",
        "ring_flash_attn\nKNN_CUDA\nmegablocks\ngrouped_gemm\ncpm-kernels\nliger-kernel\ndeepspeed\nvllm\n",
    )
    assert findings(tmp_path) == [("requirements.txt", line, "NPU701") for line in range(1, 6)]
    cli("migrate", tmp_path)
    assert req.read_text().endswith("ring_flash_attn\nliger-kernel\ndeepspeed\nvllm\n")  # still imported: kept


def test_torch_range_adds_torch_npu_unpinned_and_old_torch_gets_its_eol_release(tmp_path):
    write(tmp_path / "a.py", MIGRATED_CODE)
    req = write(tmp_path / "requirements.txt", "torch>=2.1,<2.8\n")
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    [finding] = [d for d in data["diagnostics"] if d["code"] == "NPU703"]
    assert "torch is a range" in finding["message"] and "with one: 2.5.1 (EOL), 2.6.0, 2.7.1)" in finding["message"]
    cli("migrate", tmp_path)
    assert req.read_text() == "torch>=2.1,<2.8\ntorch_npu\n"
    write(tmp_path / "requirements.txt", "torch==2.2.0")
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    [finding] = [d for d in data["diagnostics"] if d["code"] == "NPU703"]
    assert "CANN 8.0.RC2" in finding["message"] and "past end of life" in finding["message"]
    cli("migrate", tmp_path)
    assert req.read_text() == "torch==2.2.0\ntorch_npu==2.2.0.post2"


def test_explicit_file_arguments_scan_the_whole_project_for_imports(tmp_path):
    write(tmp_path / "model.py", "import xformers.ops\n")
    setup = write(tmp_path / "setup.py", 'from setuptools import setup\nsetup(install_requires=["xformers"])\n')
    cli("migrate", setup)  # as pre-commit passes it: alone
    assert '"xformers"' in setup.read_text()


def test_shell_scripts_are_reported_renamed_and_marked(tmp_path):
    write(tmp_path / "train.py", MIGRATED_CODE)
    script = write(
        tmp_path / "launch.sh",
        """
        #!/bin/bash
        # CUDA_VISIBLE_DEVICES=0 in a comment is fine
        export CUDA_VISIBLE_DEVICES=0,1
        export NCCL_SOCKET_IFNAME=eth0 NCCL_IB_HCA=mlx5
        NCCL_P2P_LEVEL=NVL nvidia-smi --query-gpu=name --format=csv
        CUDA_LAUNCH_BLOCKING=1 python train.py  # noqa: NPU711
        export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT  # NCCL's logging: nothing to migrate
        """,
    )
    assert cli("check", tmp_path, "--ignore", "NPU71").exit_code == 0
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    got = [(d["line"], d["column"], d["code"], d["message"]) for d in data["diagnostics"]]
    assert [g[:3] for g in got] == [
        (3, 8, "NPU711"),
        (4, 8, "NPU713"),  # NCCL_IB_HCA and NCCL_P2P_LEVEL: tuning switches HCCL never reads, not reported
        (5, 20, "NPU712"),
    ]
    assert "ASCEND_RT_VISIBLE_DEVICES" in got[0][3] and "HCCL_SOCKET_IFNAME" in got[1][3]
    assert "npu-smi info" in got[2][3]
    migrated = textwrap.dedent(
        """\
        #!/bin/bash
        # CUDA_VISIBLE_DEVICES=0 in a comment is fine
        export ASCEND_RT_VISIBLE_DEVICES=0,1
        export HCCL_SOCKET_IFNAME=eth0 NCCL_IB_HCA=mlx5
        # TODO(cuda2npu): NPU712 {smi}
        NCCL_P2P_LEVEL=NVL nvidia-smi --query-gpu=name --format=csv
        CUDA_LAUNCH_BLOCKING=1 python train.py  # noqa: NPU711
        export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT  # NCCL's logging: nothing to migrate
        """
    ).format(smi=got[2][3])
    result = cli("migrate", tmp_path, "--report", tmp_path / "report.json")
    assert script.read_text() == migrated
    assert "not marked in the code" not in result.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    [entry] = [f for f in report["files"] if f["path"].endswith("launch.sh")]
    assert [e["code"] for e in entry["edits"]] == ["NPU711", "NPU713"]
    assert [m["code"] for m in entry["manual"]] == ["NPU712"]
    assert entry["markers"] == [5]
    cli("migrate", tmp_path)
    assert script.read_text() == migrated  # once


SHELL_CASES = {
    # a launch line of a job script: the variable is renamed, nothing else on the line changes
    "CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node 2 train.py\n": (
        "ASCEND_RT_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node 2 train.py\n"
    ),
    # set, read, defaulted and unset: all renamed together, quoting kept
    'export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0}"\necho "$CUDA_VISIBLE_DEVICES"\nunset CUDA_VISIBLE_DEVICES\n': (
        'export ASCEND_RT_VISIBLE_DEVICES="${ASCEND_RT_VISIBLE_DEVICES:-0}"\necho "$ASCEND_RT_VISIBLE_DEVICES"\n'
        "unset ASCEND_RT_VISIBLE_DEVICES\n"
    ),
    # NCCL tuning values HCCL rejects (HCCL_RDMA_TIMEOUT 5-20, HCCL_RDMA_TC a multiple of 4): kept, marked;
    # values in range are renamed for review as before
    "export NCCL_IB_TIMEOUT=22\nexport NCCL_IB_TC=162\nexport NCCL_IB_RETRY_CNT=7\n": (
        "# TODO(cuda2npu): NPU713 `NCCL_IB_TIMEOUT` → `HCCL_RDMA_TIMEOUT` takes 5-20 on Atlas A2/A3 (5-24 on Atlas "
        "training cards): 22 is not one of them; choose an HCCL value by hand\n"
        "export NCCL_IB_TIMEOUT=22\n"
        "# TODO(cuda2npu): NPU713 `NCCL_IB_TC` → `HCCL_RDMA_TC` takes 0-255, a multiple of 4 (the DSCP value times "
        "4): 162 is not one of them; choose an HCCL value by hand\n"
        "export NCCL_IB_TC=162\n"
        "export HCCL_RDMA_RETRY_CNT=7\n"
    ),
    # IDs out of order: ASCEND_RT_VISIBLE_DEVICES stops parsing there, renamed for review
    "CUDA_VISIBLE_DEVICES=3,1 python train.py &\n": (
        "# TODO(cuda2npu): NPU711 review: `CUDA_VISIBLE_DEVICES` is ignored on Ascend → `ASCEND_RT_VISIBLE_DEVICES`; "
        "its IDs must be ascending (parsing stops at the first one out of order), and `3,1` is not\n"
        "ASCEND_RT_VISIBLE_DEVICES=3,1 python train.py &\n"
    ),
    # a mask hiding every GPU: renamed, but whether the NPU runtime hides the NPUs is for review
    'CUDA_VISIBLE_DEVICES="" python prepare.py\n': (
        "# TODO(cuda2npu): NPU711 review: `CUDA_VISIBLE_DEVICES` is ignored on Ascend → `ASCEND_RT_VISIBLE_DEVICES`; "
        '`CUDA_VISIBLE_DEVICES=""` hides every CUDA device: check that it hides the NPUs too\n'
        'ASCEND_RT_VISIBLE_DEVICES="" python prepare.py\n'
    ),
    # the marker of a continued command goes above its first line, indented like it
    "if true; then\n  python train.py \\\n    --n $(nvidia-smi -L | wc -l)\nfi\n": (
        "if true; then\n  # TODO(cuda2npu): NPU712 {smi}\n  python train.py \\\n    --n $(nvidia-smi -L | wc -l)\nfi\n"
    ),
    "set -e\nmodule load gcc/11 cuda/12.4\n": (
        "set -e\n# TODO(cuda2npu): NPU714 `module load gcc/11 cuda/12.4` loads the CUDA toolkit's environment module, "
        "which an Ascend host does not have (the command fails there, and ends a `set -e` script): set up CANN "
        "instead (`source /usr/local/Ascend/ascend-toolkit/set_env.sh`, or the cluster's CANN module)\n"
        "module load gcc/11 cuda/12.4\n"
    ),
    # near-misses: the script handles the NPU already, a lowercase or longer name, another module,
    # a read of an unrelated variable, a noqa, a comment
    'if [ -n "$NPU" ]; then export ASCEND_RT_VISIBLE_DEVICES=0; else export CUDA_VISIBLE_DEVICES=0; fi\n': None,
    "cuda_visible_devices=0 MY_CUDA_VISIBLE_DEVICES=0 python x.py\necho $CUDA_VISIBLE_DEVICES_LIST\n": None,
    "module load python/3.10 cudf-tools\nmodule list\necho nvidia-smi-like\n": None,
    "export NCCL_IB_HCA=mlx5  # noqa: NPU713\nnvidia-smi  # noqa\n# module load cuda/12.4\n": None,
    # NCCL's own default (NCCL_IB_DISABLE=0) asks nothing of HCCL, also inside a quoted option list
    'OPTIONS_NCCL="NCCL_DEBUG=info NCCL_IB_DISABLE=0 NCCL_NET_GDR_LEVEL=2"\nexport NCCL_IB_DISABLE="0"\n': None,
    # turning NCCL's InfiniBand transport off asks nothing of HCCL either (rounds 4 and 13: noise)
    "export NCCL_IB_DISABLE=1\n": None,
    # an NCCL variable with an HCCL analog of another unit is still a manual item
    "export NCCL_BUFFSIZE=8388608\n": (
        "# TODO(cuda2npu): NPU713 `NCCL_BUFFSIZE` configures NCCL: HCCL_BUFFSIZE is the analog but takes "
        "megabytes, not bytes: convert the value by hand\nexport NCCL_BUFFSIZE=8388608\n"
    ),
}


@pytest.mark.parametrize("name", ["launch.sh", "job.slurm", "job.sbatch", "run.bash"])
@pytest.mark.parametrize("case", list(SHELL_CASES))
def test_shell_script_shapes(tmp_path, case, name):
    from cuda2npu.filekinds.shellscripts import NVIDIA_SMI_MESSAGE

    script = tmp_path / name
    script.write_text(case)
    expected = SHELL_CASES[case]
    expected = case if expected is None else expected.replace("{smi}", NVIDIA_SMI_MESSAGE)
    cli("migrate", tmp_path)
    assert script.read_text() == expected
    cli("migrate", tmp_path)
    assert script.read_text() == expected


def test_portable_output_keeps_the_cuda_variable(tmp_path):
    script = write(tmp_path / "run.sh", "CUDA_VISIBLE_DEVICES=1 python train.py\n")
    cli("migrate", tmp_path, "--portable")
    assert script.read_text() == (
        "# TODO(cuda2npu): NPU711 review: `CUDA_VISIBLE_DEVICES` kept for CUDA hosts (portable output); on Ascend "
        "hosts the variable is `ASCEND_RT_VISIBLE_DEVICES`: set it as well\nCUDA_VISIBLE_DEVICES=1 python train.py\n"
    )


def test_markers_off_leave_manual_lines_alone(tmp_path):
    script = write(tmp_path / "run.sh", "CUDA_VISIBLE_DEVICES=1 python train.py\nnvidia-smi\n")
    cli("migrate", tmp_path, "--no-markers")
    assert script.read_text() == "ASCEND_RT_VISIBLE_DEVICES=1 python train.py\nnvidia-smi\n"


@pytest.mark.parametrize(
    "name", ["requirements-gpu.txt", "requirements/cuda.txt", "exp_requirements.txt", "dev-requirements.in"]
)
def test_requirements_file_names(tmp_path, name):
    write(tmp_path / name, "xformers\n")
    assert [code for _, _, code in findings(tmp_path)] == ["NPU701"]


@pytest.mark.parametrize("name", ["constraints.txt", "requirements.md", "notes.txt"])
def test_other_text_files_are_not_requirements(tmp_path, name):
    write(tmp_path / name, "xformers\n")
    assert findings(tmp_path) == []


# --- goldens: fixtures/depfiles/<case>/ migrates to the dependency files of <case>.expected/ ------

DEPFILE_CASES = Path(__file__).resolve().parent.parent / "fixtures" / "depfiles"
CASES = sorted(p.name for p in DEPFILE_CASES.iterdir() if p.is_dir() and not p.name.endswith(".expected"))


def dependency_files(root):
    """relative path -> text of the dependency files under root (the Python files belong to other
    families' goldens)."""
    return {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*"))
        if p.is_file() and (is_dependency_file(p) or p.name == "setup.py")
    }


def assert_still_valid(name, text):
    """The migrated file is still read by the tools that read it."""
    if name.endswith("pyproject.toml"):
        tomllib.loads(text)
    elif name.endswith(".yml"):
        [pip] = [d["pip"] for d in yaml.safe_load(text)["dependencies"] if isinstance(d, dict)]
        assert all(item.startswith("-") or Requirement(item) for item in pip)
    elif name.endswith("setup.py"):
        ast.parse(text)
    elif name.endswith("setup.cfg"):
        parser = configparser.ConfigParser()
        parser.read_string(text)
        for line in parser["options"].get("install_requires", "").split("\n"):
            assert not line.strip() or Requirement(line.strip())
    else:
        for line in text.splitlines():
            body = line.split(" #", 1)[0].strip()
            assert not body or body.startswith(("#", "-")) or url_requirement(body) or Requirement(body), line


@pytest.mark.parametrize("case", CASES)
def test_dependency_file_goldens(case, tmp_path, update_golden):
    tree = tmp_path / case
    shutil.copytree(DEPFILE_CASES / case, tree)
    cli("migrate", tree)
    got = dependency_files(tree)
    expected = DEPFILE_CASES / f"{case}.expected"
    if update_golden:
        shutil.rmtree(expected, ignore_errors=True)
        for relative, text in got.items():
            write(expected / relative, text)
    assert got == dependency_files(expected)
    for relative, text in got.items():
        assert_still_valid(relative, text)
    cli("migrate", tree)
    assert dependency_files(tree) == got  # a second run changes nothing (markers are not repeated)


def test_pip_compiled_file_is_reported_not_edited(tmp_path):
    tree = tmp_path / "pip_compiled"
    shutil.copytree(DEPFILE_CASES / "pip_compiled", tree)
    compiled = (tree / "requirements.txt").read_text()
    data = json.loads(cli("check", tree, "--format", "json").stdout)
    found = {(d["line"], d["code"]): d for d in data["diagnostics"] if d["path"].endswith("requirements.txt")}
    # direct requirements (`# via -r requirements.in`) only: nvidia-* and triton come `# via torch`
    assert sorted(found) == [(7, "NPU702"), (17, "NPU701"), (23, "NPU702"), (23, "NPU703")]
    assert all(
        "lock file: change requirements.in and regenerate it" in d["message"] and not d["fixable"]
        for d in found.values()
    )
    cli("migrate", tree)
    assert (tree / "requirements.txt").read_text() == compiled


def test_r25_uv_export_direct_dependencies_are_those_via_the_project_itself(tmp_path):
    """h2o-llmstudio's `uv export` lock file: its own dependencies say `# via h2o-llmstudio`, a name the
    file does not list (the project itself); what only listed packages pull in stays transitive."""
    write(tmp_path / "train.py", "import torch\n")
    write(
        tmp_path / "requirements.txt",
        "# This file was autogenerated by uv via the following command:\n#    uv export --format requirements-txt\n"
        "peft==0.17.0\n    # via h2o-llmstudio\ntorch==2.8.0+cu126\n    # via\n    #   h2o-llmstudio\n"
        "    #   peft\nnvidia-cublas-cu12==12.6.4.1\n    # via torch\n",
    )
    found = findings(tmp_path)
    assert ("requirements.txt", 5, "NPU702") in found  # torch's CUDA build, a dependency of the project
    assert not [f for f in found if f[1] == 9]  # nvidia-cublas comes `# via torch`


def test_guarded_torch_npu_import_of_multi_backend_code_does_not_require_it(tmp_path):
    write(
        tmp_path / "accelerator.py",
        """
        def npu_available():
            try:
                import torch_npu  # noqa: F401
            except ImportError:
                return False
            return True
        """,
    )
    req = write(tmp_path / "requirements.txt", "torch>=2.1\n")
    assert findings(tmp_path) == []
    write(tmp_path / "npu_train.py", "import torch\nimport torch_npu\n")  # an unguarded import: required
    assert findings(tmp_path) == [("requirements.txt", 1, "NPU703")]
    cli("migrate", tmp_path)
    assert req.read_text() == "torch>=2.1\ntorch_npu\n"


def test_a_project_on_transformers_needs_torch_npu_declared_although_no_file_imports_it(tmp_path):
    """transformers, accelerate and DeepSpeed use the NPU only where torch_npu is installed: a
    project of them whose own files never import torch_npu (only its configs were migrated) needs
    it declared; a project of plain torch whose code needs no change does not."""
    write(tmp_path / "train.py", "import torch\nfrom transformers import Trainer\n\ntrainer = Trainer(model)\n")
    req = write(tmp_path / "requirements.txt", "torch==2.6.0\ntransformers\n")
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    [finding] = [d for d in data["diagnostics"] if d["code"] == "NPU703"]
    assert (
        "torch_npu is needed by transformers (which use the NPU only where torch_npu is installed)"
        in (finding["message"])
    )
    cli("migrate", tmp_path)
    assert req.read_text().splitlines()[:2] == ["torch==2.6.0", "torch_npu==2.6.0.post5"]
    plain = tmp_path / "plain"
    write(plain / "infer.py", "import torch\nx = torch.ones(1)\n")
    write(plain / "requirements.txt", "torch==2.6.0\n")
    assert findings(plain) == []


def test_no_release_for_torch_without_markers_still_reports_and_adds(tmp_path):
    write(tmp_path / "a.py", MIGRATED_CODE)
    req = write(tmp_path / "requirements.txt", "torch==2.7.0\n")
    assert findings(tmp_path) == [("requirements.txt", 1, "NPU703"), ("requirements.txt", 1, "NPU704")]
    cli("migrate", tmp_path, "--no-markers")
    assert req.read_text() == "torch==2.7.0\ntorch_npu\n"
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    [finding] = [d for d in data["diagnostics"] if d["code"].startswith("NPU7")]
    assert finding["code"] == "NPU704" and finding["line"] == 2 and finding["tier"] == "manual"
    assert "nearest torch releases with one: 2.6.0, 2.7.1" in finding["message"]


@pytest.mark.parametrize(
    ("requirement", "removed"),
    [
        ("nvidia-cudnn-cu12==9.1.0.70", True),
        ("nvidia-cutlass-dsl", False),
        ("nvidia-mathdx", False),
        ("nvidia-sphinx-theme", False),
    ],
)
def test_nvidia_distributions_are_decided_by_distribution_name(tmp_path, requirement, removed):
    write(tmp_path / "k.py", "import cutlass\n")
    req = write(tmp_path / "requirements.txt", f"{requirement}\n")
    cli("migrate", tmp_path, "--no-markers")
    assert (req.read_text() == "") is removed


def test_hash_pinned_file_gets_no_line_without_a_hash(tmp_path):
    write(tmp_path / "a.py", MIGRATED_CODE)
    text = "torch==2.6.0 --hash=sha256:0123\nnumpy==2.1.0 --hash=sha256:4567\n"
    req = write(tmp_path / "requirements.txt", text)
    [finding] = [
        d for d in json.loads(cli("check", tmp_path, "--format", "json").stdout)["diagnostics"] if d["code"] == "NPU703"
    ]
    assert (
        not finding["fixable"]
        and "`torch_npu==2.6.0.post5`" in finding["message"]
        and "regenerate" in finding["message"]
    )
    cli("migrate", tmp_path)
    assert req.read_text() == text


def test_pyproject_keywords_and_other_project_keys_are_not_requirements(tmp_path):
    write(tmp_path / "a.py", "import numpy\n")
    text = textwrap.dedent(
        """\
        [project]
        name = "demo"
        keywords = ["causal-conv1d", "apex", "gpu"]
        dependencies = [
            "causal-conv1d",  # kernels ["x"]
        ]
        optional-dependencies = { fast = ["apex"] }
        """
    )
    pyproject = write(tmp_path / "pyproject.toml", text)
    cli("migrate", tmp_path)
    assert pyproject.read_text() == text.replace('    "causal-conv1d",  # kernels ["x"]\n', "").replace(
        'fast = ["apex"]', "fast = []"
    )


def test_run_results_carry_the_imports_of_their_final_text(tmp_path):
    """The dependency files' pass reads these instead of reading every file of the run again."""
    from cuda2npu.core.options import Options
    from cuda2npu.project.cache import from_json, to_json
    from cuda2npu.project.runner import process_file

    source = tmp_path / "train.py"
    source.write_text("import numpy\nimport torch\n\nx = torch.zeros(1).cuda()\n")
    checked = process_file(source, "train.py", Options(fix=False))
    assert (checked.imports, checked.imports_torch_npu) == (["numpy", "torch"], False)
    migrated = process_file(source, "train.py", Options(fix=True))
    assert b"import torch_npu" in migrated.new_source
    assert (migrated.imports, migrated.imports_torch_npu) == (["numpy", "torch", "torch_npu"], True)
    assert from_json(to_json(migrated)).imports == migrated.imports  # cached with the result
    (tmp_path / "notes.txt").write_text("import apex\n")
    assert process_file(tmp_path / "notes.txt", "notes.txt", Options(fix=False)).imports is None


def test_libraries_pinned_below_their_first_npu_release_are_marked(tmp_path):
    """transformers < 4.32, accelerate < 0.21, deepspeed < 0.10.1 and vllm < 0.7.1 do not run on an
    NPU host; a range that allows a newer release is left alone."""
    write(
        tmp_path / "train.py",
        "import torch\nfrom transformers import Trainer\nx = torch.ones(1).cuda()\ntrainer = Trainer(model)\n",
    )
    write(tmp_path / "serve" / "app.py", "from transformers import AutoModel\n")
    write(tmp_path / "serve" / "requirements.txt", "transformers==4.28.1\n")  # inference only: any release runs
    # flan-alpaca: Lightning's `pl.Trainer` beside transformers' models is not transformers' Trainer
    write(
        tmp_path / "lit" / "training.py",
        "import pytorch_lightning as pl\nfrom transformers import T5Model\nt = pl.Trainer()\n",
    )
    write(tmp_path / "lit" / "requirements.txt", "transformers==4.28.1\n")
    req = write(
        tmp_path / "requirements.txt",
        """
        transformers==4.28.1
        accelerate>=0.18,<0.20
        deepspeed==0.9.1
        vllm<=0.6.3
        vllm-flash-attn
        peft==0.3.0
        transformers-stream-generator>=0.0.4
        """,
    )
    write(tmp_path / "requirements-new.txt", "transformers>=4.28\naccelerate==0.21.0\ndeepspeed~=0.14\n")
    assert [f for f in findings(tmp_path) if f[2] == "NPU705"] == [
        ("requirements.txt", 1, "NPU705"),
        ("requirements.txt", 2, "NPU705"),
        ("requirements.txt", 3, "NPU705"),
        ("requirements.txt", 4, "NPU705"),
    ]
    cli("migrate", tmp_path)
    lines = req.read_text().splitlines()
    assert lines[0].startswith("# TODO(cuda2npu): NPU705 `transformers==4.28.1` allows no transformers release")
    assert lines[1] == "transformers==4.28.1"
    assert "vllm-ascend" in lines[6] and lines[7] == "vllm<=0.6.3"


def test_extras_for_another_build_are_left_alone(tmp_path):
    """Extras keyed to a CUDA version, another accelerator, Windows or a hosted notebook, and those
    made of other builds' wheels, are the other hosts' (unsloth's `cu121-torch240`, round 5): no
    marker, nothing removed, no torch_npu; the base requirements and the generic extras are checked."""
    write(tmp_path / "pkg" / "m.py", MIGRATED_CODE)
    write(tmp_path / "pkg" / "k.py", "from mamba_ssm import Mamba\n")
    text = textwrap.dedent(
        """\
        [project]
        name = "Demo_Pkg"
        dependencies = [
            "numpy",
        ]

        [project.optional-dependencies]
        kernels = ["mamba-ssm>=2.0 ; sys_platform == 'linux'"]
        train = [
            "demo-pkg[kernels]",
            "torch>=2.4",
            "apex",
        ]
        gpu = ["apex"]
        cu121-torch240 = [
            "demo-pkg[train]",
            "apex",
            "demo_pkg[cu121only]",
        ]
        cu121only = [
            "xformers @ https://download.pytorch.org/whl/cu121/xformers-0.0.28-cp311-cp311-manylinux_2_28_x86_64.whl ; python_version == '3.11'",
        ]
        cu118onlytorch211 = ["torch==2.1.1+cu118", "mamba-ssm"]
        intelgputorch260 = [
            "torch @ https://download.pytorch.org/whl/xpu/torch-2.6.0%2Bxpu-cp311-cp311-linux_x86_64.whl",
            "mamba-ssm",
        ]
        rocm64-torch280 = ["torch==2.8.0+rocm6.4", "mamba-ssm"]
        colab-new = ["demo-pkg[kernels]", "bitsandbytes"]
        windows = ["xformers ; sys_platform == 'win32'"]
        prebuilt = [
            "flash-attn @ https://example.org/v2.7.4/flash_attn-2.7.4+cu12torch2.6cxx11abiFALSE-cp311-cp311-linux_x86_64.whl",
            "demo-pkg[cu121-torch240]",
        ]

        [dependency-groups]
        cu124 = ["nvidia-nccl-cu12"]
        dev = ["pytest", "nvidia-nccl-cu12"]
        """
    )
    pyproject = write(tmp_path / "pyproject.toml", text)
    assert findings(tmp_path) == [
        ("pyproject.toml", 8, "NPU701"),
        ("pyproject.toml", 11, "NPU703"),
        ("pyproject.toml", 12, "NPU701"),
        ("pyproject.toml", 14, "NPU701"),
        ("pyproject.toml", 38, "NPU701"),
    ]
    assert cli("migrate", tmp_path).exit_code == 0
    migrated = pyproject.read_text()
    expected = (
        text.replace(
            'kernels = ["mamba-ssm',
            "# TODO(cuda2npu): NPU701 `mamba-ssm` is CUDA-only (mamba-ssm's selective-scan kernels are CUDA "
            'extensions); kept while the code imports it\nkernels = ["mamba-ssm',
        )
        .replace('    "torch>=2.4",\n    "apex",\n', '    "torch>=2.4",\n    "torch_npu",\n')
        .replace('gpu = ["apex"]', "gpu = []")
        .replace('dev = ["pytest", "nvidia-nccl-cu12"]', 'dev = ["pytest"]')
    )
    assert migrated == expected
    assert cli("migrate", tmp_path).exit_code == 0
    assert pyproject.read_text() == migrated  # idempotent


@pytest.mark.parametrize(
    "name",
    [
        "cu118only",
        "cu121-torch240",
        "cu124-ampere-torch250",
        "cuda",
        "cuda12x",
        "cu12x",
        "CU118_Torch211",
        "colab-new",
        "kaggle",
        "windows",
        "intelgputorch260",
        "intel-gpu-torch260",
        "amd",
        "rocm64-torch280",
        "xpu",
        "nvidia",
        "hopper",
    ],
)
def test_extra_names_for_another_build(name):
    from cuda2npu.filekinds.depfiles import other_build_sections

    assert other_build_sections({("extra", name): ["rich"]}, "demo") == {("extra", name)}


@pytest.mark.parametrize(
    "name",
    [
        "gpu",
        "cpu",
        "npu",
        "train",
        "dev",
        "all",
        "huggingface",
        "triton",
        "flashattention",
        "kernels",
        "audio-torch290",
        "intelligence",
        "cudagraphs",
        "accu121",
        "windowing",
    ],
)
def test_generic_extra_names(name):
    from cuda2npu.filekinds.depfiles import other_build_sections

    assert other_build_sections({("extra", name): ["rich"]}, "demo") == set()


@pytest.mark.parametrize(
    ("name", "requirements", "other"),
    [
        ("flash", ["flash-attn>=2.6"], True),  # long-context-attention: opt-in for CUDA hosts
        ("xformers", ["xformers==0.0.28"], True),
        ("flash", ["flash-attn", "einops"], False),  # einops runs on an NPU host
        ("train", ["flash-attn"], False),  # a feature named otherwise: the marker says what to drop
    ],
)
def test_an_extra_named_for_the_cuda_package_it_installs(name, requirements, other):
    from cuda2npu.filekinds.depfiles import other_build_sections

    assert other_build_sections({("extra", name): requirements}, "demo") == ({("extra", name)} if other else set())


def test_torch_of_another_build_gets_no_torch_npu(tmp_path):
    """Unsloth's Intel XPU extra got `torch_npu; <markers>` after its `torch @ ...+xpu` wheel
    (round 5, hunk 284): torch_npu goes next to the torch an Ascend host installs, or nowhere."""
    write(tmp_path / "m.py", MIGRATED_CODE)
    text = textwrap.dedent(
        """\
        [project]
        name = "demo"
        dependencies = ["numpy"]

        [project.optional-dependencies]
        intelgputorch260 = [
            "torch @ https://download.pytorch.org/whl/xpu/torch-2.6.0%2Bxpu-cp311-cp311-linux_x86_64.whl ; python_version == '3.11'",
        ]
        cu121 = ["torch==2.5.1+cu121"]
        """
    )
    pyproject = write(tmp_path / "pyproject.toml", text)
    assert findings(tmp_path) == []
    cli("migrate", tmp_path)
    assert pyproject.read_text() == text
    pyproject.write_text(text + 'torch26 = ["torch==2.6.0"]\n')
    assert findings(tmp_path) == [("pyproject.toml", 10, "NPU703")]
    cli("migrate", tmp_path)
    assert pyproject.read_text().endswith('torch26 = ["torch==2.6.0", "torch_npu==2.6.0.post5"]\n')


def test_setup_py_and_setup_cfg_extras_for_another_build(tmp_path):
    write(tmp_path / "m.py", MIGRATED_CODE)
    setup_text = textwrap.dedent(
        """\
        from setuptools import setup

        setup(
            name="demo",
            install_requires=["torch==2.6.0"],
            extras_require={"cu121": ["xformers"], "fast": ["xformers"], "colab": ["demo[cu121]"]},
        )
        """
    )
    setup = write(tmp_path / "setup.py", setup_text)
    cfg_text = textwrap.dedent(
        """\
        [metadata]
        name = demo

        [options.extras_require]
        rocm =
            causal-conv1d
        fast =
            causal-conv1d
        """
    )
    cfg = write(tmp_path / "setup.cfg", cfg_text)
    cli("migrate", tmp_path)
    assert setup.read_text() == setup_text.replace(
        '"torch==2.6.0"]', '"torch==2.6.0", "torch_npu==2.6.0.post5"]'
    ).replace('"fast": ["xformers"]', '"fast": []')
    assert cfg.read_text() == cfg_text.replace("fast =\n    causal-conv1d\n", "fast =\n")


@pytest.mark.parametrize("code", ["NPU701", "NPU703"])
def test_catalogue_near_misses_are_left_alone(tmp_path, code):
    """The `valid` pyproject.toml texts of NPU701 and NPU703 (rules/project.toml) in a project that
    imports torch_npu and every CUDA-only module they name."""
    from cuda2npu.core.catalogue import rule

    write(tmp_path / "m.py", MIGRATED_CODE + "import triton\nimport xformers\nimport flash_attn\nimport bitsandbytes\n")
    assert rule(code).valid
    for text in rule(code).valid:
        pyproject = write(tmp_path / "pyproject.toml", text)
        assert [f for f in findings(tmp_path) if f[0] == "pyproject.toml"] == []
        before = pyproject.read_text()
        cli("migrate", tmp_path)
        assert pyproject.read_text() == before


def test_the_projects_own_extras_are_not_its_dependencies(tmp_path):
    """`unsloth[kernels]` in unsloth's own pyproject pulls in its extras: nothing to report at the
    self-reference, while the extra's own CUDA-only requirement still is."""
    write(tmp_path / "train.py", "import torch\nimport xformers\n")
    pyproject = write(
        tmp_path / "pyproject.toml",
        """
        [project]
        name = "unsloth"
        dependencies = ["torch>=2.4"]

        [project.optional-dependencies]
        kernels = ["xformers>=0.0.27"]
        train = ["unsloth[kernels]"]
        """,
    )
    data = json.loads(cli("check", tmp_path, "--format", "json", "--select", "NPU701").stdout)
    assert [(d["path"].rsplit("/", 1)[-1], d["line"]) for d in data["diagnostics"]] == [("pyproject.toml", 6)]
    assert "unsloth[kernels]" in pyproject.read_text()


def test_a_singular_requirement_txt_is_read(tmp_path):
    """LoRA's `examples/NLG/requirement.txt` pins a CUDA wheel of torch: read like requirements.txt."""
    write(tmp_path / "train.py", "import torch\nx = torch.ones(1).cuda()\n")
    req = write(tmp_path / "examples" / "requirement.txt", "torch==2.4.0+cu121\n")
    assert ("requirement.txt", 1, "NPU702") in findings(tmp_path)
    cli("migrate", tmp_path)
    assert req.read_text().startswith("torch==2.4.0\n")


@pytest.mark.parametrize(
    ("constraint", "expected"),
    [
        ("^1.2.3", ">=1.2.3,<2"),
        ("^0.2.3", ">=0.2.3,<0.3"),
        ("^0.0.3", ">=0.0.3,<0.0.4"),
        ("^0", ">=0,<1"),
        ("~1.2.3", ">=1.2.3,<1.3"),
        ("~1", ">=1,<2"),
        ("2.1.0", "==2.1.0"),
        ("2.1.0+cu118", "==2.1.0+cu118"),
        ("1.2.*", "==1.2.*"),
        (">= 1.2, < 1.5", ">=1.2,<1.5"),
        ("*", ""),
        ("^1.2 || ^2", None),
        ("latest", None),
    ],
)
def test_r8_poetry_constraints_read_as_pep440(constraint, expected):
    """Poetry's dependency-specification docs: caret, tilde, wildcard, inequalities, `||` (not read)."""
    assert poetry_deps.specifier(constraint) == expected


def test_r8_poetry_dependencies_are_read_like_project_dependencies(tmp_path):
    """mistral-inference: xFormers in `[tool.poetry.dependencies]` (NPU701 in its requirements.txt
    before round 8, nothing here); still imported, so kept and marked; no torch declared, so no torch_npu."""
    write(
        tmp_path / "pkg" / "cache.py",
        "import torch\nfrom xformers.ops.fmha.attn_bias import BlockDiagonalMask\n\nMASK = BlockDiagonalMask.from_seqlens([3])\n",
    )
    pyproject = write(
        tmp_path / "pyproject.toml",
        """
        [tool.poetry.dependencies]
        python = "^3.9.10"
        xformers = ">=0.0.24"
        fire = ">=0.6.0"

        [tool.poetry.group.dev.dependencies]
        pytest = "7.4.4"
        """,
    )
    assert findings(tmp_path) == [("pyproject.toml", 3, "NPU701")]
    cli("migrate", tmp_path)
    assert pyproject.read_text().splitlines()[2:4] == [
        "# TODO(cuda2npu): NPU701 `xformers` is CUDA-only (xformers has no Ascend build; use "
        "F.scaled_dot_product_attention or torch_npu.npu_fusion_attention); kept while the code imports it",
        'xformers = ">=0.0.24"',
    ]


def test_r8_index_tables_inline_noqa_and_wheel_urls(tmp_path):
    """uv's index given inline in `[tool.uv]` is an index as well; `# noqa: NPU702` keeps one; a
    wheel URL under PyTorch's CUDA index (a `[tool.uv.sources]` url) is no index root to swap."""
    text = textwrap.dedent(
        """\
        [project]
        name = "demo"
        dependencies = ["numpy"]

        [tool.uv]
        index = [{ name = "pytorch", url = "https://download.pytorch.org/whl/cu124" }]
        find-links = ["https://download.pytorch.org/whl/cu118"]  # noqa: NPU702

        [tool.uv.sources]
        torchaudio = { url = "https://download.pytorch.org/whl/cu121/torchaudio-2.5.1%2Bcu121-cp311-cp311-linux_x86_64.whl" }
        """
    )
    pyproject = write(tmp_path / "pyproject.toml", text)
    assert findings(tmp_path) == [("pyproject.toml", 6, "NPU702")]
    cli("migrate", tmp_path)
    assert pyproject.read_text() == text.replace("whl/cu124", "whl/cpu")


def test_r8_unused_triton_pin_is_removed_an_imported_one_left(tmp_path):
    """mistral-finetune pins `triton==2.2` (no aarch64 wheel) and imports nothing of it: removed, as a
    CUDA-only requirement nothing imports is; once a file imports triton the pin is left, unreported."""
    write(tmp_path / "train.py", "import torch\n\nx = torch.zeros(1).cuda()\n")
    req = write(tmp_path / "requirements.txt", "numpy\ntriton==2.2\n")
    assert findings(tmp_path) == [("requirements.txt", 2, "NPU701")]
    cli("migrate", tmp_path)
    assert "triton" not in req.read_text()
    req.write_text("numpy\ntriton==2.2\n")
    write(tmp_path / "kernels.py", "import triton\n")
    assert findings(tmp_path) == []


def test_r8_triton_is_no_cuda_only_distribution_and_onnxruntime_gpu_is_renamed(tmp_path):
    """whisper's platform-gated triton asks nothing (its import works on an NPU host, Triton-Ascend is
    the same module); LatentSync's onnxruntime-gpu is renamed even though only insightface imports it."""
    from cuda2npu.analysis.cuda_only_modules import cuda_only_distribution
    from cuda2npu.filekinds.distribution_facts import replacement

    assert cuda_only_distribution("triton") is None and replacement("triton") is None
    assert cuda_only_distribution("onnxruntime_gpu")[0] == ("onnxruntime",)
    assert replacement("ONNXRuntime-GPU") == "onnxruntime" and replacement("faiss-gpu") is None
    write(tmp_path / "face.py", "from insightface.app import FaceAnalysis\n")
    write(tmp_path / "k.py", "import triton\n\n@triton.jit\ndef kernel(x):\n    pass\n")
    text = "triton>=2; platform_machine=='x86_64'\nonnxruntime-gpu==1.21.0  # faces\n"
    req = write(tmp_path / "requirements.txt", text)
    assert findings(tmp_path) == [("requirements.txt", 2, "NPU701")]
    cli("migrate", tmp_path)
    assert req.read_text() == "triton>=2; platform_machine=='x86_64'\nonnxruntime==1.21.0  # faces\n"
    assert findings(tmp_path) == []


def test_r17_vcs_pins_of_libraries_with_a_first_npu_release(tmp_path):
    """Chinese-Vicuna: transformers and accelerate installed from git at a commit (the release cannot be
    told: reviewed) or a tag (read as that release); a branch is the newest code (nothing)."""
    write(tmp_path / "train.py", "import torch\nfrom transformers import Trainer\n\ntrainer = Trainer(model)\n")
    write(
        tmp_path / "requirements.txt",
        """
        git+https://github.com/huggingface/transformers@0dcb46e7
        git+https://github.com/huggingface/accelerate@v0.19.0
        git+https://github.com/huggingface/transformers.git@v4.40.0
        git+https://github.com/huggingface/accelerate@main
        """,
    )
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    found = [(d["line"], d["message"]) for d in data["diagnostics"] if d["code"] == "NPU705"]
    assert [line for line, _ in found] == [1, 2]
    assert "at commit `0dcb46e7`, whose release cuda2npu cannot tell" in found[0][1]
    assert "allows no accelerate release from 0.21.0 on" in found[1][1]


def test_r18_bitsandbytes_asked_of_transformers_is_a_use_of_the_requirement(tmp_path):
    """Chinese-Mixtral: `BitsAndBytesConfig(load_in_4bit=True)` built on every run (transformers reads
    bitsandbytes' metadata there): the requirement is not unused; without such a use it is."""
    used, unused = tmp_path / "used", tmp_path / "unused"
    write(used / "eval.py", "from transformers import BitsAndBytesConfig\nq = BitsAndBytesConfig(load_in_4bit=True)\n")
    write(unused / "eval.py", "import torch\n")
    kept = write(used / "requirements.txt", "bitsandbytes==0.42.0\n")
    removed = write(unused / "requirements.txt", "bitsandbytes==0.42.0\n")
    cli("migrate", used)
    cli("migrate", unused)
    assert kept.read_text().endswith("bitsandbytes==0.42.0\n")
    assert "bitsandbytes==0.42.0" not in removed.read_text()


def test_r20_bitsandbytes_kept_for_transformers_is_not_marked_again(tmp_path):
    """yuren, Chinese-LLaMA-Alpaca-3: the requirement transformers' quantization keeps is reported, not
    marked (NPU907 marks the calls); one the code imports itself is marked."""
    quantizing, importing = tmp_path / "quantizing", tmp_path / "importing"
    write(
        quantizing / "eval.py",
        "from transformers import BitsAndBytesConfig\nq = BitsAndBytesConfig(load_in_4bit=True)\n",
    )
    write(importing / "eval.py", "import bitsandbytes as bnb\nopt = bnb.optim.Adam8bit\n")
    for root in (quantizing, importing):
        write(root / "requirements.txt", "bitsandbytes==0.42.0\n")
        cli("migrate", root)
    assert (quantizing / "requirements.txt").read_text() == "bitsandbytes==0.42.0\n"
    assert "TODO(cuda2npu): NPU701" in (importing / "requirements.txt").read_text()
    data = json.loads(cli("check", quantizing, "--format", "json").stdout)
    [found] = [d for d in data["diagnostics"] if d["code"] == "NPU701"]
    assert (
        "kept: transformers' quantization in" in found["message"] and "eval.py needs it installed" in found["message"]
    )


def test_r19_deepspeed_selects_the_npu_from_0_10_1(tmp_path):
    """LLaVA-Plus's `deepspeed==0.9.5`: 0.9.3 to 0.10.0 ship the NPU accelerator but
    `get_accelerator()` never selects it (DeepSpeed #3831, first in v0.10.1)."""
    write(tmp_path / "train.py", "import deepspeed\n")
    write(tmp_path / "requirements.txt", "deepspeed==0.9.5\n")
    write(tmp_path / "new" / "requirements.txt", "deepspeed==0.10.1\n")
    write(tmp_path / "new" / "train.py", "import deepspeed\n")
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    found = [d["path"].rsplit("/", 2)[-2:] for d in data["diagnostics"] if d["code"] == "NPU705"]
    assert len(found) == 1 and found[0][-1] == "requirements.txt" and "new" not in found[0]


def test_r47_deepspeed_pins_predating_the_npu_optimizer_builds_are_reviewed_where_the_project_uses_them(tmp_path):
    """ReMax (round 47): `deepspeed==0.10.3` selects the NPU, but its NPU accelerator has no FusedAdam
    build before 0.11.2 and no CPU Adam before 0.12.4: a project importing them fails to build its
    optimizer. Reported only where the project uses them, with the release each needs; a pin allowing
    those releases, or a project not using them, is left."""
    train = (
        "from deepspeed.ops.adam import DeepSpeedCPUAdam, FusedAdam\n\nopt = FusedAdam if fused else DeepSpeedCPUAdam\n"
    )
    cases = {
        "both": ("deepspeed==0.10.3\n", train, "0.11.2"),
        "cpu": ("deepspeed==0.11.2\n", train, "0.12.4"),
        "new": ("deepspeed>=0.12.4\n", train, None),
        "unused": ("deepspeed==0.10.3\n", "import deepspeed\n", None),
    }
    for name, (requirements, code, wanted) in cases.items():
        write(tmp_path / name / "requirements.txt", requirements)
        write(tmp_path / name / "train.py", code)
        data = json.loads(cli("check", tmp_path / name, "--format", "json").stdout)
        found = [d["message"] for d in data["diagnostics"] if d["code"] == "NPU705"]
        if wanted is None:
            assert found == [], name
        else:
            assert len(found) == 1 and f"allows no deepspeed release from {wanted} on" in found[0], (name, found)
            assert "` used in " in found[0] and "train.py): raise the requirement" in found[0]


def test_r20_deepspeed_kernels_is_cuda_only(tmp_path):
    """DeepSpeed-MII's `deepspeed-kernels`: an x86-64 wheel of CUDA libraries (module `dskernels`),
    removed where nothing imports it, marked where something does."""
    unused, used = tmp_path / "unused", tmp_path / "used"
    write(unused / "serve.py", "import deepspeed\n")
    write(used / "serve.py", "import dskernels\n")
    for root in (unused, used):
        write(root / "requirements.txt", "deepspeed>=0.12.3\ndeepspeed-kernels\n")
        cli("migrate", root)
    assert (unused / "requirements.txt").read_text() == "deepspeed>=0.12.3\n"
    assert "TODO(cuda2npu): NPU701" in (used / "requirements.txt").read_text()


def test_r21_a_trainer_only_imported_is_no_trainer_use(tmp_path):
    """WebGLM: `Trainer` imported, training in the script's own loop: transformers' Trainer pin (NPU705)
    asks nothing; a Trainer built does."""
    write(tmp_path / "requirements.txt", "transformers==4.29.1\n")
    write(
        tmp_path / "train.py",
        "from transformers import (\n    AutoModel,\n    Trainer,\n)\nm = AutoModel.from_pretrained(p)\n",
    )
    assert [f for f in findings(tmp_path) if f[2] == "NPU705"] == []
    write(tmp_path / "train.py", "from transformers import Trainer\n\ntrainer = Trainer(model)\n")
    assert [f for f in findings(tmp_path) if f[2] == "NPU705"] == [("requirements.txt", 1, "NPU705")]


def test_r21_a_projects_own_trainer_class_is_not_transformers(tmp_path):
    """MOSS-RLHF: its own `PPOTrainer` on accelerate beside transformers' models is no Trainer use."""
    write(tmp_path / "requirements.txt", "transformers==4.30.2\n")
    write(
        tmp_path / "train_ppo.py",
        "from transformers import AutoModel\nfrom ppo.ppo_trainer import PPOTrainer\n\ntrainer = PPOTrainer(opt)\n",
    )
    assert [f for f in findings(tmp_path) if f[2] == "NPU705"] == []


def test_r23_no_torch_npu_added_for_a_library_where_none_fits_torch(tmp_path):
    """PowerInfer's converter requirements: `torch~=2.2.1` beside transformers, which would use torch_npu
    if it were there, but no code imports it; no torch_npu release fits that torch, so one added
    unpinned would only make pip's resolution fail. NPU704 says the torch requirement has none."""
    write(tmp_path / "convert.py", "import torch\nfrom transformers import AutoTokenizer\n")
    req = write(tmp_path / "requirements.txt", "torch~=2.2.1\ntransformers>=4.40\n")
    assert [f[2] for f in findings(tmp_path) if f[2] in ("NPU703", "NPU704")] == ["NPU704"]
    cli("migrate", tmp_path)
    assert not [line for line in req.read_text().splitlines() if line.startswith("torch_npu")]


def test_r26_pypis_apex_is_pyramids_not_nvidias(tmp_path):
    """PLLaVA's frozen requirements pin `apex==0.9.10.dev0`: PyPI's `apex` is Pyramid's auth toolkit
    (NVIDIA's apex is built from git, as 0.1); it installs anywhere and is not reported."""
    write(tmp_path / "train.py", "import torch\n")
    write(tmp_path / "requirements.txt", "apex==0.9.10.dev0\npyramid==1.10.8\n")
    assert [f for f in findings(tmp_path) if f[2] == "NPU701"] == []
    write(tmp_path / "requirements.txt", "apex==0.1\n")
    assert [f[2] for f in findings(tmp_path)] == ["NPU701"]


def test_r28_torch_npu_goes_with_the_linux_torch_line(tmp_path):
    """H2O's HELM freeze pins torch per platform, macOS first: torch_npu is added after the Linux line,
    with its marker (after the macOS one it would be required on macOS only, where none installs)."""
    write(tmp_path / "a.py", "import torch\n\nx = torch.ones(1).cuda()\n")
    req = write(
        tmp_path / "requirements.txt",
        'torch==1.12.1 ; sys_platform == "darwin"\ntorch==2.1.0+cu118 ; sys_platform == "linux"\nnumpy\n',
    )
    cli("migrate", tmp_path)
    lines = req.read_text().splitlines()
    assert lines[:3] == [
        'torch==1.12.1 ; sys_platform == "darwin"',
        'torch==2.1.0 ; sys_platform == "linux"',
        'torch_npu==2.1.0.post17; sys_platform == "linux"',
    ]


def test_r40_a_requirement_reached_through_the_projects_own_imports_is_kept(tmp_path):
    """chameleon (round 40): `viewer/backend/requirements.txt` lists xformers; no file of the backend imports
    it, but the backend imports `chameleon.inference.loader`, which imports the model, whose xFormers
    names no rule rewrites away: the requirement stays, marked, instead of being dropped unmarked."""
    write(tmp_path / "chameleon" / "__init__.py", "")
    write(tmp_path / "chameleon" / "inference" / "__init__.py", "")
    write(tmp_path / "chameleon" / "inference" / "transformer.py", "import torch\nfrom xformers.ops import RMSNorm\n")
    write(tmp_path / "chameleon" / "inference" / "loader.py", "from chameleon.inference.transformer import RMSNorm\n")
    backend = tmp_path / "chameleon" / "viewer" / "backend"
    write(backend / "__init__.py", "")
    write(backend / "server.py", "import torch\nfrom chameleon.inference.loader import RMSNorm\n")
    requirements = write(backend / "requirements.txt", "fastapi\nxformers==0.0.23\n")
    cli("migrate", tmp_path)
    text = requirements.read_text()
    assert "xformers==0.0.23" in text and "NPU701" in text and "kept while the code imports it" in text


def test_r41_accelerates_bitsandbytes_quantization_keeps_the_requirement(tmp_path):
    """Bagel (round 41): `app.py` quantizes with accelerate's `BnbQuantizationConfig` /
    `load_and_quantize_model`, which import bitsandbytes themselves: the requirement stays, reported."""
    write(
        tmp_path / "app.py",
        "import torch\nfrom accelerate.utils import BnbQuantizationConfig, load_and_quantize_model\n\n"
        "config = BnbQuantizationConfig(load_in_8bit=True)\n",
    )
    requirements = write(tmp_path / "requirements.txt", "accelerate\nbitsandbytes==0.43.1\n")
    cli("migrate", tmp_path)
    assert "bitsandbytes==0.43.1" in requirements.read_text()


def test_an_environment_file_named_with_a_prefix_is_a_dependency_file(tmp_path):
    """Step1X-Edit's `GEdit-Bench/qwen25vl_environment.yml` (round 45): a conda environment file whatever
    comes before `environment` in its name; its CUDA-only pip requirement is reported (NPU701)."""
    write(
        tmp_path / "bench" / "qwen25vl_environment.yml",
        "name: qwen\ndependencies:\n  - pip:\n    - flash-attn==2.5.8\n",
    )
    write(tmp_path / "a.py", "import torch\n")
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    assert [(d["path"].rsplit("/", 1)[-1], d["code"]) for d in data["diagnostics"]] == [
        ("qwen25vl_environment.yml", "NPU701")
    ]


def test_an_index_option_on_a_requirement_line_and_a_pinned_torch_after_an_unpinned_one(tmp_path):
    """seed-vc (round 56): `torch --pre --index-url .../nightly/cu126` names a CUDA index on the requirement's
    own line (NPU702), its options are no version specifier, and a later `torch==2.4.0` is the pin torch_npu
    follows (NPU703 adds torch_npu 2.4.0's build, not an unpinned one)."""
    write(tmp_path / "train.py", "import torch\nx = torch.ones(1).cuda()\n")
    index = "--index-url https://download.pytorch.org/whl/nightly/cu126"
    write(tmp_path / "requirements.txt", f"torch --pre {index}\ntorchaudio --pre {index}\naccelerate\ntorch==2.4.0\n")
    assert findings(tmp_path) == [
        ("requirements.txt", 1, "NPU702"),
        ("requirements.txt", 2, "NPU702"),
        ("requirements.txt", 4, "NPU703"),
    ]
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    added = next(d["message"] for d in data["diagnostics"] if d["code"] == "NPU703")
    assert "torch_npu==2.4.0" in added and "--pre" not in added
