"""The pre-commit hooks for real: a git repository whose .pre-commit-config.yaml points at a snapshot
of this repository; a commit with `.cuda()` is blocked by cuda2npu-check, and cuda2npu-migrate
rewrites the staged file, fails once, and the commit goes through after `git add`; a manual finding
keeps failing the migrate hook, also after its marker was added, until it is suppressed.

pre-commit installs the hooks into a fresh virtualenv with pip (hatchling, libcst, click, rich come
from the package index). The test is skipped, saying why, only when that install cannot reach the
index. It takes ~15-40 s, most of it pip.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NETWORK_ERRORS = (
    "Could not find a version that satisfies",
    "No matching distribution found",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Max retries exceeded",
    "ProxyError",
)
SNAPSHOT = ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml", "cuda2npu", "rules")


def git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120, env=ENV)


ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "PRE_COMMIT_COLOR": "never",
}


def pre_commit(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args], cwd=cwd, capture_output=True, text=True, timeout=600, env=ENV
    )


def _snapshot(target: Path) -> str:
    """This working tree's package as a one-commit git repository (pre-commit needs a rev)."""
    target.mkdir()
    for name in SNAPSHOT:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, target / name)
    for args in (("init", "-q"), ("add", "-A"), ("commit", "-q", "-m", "snapshot")):
        assert git(target, *args).returncode == 0
    return git(target, "rev-parse", "HEAD").stdout.strip()


CONFIG = """repos:
  - repo: {repo}
    rev: {rev}
    hooks:
{hooks}"""


def _configure(project: Path, repo: Path, rev: str, *hook_ids: str) -> None:
    hooks = "".join(f"      - id: {hook}\n" for hook in hook_ids)
    (project / ".pre-commit-config.yaml").write_text(CONFIG.format(repo=repo, rev=rev, hooks=hooks))


@pytest.mark.slow
def test_hooks_block_then_accept_a_commit(tmp_path):
    pytest.importorskip("pre_commit")
    ENV["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    hooks_repo = tmp_path / "cuda2npu-hooks"
    rev = _snapshot(hooks_repo)
    project = tmp_path / "project"
    project.mkdir()
    assert git(project, "init", "-q").returncode == 0
    (project / "pyproject.toml").write_text('[tool.cuda2npu]\nextend-exclude = ["legacy"]\n')
    _configure(project, hooks_repo, rev, "cuda2npu-check")
    install = pre_commit(project, "install", "--install-hooks")
    if install.returncode != 0:
        output = install.stdout + install.stderr
        if any(marker in output for marker in NETWORK_ERRORS):
            pytest.skip(f"pre-commit cannot install the hook environment (no package index): {output[-300:]}")
        pytest.fail(output)

    (project / "train.py").write_text("import torch\n\nmodel = torch.nn.Linear(2, 2).cuda()\n")
    (project / "legacy").mkdir()
    (project / "legacy" / "old.py").write_text("import torch\nx = torch.ones(1).cuda()\n")  # excluded by config
    git(project, "add", "-A")
    blocked = git(project, "commit", "-m", "add training")
    assert blocked.returncode != 0, blocked.stdout
    output = blocked.stdout + blocked.stderr
    assert "cuda2npu check" in output and "Failed" in output
    assert re.search(r"train\.py:3:\d+: NPU101", output), output
    assert "legacy/old.py" not in output  # --force-exclude honours [tool.cuda2npu]

    # the migrate hook rewrites the staged file and fails so that the rewrite gets reviewed
    _configure(project, hooks_repo, rev, "cuda2npu-migrate", "cuda2npu-check")
    git(project, "add", "-A")
    fixed = git(project, "commit", "-m", "add training")
    assert fixed.returncode != 0
    assert "files were modified by this hook" in fixed.stdout + fixed.stderr
    assert "Migrated: train.py" in fixed.stdout + fixed.stderr  # the hook names what it changed
    assert (
        project / "train.py"
    ).read_text() == "import torch\nimport torch_npu\n\nmodel = torch.nn.Linear(2, 2).npu()\n"

    git(project, "add", "-A")
    accepted = git(project, "commit", "-m", "add training")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    output = accepted.stdout + accepted.stderr
    assert re.search(r"cuda2npu migrate\.+Passed", output) and re.search(r"cuda2npu check\.+Passed", output), output
    assert git(project, "status", "--porcelain").stdout == ""

    # a finding that needs a human blocks every commit, not only the one that adds its marker (issue 33)
    _configure(project, hooks_repo, rev, "cuda2npu-migrate")
    (project / "kernels.py").write_text("import torch\nimport mamba_ssm\n")
    git(project, "add", "-A")
    marked = git(project, "commit", "-m", "add kernels")
    assert marked.returncode != 0 and "files were modified by this hook" in marked.stdout + marked.stderr
    assert "# TODO(cuda2npu): NPU606" in (project / "kernels.py").read_text()
    git(project, "add", "-A")
    again = git(project, "commit", "-m", "add kernels")
    output = again.stdout + again.stderr
    assert again.returncode != 0 and re.search(r"cuda2npu migrate\.+Failed", output), output
    assert (
        "need a human: 1 finding (NPU606 cuda-only-import ×1)" in output
        and "files were modified by this hook" not in output
    )
    text = (project / "kernels.py").read_text()  # looked at: suppressed where it is
    (project / "kernels.py").write_text(text.replace("import mamba_ssm\n", "import mamba_ssm  # noqa: NPU606\n"))
    git(project, "add", "-A")
    reviewed = git(project, "commit", "-m", "add kernels")
    assert reviewed.returncode == 0, reviewed.stdout + reviewed.stderr
