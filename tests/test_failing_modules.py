"""The project's modules that fail at import on an NPU host, also through other modules (a project fact,
cuda2npu/analysis/failing_modules.py): VideoMamba's models import its vendored ``mamba_ssm``, whose
``__init__`` imports a module importing the compiled ``selective_scan_cuda``; each file importing one
such module at module level gets NPU606 at that import."""

from __future__ import annotations

from cli_helpers import cli, write

from cuda2npu.analysis.failing_modules import failing_modules
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
