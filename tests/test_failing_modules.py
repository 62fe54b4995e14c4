"""The project's modules that fail at import on an NPU host, also through other modules (a project fact,
cuda2npu/analysis/failing_modules.py): VideoMamba's models import its vendored ``mamba_ssm``, whose
``__init__`` imports a module importing the compiled ``selective_scan_cuda``; each file importing one
such module at module level gets NPU606 at that import."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from cli_helpers import cli, write

from cuda2npu.analysis.failing_modules import failing_and_optional_modules, failing_modules
from cuda2npu.analysis.python_files import PythonFiles

INTERFACE = "import torch\nimport selective_scan_cuda\n\n\ndef scan(x):\n    return selective_scan_cuda.fwd(x)\n"


def test_failing_modules_follow_module_level_imports_and_packages(tmp_path):
    texts = {
        tmp_path / "mamba_ssm" / "__init__.py": b"from mamba_ssm.ops.interface import scan\n",
        tmp_path / "mamba_ssm" / "ops" / "__init__.py": b"",
        tmp_path / "mamba_ssm" / "ops" / "interface.py": INTERFACE.encode(),
        tmp_path / "mamba_ssm" / "ops" / "triton" / "__init__.py": b"",
        tmp_path / "mamba_ssm" / "ops" / "triton" / "layernorm.py": b"import torch\n",
        tmp_path / "models" / "__init__.py": b"",
        tmp_path / "models" / "videomamba.py": b"from mamba_ssm.ops.triton.layernorm import rms\n",
        tmp_path / "models" / "guarded.py": b"try:\n    import mamba_ssm\nexcept ImportError:\n    mamba_ssm = None\n",
        tmp_path / "train.py": b"def main():\n    import mamba_ssm\n",
    }
    assert failing_modules(PythonFiles(texts)) == (
        ("mamba_ssm", "selective_scan_cuda"),
        ("mamba_ssm.ops.interface", "selective_scan_cuda"),
        ("models.videomamba", "selective_scan_cuda"),  # importing a submodule runs mamba_ssm/__init__.py
    )


def test_an_import_of_a_failing_project_module_is_marked(tmp_path):
    write(tmp_path / "mamba_ssm" / "__init__.py", "from mamba_ssm.ops.interface import scan\n")
    write(tmp_path / "mamba_ssm" / "ops" / "__init__.py", "")
    write(tmp_path / "mamba_ssm" / "ops" / "interface.py", INTERFACE)
    model = write(
        tmp_path / "models" / "videomamba.py", "import torch\nfrom mamba_ssm import scan\n\nx = torch.ones(2)\n"
    )
    cli("migrate", tmp_path)
    text = model.read_text()
    assert "NPU606 `mamba_ssm` cannot be imported on an NPU host" in text and "`selective_scan_cuda`" in text
    assert "NPU606" in (tmp_path / "mamba_ssm" / "ops" / "interface.py").read_text()  # the import itself


def test_a_monkey_patch_importing_flash_attn_padding_helpers_fails_and_so_does_its_importer(tmp_path):
    """LLaVA-style `train_mem.py` imports `llama_flash_attn_monkey_patch`, which imports
    `flash_attn.bert_padding` (pure-PyTorch helpers NPU606 tells to copy: the import stays until then):
    both fail at import on an NPU host (mPLUG-Owl2, ShareGPT4V, round 13); a flash-attn import whose
    calls the migration rewrites does not count."""
    texts = {
        tmp_path / "llava" / "__init__.py": b"",
        tmp_path / "llava" / "train" / "__init__.py": b"",
        tmp_path / "llava" / "train" / "llama_flash_attn_monkey_patch.py": (
            b"import torch\nfrom flash_attn.bert_padding import pad_input, unpad_input\n\n\n"
            b"def replace_llama_attn_with_flash_attn():\n    pass\n"
        ),
        tmp_path / "llava" / "train" / "train_mem.py": (
            b"from llava.train.llama_flash_attn_monkey_patch import replace_llama_attn_with_flash_attn\n"
        ),
        tmp_path / "llava" / "model" / "__init__.py": b"",
        tmp_path / "llava" / "model" / "attention.py": b"from flash_attn import flash_attn_func\n",
    }
    assert failing_modules(PythonFiles(texts)) == (
        ("llava.train.llama_flash_attn_monkey_patch", "flash_attn.bert_padding"),
        ("llava.train.train_mem", "flash_attn.bert_padding"),
    )


def test_flash_attn_helpers_imported_in_a_try_that_re_raises_fail_and_so_does_the_importer(tmp_path):
    """LLM-Finetuning-Toolkit's `llama2/llama_patch.py` (round 53): `try: from flash_attn.bert_padding import
    ...` / `except Exception: raise ModuleNotFoundError(...)` is no fallback: the helpers' import stays, and
    the scripts importing the patch fail with it (they were unmarked)."""
    texts = {
        tmp_path / "llama2" / "llama_patch.py": (
            b"try:\n    from flash_attn.bert_padding import pad_input, unpad_input\n"
            b"except Exception:\n    raise ModuleNotFoundError('install flash-attn')\n\n\n"
            b"def pad(x):\n    return pad_input(x)\n"
        ),
        tmp_path / "llama2" / "infer.py": b"from llama_patch import pad\n",
    }
    assert failing_modules(PythonFiles(texts)) == (
        ("infer", "flash_attn.bert_padding"),
        ("llama_patch", "flash_attn.bert_padding"),
    )


def test_a_vendored_verl_vllm_package_with_old_adapters_only_fails_and_so_do_its_importers(tmp_path):
    """RAGEN and Search-R1 (round 55; rllm, round 46): verl's `third_party/vllm/__init__.py` imports the adapter
    of the installed vLLM (0.3.1 to 0.6.3) and raises for any other, so for every vLLM vllm-ascend runs."""
    init = (
        b"from importlib.metadata import version\n\nif version('vllm') == '0.6.3':\n"
        b"    from .vllm_v_0_6_3.llm import LLM\nelse:\n    raise ValueError('vllm version not supported')\n"
    )
    texts = {
        tmp_path / "verl" / "__init__.py": b"",
        tmp_path / "verl" / "third_party" / "__init__.py": b"",
        tmp_path / "verl" / "third_party" / "vllm" / "__init__.py": init,
        tmp_path / "verl" / "third_party" / "vllm" / "vllm_v_0_6_3" / "__init__.py": b"",
        tmp_path / "verl" / "third_party" / "vllm" / "vllm_v_0_6_3" / "llm.py": b"class LLM:\n    pass\n",
        tmp_path / "verl" / "rollout.py": b"from verl.third_party.vllm import LLM\n",
    }
    failing = dict(failing_modules(PythonFiles(texts)))
    assert set(failing) == {"verl.rollout", "verl.third_party.vllm"}
    assert "adapters for vLLM 0.6.3 to 0.6.3 raise" in failing["verl.rollout"]
    texts[tmp_path / "verl" / "third_party" / "vllm" / "vllm_v_0_8_5" / "llm.py"] = b"class LLM:\n    pass\n"
    assert failing_modules(PythonFiles(texts)) == ()  # an adapter for a vLLM vllm-ascend runs: it may import


def test_a_module_in_a_namespace_directory_fails_under_its_package_name_too(tmp_path):
    """Video-ChatGPT: ``video_chatgpt/train/`` has no ``__init__.py``; train_mem.py imports the
    flash-attn patch beside it as ``video_chatgpt.train.llama_flash_attn_monkey_patch``."""
    patch = b"import torch\nfrom flash_attn.flash_attn_interface import flash_attn_unpadded_qkvpacked_func\n"
    texts = {
        tmp_path / "video_chatgpt" / "__init__.py": b"",
        tmp_path / "video_chatgpt" / "train" / "llama_flash_attn_monkey_patch.py": patch,
        tmp_path / "video_chatgpt" / "train" / "train_mem.py": (
            b"from video_chatgpt.train.llama_flash_attn_monkey_patch import replace_llama_attn\n"
        ),
        tmp_path / "video_chatgpt" / "train" / "beside.py": b"from llama_flash_attn_monkey_patch import replace\n",
        tmp_path / "scripts" / "run.py": b"import llama_flash_attn_monkey_patch\n",  # not beside it: no package
    }
    failing = dict(failing_modules(PythonFiles(texts)))
    flash = "flash_attn.flash_attn_interface"
    assert failing["llama_flash_attn_monkey_patch"] == failing["video_chatgpt.train.llama_flash_attn_monkey_patch"]
    assert failing["llama_flash_attn_monkey_patch"].startswith(flash)
    assert {"train_mem", "video_chatgpt.train.train_mem", "beside", "video_chatgpt.train.beside"} <= set(failing)


def test_the_importer_of_an_unported_flash_attn_1_patch_is_marked(tmp_path):
    patch = "import torch\nfrom flash_attn.flash_attn_interface import flash_attn_unpadded_qkvpacked_func\n"
    write(tmp_path / "video_chatgpt" / "__init__.py", "")
    write(tmp_path / "video_chatgpt" / "train" / "llama_flash_attn_monkey_patch.py", patch)
    main = write(
        tmp_path / "video_chatgpt" / "train" / "train_mem.py",
        "from video_chatgpt.train.llama_flash_attn_monkey_patch import replace_llama_attn\n\nreplace_llama_attn()\n",
    )
    cli("migrate", tmp_path)
    assert "NPU606 `video_chatgpt.train.llama_flash_attn_monkey_patch` cannot be imported" in main.read_text()


FUSED = b"import torch\nfrom flash_attn.ops.layer_norm import layer_norm\n\n\ndef norm(x, w):\n    return layer_norm(x, w)\n"


def test_a_failing_module_the_project_imports_only_under_a_fallback_is_optional(tmp_path):
    """Otter's ``modeling_fuyu.py``: ``try: from .modeling_persimmon import ...`` / ``except ImportError:
    from transformers import ...`` (round 14): the module never loads on an NPU host. Not optional: a
    module also imported once without a guard, or under a guard that does not catch the failure
    (``except ValueError``) or re-raises it, and a module nothing imports (a script)."""
    guarded = b"try:\n    from .%s import norm\nexcept ImportError:\n    norm = None\n"
    texts = {
        tmp_path / "pkg" / "__init__.py": b"",
        tmp_path / "pkg" / "fuyu" / "modeling_fused.py": FUSED,  # a directory without __init__.py, as Otter's
        tmp_path / "pkg" / "fuyu" / "modeling_main.py": guarded % b"modeling_fused",
        tmp_path / "pkg" / "both.py": FUSED,
        tmp_path / "pkg" / "uses_both.py": guarded % b"both" + b"\nfrom pkg.both import norm as again\n",
        tmp_path / "pkg" / "value_error.py": FUSED,
        tmp_path / "pkg" / "uses_value_error.py": b"try:\n    import pkg.value_error\nexcept ValueError:\n    pass\n",
        tmp_path / "pkg" / "reraised.py": FUSED,
        tmp_path / "pkg" / "uses_reraised.py": (
            b"try:\n    from . import reraised\nexcept ImportError as e:\n    raise RuntimeError('no') from e\n"
        ),
        tmp_path / "pkg" / "lazy.py": FUSED,
        tmp_path
        / "pkg"
        / "uses_lazy.py": b"def attend():\n    try:\n        from .lazy import norm\n    except:\n        pass\n",
        tmp_path / "pkg" / "script.py": FUSED,
        tmp_path / "pkg" / "ops.py": INTERFACE.encode(),
        tmp_path / "pkg" / "chain.py": b"import torch\nfrom .ops import scan\n",
        tmp_path
        / "pkg"
        / "uses_chain.py": b"try:\n    from pkg import chain\nexcept ModuleNotFoundError:\n    chain = None\n",
    }
    failing, optional, _ = failing_and_optional_modules(PythonFiles(texts), root=tmp_path)
    assert {"pkg.both", "pkg.script", "pkg.ops", "pkg.chain", "modeling_fused"} <= dict(failing).keys()
    real = os.path.realpath(tmp_path)
    assert optional == tuple(
        sorted(
            [
                (f"{real}/pkg/chain.py", ".ops", "selective_scan_cuda", "pkg/uses_chain.py:2"),
                (f"{real}/pkg/fuyu/modeling_fused.py", "flash_attn.ops.layer_norm", "", "pkg/fuyu/modeling_main.py:2"),
                (f"{real}/pkg/lazy.py", "flash_attn.ops.layer_norm", "", "pkg/uses_lazy.py:3"),
            ]
        )
    )


def test_an_optional_module_is_left_as_written_but_for_its_marker(tmp_path):
    """Migrated: the module imported only under a fallback gets NPU606 at its failing import, naming
    where the project falls back, and nothing else; the near misses are migrated as before."""
    body = (
        "import torch\nfrom flash_attn.ops.layer_norm import layer_norm\n\n\n"
        "def norm(x, w):\n    return layer_norm(x.cuda(), w)\n"
    )
    write(tmp_path / "pkg" / "__init__.py", "")
    optional = write(tmp_path / "pkg" / "fused.py", body)
    write(tmp_path / "pkg" / "model.py", "try:\n    from .fused import norm\nexcept ImportError:\n    norm = None\n")
    unguarded = write(tmp_path / "pkg" / "fused_too.py", body)
    write(tmp_path / "pkg" / "model_too.py", "try:\n    from .fused_too import norm\nexcept ImportError:\n    pass\n")
    write(tmp_path / "pkg" / "train.py", "from pkg.fused_too import norm\n")
    value_error = write(tmp_path / "pkg" / "fused_value.py", body)
    write(
        tmp_path / "pkg" / "model_value.py", "try:\n    from .fused_value import norm\nexcept ValueError:\n    pass\n"
    )
    script = write(tmp_path / "pkg" / "script.py", body)
    cli("migrate", tmp_path, "--report", tmp_path / "report.json")
    lines = optional.read_text().splitlines()
    assert lines[1].startswith("# TODO(cuda2npu): NPU606 `flash_attn.ops.layer_norm` cannot be imported")
    assert "(pkg/model.py:2)" in lines[1] and "left this file as written" in lines[1]
    assert lines[:1] + lines[2:] == body.splitlines()  # no `import torch_npu`, `.cuda()` kept, no NPU403
    for migrated in (unguarded, value_error, script):
        text = migrated.read_text()
        assert "x.npu()" in text and "NPU403" in text and "left this file as written" not in text
    before = optional.read_text()
    cli("migrate", tmp_path)
    assert optional.read_text() == before  # idempotent
    report = json.loads((tmp_path / "report.json").read_text())  # no real path in the report
    assert report["options"]["optional_modules"] == [["fused.py", "flash_attn.ops.layer_norm", "", "pkg/model.py:2"]]


# SpQR (round 27): the package's kernel module compiles CUDA when imported; its package, its scripts and
# its tests import it, through relative imports too.
CUDA_KERNEL = """\
import os
import subprocess

import torch
from torch.utils.cpp_extension import load

FOLDER = os.path.dirname(os.path.abspath(__file__))
SPQR_CUDA = load(name="spqr_cuda", sources=[os.path.join(FOLDER, "spqr_cuda_kernel.cu")])
"""
SPQR_TEST = """\
import torch
from spqr_quant import QuantizedLinear


def test_matmul():
    x = torch.randn(4, 4).cuda()
    torch.cuda.synchronize()
    return QuantizedLinear(x)
"""


def _spqr(root):
    write(root / "spqr_quant" / "__init__.py", "from .inference import QuantizedLinear\n")
    write(root / "spqr_quant" / "inference.py", "from .kernels.cuda_kernel import SPQR_CUDA\n\nQuantizedLinear = 1\n")
    write(root / "spqr_quant" / "kernels" / "__init__.py", "from .selector import pick\n")
    write(root / "spqr_quant" / "kernels" / "selector.py", "def pick():\n    from .cuda_kernel import FOLDER\n")
    write(root / "spqr_quant" / "kernels" / "cuda_kernel.py", CUDA_KERNEL)
    return write(root / "tests" / "test_spqr.py", SPQR_TEST)


def test_a_module_compiling_cuda_at_import_fails_and_so_do_its_importers(tmp_path):
    _spqr(tmp_path)
    texts = {path: path.read_bytes() for path in tmp_path.rglob("*.py")}
    failing, optional, failing_imports = failing_and_optional_modules(PythonFiles(texts), root=tmp_path)
    kernel = "spqr_quant.kernels.cuda_kernel"
    assert dict(failing)["spqr_quant.kernels.cuda_kernel"] == kernel
    assert dict(failing)["spqr_quant"] == kernel and not optional
    left = {os.path.relpath(path, tmp_path): entry for path, *entry in failing_imports}
    assert left == {
        "spqr_quant/__init__.py": [".inference", kernel, True, ""],
        "spqr_quant/inference.py": [".kernels.cuda_kernel", kernel, True, ""],  # the kernel module itself, imported
        "tests/test_spqr.py": ["spqr_quant", kernel, True, ""],
        # importing these runs `spqr_quant/__init__.py` first: no import of their own fails (round 31)
        "spqr_quant/kernels/__init__.py": ["", kernel, True, ""],
        "spqr_quant/kernels/selector.py": ["", kernel, True, ""],
    }


def test_a_file_that_cannot_be_imported_through_the_project_is_left_as_written(tmp_path):
    """Its edits would be noise (SpQR's tests, Quest's package): NPU606 at the import says what fails."""
    test = _spqr(tmp_path)
    cli("migrate", tmp_path)
    lines = test.read_text().splitlines()
    assert lines[1].startswith("# TODO(cuda2npu): NPU606 `spqr_quant` cannot be imported on an NPU host")
    assert "`spqr_quant.kernels.cuda_kernel`, which fails there, and so does this file" in lines[1]
    assert lines[:1] + lines[2:] == SPQR_TEST.splitlines()
    inference = (tmp_path / "spqr_quant" / "inference.py").read_text()
    assert inference.startswith(
        "# TODO(cuda2npu): NPU606 `.kernels.cuda_kernel` (`spqr_quant.kernels.cuda_kernel`) cannot"
    )
    assert "NPU602" in (tmp_path / "spqr_quant" / "kernels" / "cuda_kernel.py").read_text()


def test_the_importer_of_a_flash_attn_helper_a_person_copies_is_still_migrated(tmp_path):
    """``flash_attn.bert_padding`` is ported by hand (NPU606 says what to copy): the files importing the
    patch run once that is done, so they are migrated, and marked at the import."""
    write(tmp_path / "llava" / "__init__.py", "")
    write(tmp_path / "llava" / "patch.py", "import torch\nfrom flash_attn.bert_padding import pad_input\n")
    train = write(tmp_path / "llava" / "train.py", "import torch\nimport llava.patch\n\nx = torch.ones(2).cuda()\n")
    cli("migrate", tmp_path)
    text = train.read_text()
    assert "NPU606 `llava.patch` cannot be imported" in text and ".npu()" in text


def test_a_top_level_namespace_package_is_followed_and_a_module_named_like_a_library_imports_the_library(tmp_path):
    """PyramidKV (round 27): `pyramidkv/` has no `__init__.py`; `monkeypatch.py` imports
    `pyramidkv.llama_model`, which imports `flash_attn.bert_padding`; `pyramidkv/minference.py` imports
    the MInference library, whose name it has (inside itself, the name is the library's)."""
    write(tmp_path / "pyramidkv" / "llama_model.py", "import torch\nfrom flash_attn.bert_padding import pad_input\n")
    patch = write(tmp_path / "pyramidkv" / "monkeypatch.py", "from pyramidkv.llama_model import pad_input\n")
    own = write(
        tmp_path / "pyramidkv" / "minference.py",
        "import torch\nfrom minference.modules.minference_forward import prefill\n\nx = torch.ones(1).cuda()\n",
    )
    cli("migrate", tmp_path)
    assert "NPU606 `pyramidkv.llama_model` cannot be imported" in patch.read_text()
    text = own.read_text()
    assert "NPU606 `minference.modules.minference_forward` cannot run on an NPU host, nor can this file" in text
    assert ".cuda()" in text  # left as written


def test_a_relative_import_of_a_failing_module_is_marked_and_the_file_migrated(tmp_path):
    """TriForce (round 28): `models/TP_llama.py` runs `from .tensor_op import ...`, and `tensor_op.py`
    imports flash-attn's `bert_padding` (a person copies it): marked at the import, and migrated."""
    write(tmp_path / "models" / "__init__.py", "")
    write(tmp_path / "models" / "tensor_op.py", "import torch\nfrom flash_attn.bert_padding import pad_input\n")
    model = write(
        tmp_path / "models" / "TP_llama.py",
        "import torch\nfrom .tensor_op import pad_input\n\nx = torch.ones(2).cuda()\n",
    )
    cli("migrate", tmp_path)
    text = model.read_text()
    assert "NPU606 `.tensor_op` cannot be imported on an NPU host" in text and ".npu()" in text


def test_a_script_importing_a_sibling_of_its_package_by_its_bare_name_fails_through_it(tmp_path):
    """KIVI (round 28): `quant/test.py`, run from `quant/`, imports `matmul` (`quant/matmul.py`), which
    imports the compiled `kivi_gemv`: the script fails there too, and is left as written."""
    write(tmp_path / "quant" / "__init__.py", "")
    write(tmp_path / "quant" / "matmul.py", "import torch\nimport kivi_gemv\n")
    write(
        tmp_path / "quant" / "setup.py",
        "from torch.utils.cpp_extension import CUDAExtension\n"
        "from setuptools import setup\nsetup(ext_modules=[CUDAExtension('kivi_gemv', ['gemv.cu'])])\n",
    )
    test = write(tmp_path / "quant" / "test.py", "import torch\nfrom matmul import bmm\n\nx = torch.ones(2).cuda()\n")
    cli("migrate", tmp_path)
    text = test.read_text()
    assert "NPU606 `matmul` cannot be imported on an NPU host" in text and ".cuda()" in text


def test_the_failing_flash_attn_name_is_one_the_migrated_file_still_imports(tmp_path):
    """DuoAttention (round 27): `from flash_attn import flash_attn_func, flash_attn_with_kvcache` where
    `flash_attn_with_kvcache` is unused (the rewrite of the statement drops it) and `flash_attn_func`
    is also stored as a value (NPU403: its import stays): the module fails through the latter."""
    texts = {
        tmp_path / "patch" / "__init__.py": b"from .llama import enable\n",
        tmp_path / "patch" / "llama.py": (
            b"from flash_attn import flash_attn_func, flash_attn_with_kvcache\n\n\n"
            b"def enable(module, q, k, v):\n    module.attn = flash_attn_func\n    return flash_attn_func(q, k, v)\n"
        ),
        tmp_path / "patch" / "calls_only.py": (
            b"from flash_attn import flash_attn_func, flash_attn_with_kvcache\n\n\n"
            b"def attend(q, k, v):\n    return flash_attn_func(q, k, v)\n"
        ),
    }
    failing = dict(failing_modules(PythonFiles(texts)))
    assert failing["patch.llama"] == "flash_attn.flash_attn_func" and failing["patch"] == "flash_attn.flash_attn_func"
    assert "patch.calls_only" not in failing  # its calls are rewritten and the unused name goes with the import


def test_a_flash_attn_call_the_rule_leaves_keeps_its_import_and_its_importers_fail(tmp_path):
    """Infinity and Kimi-Audio (rounds 41, 42): `flash_attn_func(q, k, v, **kw)` and
    `return_attn_probs=output_attentions` are left (NPU401), so their import stays and every module
    importing the file fails with it; a call with `return_attn_probs=False` is rewritten and its import
    goes. The fact and the rule agree: the importer is marked, the kept call and import are in place."""
    basic = write(
        tmp_path / "models" / "basic.py",
        "from flash_attn import flash_attn_func\n\n\n"
        "def attend(q, k, v, **kw):\n    return flash_attn_func(q, k, v, dropout_p=0, **kw)\n",
    )
    write(
        tmp_path / "models" / "whisper.py",
        "from flash_attn import flash_attn_func\n\n\n"
        "def attend(q, k, v, probs):\n    return flash_attn_func(q, k, v, return_attn_probs=probs)\n",
    )
    write(
        tmp_path / "models" / "plain.py",
        "from flash_attn import flash_attn_func\n\n\n"
        "def attend(q, k, v):\n    return flash_attn_func(q, k, v, return_attn_probs=False)\n",
    )
    importer = write(tmp_path / "models" / "infinity.py", "from models.basic import attend\n")
    write(tmp_path / "models" / "__init__.py", "")
    failing = dict(failing_modules(PythonFiles.read(sorted(tmp_path.rglob("*.py")), tmp_path)))
    assert failing["models.basic"] == failing["models.whisper"] == "flash_attn.flash_attn_func"
    assert "models.plain" not in failing
    cli("migrate", tmp_path)
    assert "NPU606 `models.basic` cannot be imported on an NPU host" in importer.read_text()
    migrated = basic.read_text()
    assert "from flash_attn import flash_attn_func" in migrated and "NPU401 `flash_attn_func` not rewritten" in migrated
    assert "flash_attn" not in (tmp_path / "models" / "plain.py").read_text()


def test_a_package_below_a_directory_without_init_fails_by_its_rooted_name_too(tmp_path):
    """Infinity (round 42): `infinity/` has no `__init__.py`, `infinity/models/__init__.py` reaches
    flash-attn, and `trainer.py` imports `infinity.models.ema`: the package's modules fail by that name,
    and so does one nothing imports (`t5.py`); a script in a directory without `__init__.py` below the
    package, run by itself, does not."""
    write(tmp_path / "infinity" / "models" / "__init__.py", "from .basic import attend\n")
    write(
        tmp_path / "infinity" / "models" / "basic.py",
        "from flash_attn import flash_attn_func\n\n\ndef attend(q, k, v, **kw):\n    return flash_attn_func(q, k, v, **kw)\n",
    )
    write(tmp_path / "infinity" / "models" / "ema.py", "import torch\n")
    write(tmp_path / "infinity" / "models" / "t5.py", "import torch\n")
    write(tmp_path / "infinity" / "models" / "tools" / "plot.py", "import torch\n")
    write(tmp_path / "trainer.py", "from infinity.models.ema import update\n")
    files = PythonFiles.read(sorted(tmp_path.rglob("*.py")), tmp_path)
    marked = {path.rpartition(os.sep)[2] for path, *_ in failing_and_optional_modules(files, (), tmp_path)[2]}
    assert {"ema.py", "t5.py", "trainer.py"} <= marked and "plot.py" not in marked


@pytest.mark.parametrize(("pin", "fails"), [("xfuser==0.4.2rc2", True), ("xfuser>=0.4.5", False), ("xfuser", False)])
def test_a_package_running_on_an_npu_from_a_release_fails_only_under_an_older_pin(tmp_path, pin, fails):
    """Step-Video (round 43): xfuser before 0.4.5 raises at import on a host without CUDA, and its
    `stepvideo/__init__.py` reaches it: every module of the package fails under `xfuser==0.4.2rc2`; a pin
    allowing 0.4.5 or later fails nowhere (NPU606 marks the import for review without a pin)."""
    write(tmp_path / "requirements.txt", f"torch\n{pin}\n")
    write(tmp_path / "stepvideo" / "__init__.py", "from .parallel import init\n")
    write(tmp_path / "stepvideo" / "parallel.py", "import xfuser\n\n\ndef init():\n    return xfuser\n")
    config = write(tmp_path / "stepvideo" / "config.py", "import torch\n\nx = torch.ones(1).cuda()\n")
    write(tmp_path / "run.py", "from stepvideo.config import x\n")
    cli("migrate", tmp_path)
    assert ("NPU606 this module cannot be imported on an NPU host" in config.read_text()) is fails
    assert (
        "`xfuser==0.4.2rc2` allows no xfuser release from 0.4.5 on" in (tmp_path / "requirements.txt").read_text()
    ) is fails


def test_an_old_vllm_pin_fails_the_modules_reaching_it(tmp_path):
    """DeepSeek-Prover (round 44): under `vllm==0.4.1`, older than vllm-ascend's first release, vLLM cannot
    be imported on an NPU host: NPU931 marks the direct import, NPU606 the package and its importers."""
    write(tmp_path / "requirements.txt", "vllm==0.4.1\n")
    write(tmp_path / "prover" / "__init__.py", "")
    write(tmp_path / "prover" / "workers" / "__init__.py", "from .generator import Generator\n")
    generator = write(tmp_path / "prover" / "workers" / "generator.py", "from vllm import LLM\n\nGenerator = LLM\n")
    launch = write(tmp_path / "prover" / "launch.py", "from prover.workers import Generator\n")
    cli("migrate", tmp_path)
    assert "NPU931" in generator.read_text() and "NPU606" not in generator.read_text()
    assert "NPU606 `prover.workers` cannot be imported on an NPU host" in launch.read_text()


def test_an_xformers_module_import_stays_where_the_file_reads_what_npu409_does_not_rewrite(tmp_path):
    """PixArt-sigma (round 45): `import xformers.ops` and `xformers.ops.fmha.BlockDiagonalMask.from_seqlens(...)`:
    the mask is never rewritten (NPU410), so the import stays and the package's importers fail; a file
    calling only `memory_efficient_attention` has its import rewritten away."""
    texts = {
        tmp_path / "diffusion" / "__init__.py": b"from .blocks import attend\n",
        tmp_path / "diffusion" / "blocks.py": (
            b"import xformers.ops\n\n\ndef attend(q, k, v, lens):\n"
            b"    bias = xformers.ops.fmha.BlockDiagonalMask.from_seqlens(lens)\n"
            b"    return xformers.ops.memory_efficient_attention(q, k, v, attn_bias=bias)\n"
        ),
        tmp_path / "plain" / "__init__.py": b"from .attn import attend\n",
        tmp_path / "plain" / "attn.py": (
            b"import xformers.ops\n\n\ndef attend(q, k, v):\n    return xformers.ops.memory_efficient_attention(q, k, v)\n"
        ),
    }
    failing = dict(failing_modules(PythonFiles(texts)))
    assert failing["diffusion"] == failing["diffusion.blocks"] == "xformers.ops"
    assert "plain" not in failing and "plain.attn" not in failing


def test_a_relative_import_of_the_projects_compiled_extension_leaves_the_file_as_written(tmp_path):
    """nunchaku and SageAttention (round 29): `from .._C import ops`, `from . import _fused`, where the
    project's setup.py builds `pkg._C` / `pkg._fused` from CUDA: the file cannot be imported."""
    write(
        tmp_path / "setup.py",
        "from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n"
        "setup(name='pkg', ext_modules=[CUDAExtension('pkg._C', ['k.cu']), CUDAExtension('pkg._fused', ['f.cu'])])\n",
    )
    write(tmp_path / "pkg" / "__init__.py", "")
    write(tmp_path / "pkg" / "ops" / "__init__.py", "")
    gemm = write(
        tmp_path / "pkg" / "ops" / "gemm.py", "import torch\nfrom .._C import ops\n\nx = torch.ones(1).cuda()\n"
    )
    quant = write(tmp_path / "pkg" / "quant.py", "import torch\nfrom . import _fused\n\ny = torch.ones(1).cuda()\n")
    cli("migrate", tmp_path)
    assert "NPU606 `.._C` (`pkg._C`) cannot be imported on an NPU host, nor can this file" in gemm.read_text()
    assert "NPU606 `._fused` (`pkg._fused`) cannot be imported" in quant.read_text()
    assert ".cuda()" in gemm.read_text() and ".cuda()" in quant.read_text()


def test_a_module_importing_mamba_ssm_fails_and_its_importers_are_marked_but_migrated(tmp_path):
    """MambaVision (round 29): `models/mamba_vision.py` imports the mamba-ssm library, whose kernels a
    person replaces (its pure-torch `selective_scan_ref`); `train.py`, run from the package directory,
    imports `models.mamba_vision`: marked, and migrated. A module of the package that imports only its
    siblings is not failing through the package's `__init__` (that one is marked where it fails)."""
    write(tmp_path / "mambavision" / "__init__.py", "from .models import registry\n")
    write(tmp_path / "mambavision" / "models" / "__init__.py", "from .mamba_vision import *\nregistry = 1\n")
    write(
        tmp_path / "mambavision" / "models" / "mamba_vision.py",
        "import torch\nfrom mamba_ssm.ops.selective_scan_interface import selective_scan_fn\n",
    )
    write(tmp_path / "mambavision" / "scheduler" / "__init__.py", "from .cosine_lr import CosineLR\n")
    write(tmp_path / "mambavision" / "scheduler" / "cosine_lr.py", "import torch\n\n\nclass CosineLR:\n    pass\n")
    train = write(
        tmp_path / "mambavision" / "train.py",
        "import torch\nfrom models.mamba_vision import *\n\nx = torch.ones(1).cuda()\n",
    )
    cli("migrate", tmp_path)
    text = train.read_text()
    assert "NPU606 `models.mamba_vision` cannot be imported on an NPU host" in text and ".npu()" in text
    assert "NPU606" not in (tmp_path / "mambavision" / "scheduler" / "__init__.py").read_text()


def test_a_checkout_named_like_its_package_is_no_namespace_package(tmp_path):
    """marlin (round 30), cloned into `marlin/`: `bench.py` at the root imports the package `marlin`,
    which imports the compiled `marlin_cuda`; the root's own name is no package above `bench.py`."""
    root = tmp_path / "marlin"
    write(root / "marlin" / "__init__.py", "import torch\nimport marlin_cuda\n")
    bench = write(root / "bench.py", "import torch\nimport marlin\n\nx = torch.ones(1).cuda()\n")
    cli("migrate", root)
    assert "NPU606 `marlin` cannot be imported on an NPU host" in bench.read_text()


def test_a_module_of_a_failing_package_that_imports_the_package_by_name_fails_through_it(tmp_path):
    """SpargeAttn (round 31): `spas_sage_attn/autotune.py` runs `from spas_sage_attn import
    spas_sage_attn_meansim_cuda`, which the package's `__init__` takes from `.core`, which imports the
    compiled `spas_sage_attn._qattn`: the package's own names fail it (a script run from the package's
    directory imports them too), so it is left as written but for its marker. A sibling fails through
    the package's `__init__` too, with the marker at its first statement."""
    write(
        tmp_path / "setup.py",
        'from setuptools import setup\nsetup(ext_modules=[CUDAExtension("spas_sage_attn._qattn", [])])\n',
    )
    write(tmp_path / "spas_sage_attn" / "__init__.py", "from .core import spas_sage_attn_meansim_cuda\n")
    write(tmp_path / "spas_sage_attn" / "core.py", "import torch\nimport spas_sage_attn._qattn as qattn\n")
    write(tmp_path / "spas_sage_attn" / "utils.py", "import torch\n\n\ndef metric(x):\n    return x.cuda()\n")
    autotune = write(
        tmp_path / "spas_sage_attn" / "autotune.py",
        "import torch\nfrom spas_sage_attn.utils import metric\nfrom spas_sage_attn import spas_sage_attn_meansim_cuda\n\n"
        "x = torch.ones(1).cuda()\n",
    )
    cli("migrate", tmp_path)
    text = autotune.read_text()
    assert "NPU606 `spas_sage_attn` cannot be imported on an NPU host" in text and ".cuda()" in text
    assert "NPU606 this module cannot be imported" in (tmp_path / "spas_sage_attn" / "utils.py").read_text()


def test_a_fork_of_vllm_builds_its_kernels_with_cmake_and_their_importers_fail(tmp_path):
    """vllm-ltr (round 31), vLLM 0.4.1 itself: CMakeLists.txt builds `_C`, `_moe_C` and `_punica_C` with
    `define_gpu_extension_target(... DESTINATION vllm ...)` from `.cu` sources; a benchmark importing
    `vllm._C` at module level cannot run on an NPU host and is left as written but for its marker."""
    write(
        tmp_path / "CMakeLists.txt",
        'project(vllm_extensions LANGUAGES CXX)\nset(VLLM_EXT_SRC "csrc/cache_kernels.cu")\n'
        "define_gpu_extension_target(\n  _C\n  DESTINATION vllm\n  LANGUAGE ${VLLM_GPU_LANG}\n  SOURCES ${VLLM_EXT_SRC})\n",
    )
    write(tmp_path / "vllm" / "__init__.py", '__version__ = "0.4.1"\n')
    bench = write(
        tmp_path / "benchmarks" / "paged_attention.py",
        "import torch\nfrom vllm._C import ops\n\nx = torch.ones(1).cuda()\n",
    )
    cli("migrate", tmp_path)
    text = bench.read_text()
    assert "NPU606 `vllm._C` cannot run on an NPU host, nor can this file" in text and ".cuda()" in text


def test_a_module_of_a_package_whose_init_fails_is_left_as_written_with_one_marker(tmp_path):
    """Block-Sparse-Attention (round 31): `block_sparse_attn/__init__.py` imports the interface, which
    imports the compiled `block_sparse_attn_cuda`; `utils/benchmark.py` and `bert_padding.py` import
    nothing failing themselves, but importing them runs the package's `__init__` first. A script of the
    package (`if __name__ == "__main__":`) may run from its directory: migrated."""
    write(
        tmp_path / "setup.py",
        'from setuptools import setup\nsetup(ext_modules=[CUDAExtension("block_sparse_attn_cuda", [])])\n',
    )
    write(tmp_path / "block_sparse_attn" / "__init__.py", "from .interface import attn\n")
    write(tmp_path / "block_sparse_attn" / "interface.py", "import torch\nimport block_sparse_attn_cuda\n")
    write(tmp_path / "block_sparse_attn" / "utils" / "__init__.py", "")
    benchmark = write(
        tmp_path / "block_sparse_attn" / "utils" / "benchmark.py",
        '"""Benchmarks."""\nimport torch\n\n\ndef sync():\n    torch.cuda.synchronize()\n',
    )
    padding = write(tmp_path / "block_sparse_attn" / "bert_padding.py", "import torch\n\n\ndef pad(x):\n    return x\n")
    script = write(
        tmp_path / "block_sparse_attn" / "demo.py",
        'import torch\n\nif __name__ == "__main__":\n    torch.cuda.synchronize()\n',
    )
    cli("migrate", tmp_path)
    text = benchmark.read_text()
    assert text.startswith("# TODO(cuda2npu): NPU606 this module cannot be imported on an NPU host")
    assert "`block_sparse_attn_cuda`" in text and "torch.cuda.synchronize()" in text and "torch_npu" not in text
    assert "NPU606 this module cannot be imported" in padding.read_text()
    assert "torch.npu.synchronize()" in script.read_text()


def test_a_module_of_a_package_whose_init_reaches_flash_attn_is_marked_and_migrated(tmp_path):
    """nano-vllm (round 38): `nanovllm/__init__.py` imports `.llm`, which reaches `flash_attn` through the
    engine; `nanovllm/config.py` imports nothing failing itself, but importing it runs that `__init__`
    first (`llm.py` imports it as `nanovllm.config`). flash-attn is ported by hand, so the module keeps a
    marker at its first statement and is migrated (not left as written)."""
    write(tmp_path / "nanovllm" / "__init__.py", "from nanovllm.llm import LLM\n")
    write(
        tmp_path / "nanovllm" / "llm.py",
        "from nanovllm.attention import attend\nfrom nanovllm.config import sync\n\n\nclass LLM:\n    pass\n",
    )
    write(
        tmp_path / "nanovllm" / "attention.py",
        "from flash_attn import flash_attn_with_kvcache\n\n\ndef attend(q, k, v):\n"
        "    return flash_attn_with_kvcache(q, k, v)\n",
    )
    config = write(
        tmp_path / "nanovllm" / "config.py",
        '"""Config."""\nimport torch\n\n\ndef sync():\n    torch.cuda.synchronize()\n',
    )
    cli("migrate", tmp_path)
    text = config.read_text()
    assert text.startswith("# TODO(cuda2npu): NPU606 this module cannot be imported on an NPU host")
    assert "`flash_attn" in text and "and this module works again" in text and "left as written" not in text
    assert "torch.npu.synchronize()" in text
    cli("migrate", tmp_path)
    assert config.read_text() == text  # idempotent


def test_modules_a_package_imports_relatively_or_nothing_imports_fail_through_its_init(tmp_path):
    """VLM2Vec (round 38): `src/data/__init__.py` reaches flash-attn; `src/data/dataset/__init__.py` imports
    `.beir_dataset` relatively, and `train.py` imports `src.data.dataset.mmeb` by name, so the relative
    import runs through the package too; `videotext.py`, which nothing imports, can only be imported
    through it. All three are marked at their first statement and migrated."""
    write(tmp_path / "src" / "__init__.py", "")
    write(tmp_path / "src" / "data" / "__init__.py", "from src.model import processor\n")
    write(tmp_path / "src" / "model" / "__init__.py", "")
    write(tmp_path / "src" / "model" / "processor.py", "from flash_attn.bert_padding import pad_input\n")
    write(tmp_path / "src" / "data" / "dataset" / "__init__.py", "from .beir import load\nfrom .mmeb import m\n")
    body = "import torch\n\n\ndef sync():\n    torch.cuda.synchronize()\n"
    beir = write(tmp_path / "src" / "data" / "dataset" / "beir.py", body)
    write(tmp_path / "src" / "data" / "dataset" / "mmeb.py", "m = 1\n")
    videotext = write(tmp_path / "src" / "data" / "dataset" / "videotext.py", body)
    write(tmp_path / "train.py", "from src.data.dataset.mmeb import m\n")
    cli("migrate", tmp_path)
    for module in (beir, videotext):
        text = module.read_text()
        assert text.startswith("# TODO(cuda2npu): NPU606 this module cannot be imported on an NPU host"), module
        assert "torch.npu.synchronize()" in text


def test_namespace_modules_of_a_package_imported_by_its_name_fail_through_its_init_but_not_its_scripts(tmp_path):
    """LongVA (round 39): scripts import `from easy_context import apply` only; its `__init__` imports
    `.dist.patch` (a directory without `__init__.py`), which imports `.comm` and reaches flash-attn through
    `ring_flash_attn`: both modules fail through the package. `tests/test_loss.py`, in another directory
    without `__init__.py`, is a script (it puts `..` on sys.path): not marked."""
    write(tmp_path / "easy_context" / "seqpar" / "patch.py", "from .comm import send\n\n\ndef apply():\n    pass\n")
    body = "import torch\n\n\ndef send(x):\n    return x.cuda()\n"
    comm = write(tmp_path / "easy_context" / "seqpar" / "comm.py", body)
    write(tmp_path / "easy_context" / "ring.py", "import ring_flash_attn\n")
    write(tmp_path / "easy_context" / "__init__.py", "from .ring import *\nfrom .seqpar.patch import apply\n")
    script = write(tmp_path / "easy_context" / "tests" / "test_loss.py", 'import sys\nsys.path.append("..")\n' + body)
    write(tmp_path / "train.py", "from easy_context import apply\n")
    cli("migrate", tmp_path)
    assert comm.read_text().startswith("# TODO(cuda2npu): NPU606 this module cannot be imported on an NPU host")
    assert "NPU606" not in script.read_text() and ".npu()" in script.read_text()


def test_xformers_names_no_rule_rewrites_keep_the_import_and_its_importers_fail(tmp_path):
    """chameleon (round 40): `transformer.py` imports `RMSNorm` and `rope_padded` from `xformers.ops`, which
    NPU409 does not rewrite away: the import stays and fails, and so do `loader.py`, which imports it, and
    `image_tokenizer.py`'s neighbours; `image_tokenizer.py` imports `chameleon.inference.vqgan`, the package's
    module, not its sibling `chameleon.py` (a script beside it importing the same name would), so it does
    not fail. A file importing only `memory_efficient_attention` is migrated, its importers not marked."""
    write(tmp_path / "chameleon" / "__init__.py", "")
    write(tmp_path / "chameleon" / "inference" / "__init__.py", "")
    write(
        tmp_path / "chameleon" / "inference" / "transformer.py", "from xformers.ops import RMSNorm, fmha, rope_padded\n"
    )
    write(tmp_path / "chameleon" / "inference" / "loader.py", "from chameleon.inference.transformer import RMSNorm\n")
    write(tmp_path / "chameleon" / "inference" / "chameleon.py", "from chameleon.inference.loader import RMSNorm\n")
    write(tmp_path / "chameleon" / "inference" / "vqgan.py", "import torch\n")
    write(tmp_path / "chameleon" / "inference" / "image_tokenizer.py", "from chameleon.inference.vqgan import torch\n")
    write(tmp_path / "sdpa" / "__init__.py", "")
    write(tmp_path / "sdpa" / "attn.py", "from xformers.ops import memory_efficient_attention\n")
    write(tmp_path / "sdpa" / "model.py", "from sdpa.attn import memory_efficient_attention\n")
    texts = {path: path.read_bytes() for path in tmp_path.rglob("*.py")}
    failing = dict(failing_modules(PythonFiles(texts, tmp_path), ()))
    assert failing["chameleon.inference.loader"] == failing["chameleon.inference.chameleon"] == "xformers.ops"
    assert "chameleon.inference.image_tokenizer" not in failing
    assert "sdpa.model" not in failing and "sdpa.attn" not in failing


def test_a_module_fails_through_its_first_failing_import_in_file_order(tmp_path):
    """quip-sharp (round 34): `lib/utils/__init__.py` imports `.data_utils` (through `lib.codebook` to the
    compiled `quiptools_cuda`) before `.matmul_had` (`fast_hadamard_transform`). The first raises, so
    the package and its importers fail through the compiled extension: an importer is left as written,
    and its marker does not promise that guarding `fast_hadamard_transform` makes it run."""
    write(
        tmp_path / "setup.py",
        'from setuptools import setup\nsetup(ext_modules=[CUDAExtension("quiptools_cuda", [])])\n',
    )
    write(tmp_path / "lib" / "__init__.py", "")
    write(tmp_path / "lib" / "codebook" / "__init__.py", "import quiptools_cuda\n")
    write(tmp_path / "lib" / "utils" / "__init__.py", "from .data_utils import load\nfrom .matmul_had import had\n")
    write(tmp_path / "lib" / "utils" / "data_utils.py", "from lib import codebook\n\n\ndef load():\n    pass\n")
    write(tmp_path / "lib" / "utils" / "matmul_had.py", "import fast_hadamard_transform\n\n\ndef had():\n    pass\n")
    evaluate = write(
        tmp_path / "eval" / "eval_ppl.py", "import torch\nfrom lib.utils import load\n\nx = torch.ones(1).cuda()\n"
    )
    texts = {path: path.read_bytes() for path in tmp_path.rglob("*.py")}
    failing = dict(failing_modules(PythonFiles(texts, tmp_path), ("quiptools_cuda",)))
    assert failing["lib.utils"] == failing["eval.eval_ppl"] == "quiptools_cuda"
    assert failing["lib.utils.matmul_had"] == "fast_hadamard_transform"
    cli("migrate", tmp_path)
    text = evaluate.read_text()
    assert "reaches `quiptools_cuda`" in text and "left as written" in text and ".cuda()" in text
    assert "fast_hadamard_transform" not in text


def test_importers_of_a_pycuda_module_fail_but_not_those_of_a_cupy_one(tmp_path):
    """PyCUDA builds only against the CUDA toolkit: a module importing it fails on an NPU host, and so
    does its importer (marked there, and migrated: a person ports the PyCUDA code). CuPy imports there
    and fails at its first kernel (docs/reference/kernel_libraries.md): DejaVu's importers of its CuPy
    NCCL backend import (round 33)."""
    write(tmp_path / "trt" / "__init__.py", "")
    write(tmp_path / "trt" / "common.py", "import pycuda.driver as cuda\nimport pycuda.autoinit\n")
    write(tmp_path / "comm" / "__init__.py", "")
    write(tmp_path / "comm" / "cupy_backend.py", "import cupy\nfrom cupy.cuda import nccl\n")
    write(tmp_path / "comm" / "comm_utils.py", "from .cupy_backend import *\n")
    infer = write(tmp_path / "infer.py", "import torch\nfrom trt.common import cuda\n\nx = torch.ones(1).cuda()\n")
    texts = {path: path.read_bytes() for path in tmp_path.rglob("*.py")}
    assert failing_modules(PythonFiles(texts, tmp_path)) == (
        ("infer", "pycuda.driver"),
        ("trt.common", "pycuda.driver"),
    )
    cli("migrate", tmp_path)
    text = infer.read_text()
    assert "NPU606 `trt.common` cannot be imported on an NPU host" in text and ".npu()" in text
    assert "NPU606" not in (tmp_path / "comm" / "comm_utils.py").read_text()


def test_the_marker_of_an_importer_names_every_cuda_only_import_its_chain_reaches(tmp_path):
    """UMbreLLa (round 34): `engine.py` imports `umbrella.models`, whose `llama.py` imports flashinfer
    (whose kernels are CUDA) before its layer, which imports the compiled `awq_ext`. Porting `awq_ext`
    alone does not make the engine run: its marker names both."""
    write(tmp_path / "umbrella" / "__init__.py", "")
    write(tmp_path / "umbrella" / "models" / "__init__.py", "from .llama import Llama\n")
    write(tmp_path / "umbrella" / "models" / "llama.py", "import flashinfer\nfrom .layer import Layer\n")
    write(tmp_path / "umbrella" / "models" / "layer.py", "import awq_ext\n")
    engine = write(
        tmp_path / "umbrella" / "engine.py",
        "import torch\nfrom umbrella.models import Llama\n\nx = torch.ones(1).cuda()\n",
    )
    cli("migrate", tmp_path)
    text = engine.read_text()
    assert "it reaches `awq_ext`, which fails there, and `flashinfer`, CUDA-only too" in text
    assert "port (or guard) those imports, and this one works again" in text and ".npu()" in text


def test_a_package_bundled_twice_is_the_copy_nearest_the_importer(tmp_path):
    """GuidedQuant (round 34) bundles QTIP's `qtip/lib` (importing the compiled `qtip_kernels`) and its
    own `inference/lib` (which guards that import); scripts run from each directory import `lib`. Only
    the importers of the failing copy fail. A directory holding only an extension's setup.py
    (`inference/ap_gemv/`) does not hide the installed extension its name imports."""
    write(
        tmp_path / "inference" / "ap_gemv" / "setup.py",
        'from setuptools import setup\nsetup(ext_modules=[CUDAExtension(name="ap_gemv", sources=[])])\n',
    )
    write(tmp_path / "qtip" / "lib" / "__init__.py", "")
    write(tmp_path / "qtip" / "lib" / "codebook.py", "import qtip_kernels\n")
    write(tmp_path / "inference" / "lib" / "__init__.py", "")
    write(
        tmp_path / "inference" / "lib" / "codebook.py",
        "try:\n    import qtip_kernels\nexcept ImportError:\n    qtip_kernels = None\n",
    )
    write(tmp_path / "inference" / "generate.py", "import torch\nfrom lib.codebook import qtip_kernels\n")
    write(tmp_path / "inference" / "plugin.py", "import torch\nimport ap_gemv\n")
    write(tmp_path / "qtip" / "eval" / "eval_ppl.py", "import torch\nfrom lib.codebook import qtip_kernels\n")
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    texts = PythonFiles.read(files, tmp_path)
    extensions = ("ap_gemv", "qtip_kernels")
    failing = dict(failing_modules(texts, extensions))
    assert failing["qtip.lib.codebook"] == failing["eval_ppl"] == "qtip_kernels"
    assert failing["plugin"] == "ap_gemv"
    assert "generate" not in failing and "inference.lib.codebook" not in failing


def test_an_import_in_a_function_of_a_failing_project_module_is_marked(tmp_path):
    """qmoe (round 34): `switch.py` imports `sub1` (which imports the compiled `sub1_cuda`) only when
    `--save` is given, in its main function: the function fails when it runs."""
    write(
        tmp_path / "setup_cuda.py",
        'from setuptools import setup\nsetup(ext_modules=[CUDAExtension("sub1_cuda", [])])\n',
    )
    write(tmp_path / "sub1.py", "import torch\nimport sub1_cuda\n")
    switch = write(
        tmp_path / "switch.py",
        "import torch\n\n\ndef main(save):\n    x = torch.ones(1).cuda()\n    if save:\n"
        "        from sub1 import Manager\n        Manager(x)\n",
    )
    cli("migrate", tmp_path)
    text = switch.read_text()
    assert "NPU606 `sub1` cannot be imported on an NPU host" in text and "`sub1_cuda`" in text
    assert "the function importing it fails when it runs" in text and ".npu()" in text
    assert text.count("NPU606") == 1
    cli("migrate", tmp_path)
    assert switch.read_text() == text  # idempotent


def test_a_directory_without_init_is_a_copy_of_a_module_named_alike(tmp_path):
    """GuidedQuant (round 34): from `qtip/`, `model` is the directory `qtip/model/` (no `__init__.py`),
    not `inference/model.py` (which imports the compiled `ap_gemv`); a module of `spin_quant/utils/`
    that is no script is imported from `spin_quant/`, where `from utils import model_utils` finds the
    directory, not `spin_quant/utils/utils.py`."""
    write(
        tmp_path / "inference" / "ap_gemv" / "setup.py",
        'from setuptools import setup\nsetup(ext_modules=[CUDAExtension(name="ap_gemv", sources=[])])\n',
    )
    write(tmp_path / "inference" / "model.py", "import torch\nimport ap_gemv\n")
    write(tmp_path / "qtip" / "model" / "cache_utils.py", "import torch\n")
    write(tmp_path / "qtip" / "eval" / "interactive_gen.py", "import torch\nfrom model.cache_utils import Cache\n")
    write(tmp_path / "spin_quant" / "utils" / "utils.py", "import fast_hadamard_transform\n")
    write(tmp_path / "spin_quant" / "utils" / "model_utils.py", "import torch\n")
    write(tmp_path / "spin_quant" / "utils" / "eval_utils.py", "import torch\nfrom utils import model_utils\n")
    write(tmp_path / "spin_quant" / "utils" / "quant_utils.py", "import torch\nfrom utils import utils\n")
    write(tmp_path / "spin_quant" / "ptq.py", "import torch\nfrom utils import eval_utils\n")
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    failing = dict(failing_modules(PythonFiles.read(files, tmp_path), ("ap_gemv",)))
    assert failing["inference.model"] == "ap_gemv" and "interactive_gen" not in failing
    assert "eval_utils" not in failing and "ptq" not in failing
    assert failing["quant_utils"] == "fast_hadamard_transform"


def test_a_module_reached_through_directories_without_init_from_the_root_fails_there(tmp_path):
    """hart (round 35): `hart/`, `hart/modules/` and `hart/modules/networks/` have no `__init__.py`;
    `sample.py` at the root imports `hart.modules.networks.basic_hart`, which imports the compiled
    `hart_backend.fused_kernels` (built by `hart/kernels/setup.py`)."""
    write(
        tmp_path / "hart" / "kernels" / "setup.py",
        'from setuptools import setup\nsetup(ext_modules=[CUDAExtension(name="hart_backend.fused_kernels")])\n',
    )
    write(
        tmp_path / "hart" / "modules" / "networks" / "basic_hart.py",
        "import torch\nimport hart_backend.fused_kernels\n",
    )
    write(
        tmp_path / "hart" / "modules" / "models" / "transformer" / "__init__.py",
        "from hart.modules.networks.basic_hart import Block\n",
    )
    sample = write(
        tmp_path / "sample.py",
        "import torch\nfrom hart.modules.models.transformer import Block\n\nx = torch.ones(1).cuda()\n",
    )
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    failing = dict(failing_modules(PythonFiles.read(files, tmp_path), ("hart_backend.fused_kernels",)))
    assert failing["hart.modules.networks.basic_hart"] == failing["sample"] == "hart_backend.fused_kernels"
    assert failing["hart.modules.models.transformer"] == "hart_backend.fused_kernels"
    cli("migrate", tmp_path)
    assert "NPU606 `hart.modules.models.transformer` cannot be imported on an NPU host" in sample.read_text()


def test_an_import_in_a_module_level_try_that_raises_again_fails_and_packages_below_a_plain_directory(tmp_path):
    """Mask2Former (round 37): `ops/functions/ms_deform_attn_func.py` imports the compiled
    `MultiScaleDeformableAttention` in a `try` whose handler raises again (no fallback); `ops/` has no
    `__init__.py`, and `pixel_decoder/msdeformattn.py` imports `.ops.modules`, a package in it."""
    write(
        tmp_path / "mask2former" / "modeling" / "pixel_decoder" / "ops" / "setup.py",
        'from setuptools import setup\nsetup(ext_modules=[CUDAExtension("MultiScaleDeformableAttention", [])])\n',
    )
    write(tmp_path / "mask2former" / "__init__.py", "from . import modeling\n")
    write(tmp_path / "mask2former" / "modeling" / "__init__.py", "from .pixel_decoder.msdeformattn import Decoder\n")
    write(tmp_path / "mask2former" / "modeling" / "pixel_decoder" / "__init__.py", "")
    ops = tmp_path / "mask2former" / "modeling" / "pixel_decoder" / "ops"
    write(
        ops / "functions" / "ms_deform_attn_func.py",
        "try:\n    import MultiScaleDeformableAttention as MSDA\nexcept ModuleNotFoundError as e:\n"
        '    raise ModuleNotFoundError("compile the op") from e\n',
    )
    write(ops / "functions" / "__init__.py", "from .ms_deform_attn_func import MSDA\n")
    write(ops / "modules" / "__init__.py", "from .ms_deform_attn import MSDeformAttn\n")
    write(ops / "modules" / "ms_deform_attn.py", "from ..functions import MSDA\n")
    write(
        tmp_path / "mask2former" / "modeling" / "pixel_decoder" / "msdeformattn.py",
        "import torch\nfrom .ops.modules import MSDeformAttn\n",
    )
    write(tmp_path / "train_net.py", "import torch\nfrom mask2former import modeling\n")
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    failing = dict(failing_modules(PythonFiles.read(files, tmp_path), ("MultiScaleDeformableAttention",)))
    assert failing["mask2former.modeling.pixel_decoder.msdeformattn"] == "MultiScaleDeformableAttention"
    assert failing["train_net"] == failing["mask2former"] == "MultiScaleDeformableAttention"


def test_modules_below_an_extension_build_are_named_from_the_project_root_through_packages(tmp_path):
    """LivePortrait (round 56) vendors XPose, whose Deformable DETR `ops/setup.py` only builds
    `MultiScaleDeformableAttention` (no `install_requires`): the files below it keep the project's facts (it
    is no project of its own), and `ops/modules/ms_deform_attn.py` imports its sibling by the path from the
    project root through packages (`src/utils/`, `models/`) and plain directories (`src/`, `ops/`)."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    ops = tmp_path / "src" / "utils" / "XPose" / "models" / "ops"
    write(ops / "setup.py", 'setup(name="MSDA", ext_modules=[CUDAExtension("MultiScaleDeformableAttention", [])])\n')
    write(tmp_path / "src" / "utils" / "__init__.py", "")
    write(tmp_path / "src" / "utils" / "XPose" / "models" / "__init__.py", "")
    write(ops / "functions" / "__init__.py", "from .ms_deform_attn_func import MSDeformAttnFunction\n")
    write(ops / "functions" / "ms_deform_attn_func.py", "import torch\nimport MultiScaleDeformableAttention as MSDA\n")
    modules_init = write(ops / "modules" / "__init__.py", "from .ms_deform_attn import MSDeformAttn\n")
    attn = write(
        ops / "modules" / "ms_deform_attn.py",
        "import torch\nfrom src.utils.XPose.models.ops.functions.ms_deform_attn_func import MSDeformAttnFunction\n",
    )
    cli("migrate", "--allow-dirty", tmp_path)
    assert "NPU606" in attn.read_text() and "NPU606" in modules_init.read_text()
    assert "`MultiScaleDeformableAttention`" in attn.read_text()


def test_a_fallback_import_that_fails_too_fails_the_module_and_a_packages_setup_py_is_never_imported(tmp_path):
    """stable-dreamfusion (round 57): `freq.py` tries the prebuilt `_freqencoder` (a CUDAExtension of its
    setup.py) and falls back to `.backend`, which compiles CUDA at import: on an NPU host both fail, so the
    module and its package fail, marked at the handler's import. The package's `setup.py` is a build script,
    not a module anyone imports: no marker there."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    package = tmp_path / "freqencoder"
    write(package / "setup.py", 'setup(name="freq", ext_modules=[CUDAExtension("_freqencoder", ["f.cu"])])\n')
    write(
        package / "backend.py",
        'from torch.utils.cpp_extension import load\n\n_backend = load(name="_f", sources=["f.cu"])\n',
    )
    freq = write(
        package / "freq.py",
        "import torch\n\ntry:\n    import _freqencoder as _backend\nexcept ImportError:\n    from .backend import _backend\n",
    )
    init = write(package / "__init__.py", "from .freq import FreqEncoder\n")
    optional = write(
        tmp_path / "optional.py",
        "try:\n    import _freqencoder as _backend\nexcept ImportError:\n    import numpy as _backend\n",
    )
    cli("migrate", "--allow-dirty", tmp_path)
    assert "NPU606 `.backend` (`freqencoder.backend`)" in freq.read_text()
    assert "NPU606" in init.read_text()
    assert "NPU606" not in (package / "setup.py").read_text() and "NPU606" not in optional.read_text()


def test_an_import_in_a_function_of_a_module_whose_package_fails_is_marked(tmp_path):
    """DINO (round 59): `build_model_main()` imports `models.registry`, plain Python, whose package's
    `__init__` reaches the compiled `MultiScaleDeformableAttention`: the function fails when it runs."""
    write(
        tmp_path / "models" / "ops" / "setup.py",
        'setup(ext_modules=[CUDAExtension("MultiScaleDeformableAttention", [])])\n',
    )
    write(tmp_path / "models" / "__init__.py", "from .deformable import build\n")
    write(tmp_path / "models" / "deformable.py", "import torch\nimport MultiScaleDeformableAttention as MSDA\n")
    write(tmp_path / "models" / "registry.py", "MODULE_BUILD_FUNCS = {}\n")
    main = write(
        tmp_path / "main.py",
        "import torch\n\n\ndef build_model_main(args):\n    from models.registry import MODULE_BUILD_FUNCS\n"
        "    return MODULE_BUILD_FUNCS[args.name](args).cuda()\n",
    )
    cli("migrate", tmp_path)
    text = main.read_text()
    assert "NPU606 `models.registry` cannot be imported on an NPU host (its package `models` runs first)" in text
    assert "`MultiScaleDeformableAttention`" in text and ".npu()" in text
