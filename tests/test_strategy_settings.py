"""The run settings are declared once (cuda2npu/core/strategy_settings.py): the configuration
reader, the command line (each command's own), --show-settings and the manual's settings table
follow that list."""

from __future__ import annotations

import re

import pytest
from cli_helpers import REPO, cli, write

from cuda2npu.core.config import KEYS
from cuda2npu.core.strategy_settings import SETTINGS

SETTINGS_TABLE = (REPO / "docs" / "ci-integration.md").read_text()


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.key)
def test_each_setting_reaches_the_config_the_command_line_and_the_manual(setting, tmp_path):
    assert KEYS[setting.key] == setting.expected
    row = next(line for line in SETTINGS_TABLE.splitlines() if line.startswith(f"| `{setting.key}` |"))
    assert f"`--{setting.key}`" in row, row
    for choice in setting.choices:
        assert f"`{choice}`" in row, row
    assert f"--{setting.key}" in cli("migrate", "--help").stdout
    assert (f"--{setting.key}" in cli("check", "--help").stdout) == (setting.command != "migrate")


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.key)
def test_a_configured_value_shows_in_the_settings_and_a_wrong_one_is_a_usage_error(setting, tmp_path):
    value = f'"{setting.choices[-1]}"' if setting.choices else {"bool": "true", "version": '"2.6"'}[setting.kind]
    write(tmp_path / "pyproject.toml", f"[tool.cuda2npu]\n{setting.key} = {value}\n")
    write(tmp_path / "train.py", "import torch\n")
    shown = cli("check", tmp_path / "train.py", "--show-settings").stdout
    assert re.search(rf"^{re.escape(setting.key)} = {re.escape(value)}$", shown, re.M), shown
    write(tmp_path / "pyproject.toml", f"[tool.cuda2npu]\n{setting.key} = 3\n")
    result = cli("check", tmp_path / "train.py")
    assert result.exit_code == 2 and f"key '{setting.key}' = 3 is invalid" in result.output
