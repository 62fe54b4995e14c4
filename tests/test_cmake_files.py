"""CMake builds of CUDA code (cuda2npu/filekinds/cmake_files.py): Quest's `quest/ops/CMakeLists.txt`
builds the Python module `_kernels` from `.cu` sources; the project is reported (NPU602) with a marker
line above `project(...)`, and the module is a CUDA extension for NPU606 wherever it is imported."""

from __future__ import annotations

import json

from cli_helpers import cli, write

from cuda2npu.analysis.cuda_only_modules import cmake_extensions

CMAKE = """\
cmake_minimum_required(VERSION 3.26)
set(CMAKE_CUDA_STANDARD 17)
project(_kernels LANGUAGES CUDA CXX)  # the extension
file(GLOB SOURCES "csrc/*.cu")
pybind11_add_module(_kernels MODULE ${SOURCES})
"""


def quest(root):
    write(root / "pyproject.toml", '[project]\nname = "quest"\n')
    write(root / "quest" / "__init__.py", "from quest.utils import decode\n")
    write(
        root / "quest" / "utils.py",
        "import torch\nimport quest._kernels as _kernels\n\n\ndef decode(x):\n    return _kernels.decode(x)\n",
    )
    write(root / "quest" / "ops" / "CMakeLists.txt", CMAKE)
    write(root / "tools" / "CMakeLists.txt", "project(tools LANGUAGES CXX)\nadd_executable(tool main.cpp)\n")
    return root


def test_the_modules_a_cuda_cmake_project_builds(tmp_path):
    root = quest(tmp_path)
    files = [p for p in root.rglob("*") if p.is_file()]
    assert cmake_extensions(files) == ("_kernels", "quest._kernels")


def test_r26_a_cuda_cmake_project_and_the_imports_of_its_module_are_reported(tmp_path):
    root = quest(tmp_path / "quest-project")
    data = json.loads(cli("check", root, "--format", "json").stdout)
    found = sorted((d["path"].split("quest-project/")[-1], d["line"], d["code"]) for d in data["diagnostics"])
    assert ("quest/ops/CMakeLists.txt", 3, "NPU602") in found and ("quest/utils.py", 2, "NPU606") in found
    assert not [f for f in found if f[0] == "tools/CMakeLists.txt"]  # no CUDA there
    out = tmp_path / "out"
    assert cli("migrate", root, "--out", out).exit_code == 0
    migrated = (out / "quest" / "ops" / "CMakeLists.txt").read_text()
    marker = "# TODO(cuda2npu): NPU602 `project(_kernels LANGUAGES CUDA CXX)` compiles CUDA"
    assert (
        migrated.splitlines()[2].startswith(marker) and migrated.replace(migrated.splitlines()[2] + "\n", "") == CMAKE
    )
    assert cli("migrate", out, "--check").exit_code == 0  # idempotent: the marker above is seen
