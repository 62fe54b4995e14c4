"""The wheel ships the rule catalogue: build it, install it apart from the source tree, list rules."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

from cli_helpers import REPO


def test_wheel_contains_the_catalogue_and_runs(tmp_path):
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    wheel = next((tmp_path / "dist").glob("cuda2npu-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "cuda2npu/catalogue/device.toml" in names
    assert "cuda2npu/catalogue/tables/torch_cuda_api.toml" in names
    site = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stderr
    env = {**os.environ, "PYTHONPATH": str(site)}
    listing = subprocess.run(
        [
            sys.executable,
            "-c",
            "import cuda2npu.core.catalogue as c, sys; print(c.catalogue_dir()); from cuda2npu.commands.cli import main; sys.argv=['cuda2npu', 'rules']; main()",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert listing.returncode == 0, listing.stderr
    first_line, table = listing.stdout.split("\n", 1)
    assert first_line.startswith(str(site)), "the catalogue must come from the installed wheel"
    assert any(line.split()[:2] == ["NPU101", "cuda-method-call"] for line in table.splitlines())
