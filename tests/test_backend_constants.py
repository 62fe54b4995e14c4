"""Module constants another project file passes to torch.distributed as the backend (a project fact,
cuda2npu/analysis/backend_constants.py): NPU201 rewrites them where they are defined
(mistral-finetune's `BACKEND = "nccl"`, read by train.py's `init_process_group(backend=BACKEND)`).
The single-file behaviour is in the goldens (`distributed/backend_r8_imported_constant*`)."""

from __future__ import annotations

import os
from pathlib import Path

from cli_helpers import cli, write

from cuda2npu.analysis.backend_constants import backend_constants
from cuda2npu.analysis.python_files import PythonFiles
from cuda2npu.core.options import Options, ProjectFacts

DIST = 'import torch.distributed as dist\n\nBACKEND = "nccl"\nRAY_BACKEND = "nccl"\nOPTION = "nccl"\n'


def test_the_fact_follows_imports_into_torch_backend_positions(tmp_path):
    files = {
        "pkg/__init__.py": "",
        "pkg/dist.py": DIST,
        "pkg/groups.py": 'GROUP = "nccl"\nLABEL = "nccl"\n',
        "train.py": (
            "import torch.distributed as dist\n"
            "from ray.util import collective\n"
            "from pkg.dist import BACKEND as B, RAY_BACKEND\n\n"
            "dist.init_process_group(backend=B)\n"
            "collective.init_collective_group(2, 0, backend=RAY_BACKEND)\n"
        ),
        "pkg/sub.py": (
            "from torch.distributed import new_group\n"
            "from . import groups\n"
            "from .dist import OPTION, RAY_BACKEND\n\n"
            "new_group([0, 1], None, groups.GROUP)\n"
            "new_group(backend=RAY_BACKEND)\n"
            "Trainer(process_group_backend=OPTION)\n"
            "new_group(backend=OPTION)\n"
            "init_process_group(backend=groups.LABEL)  # not torch's: the project's own or unknown\n"
        ),
    }
    texts = {tmp_path / name: text.encode() for name, text in files.items()}
    real = os.path.realpath(tmp_path)
    assert backend_constants(PythonFiles(texts)) == (
        (os.path.join(real, "pkg", "dist.py"), ("BACKEND",)),
        (os.path.join(real, "pkg", "groups.py"), ("GROUP",)),
    )


def test_no_caller_no_parse():
    assert (
        backend_constants(PythonFiles({Path("a.py"): b'BACKEND = "nccl"\n', Path("b.py"): b"from a import BACKEND\n"}))
        == ()
    )


def test_migrate_rewrites_the_constant_where_it_is_defined(tmp_path):
    write(tmp_path / "setup.py", "")
    write(tmp_path / "pkg" / "__init__.py", "")
    dist = write(tmp_path / "pkg" / "dist.py", DIST)
    write(
        tmp_path / "train.py",
        "import torch.distributed as dist\n\nfrom pkg.dist import BACKEND\n\ndist.init_process_group(backend=BACKEND)\n",
    )
    checked = cli("check", dist, "--select", "NPU201")  # one file given: the facts still come from the project
    assert "pkg/dist.py:3:11: NPU201 [*]" in checked.output.replace(os.sep, "/"), checked.output
    cli("migrate", tmp_path)
    text = dist.read_text()
    assert 'BACKEND = "hccl"' in text
    assert 'RAY_BACKEND = "nccl"' in text and 'OPTION = "nccl"' in text  # nothing shows where they go: review


def test_each_file_gets_its_own_names(tmp_path):
    dist = write(tmp_path / "pkg" / "dist.py", DIST)
    other = write(tmp_path / "other" / "dist.py", DIST)  # the same file name elsewhere: not its names
    options = Options(project=ProjectFacts(backend_constants=((os.path.realpath(dist), ("BACKEND",)),)))
    assert options.for_path(dist).file.backend_names == ("BACKEND",)
    assert options.for_path(other).file.backend_names == ()
    assert options.for_path(dist).project.backend_constants == ()  # the cache key holds the file's share only
