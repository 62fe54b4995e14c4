"""Which files of a project are run configurations (cuda2npu/filekinds/runconfigs.py): by name only,
as discovery asks for every file of the tree."""

from __future__ import annotations

import re
from pathlib import Path

SUFFIXES = (".yaml", ".yml", ".json", ".toml")
TOOLING_DIRS = {".github", ".gitlab", ".circleci", ".buildkite", ".vscode", ".idea", ".devcontainer", "npu_validation"}
TOOLING_NAMES = re.compile(
    r"""\.?gitlab-ci\.ya?ml|\.pre-commit-(?:config|hooks)\.ya?ml|package(?:-lock)?\.json|[tj]sconfig[\w.-]*\.json
    |mkdocs\.ya?ml|\.?readthedocs\.ya?ml|\.?codecov\.ya?ml|dependabot\.ya?ml|\.travis\.ya?ml|azure-pipelines\.ya?ml
    |appveyor\.ya?ml|\.?(?:docker-)?compose[\w.-]*\.ya?ml|renovate\.json|\.?cuda2npu\.toml|\.?ruff\.toml|cargo\.toml
    |\.yamllint(?:\.ya?ml)?|\.markdownlint[\w.-]*\.json|\.eslintrc[\w.-]*\.json|\.prettierrc[\w.-]*\.json|lerna\.json
    |meta\.ya?ml|\.?mergify\.ya?ml|cuda2npu_report\.json|_?\.?typos\.toml|\.?taplo\.toml|rustfmt\.toml|pixi\.toml""",
    re.X | re.I,
)
# conda environment files (``environment.yml``, ``environment-gpu.yaml``, PandaLM's ``conda-env.yml``, Step1X-Edit's
# ``qwen25vl_environment.yml``, VGen's ``tft2v_environment.yaml``): dependency files, cuda2npu/filekinds/depfiles.py's
# (which imports this module)
ENVIRONMENT_FILE = re.compile(r"(?:[\w.-]*[-_])?(?:environment|conda[-_]env(?:ironment)?)[\w.-]*\.ya?ml")
DEPENDENCY_NAMES = re.compile(rf"pyproject\.toml|{ENVIRONMENT_FILE.pattern}")


def is_run_config(path: Path) -> bool:
    """A YAML/JSON/TOML file that is neither a dependency file nor CI or tooling configuration."""
    if path.suffix not in SUFFIXES or DEPENDENCY_NAMES.fullmatch(path.name) or TOOLING_NAMES.fullmatch(path.name):
        return False
    return not TOOLING_DIRS.intersection(path.parts[:-1])
