"""core.imports.ensure_torch_npu_import: where `import torch_npu` goes, and when it is needed."""

from __future__ import annotations

import libcst as cst
from helpers import dedent

from cuda2npu.core.imports import ensure_torch_npu_import


def ensured(source: str) -> str:
    return ensure_torch_npu_import(cst.parse_module(dedent(source))).code


def test_an_import_inside_a_function_serves_only_that_function():
    source = """
        import torch


        def load(device):
            if device == "npu":
                import torch_npu
            return device


        def sync():
            torch.npu.synchronize()
        """
    assert ensured(source).startswith("import torch\nimport torch_npu\n")


def test_a_file_without_a_torch_import_gets_one_only_when_its_code_names_torch_npu():
    named = "from megatron import get_args\n\nopt = torch_npu.optim.NpuFusedSGD(params)\n"
    assert (
        ensured(named)
        == "from megatron import get_args\nimport torch_npu\n\nopt = torch_npu.optim.NpuFusedSGD(params)\n"
    )
    mentioned = "x = 1  # TODO(cuda2npu): use torch_npu.npu_rms_norm\n"
    assert ensured(mentioned) == mentioned


def test_setup_py_gets_no_torch_npu_import(tmp_path):
    """A setup.py runs in an isolated build environment whose requirements have no torch_npu (torch
    >= 2.5 loads it where it is installed): its rewrites add no `import torch_npu` (megablocks)."""
    from cli_helpers import cli, write

    setup = write(
        tmp_path / "setup.py",
        "import torch\nfrom setuptools import setup\n\nprint(torch.cuda.device_count())\nsetup(name='x')\n",
    )
    cli("migrate", tmp_path)
    assert "torch.npu.device_count()" in setup.read_text() and "torch_npu" not in setup.read_text()


def test_a_torch_import_only_in_an_except_handler_gets_it_after_that_import():
    """DB-GPT (round 51): `except NameError: import torch` is the file's only torch import; the
    `torch.npu` read after it needs torch_npu on torch < 2.5. A handler's import serves only when no
    other block imports torch."""
    lazy = """
        def infer_torch_device():
            try:
                has_npu = torch.npu.is_available()
            except NameError:
                import torch

                has_npu = torch.npu.is_available()
            return "npu" if has_npu else "cpu"
        """
    assert "        import torch\n        import torch_npu\n\n        has_npu" in ensured(lazy)
    both = """
        def load():
            try:
                import jax
            except ImportError:
                import torch
            import torch
            return torch.npu.device_count()
        """
    assert ensured(both).count("import torch_npu") == 1
    assert "    import torch\n    import torch_npu\n    return" in ensured(both)
