"""liger-kernel (an Ascend backend from 0.6.5: NPU606 by the project's pin, NPU705 at an older pin) and
lightning-thunder (no NPU device, nothing ports it: a file importing it unguarded at module level is
left as written with one NPU606 marker)."""

from __future__ import annotations

from helpers import dedent, migrate_text, options_of

from cuda2npu.analysis.cuda_only_modules import (
    cuda_module,
    cuda_only_distribution,
    npu_release,
    shadowing_modules,
    unported_module,
)
from cuda2npu.core.catalogue import table
from cuda2npu.core.options import Options
from cuda2npu.core.pins import CONSULTED
from cuda2npu.filekinds.depfiles import ProjectImports, check_text
from cuda2npu.project.facts import project_facts

THUNDER_EXECUTOR = dedent(
    """
    import torch
    from thunder.extend import OperatorExecutor

    ex = OperatorExecutor("fused", version="0.1")


    def checker(a):
        return a.device.type == "cuda"


    torch.cuda.synchronize()
    """
)


def _codes(result) -> list[str]:
    return [f.code for f in result.findings]


def test_table_entries():
    assert cuda_module("liger_kernel.ops.rms_norm")[0] == "kernels"
    assert npu_release("liger_kernel.transformers") == ("liger-kernel", "0.6.5")
    assert npu_release("thunder") is None and npu_release("triton") is None
    assert unported_module("thunder.core.proxies") and not unported_module("thunder_utils")
    assert not unported_module("flash_attn") and not unported_module("liger_kernel")
    assert cuda_only_distribution("lightning-thunder") == (("thunder",), cuda_only_distribution("lightning_thunder")[1])
    assert cuda_only_distribution("liger-kernel") is None  # an old pin is NPU705's, not NPU701's
    # unsloth and unsloth_zoo raise at import without an NVIDIA, AMD or Intel GPU
    assert cuda_module("unsloth_zoo.device_type")[0] == "imports" and unported_module("unsloth.models")
    assert cuda_only_distribution("unsloth-zoo")[0] == ("unsloth", "unsloth_zoo")


def test_every_npu_release_is_a_consulted_pin():
    """NPU606 sees the pin only for distributions the project facts keep (core/pins.py)."""
    releases = table("npu_first_releases")["release"]
    for name, entry in table("cuda_only_packages")["package"].items():
        if "npu_release" in entry:
            assert entry["npu_release"] in releases, name
            assert entry["npu_release"] in CONSULTED, name


def test_liger_follows_the_project_pin():
    source = "from liger_kernel.ops.rope import LigerRopeFunction\n"
    by_pin = {}
    for spec in (None, "", ">=0.5", "==0.5.2", "<0.6", ">=0.6.5", "~=0.7.0"):
        pins = () if spec is None else (("liger-kernel", spec),)
        found = migrate_text(source, options_of(fix=False, pins=pins))[1].findings
        by_pin[spec] = found[0].tier.name if found else None
    assert by_pin == {
        None: "REVIEW",
        "": "REVIEW",
        ">=0.5": "REVIEW",
        "==0.5.2": "MANUAL",
        "<0.6": "MANUAL",
        ">=0.6.5": None,
        "~=0.7.0": None,
    }


def test_project_facts_read_the_liger_pin(tmp_path):
    (tmp_path / "requirements.txt").write_text("torch==2.4.0\nliger-kernel==0.5.2\n")
    (tmp_path / "model.py").write_text("import liger_kernel\n")
    facts = project_facts(sorted(tmp_path.iterdir()), tmp_path)
    assert ("liger-kernel", "==0.5.2") in facts.pins


def _depfile(text: str, modules: dict[str, list[str]]) -> tuple[list, str]:
    return check_text("requirements.txt", text, "requirements.txt", Options(), ProjectImports(modules, ""))


def test_dependency_files():
    findings, new = _depfile("liger-kernel==0.5.2\nlightning-thunder>=0.2\n", {"thunder": ["ext/run.py"]})
    assert [(f.code, f.line) for f in findings] == [("NPU705", 1), ("NPU701", 2)]
    assert "liger-kernel==0.5.2\n" in new and "lightning-thunder>=0.2\n" in new  # kept, each under a marker
    assert not _depfile("liger-kernel\nliger-kernel>=0.6.5\n", {"liger_kernel": ["m.py"]})[0]


def test_unported_import_leaves_the_file_as_written():
    migrated, result = migrate_text(THUNDER_EXECUTOR)
    lines = migrated.splitlines()
    assert lines[1].startswith("# TODO(cuda2npu): NPU606 `thunder.extend` cannot run on an NPU host, nor can this file")
    assert "\n".join(lines[:1] + lines[2:]) + "\n" == THUNDER_EXECUTOR
    assert _codes(result) == ["NPU606"]
    assert _codes(migrate_text(THUNDER_EXECUTOR, Options(fix=False))[1]) == ["NPU606"]


def test_tensorrt_is_unported_and_its_wheels_are_cuda_only():
    """flux's trt/ modules: a file importing TensorRT at module level is TensorRT code (left as written,
    one marker); its cu12 wheels are CUDA-only distributions."""
    source = "import tensorrt as trt\nimport torch\n\nstream = torch.cuda.Stream()\n"
    migrated, result = migrate_text(source, Options())
    assert migrated.endswith(source) and _codes(result) == ["NPU606"]
    assert unported_module("tensorrt") and cuda_only_distribution("tensorrt-cu12")[0][0] == "tensorrt"


def test_unported_import_noqa_or_ignored_migrates_the_rest():
    suppressed = THUNDER_EXECUTOR.replace("OperatorExecutor\n", "OperatorExecutor  # noqa: NPU606\n", 1)
    migrated, result = migrate_text(suppressed)
    assert "NPU606" not in _codes(result) and 'a.device.type == "npu"' in migrated
    migrated, result = migrate_text(THUNDER_EXECUTOR, Options(ignore=("NPU606",)))
    assert "torch.npu.synchronize()" in migrated and "TODO(cuda2npu): NPU606" not in migrated


def test_guarded_or_nested_unported_import_keeps_the_other_edits():
    for imported in (
        "try:\n    import thunder\nexcept ImportError:\n    thunder = None\n",
        "if THUNDER_AVAILABLE:\n    import thunder\n",
        "def jit(m):\n    import thunder\n    return thunder.jit(m)\n",
    ):
        migrated, result = migrate_text(f"import torch\n{imported}\ntorch.cuda.synchronize()\n")
        assert "torch.npu.synchronize()" in migrated, imported
        assert migrated.count("TODO(cuda2npu): NPU606 `thunder` runs CUDA kernels") == 1, imported


def test_the_project_own_thunder_package_is_not_reported(tmp_path):
    package = tmp_path / "thunder"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (tmp_path / "use.py").write_text("")
    everywhere, _ = shadowing_modules(sorted([package / "__init__.py", tmp_path / "use.py"]), root=tmp_path)
    assert everywhere == ("thunder",)
    migrated, result = migrate_text(THUNDER_EXECUTOR, options_of(local_modules=everywhere))
    assert "NPU606" not in _codes(result) and "torch.npu.synchronize()" in migrated


def test_a_nested_thunder_package_is_not_lightning_thunder(tmp_path):
    """litgpt's ``extensions/thunder/`` is imported as ``extensions.thunder``: ``import thunder`` is
    still the library; a package whose import fails (``flash_attn``) shadows from anywhere, as before."""
    files = [tmp_path / "extensions" / name / "__init__.py" for name in ("thunder", "flash_attn")]
    files.append(tmp_path / "train.py")
    assert shadowing_modules(files, root=tmp_path) == (("flash_attn",), ())
