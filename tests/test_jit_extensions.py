"""Modules compiling CUDA when imported (cuda2npu/analysis/jit_extensions.py): a seed of the project fact
``failing_modules``. Only a statement of the module's own body counts: a build in a function, or in a
``try`` that falls back, runs later or not at all."""

from __future__ import annotations

from cuda2npu.analysis.jit_extensions import jit_cuda_modules
from cuda2npu.analysis.python_files import PythonFiles

SHAPES = {
    "from_import.py": 'from torch.utils.cpp_extension import load\nEXT = load(name="e", sources=["k.cu"])\n',
    "aliased.py": 'import torch.utils.cpp_extension as cx\ncx.load_inline("e", cpp_sources="", cuda_sources="")\n',
    "module_attr.py": 'from torch.utils import cpp_extension\nEXT = cpp_extension.load("e", ["a.cu"], extra_cuda_cflags=["-O3"])\n',
    # `load` compiles CUDA only for `.cu` sources (`with_cuda=None`): nvcc flags beside C++ ones build none (YOLOX)
    "cpp_with_nvcc_flags.py": 'from torch.utils.cpp_extension import load\nEXT = load("e", ["a.cpp"], extra_cuda_cflags=["-O3"])\n',
    "dotted.py": 'import torch\nEXT = torch.utils.cpp_extension.load("e", ["k.cu"])\n',
    "cpp_only.py": 'from torch.utils.cpp_extension import load\nEXT = load(name="e", sources=["k.cpp"])\n',
    "in_function.py": 'from torch.utils.cpp_extension import load\n\ndef build():\n    return load("e", ["k.cu"])\n',
    "in_try.py": 'from torch.utils.cpp_extension import load\ntry:\n    EXT = load("e", ["k.cu"])\nexcept Exception:\n    EXT = None\n',
    "other_load.py": 'from json import load\nEXT = load(open("k.cu"))  # cpp_extension\n',
}


def test_only_a_module_level_cuda_build_of_cpp_extension_counts(tmp_path):
    texts = {tmp_path / name: text.encode() for name, text in SHAPES.items()}
    found = {path.name for path in jit_cuda_modules(PythonFiles(texts))}
    assert found == {"from_import.py", "aliased.py", "module_attr.py", "dotted.py"}
