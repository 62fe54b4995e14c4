"""Every leftover is visible at its line: review markers, CUDA-only imports (NPU606), non-PyTorch files.

Golden cases: fixtures/rules/markers/.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import cuda2npu
from helpers import dedent, migrate_text, options_of

from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.options import Options
from cuda2npu.filekinds.python import marker_reason, migrate_source

HALF = dedent(
    """
    import mamba_ssm
    from torch import nn

    model = nn.Linear(4, 4).half()
    model(x).sum().backward()
    optimizer.step()
    """
)
REVIEW = "# TODO(cuda2npu): NPU342 review: "
MANUAL = "# TODO(cuda2npu): NPU606 `mamba_ssm`"


def test_review_and_manual_markers_and_their_switches():
    migrated, _ = migrate_text(HALF, Options())
    assert REVIEW in migrated and MANUAL in migrated
    assert migrate_text(migrated, Options())[0] == migrated, "a second migrate adds nothing"
    manual_only, _ = migrate_text(HALF, Options(review_markers=False))
    assert REVIEW not in manual_only and MANUAL in manual_only
    assert migrate_text(HALF, Options(markers=False))[0] == HALF


def test_an_existing_marker_is_recognised_whatever_its_reason():
    edited = HALF.replace("model =", "# TODO(cuda2npu): NPU342 review: keep fp16, we checked\nmodel =")
    migrated, _ = migrate_text(edited, Options())
    assert migrated.count("NPU342") == 1


def test_which_findings_get_a_marker():
    options = Options()
    # a message quoting multi-line code (an `if (\n a\n and b\n):` test) is one line in the marker
    assert marker_reason("NPU606", Tier.MANUAL, "`(\n    a\n)` what", options, applied=False) == "`( a )` what"
    assert marker_reason("NPU342", Tier.REVIEW, "what", options, applied=False) == "review: what"
    assert marker_reason("NPU101", Tier.EXACT, "what", options, applied=False) == "review: what"  # above --max-tier
    assert marker_reason("NPU005", Tier.REVIEW, "what", options, applied=False) is None
    # applied: only where the rule raised the tier of this finding, or the code is listed
    assert marker_reason("NPU103", Tier.REVIEW, "what", options, applied=True) == "review: what"
    assert marker_reason("NPU103", Tier.EXACT, "what", options, applied=True) is None
    assert marker_reason("NPU505", Tier.REVIEW, "what", options, applied=True) == "review: what"
    assert marker_reason("NPU301", Tier.REVIEW, "what", options, applied=True) is None
    assert marker_reason("NPU342", Tier.REVIEW, "what", Options(review_markers=False), applied=False) is None
    assert marker_reason("NPU606", Tier.MANUAL, "what", Options(markers=False), applied=False) is None


CASES = sorted(
    p for p in (Path(__file__).parent.parent / "fixtures/rules/markers").glob("*.py") if ".out." not in p.name
)


@pytest.mark.parametrize("case", CASES, ids=[case.stem for case in CASES])
def test_every_open_finding_has_its_marker(case):
    migrated, result = migrate_text(case.read_text(), Options())
    marked = {line.split()[2] for line in migrated.splitlines() if line.strip().startswith("# TODO(cuda2npu): ")}
    assert {f.code for f in result.findings if not f.applied} <= marked  # an open finding: its marker
    assert marked <= {f.code for f in result.findings}  # a marker: its finding


def test_an_import_the_migration_removes_is_not_reported():
    source = dedent(
        """
        import torch
        import transformer_engine.pytorch as te

        layer = te.Linear(16, 16)
        """
    )
    migrated, result = migrate_text(source, Options())
    assert "transformer_engine" not in migrated
    assert "NPU606" not in {f.code for f in result.findings}
    checked = migrate_source(source.encode(), "a.py", Options(fix=False))
    assert "NPU606" in {f.code for f in checked.findings}, "check reports the file as it is"


def test_cuda_only_imports_at_module_level_and_extensions_in_functions():
    source = dedent(
        """
        import torch
        import lightconv_cuda
        from fairseq import libnat_cuda
        import utils_cuda_graphs
        try:
            import dynamicconv_cuda
        except (ImportError, ModuleNotFoundError):
            dynamicconv_cuda = None


        class Kernels:
            import fused_dense_cuda


        def lazy():
            import xentropy_cuda  # an extension: the call fails


        def lazy_library():
            import mamba_ssm  # a library imported in a function: the call fails too


        def triton_kernels():
            import triton  # imports where Triton or Triton-Ascend is installed: not reported
        """
    )
    found = lambda options: {  # noqa: E731
        f.message.split("`")[1] for f in migrate_source(source.encode(), "a.py", options).findings if f.code == "NPU606"
    }
    # a compiled extension imported unguarded at module level: the file cannot load, its marker is all
    # that is kept (round 22, as for an unported package)
    assert found(Options(fix=False)) == {"lightconv_cuda"}
    source = source.replace("import lightconv_cuda\n", "")
    assert found(Options(fix=False)) == {"fused_dense_cuda", "xentropy_cuda", "mamba_ssm"}
    assert found(options_of(fix=False, cuda_extensions=("fairseq.libnat_cuda",))) == {"fairseq.libnat_cuda"}


def test_declared_extensions(tmp_path):
    from cuda2npu.analysis.cuda_only_modules import declared_extensions

    setup = tmp_path / "setup.py"
    setup.write_text(
        "from torch.utils import cpp_extension\n"
        "ext = [cpp_extension.CUDAExtension('fairseq.libnat_cuda', ['a.cu']),\n"
        '       cpp_extension.CUDAExtension(name="flash_attn_2_cuda", sources=[]),\n'
        "       cpp_extension.CppExtension('fairseq.libbase', ['b.cpp'])]\n"
    )
    assert declared_extensions([setup, tmp_path / "train.py"]) == ("fairseq.libnat_cuda", "flash_attn_2_cuda")


def test_declared_extensions_through_a_name_bound_to_the_class(tmp_path):
    """InternImage's and GroundingDINO's `extension = CUDAExtension` ... `extension("DCNv3", ...)`."""
    from cuda2npu.analysis.cuda_only_modules import declared_extensions

    setup = tmp_path / "setup.py"
    setup.write_text(
        "from torch.utils.cpp_extension import CppExtension, CUDAExtension\n\n\ndef get_extensions():\n"
        "    extension = CppExtension\n    if cuda:\n        extension = CUDAExtension\n"
        "    else:\n        raise NotImplementedError('Cuda is not available')\n"
        "    return [extension('DCNv3', sources), make('not_an_extension', [])]\n"
    )
    assert declared_extensions([setup]) == ("DCNv3",)


def test_an_extension_that_falls_back_to_cpp_is_built_without_cuda(tmp_path):
    """detectron2's setup.py: `extension = CppExtension`, CUDAExtension only where CUDA is found, no
    `else` that raises or returns: on an NPU host `detectron2._C` builds with CPU kernels and imports
    (no NPU606 at its imports, round 13), but its operators still have no NPU kernels."""
    from cuda2npu.analysis.cuda_only_modules import cpu_built_extensions, declared_extensions

    setup = tmp_path / "setup.py"
    setup.write_text(
        "from torch.utils.cpp_extension import CppExtension, CUDAExtension\n\n\ndef get_extensions():\n"
        "    extension = CppExtension\n    if torch.cuda.is_available() and CUDA_HOME is not None:\n"
        "        extension = CUDAExtension\n        sources += cuda_sources\n"
        "    return [extension('detectron2._C', sources)]\n"
    )
    assert declared_extensions([setup]) == ()
    assert cpu_built_extensions([setup]) == ("detectron2._C",)


JAX = b"import jax\nimport transformer_engine.jax  # noqa: F401\n\nDEVICE = 'cuda'\nx = jax.device_put(1, jax.devices('cuda')[0])\n"


def test_files_of_another_framework_are_skipped_in_migrate_and_check():
    for options in (Options(), Options(fix=False)):
        result = migrate_source(JAX, "step.py", options)
        assert (result.status, result.findings, result.new_source) == ("skipped", [], None)
        assert result.reason == "not a PyTorch file: imports JAX and no torch module"
    both = migrate_source(b"import torch\nimport jax\nx = torch.ones(1).cuda()\n", "convert.py", Options())
    assert both.status == "changed"
    no_import = migrate_source(b"def to_gpu(x):\n    return x.cuda()\n", "util.py", Options())
    assert no_import.status == "changed", "PyTorch code that imports nothing is still migrated"


def test_imports_guarded_by_an_availability_probe_are_left_alone():
    source = dedent(
        """
        import torch
        from diffusers.utils import is_xformers_available

        if is_xformers_available():
            import xformers.ops
        else:
            xformers = None
        if HAS_TRITON and not torch.cuda.is_available():
            import triton
        if HAVE_TE:
            import transformer_engine.pytorch as te
        if torch.cuda.is_available():
            import flash_attn_2_cuda
        if torch.cuda.is_available():
            from flash_attn import flash_attn_func
        """
    )
    findings = migrate_source(source.encode(), "a.py", Options(fix=False)).findings
    # `torch.cuda.is_available()` is a device check, True on NPU once migrated (flash-attn's calls become
    # NPU calls): the import under it fails there; gating a module no migration covers it is a feature
    # switch instead, kept as written and unreported (nothing to decide): the import never runs on NPU
    assert [f.line for f in findings if f.code == "NPU606"] == [15]
    assert not [f for f in findings if f.code == "NPU103" and f.line == 12]
    migrated = migrate_source(source.encode(), "a.py", Options()).new_source.decode()
    assert "if torch.cuda.is_available():\n    import flash_attn_2_cuda\n" in migrated


def test_the_projects_own_modules_are_not_missing_dependencies(tmp_path):
    from cuda2npu.analysis.cuda_only_modules import shadowing_modules

    files = [
        tmp_path / "flash_attn" / "__init__.py",
        tmp_path / "flash_attn" / "ops" / "__init__.py",
        tmp_path / "flash_attn" / "ops" / "layer_norm.py",
        tmp_path / "bench_cuda.py",
        tmp_path / "scripts" / "xformers.py",
        tmp_path / "scripts" / "train.py",
        tmp_path / "src" / "triton.py",
        # round 24 (Megatron-DeepSpeed): a namespace portion inside a package is `megatron.core.custom_layers`
        tmp_path / "megatron" / "__init__.py",
        tmp_path / "megatron" / "custom_layers" / "transformer_engine.py",
    ]
    everywhere, loose = shadowing_modules(files)
    assert everywhere == ("bench_cuda", "flash_attn", "triton")  # a package; loose in the root or src/
    assert loose == ((str(tmp_path / "scripts"), "xformers"),)  # importable by the scripts next to it only
    source = b"import torch\nfrom flash_attn.ops import layer_norm\nimport bench_cuda\nimport mamba_ssm\n"
    found = migrate_source(source, "a.py", options_of(fix=False, local_modules=("bench_cuda", "flash_attn"))).findings
    assert [f.line for f in found if f.code == "NPU606"] == [4]


def test_a_loose_module_shadows_a_cuda_only_one_in_its_own_directory_only(tmp_path):
    """``scripts/xformers.py`` (no ``__init__.py``) is what ``import xformers`` finds in a script run
    from scripts/, not in the package's ``pkg/model.py``; a real package ``flash_attn/`` is the
    project's everywhere. ``check`` and ``migrate`` agree."""
    files = {
        "scripts/xformers.py": "def memory_efficient_attention(q, k, v):\n    return q\n",
        "scripts/run.py": "import torch\nimport xformers\nimport flash_attn\n",
        "pkg/__init__.py": "",
        "pkg/model.py": "import torch\nimport xformers\nfrom flash_attn import layers\n\nVERSION = xformers.__version__\n",
        "flash_attn/__init__.py": "",
        "flash_attn/layers.py": "import torch\n",
    }
    project = tmp_path / "project"
    for name, text in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    checked = json.loads(cuda2npu("check", project, "--format", "json", "--exit-zero", "--select", "NPU606").stdout)
    found = {(Path(d["path"]).relative_to(project).as_posix(), d["line"]) for d in checked["diagnostics"]}
    assert found == {("pkg/model.py", 2)}
    out = tmp_path / "out"
    assert cuda2npu("migrate", project, "--out", out).returncode == 0
    marked = {
        path.relative_to(out).as_posix() for path in out.rglob("*.py") if "TODO(cuda2npu): NPU606" in path.read_text()
    }
    assert marked == {"pkg/model.py"}


def test_r22_a_namespace_package_at_the_root_is_the_projects(tmp_path):
    """llm-awq: `awq/` and `tinychat/` have no `__init__.py` (PEP 420 namespace packages) and are the
    project's own; an NPU host, without AutoAWQ or TinyChat installed, imports them. A namespace
    directory below the root is not importable by that name."""
    from cuda2npu.analysis.cuda_only_modules import shadowing_modules

    files = [
        tmp_path / "awq" / "entry.py",
        tmp_path / "awq" / "quantize" / "__init__.py",
        tmp_path / "awq" / "quantize" / "pre_quant.py",
        tmp_path / "tinychat" / "models" / "llama.py",
        tmp_path / "examples" / "xformers" / "bench.py",
    ]
    assert shadowing_modules(files, (), tmp_path) == (("awq", "tinychat"), ())
