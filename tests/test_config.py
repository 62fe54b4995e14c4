"""Configuration: [tool.cuda2npu] / cuda2npu.toml, nearest file wins, errors exit 2, CLI overrides."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_helpers import cli, cuda2npu, write

from cuda2npu.core.config import ConfigError, find_config_file, load_config

CUDA = "import torch\nx = torch.zeros(1).cuda()\ntorch.cuda.synchronize()\n"


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


def test_exclude_and_extend_exclude_on_the_command_line(tmp_path, monkeypatch):
    """ruff's: --exclude replaces every configured exclude, --extend-exclude adds to them; globs
    with a `/` are relative to the current directory."""
    write(tmp_path / "pyproject.toml", '[tool.cuda2npu]\nexclude = ["legacy"]\n')
    for name in ("keep.py", "legacy/a.py", "gen/b.py", "tools/gen/c.py"):
        write(tmp_path / name, CUDA)
    monkeypatch.chdir(tmp_path)

    def files(*options):
        return set(cli("check", ".", "--show-files", *options).stdout.split())

    assert files() == {"keep.py", "gen/b.py", "tools/gen/c.py", "pyproject.toml"}
    assert files("--extend-exclude", "gen/*") == {"keep.py", "tools/gen/c.py", "pyproject.toml"}
    assert files("--extend-exclude", "gen") == {"keep.py", "pyproject.toml"}  # a component anywhere
    assert files("--exclude", "tools,keep.py") == {"legacy/a.py", "gen/b.py", "pyproject.toml"}
    data = json.loads(cli("check", ".", "--exclude", "gen", "--extend-exclude", "tools", "--format", "json").stdout)
    assert sorted({d["path"] for d in data["diagnostics"]}) == ["keep.py", "legacy/a.py"]


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


# --- one configuration per file, project facts from the project root (issue 33, items 1 and 2) ---------

SETUP = (
    "from setuptools import setup\n"
    "from torch.utils.cpp_extension import CUDAExtension\n"
    'setup(ext_modules=[CUDAExtension("mykernels", ["k.cu"])])\n'
)


def found_606(result, cwd: Path) -> set[tuple[Path, int]]:
    """The NPU606 findings of a json run, by real path (comparable across working directories)."""
    assert result.returncode in (0, 1), result.stderr
    diagnostics = json.loads(result.stdout)["diagnostics"]
    return {((cwd / d["path"]).resolve(), d["line"]) for d in diagnostics if d["code"] == "NPU606"}


@pytest.mark.parametrize("root_kind", ["config", "git", "setup.py"])
def test_project_facts_come_from_the_project_root_whatever_paths_are_given(tmp_path, root_kind):
    """pre-commit passes the staged files, CI checks `.`: a CUDAExtension that setup.py declares and a
    loose module shadowing a CUDA-only package are the same facts for both, from any working directory."""
    project = tmp_path / "proj"
    write(project / "setup.py", SETUP)
    write(project / "pkg" / "__init__.py", "")
    # (the extension imported where it runs: at module level it would leave the whole file as written)
    write(project / "pkg" / "use.py", "import torch\nimport xformers\n\n\ndef kernels():\n    import mykernels\n")
    write(project / "scripts" / "xformers.py", "def memory_efficient_attention(q, k, v):\n    return q\n")
    write(project / "scripts" / "run.py", "import torch\nimport xformers\nimport mykernels\n")
    if root_kind == "config":
        write(project / "pyproject.toml", "[tool.cuda2npu]\n")
    elif root_kind == "git":  # no setup.py at the top: only git says where the root is
        (project / "setup.py").unlink()
        write(project / "csrc" / "setup.py", SETUP)
        subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    args = ("check", "--output-format", "json", "--exit-zero", "--select", "NPU606")
    use, run_py = (project / "pkg" / "use.py").resolve(), (project / "scripts" / "run.py").resolve()
    expected = {(use, 2), (use, 6), (run_py, 3)}  # scripts/xformers.py shadows xformers for scripts/ only
    assert found_606(cuda2npu(*args, ".", cwd=project), project) == expected
    assert found_606(cuda2npu(*args, "pkg/use.py", "scripts/run.py", cwd=project), project) == expected
    assert found_606(cuda2npu(*args, "proj/pkg/use.py", "proj/scripts/run.py", cwd=tmp_path), tmp_path) == expected
    assert found_606(cuda2npu(*args, "use.py", cwd=project / "pkg"), project / "pkg") == {(use, 2), (use, 6)}
    assert found_606(cuda2npu(*args, "run.py", cwd=project / "scripts"), project / "scripts") == {(run_py, 3)}


def nested_project(tmp_path: Path, sub_config: str = 'ignore = ["NPU101"]\n') -> Path:
    """The root ignores NPU103 and excludes legacy/; sub/ has a configuration of its own."""
    write(tmp_path / "pyproject.toml", '[tool.cuda2npu]\nignore = ["NPU103"]\nexclude = ["legacy"]\n')
    write(tmp_path / "sub" / "pyproject.toml", f"[tool.cuda2npu]\n{sub_config}")
    for name in ("m.py", "sub/m.py", "legacy/old.py", "sub/legacy/old.py"):
        write(tmp_path / name, CUDA)
    return tmp_path


def findings_by_file(result) -> dict[str, list[str]]:
    assert result.returncode in (0, 1), result.stderr
    by_file: dict[str, list[str]] = {}
    for d in json.loads(result.stdout)["diagnostics"]:
        by_file.setdefault(d["path"], []).append(d["code"])
    return by_file


def test_each_file_uses_its_nearest_configuration_whatever_paths_are_given(tmp_path):
    """ruff's model: a file's settings come from the nearest configuration above it, not merged with
    the ones above; `check sub/m.py`, `check sub/m.py m.py`, `check .` and pre-commit agree."""
    project = nested_project(tmp_path)
    json_check = ("check", "--output-format", "json")
    alone = findings_by_file(cuda2npu(*json_check, "sub/m.py", cwd=project))
    with_root_file = findings_by_file(cuda2npu(*json_check, "sub/m.py", "m.py", cwd=project))
    whole_run = cuda2npu(*json_check, ".", cwd=project)
    everything = findings_by_file(whole_run)
    assert alone == {"sub/m.py": ["NPU103"]}
    assert with_root_file == {"sub/m.py": ["NPU103"], "m.py": ["NPU101"]}
    # the root's exclude does not reach sub/, whose configuration has none
    assert everything == {"m.py": ["NPU101"], "sub/m.py": ["NPU103"], "sub/legacy/old.py": ["NPU103"]}
    assert findings_by_file(cuda2npu(*json_check, "m.py", cwd=project / "sub")) == {"m.py": ["NPU103"]}
    # the command line overrides every configuration
    assert findings_by_file(cuda2npu(*json_check, ".", "--ignore", "NPU103", cwd=project)) == {"m.py": ["NPU101"]}

    shown = cuda2npu("check", "--show-settings", "sub/m.py", cwd=project)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[:2] == [
        "Resolved settings for: sub/m.py",
        f"Settings path: {(project / 'sub' / 'pyproject.toml').resolve()}",
    ]
    assert 'ignore = ["NPU101"]' in lines and "exclude = []" in lines
    root_settings = cuda2npu("migrate", "--show-settings", "m.py", "--precision", "fp16", cwd=project).stdout
    assert f"Settings path: {(project / 'pyproject.toml').resolve()}" in root_settings
    assert 'ignore = ["NPU103"]' in root_settings and 'precision = "fp16"' in root_settings

    listed = cuda2npu("check", "--show-files", cwd=project)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        "m.py",
        "pyproject.toml",
        "sub/legacy/old.py",
        "sub/m.py",
        "sub/pyproject.toml",
    ]
    assert cuda2npu("migrate", "--show-files", "sub", cwd=project).stdout.splitlines() == [
        "sub/legacy/old.py",
        "sub/m.py",
        "sub/pyproject.toml",
    ]
    # what check reads: the Python files it scans are the ones listed (legacy/old.py is excluded)
    scanned = json.loads(whole_run.stdout)["summary"]["files_scanned"]
    assert scanned == len([name for name in listed.stdout.split() if name.endswith(".py")]) == 3


def test_extend_inherits_a_configuration_and_anchors_its_globs_where_they_are_set(tmp_path):
    project = nested_project(tmp_path, 'extend = "../pyproject.toml"\nignore = ["NPU101"]\nprecision = "keep"\n')
    write(project / "sub" / "gen" / "x_pb2.py", CUDA)
    write(project / "pyproject.toml", '[tool.cuda2npu]\nignore = ["NPU103"]\nexclude = ["legacy", "sub/gen"]\n')
    everything = findings_by_file(cuda2npu("check", "--output-format", "json", ".", cwd=project))
    assert everything == {"m.py": ["NPU101"]}  # sub/: both ignores; the root's excludes, anchored at the root
    shown = cuda2npu("check", "--show-settings", "sub/m.py", cwd=project).stdout
    assert f"Extends: {(project / 'pyproject.toml').resolve()}" in shown
    assert 'ignore = ["NPU103", "NPU101"]' in shown and 'precision = "keep"' in shown
    assert f"Project root: {project.resolve()} " in shown  # an extending configuration is part of the project
    write(project / "sub" / "pyproject.toml", '[tool.cuda2npu]\nextend = "../pyproject.toml"\nselect = ["NPU103"]\n')
    assert findings_by_file(cuda2npu("check", "--output-format", "json", "sub", cwd=project)) == {
        "sub/m.py": ["NPU103"]  # a select of its own starts afresh: the inherited ignore is gone
    }
    write(project / "pyproject.toml", '[tool.cuda2npu]\nextend = "sub/pyproject.toml"\n')
    cycle = cuda2npu("check", ".", cwd=project)
    assert cycle.returncode == 2 and "extend each other" in cycle.stderr


def test_a_config_file_named_on_the_command_line_applies_to_every_file(tmp_path):
    project = nested_project(tmp_path / "repo")
    config = write(tmp_path / "ci" / "cuda2npu.toml", 'ignore = ["NPU101"]\nexclude = ["legacy"]\n')
    listed = cuda2npu("check", "--config", config, "--show-files", cwd=project).stdout.splitlines()
    assert listed == ["m.py", "pyproject.toml", "sub/m.py", "sub/pyproject.toml"]  # legacy/ below the root too
    found = findings_by_file(
        cuda2npu("check", "--output-format", "json", "--config", config, "sub/m.py", "m.py", cwd=project)
    )
    assert found == {"m.py": ["NPU103"], "sub/m.py": ["NPU103"]}
