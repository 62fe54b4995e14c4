"""`cuda2npu validate git:REV MIGRATED`: the original of an in-place migration comes from git."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from cli_helpers import REPO, cuda2npu

from cuda2npu.validation.revision import RevisionError, original_tree

pytestmark = pytest.mark.slow  # most tests here run validate or the harness in subprocesses

MLP = REPO / "fixtures" / "validation" / "mlp"


def _git(cwd, *args):
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True, capture_output=True
    )


@pytest.fixture
def repository(tmp_path):
    """A git repository holding the MLP fixture in models/, committed, then migrated in place."""
    project = tmp_path / "repo" / "models"
    shutil.copytree(MLP, project)
    (tmp_path / "repo" / "README").write_text("outside the migrated directory\n")
    _git(tmp_path / "repo", "init", "-q")
    _git(tmp_path / "repo", "add", ".")
    _git(tmp_path / "repo", "commit", "-q", "-m", "original")
    migrated = cuda2npu("migrate", project)
    assert migrated.returncode == 0, migrated.stderr
    assert "torch_npu" in (project / "model.py").read_text()
    return project


def test_in_place_migration_validates_against_the_committed_original(repository):
    result = cuda2npu("validate", "git:HEAD", repository, "--entry", "model:build")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "equivalent" in result.stdout.lower()


def test_the_revision_holds_the_original_files_of_the_migrated_directory(repository):
    with original_tree("git:HEAD", repository) as tree:
        assert (tree / "model.py").read_text() == (MLP / "model.py").read_text()
        assert not (tree.parent / "README").exists()  # only the migrated directory is extracted
    assert not tree.exists()  # removed afterwards


def test_a_plain_directory_is_used_as_given(tmp_path):
    with original_tree(tmp_path, tmp_path) as tree:
        assert tree == tmp_path


def test_unknown_revision_is_a_usage_error(repository):
    result = cuda2npu("validate", "git:no-such-rev", repository, "--entry", "model:build")
    assert result.returncode == 2
    assert "no-such-rev" in result.stderr


def test_revision_outside_git_is_a_usage_error(tmp_path):
    shutil.copytree(MLP, tmp_path / "plain")
    with pytest.raises(RevisionError, match="not in a git work tree"):
        with original_tree("git:HEAD", tmp_path / "plain"):
            pass
    result = cuda2npu("validate", "git:HEAD", tmp_path / "plain", "--entry", "model:build")
    assert result.returncode == 2 and "git work tree" in result.stderr
