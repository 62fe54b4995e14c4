"""Fixtures for the emulator tests: the shared emulated-npu worker process (see npu_process.py)."""

from __future__ import annotations

import pytest
from npu_process import NpuProcess


@pytest.fixture(scope="session")
def npu_process():
    process = NpuProcess()
    yield process
    process.close()
