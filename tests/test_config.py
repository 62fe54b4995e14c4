"""Configuration: [tool.cuda2npu] / cuda2npu.toml, nearest file wins, errors exit 2, CLI overrides."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from cuda2npu.commands.cli import main
from cuda2npu.core.config import ConfigError, find_config_file, load_config

CUDA = "import torch\nx = torch.zeros(1).cuda()\ntorch.cuda.synchronize()\n"


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def codes(result):
    return sorted(d["code"] for d in json.loads(result.stdout)["diagnostics"])


def test_nearest_config_wins_and_plain_pyproject_is_skipped(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.cuda2npu]\nignore = ["NPU103"]\n')
    write(tmp_path / "sub" / "pyproject.toml", '[project]\nname = "sub"\n')  # no table: not a config
    write(tmp_path / "sub" / "deeper" / "cuda2npu.toml", 'ignore = ["NPU101"]\n')
    write(tmp_path / "sub" / "a.py", CUDA)
    write(tmp_path / "sub" / "deeper" / "b.py", CUDA)
    assert find_config_file([tmp_path / "sub"]) == tmp_path / "pyproject.toml"
    assert find_config_file([tmp_path / "sub" / "deeper" / "b.py"]) == tmp_path / "sub" / "deeper" / "cuda2npu.toml"
    assert codes(cli("check", tmp_path / "sub" / "a.py", "--format", "json")) == ["NPU101"]
    assert codes(cli("check", tmp_path / "sub" / "deeper", "--format", "json")) == ["NPU103"]
    # standalone file beats pyproject.toml in the same directory; --isolated ignores both
    write(tmp_path / "sub" / "cuda2npu.toml", 'select = ["NPU103"]\n')
    assert codes(cli("check", tmp_path / "sub" / "a.py", "--format", "json")) == ["NPU103"]
    assert codes(cli("check", tmp_path / "sub" / "a.py", "--format", "json", "--isolated")) == ["NPU101", "NPU103"]


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('selct = ["NPU1"]', ["key 'selct' is unknown", "allowed keys:", "select"]),
        ("fuse_sdpa = true", ["key 'fuse_sdpa' is unknown (did you mean 'fuse-sdpa'?)"]),
        ('precision = "fp8"', ["key 'precision' = 'fp8' is invalid", "allowed values: bf16, fp16, keep"]),
        ('max-tier = "manual"', ["key 'max-tier'", "allowed values: exact, numeric, review"]),
        ('markers = "yes"', ["key 'markers'", "allowed values: true, false"]),
        ('select = ["XYZ1"]', ["key 'select': 'XYZ1' matches no rule code", "NPU101"]),
        (
            'per-file-ignores = { "tests/*" = ["NPU9999"] }',
            ["per-file-ignores.tests/*", "'NPU9999' matches no rule code"],
        ),
        ('target = { torch_npu = "latest" }', ["key 'target.torch_npu' = 'latest' is invalid"]),
        ('target = { torch = "2.1" }', ["key 'target.torch' is unknown; allowed keys: torch_npu"]),
        ('validate = { entries = ["model"] }', ["key 'validate.entries': 'model' is invalid", "module:function"]),
        ('exclude = "legacy"', []),  # a single string is accepted as a one-element list
        ("select = [", ["invalid TOML"]),
    ],
)
def test_unknown_keys_and_bad_values_exit_2_naming_file_key_and_allowed_values(tmp_path, table, expected):
    config = write(tmp_path / "pyproject.toml", f"[tool.cuda2npu]\n{table}\n")
    write(tmp_path / "a.py", CUDA)
    result = cli("check", tmp_path, "--format", "json")
    if not expected:
        assert result.exit_code == 1, result.output
        return
    assert result.exit_code == 2, result.output
    assert str(config) in result.stderr
    for fragment in expected:
        assert fragment in result.stderr


def test_every_documented_key_is_accepted(tmp_path):
    write(
        tmp_path / "cuda2npu.toml",
        """
        select = ["NPU1", "NPU2"]
        ignore = ["NPU109"]
        extend-select = ["NPU005"]
        exclude = ["legacy"]
        extend-exclude = ["gen/*.py"]
        per-file-ignores = { "tests/*" = ["NPU101"], "conftest.py" = ["NPU1"] }
        precision = "fp16"
        apex = "ascend"
        colossalai = "native"
        fuse-sdpa = true
        target = { torch_npu = "2.1.0.post17" }
        validate = { entries = ["model:build", "pkg.models:make_model"] }
        max-tier = "numeric"
        markers = false
        """,
    )
    config = load_config([tmp_path])
    assert config.select == ("NPU1", "NPU2") and config.extend_select == ("NPU005",)
    assert config.exclude_patterns == ("legacy", "gen/*.py")
    assert config.precision == "fp16" and config.apex == "ascend" and config.colossalai == "native"
    assert config.fuse_sdpa is True and config.markers is False and config.max_tier == "numeric"
    assert config.target_torch_npu == "2.1.0.post17"
    assert config.validate_entries == ("model:build", "pkg.models:make_model")
    with pytest.raises(ConfigError):
        load_config([tmp_path], config_file=write(tmp_path / "other" / "pyproject.toml", "[project]\nname='x'\n"))


def test_strategies_and_tiers_come_from_config_and_cli_overrides(tmp_path):
    write(
        tmp_path / "pyproject.toml",
        '[tool.cuda2npu]\nprecision = "fp16"\nmax-tier = "exact"\nmarkers = false\napex = "ascend"\n',
    )
    write(tmp_path / "a.py", CUDA)
    report = tmp_path / "report.json"
    cli("migrate", tmp_path, "--diff", "--report", report)
    options = json.loads(report.read_text())["options"]
    assert (options["precision"], options["max_tier"], options["markers"], options["apex"]) == (
        "fp16",
        "exact",
        False,
        "ascend",
    )
    cli(
        "migrate",
        tmp_path,
        "--diff",
        "--report",
        report,
        "--precision",
        "bf16",
        "--max-tier",
        "review",
        "--apex",
        "native",
    )
    options = json.loads(report.read_text())["options"]
    assert (options["precision"], options["max_tier"], options["apex"]) == ("bf16", "review", "native")


def test_select_ignore_and_extend_select(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.cuda2npu]\nselect = ["NPU101"]\n')
    write(tmp_path / "a.py", CUDA + "y = torch.zeros(1)  # noqa: NPU104\n")
    assert codes(cli("check", tmp_path, "--format", "json")) == ["NPU101"]
    assert codes(cli("check", tmp_path, "--format", "json", "--select", "NPU103")) == ["NPU103"]  # CLI select replaces
    assert codes(cli("check", tmp_path, "--format", "json", "--extend-select", "NPU005")) == ["NPU005", "NPU101"]
    assert codes(cli("check", tmp_path, "--format", "json", "--ignore", "NPU1")) == ["NPU101"]  # longest prefix wins
    assert codes(cli("check", tmp_path, "--format", "json", "--ignore", "NPU101")) == []
    write(tmp_path / "pyproject.toml", '[tool.cuda2npu]\nignore = ["NPU103"]\nextend-select = ["NPU005"]\n')
    assert codes(cli("check", tmp_path, "--format", "json")) == ["NPU005", "NPU101"]


def test_exclude_extend_exclude_and_force_exclude(tmp_path):
    write(
        tmp_path / "pyproject.toml",
        '[tool.cuda2npu]\nexclude = ["legacy"]\nextend-exclude = ["gen/*.py", "*_old.py"]\n',
    )
    for name in ("keep.py", "legacy/a.py", "gen/b.py", "gen/sub/c.py", "pkg/x_old.py", "pkg/y.py"):
        write(tmp_path / name, CUDA)
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    paths = sorted({d["path"].rsplit(str(tmp_path.name) + "/", 1)[-1] for d in data["diagnostics"]})
    assert paths == ["keep.py", "pkg/y.py"]  # fnmatch globs: "*" also matches "/"
    # files named on the command line are checked unless --force-exclude (the pre-commit hooks)
    assert cli("check", tmp_path / "legacy" / "a.py").exit_code == 1
    assert cli("check", tmp_path / "legacy" / "a.py", "--force-exclude").exit_code == 0
    assert "All checks passed!" in cli("check", tmp_path / "legacy" / "a.py", "--force-exclude").stdout


def test_per_file_ignores_are_relative_to_the_config_file(tmp_path):
    write(tmp_path / "cuda2npu.toml", '[per-file-ignores]\n"tests/*" = ["NPU101"]\n"conftest.py" = ["NPU1"]\n')
    write(tmp_path / "tests" / "test_a.py", CUDA)
    write(tmp_path / "src" / "conftest.py", CUDA)
    write(tmp_path / "src" / "tests.py", CUDA)
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    found = sorted((d["path"].split("/")[-1], d["code"]) for d in data["diagnostics"])
    assert found == [("test_a.py", "NPU103"), ("tests.py", "NPU101"), ("tests.py", "NPU103")]
    # and migrate does not fix what is ignored
    cli("migrate", tmp_path)
    assert ".cuda()" in (tmp_path / "tests" / "test_a.py").read_text()
    assert "torch.npu.synchronize()" in (tmp_path / "tests" / "test_a.py").read_text()


def test_the_documented_example_configuration_is_valid(tmp_path):
    docs = (Path(__file__).resolve().parent.parent / "docs" / "ci-integration.md").read_text(encoding="utf-8")
    example = docs.split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "pyproject.toml").write_text(example, encoding="utf-8")
    config = load_config([tmp_path])
    assert config.per_file_ignores == (("tests/*", ("NPU101",)), ("conftest.py", ("NPU1",)))
    assert config.validate_entries == ("model:build",) and config.target_torch_npu == "2.1.0.post17"
