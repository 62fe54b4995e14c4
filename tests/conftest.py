"""Shared test configuration: ``--update-golden`` rewrites golden ``*.out.py`` files."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="Regenerate fixtures/rules/**/*.out.py.")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return request.config.getoption("--update-golden")
