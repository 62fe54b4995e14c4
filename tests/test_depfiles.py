"""Dependency files and shell scripts: reported by check, rewritten by migrate, untouched otherwise."""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from cuda2npu.cli import main

MIGRATED_CODE = "import torch\nimport torch_npu\n\nx = torch.ones(1).npu()\n"


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def findings(path, only_project_files=True):
    """(file name, line, code) of the findings; by default those of the files this module handles
    (Python rules of other families may report on the test's Python files too)."""
    data = json.loads(cli("check", path, "--format", "json").stdout)
    found = [(d["path"].rsplit("/", 1)[-1], d["line"], d["code"]) for d in data["diagnostics"]]
    return [f for f in found if not only_project_files or f[2].startswith("NPU7")]


def test_requirements_txt_is_rewritten(tmp_path):
    write(tmp_path / "train.py", "import torch\nimport triton\nx = torch.ones(1).cuda()\n")
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
    assert ("train.py", 3, "NPU101") in findings(tmp_path, only_project_files=False)
    assert cli("migrate", tmp_path).exit_code == 0
    assert req.read_text() == textwrap.dedent(
        """\
        # training
        --extra-index-url https://download.pytorch.org/whl/cpu
        torch==2.7.1 ; platform_system == "Linux"
        torch_npu==2.7.1.post8; platform_system == "Linux"
        torchvision==0.22.1
        triton
        numpy>=1.24
        """
    )  # triton stays: train.py still imports it
    assert [code for _, _, code in findings(tmp_path)] == ["NPU701"]
    assert cli("migrate", tmp_path, "--check").exit_code == 0


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
        fast = ["triton", "bitsandbytes>=0.43"]
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
    write(tmp_path / "k.py", "import triton\n\n@triton.jit\ndef kernel(x):\n    pass\n")
    req = write(tmp_path / "requirements.txt", "triton==3.0\nbitsandbytes  # noqa: NPU701\n")
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    [finding] = [d for d in data["diagnostics"] if d["path"].endswith("requirements.txt")]  # noqa'd bitsandbytes: none
    assert finding["code"] == "NPU701" and not finding["fixable"] and "still imported by" in finding["message"]
    cli("migrate", tmp_path)
    assert req.read_text() == "triton==3.0\nbitsandbytes  # noqa: NPU701\n"


def test_unpinned_or_unknown_torch_adds_torch_npu_without_pin(tmp_path):
    write(tmp_path / "a.py", MIGRATED_CODE)
    req = write(tmp_path / "requirements.txt", "torch>=2.1\n")
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    [finding] = [d for d in data["diagnostics"] if d["code"] == "NPU703"]
    assert "pin torch exactly" in finding["message"]
    cli("migrate", tmp_path)
    assert req.read_text() == "torch>=2.1\ntorch_npu\n"
    write(tmp_path / "requirements.txt", "torch==2.2.0")
    cli("migrate", tmp_path)
    assert req.read_text() == "torch==2.2.0\ntorch_npu"


def test_explicit_file_arguments_scan_the_whole_project_for_imports(tmp_path):
    write(tmp_path / "model.py", "import xformers.ops\n")
    setup = write(tmp_path / "setup.py", 'from setuptools import setup\nsetup(install_requires=["xformers"])\n')
    cli("migrate", setup)  # as pre-commit passes it: alone
    assert '"xformers"' in setup.read_text()


def test_shell_scripts_are_reported_only_when_opted_in(tmp_path):
    write(tmp_path / "train.py", MIGRATED_CODE)
    script = write(
        tmp_path / "launch.sh",
        """
        #!/bin/bash
        # CUDA_VISIBLE_DEVICES=0 in a comment is fine
        export CUDA_VISIBLE_DEVICES=0,1
        export NCCL_SOCKET_IFNAME=eth0 NCCL_DEBUG=INFO
        NCCL_P2P_LEVEL=NVL nvidia-smi --query-gpu=name --format=csv
        CUDA_LAUNCH_BLOCKING=1 python train.py  # noqa: NPU711
        """,
    )
    before = script.read_text()
    assert cli("check", tmp_path, "--ignore", "NPU71").exit_code == 0
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    got = [(d["line"], d["column"], d["code"], d["message"]) for d in data["diagnostics"]]
    assert [g[:3] for g in got] == [
        (3, 8, "NPU711"), (4, 8, "NPU713"), (4, 32, "NPU713"), (5, 1, "NPU713"), (5, 20, "NPU712")
    ]
    assert "ASCEND_RT_VISIBLE_DEVICES" in got[0][3] and "HCCL_SOCKET_IFNAME" in got[1][3]
    assert "npu-smi info" in got[4][3]
    cli("migrate", tmp_path)
    assert script.read_text() == before  # never rewritten


@pytest.mark.parametrize("name", ["requirements-gpu.txt", "requirements/cuda.txt"])
def test_requirements_file_names(tmp_path, name):
    write(tmp_path / name, "xformers\n")
    assert [code for _, _, code in findings(tmp_path)] == ["NPU701"]
