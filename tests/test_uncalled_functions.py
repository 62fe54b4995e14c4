"""A script's functions nothing calls stay as written (analysis/uncalled_functions.py, never_run):
MedicalGPT's `check_and_optimize_memory`, round 16."""

from __future__ import annotations

from cli_helpers import cli, write

from cuda2npu.analysis.python_files import PythonFiles
from cuda2npu.analysis.uncalled_functions import SearchedTexts, uncalled_functions

SCRIPT = """
import torch


def check_and_optimize_memory():
    torch.cuda.empty_cache()


def used_helper():
    torch.cuda.empty_cache()


def called_elsewhere():
    torch.cuda.synchronize()


@torch.no_grad()
def decorated():
    torch.cuda.empty_cache()


def main():
    used_helper()


if __name__ == "__main__":
    main()
"""


def test_the_fact_names_only_undecorated_script_functions_nobody_names(tmp_path):
    script = write(tmp_path / "sft.py", SCRIPT)
    write(tmp_path / "notebook.ipynb", '{"cells": [{"source": ["from sft import called_elsewhere"]}]}')
    write(tmp_path / "lib.py", "def never_called():\n    pass\n")  # not a script: a library's API
    files = PythonFiles.read([script, tmp_path / "lib.py"])
    found = uncalled_functions(files, SearchedTexts(files, [tmp_path / "notebook.ipynb"]))
    assert [name for _, name in found] == ["check_and_optimize_memory"]


def test_a_script_reaching_its_functions_by_name_has_none(tmp_path):
    script = write(tmp_path / "cli.py", SCRIPT.replace("    main()", "    fire.Fire()"))
    files = PythonFiles.read([script])
    assert uncalled_functions(files, SearchedTexts(files, [])) == ()


def test_migrate_leaves_the_uncalled_function_as_written(tmp_path):
    script = write(tmp_path / "sft.py", SCRIPT)
    cli("migrate", tmp_path)
    text = script.read_text()
    assert "def check_and_optimize_memory():\n    torch.cuda.empty_cache()" in text
    assert "def used_helper():\n    torch.npu.empty_cache()" in text
    assert "def called_elsewhere():\n    torch.cuda.synchronize()" in text  # here no notebook names it
    assert "def decorated():\n    torch.npu.empty_cache()" in text


def test_a_test_function_of_a_script_running_pytest_is_called_by_pytest(tmp_path):
    """lightllm's unit tests end in `pytest.main()` (round 28): pytest calls `test_*` by name."""
    test = write(
        tmp_path / "test_sampling.py",
        "import pytest\nimport torch\n\n\ndef test_sampling():\n    torch.cuda.synchronize()\n\n\n"
        'if __name__ == "__main__":\n    pytest.main()\n',
    )
    files = PythonFiles.read([test])
    assert uncalled_functions(files, SearchedTexts(files, [])) == ()
    cli("migrate", tmp_path)
    assert "torch.npu.synchronize()" in test.read_text()


MISC = """
import torch


def all_gather(data):
    return [torch.zeros(1, device="cuda")]


def reduce_dict(values):
    return all_gather(values)


def init_distributed_mode(args):
    torch.cuda.set_device(args.local_rank)
    init_distributed_mode.calls = getattr(init_distributed_mode, "calls", 0) + 1


def nested_tensor(x):
    return x.cuda()


@torch.no_grad()
def decorated(x):
    return x.cuda()


def __getattr__(name):
    raise AttributeError(name)
"""


def test_an_applications_module_functions_nothing_calls_also_through_other_uncalled_ones(tmp_path):
    """LivePortrait (round 57) vendors DETR's `util/misc.py` into an application (scripts, no package
    metadata): `init_distributed_mode` (mentioned in its own body only) and `reduce_dict` nothing calls, and
    `all_gather` only `reduce_dict` does. Not in an installable project, whose functions others may import."""
    misc = write(tmp_path / "src" / "utils" / "misc.py", MISC)
    write(tmp_path / "src" / "utils" / "__init__.py", "")
    script = write(
        tmp_path / "inference.py",
        'from src.utils.misc import nested_tensor\n\nif __name__ == "__main__":\n    nested_tensor(1)\n',
    )
    files = PythonFiles.read([misc, script, tmp_path / "src" / "utils" / "__init__.py"], tmp_path)
    found = uncalled_functions(files, SearchedTexts(files, []))
    assert sorted(name for _, name in found) == ["all_gather", "init_distributed_mode", "reduce_dict"]
    cli("migrate", tmp_path)
    text = misc.read_text()
    assert 'device="cuda"' in text and "torch.cuda.set_device" in text and "return x.npu()" in text
    write(tmp_path / "setup.py", "from setuptools import setup\nsetup(name='app')\n")
    assert uncalled_functions(files, SearchedTexts(files, [])) == ()


def test_a_library_modules_attribute_is_no_call_of_a_function_so_named(tmp_path):
    """imaginaire's vendored CLIP `load` (round 64): `torch.load(...)` elsewhere does not call it; `clip.load(...)`
    would."""
    script = write(
        tmp_path / "caption.py",
        "import torch\n\n\ndef load(name):\n    return torch.load(name).cuda()\n\n\n"
        "def main():\n    return torch.load('x.pt')\n\n\nif __name__ == '__main__':\n    main()\n",
    )
    files = PythonFiles.read([script])
    assert [name for _, name in uncalled_functions(files, SearchedTexts(files, []))] == ["load"]
    user = write(tmp_path / "user.py", "import caption as clip\n\nclip.load('ViT-B/32')\n")
    files = PythonFiles.read([script, user])
    assert uncalled_functions(files, SearchedTexts(files, [])) == ()
