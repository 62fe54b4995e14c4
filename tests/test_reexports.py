"""An import other modules read is not unused (issue 32, item 4): a package's ``__init__.py``
re-exporting an apex class, a module another project file imports a name from, ``__all__``.

Through the command line (the project facts step: cuda2npu/analysis/project_imports.py) and on the
scan itself. The single-file behaviour is in the goldens (``apex/reexported_imports``,
``attention/flash_reexported_imports``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cli_helpers import cuda2npu, tree_digest
from helpers import dedent

from cuda2npu.analysis.project_imports import imported_names
from cuda2npu.analysis.python_files import PythonFiles, module_names

APEX_STUB = {  # where the migrated package is imported to check that its names still resolve
    "apex/__init__.py": "",
    "apex/normalization.py": "class MixedFusedRMSNorm:\n    def __init__(self, dim):\n        self.dim = dim\n",
    "apex/optimizers.py": "class FusedAdam:\n    pass\n",
}
PROJECT = {
    "pkg/__init__.py": "from apex.normalization import MixedFusedRMSNorm as RMSNorm\n",
    "pkg/model.py": """
        import torch

        from pkg import RMSNorm


        class Block(torch.nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.norm = RMSNorm(dim)
                self.proj = torch.nn.Linear(dim, dim).cuda()
        """,
    "pkg/other.py": "from pkg import RMSNorm\n\nnorm = RMSNorm(16)\n",
    "pkg/layers.py": """
        from apex.normalization import FusedLayerNorm
        from apex.optimizers import FusedAdam
        """,
    "pkg/train.py": "from .layers import FusedAdam\n\noptimizer_class = FusedAdam\n",
}


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dedent(text) if text.startswith("\n") else text)


def _migrate(source: Path, out: Path) -> None:
    result = cuda2npu("migrate", source, "--out", out, "-q")
    assert result.returncode == 0, result.stderr


def test_a_reexported_import_survives_the_migration_and_still_resolves(tmp_path):
    _write(tmp_path / "project", PROJECT)
    _write(tmp_path / "stubs", APEX_STUB)
    out = tmp_path / "out"
    _migrate(tmp_path / "project", out)

    init = (out / "pkg" / "__init__.py").read_text()
    assert "from apex.normalization import MixedFusedRMSNorm as RMSNorm" in init
    assert "NPU324" in init  # marked as a used import of a CUDA-only class is
    layers = (out / "pkg" / "layers.py").read_text()
    assert "from apex.optimizers import FusedAdam" in layers  # pkg/train.py imports it from here
    assert "FusedLayerNorm" not in layers  # nobody reads it: removed as before
    assert "from pkg import RMSNorm" in (out / "pkg" / "model.py").read_text()

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(out), str(tmp_path / "stubs")])}
    check = "from pkg import RMSNorm; from pkg.layers import FusedAdam; print(RMSNorm(8).dim, FusedAdam.__name__)"
    run = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["8", "FusedAdam"]


def test_migrating_the_output_again_changes_nothing(tmp_path):
    _write(tmp_path / "project", PROJECT)
    first, second = tmp_path / "first", tmp_path / "second"
    _migrate(tmp_path / "project", first)
    _migrate(first, second)
    sources = {name: digest for name, digest in tree_digest(first).items() if name.startswith("pkg/")}
    assert {name: digest for name, digest in tree_digest(second).items() if name in sources} == sources


def test_the_scan_finds_the_names_other_modules_import(tmp_path):
    files = {
        "pkg/__init__.py": "from apex import amp\n",  # a package exports everything: not listed
        "pkg/layers.py": "from apex.normalization import FusedLayerNorm, FusedRMSNorm\nimport flash_attn\n",
        "pkg/kernels.py": "import transformer_engine.pytorch as te\n",
        "pkg/unused.py": "from apex.optimizers import FusedAdam\n",  # nobody imports from it
        "pkg/plain.py": "import torch\n",  # imports no library whose imports rules remove
        "pkg/sub/__init__.py": "",
        "pkg/sub/use.py": """
            from ..layers import (  # two names, one aliased
                FusedLayerNorm as LN,
                FusedRMSNorm,
            )
            from pkg import kernels
            from pkg.plain import torch
            import pkg.layers as layers

            te = kernels.te
            module = layers.flash_attn
            """,
        "scripts/star.py": "from pkg.kernels import *\n",
    }
    _write(tmp_path, files)
    paths = sorted(tmp_path.rglob("*.py"))
    assert module_names(paths)[tmp_path / "pkg" / "sub" / "use.py"] == "pkg.sub.use"
    real = os.path.realpath(tmp_path)
    assert dict(imported_names(PythonFiles.read(paths))) == {
        os.path.join(real, "pkg", "kernels.py"): ("*", "te"),
        os.path.join(real, "pkg", "layers.py"): ("FusedLayerNorm", "FusedRMSNorm", "flash_attn"),
    }


def test_each_file_gets_the_names_of_its_own(tmp_path):
    from cuda2npu.core.options import PACKAGE_API, Options, ProjectFacts

    layers = tmp_path / "pkg" / "layers.py"
    options = Options(project=ProjectFacts(project_imports=((os.path.realpath(layers), ("FusedAdam",)),)))
    assert options.for_path(layers).file.exports == ("FusedAdam",)
    assert options.for_path(layers).project.project_imports == ()  # per file: the cache key holds its own names only
    assert options.for_path(tmp_path / "pkg" / "model.py").file.exports == ()
    assert Options().for_path(tmp_path / "pkg" / "__init__.py").file.exports == (PACKAGE_API,)


def test_a_star_import_of_a_module_with_all_takes_only_its_names(tmp_path):
    """TRELLIS (round 58): `attention/__init__.py` star-imports `full_attn.py`, whose `__all__` lists its
    function alone, so the backend switch's `import flash_attn`, unused once the calls are rewritten, is no
    re-export and goes (the `elif` keeps a `pass`); without `__all__`, the star import takes every name and
    the import stays."""
    full_attn = """
        import torch

        BACKEND = 'flash_attn'
        if BACKEND == 'xformers':
            import xformers.ops as xops
        elif BACKEND == 'flash_attn':
            import flash_attn

        __all__ = ['attend']


        def attend(q, k, v):
            if BACKEND == 'flash_attn':
                return flash_attn.flash_attn_func(q, k, v)
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)
        """
    project = {"attn/__init__.py": "from .full_attn import *\n", "attn/full_attn.py": full_attn}
    _write(tmp_path / "project", project)
    _migrate(tmp_path / "project", tmp_path / "out")
    migrated = (tmp_path / "out" / "attn" / "full_attn.py").read_text()
    assert "import flash_attn" not in migrated and "elif BACKEND == 'flash_attn':\n    pass" in migrated
    _write(tmp_path / "open", {**project, "attn/full_attn.py": full_attn.replace("__all__ = ['attend']\n", "")})
    _migrate(tmp_path / "open", tmp_path / "open-out")
    assert "import flash_attn" in (tmp_path / "open-out" / "attn" / "full_attn.py").read_text()
