"""Shared test configuration: ``--update-golden`` rewrites golden ``*.out.py`` files."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="Regenerate fixtures/rules/**/*.out.py.")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return request.config.getoption("--update-golden")


@pytest.fixture(autouse=True)
def _no_result_cache(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs start from scratch (no `.cuda2npu_cache/` read or written in fixtures or the repo),
    except in the cache's own tests."""
    if request.module.__name__ != "test_cache":
        monkeypatch.setenv("CUDA2NPU_NO_CACHE", "1")
