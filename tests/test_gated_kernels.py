"""Triton-kernel modules the project imports only behind a kept ``.is_cuda`` test (a project fact,
cuda2npu/analysis/gated_kernels.py): NPU603 does not mark their kernels (whisper's ``triton_ops.py``,
imported under ``if x.is_cuda:`` and by ``dtw_cuda``, called only there and by a ``requires_cuda``
test). The single-file behaviour is the golden ``custom_kernels/triton_kernels_r8_behind_cuda_gates``."""

from __future__ import annotations

import os

from cli_helpers import cli, write

from cuda2npu.analysis.gated_kernels import (
    extension_definitions,
    extension_functions,
    kernels_behind_cuda_gates,
    triton_functions,
)
from cuda2npu.analysis.python_files import PythonFiles
from cuda2npu.core.options import Options, ProjectFacts

KERNELS = """\
import triton
import triton.language as tl


@triton.jit
def _scan_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


def scan_cuda(x):
    _scan_kernel[(1,)](x, x.numel(), BLOCK=128)
    return x
"""
ALIGN = """\
import torch


def smooth(x):
    out = None
    if x.is_cuda:
        try:
            from .fast_ops import scan_cuda

            out = scan_cuda(x)
        except RuntimeError:
            pass
    if out is None:
        out = x.cumsum(-1)
    return out


def path_cuda(x):
    from .fast_ops import scan_cuda

    return scan_cuda(x)


def path(x):
    if x.is_cuda:
        return path_cuda(x)
    return x.cumsum(-1)
"""
TEST = """\
import pytest
import torch

from pkg.align import path_cuda


@pytest.mark.requires_cuda
def test_path_cuda():
    assert path_cuda(torch.ones(3).cuda()) is not None
"""


def _facts(tmp_path, files: dict[str, str]) -> tuple[str, ...]:
    texts = {tmp_path / name: text.encode() for name, text in files.items()}
    return kernels_behind_cuda_gates(PythonFiles(texts))


def _gated(tmp_path, name: str) -> tuple[str, ...]:
    return (os.path.join(os.path.realpath(tmp_path), *name.split("/")),)


def test_imports_behind_cuda_tests_and_their_callers(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/fast_ops.py": KERNELS, "pkg/align.py": ALIGN, "tests/test_align.py": TEST}
    assert _facts(tmp_path, files) == _gated(tmp_path, "pkg/fast_ops.py")


def test_near_misses(tmp_path):
    base = {"pkg/__init__.py": "", "pkg/fast_ops.py": KERNELS}
    # a launcher named without a cuda word: the device rules rewrite the test to `.is_npu`
    renamed = ALIGN.replace("scan_cuda", "scan_fast").replace("path_cuda", "path_fast")
    kernels = KERNELS.replace("scan_cuda", "scan_fast")
    assert _facts(tmp_path, {**base, "pkg/fast_ops.py": kernels, "pkg/align.py": renamed}) == ()
    # a caller of `path_cuda` off the gate
    assert _facts(tmp_path, {**base, "pkg/align.py": ALIGN + "\n\nresult = path_cuda\n"}) == ()
    assert (
        _facts(tmp_path, {**base, "pkg/align.py": ALIGN, "run.py": "from pkg.align import path_cuda\npath_cuda(1)\n"})
        == ()
    )
    # a module-level import, a script, a module nothing imports
    assert _facts(tmp_path, {**base, "pkg/align.py": "from pkg.fast_ops import scan_cuda\n" + ALIGN}) == ()
    # ... also relative, multi-line, or in another file than the gated ones (found without a tree)
    top = "from .fast_ops import (\n    scan_cuda,\n)\n"
    assert _facts(tmp_path, {**base, "pkg/align.py": ALIGN, "pkg/other.py": top}) == ()
    assert _facts(tmp_path, {**base, "pkg/align.py": ALIGN, "pkg/other.py": "import pkg.fast_ops\n"}) == ()
    script = KERNELS + '\n\nif __name__ == "__main__":\n    scan_cuda(None)\n'
    assert _facts(tmp_path, {**base, "pkg/fast_ops.py": script, "pkg/align.py": ALIGN}) == ()
    assert _facts(tmp_path, base) == ()


def test_each_file_gets_its_own_flag(tmp_path):
    ops = tmp_path / "pkg" / "fast_ops.py"
    other = tmp_path / "other" / "fast_ops.py"
    for path in (ops, other):
        path.parent.mkdir(parents=True)
        path.write_text(KERNELS)
    options = Options(project=ProjectFacts(kernels_behind_cuda_gates=(os.path.realpath(ops),)))
    assert options.for_path(ops).file.cuda_gated_kernels
    assert not options.for_path(other).file.cuda_gated_kernels
    assert options.for_path(ops).project.kernels_behind_cuda_gates == ()  # the cache key holds the file's share only


def test_check_leaves_the_gated_kernels_unreported(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/fast_ops.py": KERNELS, "pkg/align.py": ALIGN, "tests/test_align.py": TEST}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "setup.py").write_text("")
    assert "NPU603" not in cli("check", tmp_path / "pkg" / "fast_ops.py", "--select", "NPU603").output
    (tmp_path / "pkg" / "align.py").write_text(ALIGN + "\n\nresult = path_cuda\n")
    assert "NPU603" in cli("check", tmp_path / "pkg" / "fast_ops.py", "--select", "NPU603").output


ROUTES = """\
import triton
import triton.language as tl


@triton.jit
def _gather_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


@triton.autotune(configs=[], key=["n"])
@triton.jit
def _scatter_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


def gather_rows(x):
    _gather_kernel[(1,)](x, x.numel(), BLOCK=128)
    return x


def check_rows(x):
    assert x.ndim == 2
"""
ROUTE_USER = """\
def route(x):
    if x.is_cuda:
        from pkg.routes import gather_rows

        return gather_rows(x)
    return x.index_select(0, x.new_zeros(1, dtype=int))
"""


def test_triton_functions_name_kernels_and_launchers(tmp_path):
    """r9 (slime's deterministic_route_kernels.py): the kernels and the functions launching one, by
    qualified name; not the module's other helpers; a file outside a package under its own name."""
    texts = {tmp_path / "pkg" / "__init__.py": b"", tmp_path / "pkg" / "routes.py": ROUTES.encode()}
    assert triton_functions(PythonFiles(texts)) == (
        "pkg.routes._gather_kernel",
        "pkg.routes._scatter_kernel",
        "pkg.routes.gather_rows",
    )
    assert triton_functions(PythonFiles({tmp_path / "routes.py": ROUTES.encode()}))[-1] == "routes.gather_rows"
    assert triton_functions(PythonFiles({tmp_path / "plain.py": b"def f(x):\n    return x\n"})) == ()


def test_a_project_kernel_keeps_its_cuda_test(tmp_path):
    """The fact read by the device rules: `.is_cuda` over a call of the project's Triton launcher stays
    (the torch path runs on the NPU); without the kernel module in the project it is rewritten."""
    for name, text in {"pkg/__init__.py": "", "pkg/routes.py": ROUTES, "pkg/use.py": ROUTE_USER}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "setup.py").write_text("")
    assert "is_npu" not in cli("migrate", tmp_path / "pkg" / "use.py", "--diff", "--allow-dirty").output
    (tmp_path / "pkg" / "routes.py").unlink()
    assert "is_npu" in cli("migrate", tmp_path / "pkg" / "use.py", "--diff", "--allow-dirty").output


DETECTRON_NMS = """
import torch


def nms_rotated(boxes, scores, iou_threshold):
    return torch.ops.detectron2.nms_rotated(boxes, scores, iou_threshold)


def batched_nms_rotated(boxes, scores, idxs, iou_threshold):
    return nms_rotated(boxes + idxs[:, None], scores, iou_threshold)


def plain(boxes):
    return torch.ops.aten.relu(boxes)
"""

DEFORM = """
from torch.autograd import Function

try:
    from detectron2 import _C
except ImportError:
    _C = None


class _DeformConv(Function):
    @staticmethod
    def forward(ctx, x, offset):
        return _C.deform_conv_forward(x, offset)


deform_conv = _DeformConv.apply


class DeformConv:
    def forward(self, x, offset):
        return deform_conv(x, offset)
"""


def test_extension_functions_follow_callers_classes_aliases_and_reexports(tmp_path):
    """detectron2's rotated NMS and deformable conv (issue 32, round 12): the project functions and
    classes that reach its compiled operators, by qualified name and under the names a package's
    __init__ re-exports them."""
    texts = {
        tmp_path / "detectron2" / "__init__.py": b"",
        tmp_path / "detectron2" / "layers" / "__init__.py": b"from .nms import batched_nms_rotated\n",
        tmp_path / "detectron2" / "layers" / "nms.py": DETECTRON_NMS.encode(),
        tmp_path / "detectron2" / "layers" / "deform_conv.py": DEFORM.encode(),
    }
    assert extension_functions(PythonFiles(texts), ("detectron2._C",)) == (
        "detectron2.layers.batched_nms_rotated",
        "detectron2.layers.deform_conv.DeformConv",
        "detectron2.layers.deform_conv.DeformConv.forward",  # the methods reaching them (`self.m(...)` uses)
        "detectron2.layers.deform_conv._DeformConv",
        "detectron2.layers.deform_conv._DeformConv.forward",
        "detectron2.layers.deform_conv.deform_conv",
        "detectron2.layers.nms.batched_nms_rotated",
        "detectron2.layers.nms.nms_rotated",
    )


def test_extension_definitions_name_each_files_own(tmp_path):
    """pytorch3d's `graph_conv.py` calls `gather_scatter = GatherScatter.apply` under `verts.is_cuda` (round
    60): the file's own names reaching the operators, by real path, for its calls that name no module."""
    deform = tmp_path / "detectron2" / "layers" / "deform_conv.py"
    texts = {
        tmp_path / "detectron2" / "__init__.py": b"",
        tmp_path / "detectron2" / "layers" / "__init__.py": b"from .deform_conv import deform_conv\n",
        deform: DEFORM.encode(),
    }
    files = PythonFiles(texts)
    functions = extension_functions(files, ("detectron2._C",))
    assert extension_definitions(files, functions) == (
        (str(tmp_path / "detectron2" / "layers" / "__init__.py"), "deform_conv"),  # re-exported there
        (str(deform), "DeformConv"),
        (str(deform), "_DeformConv"),
        (str(deform), "deform_conv"),
    )


def test_extension_functions_follow_a_dependencys_kernel_modules(tmp_path):
    """GFPGAN's architectures (round 61) use basicsr's CUDA-only ops, by a call and by subclassing its StyleGAN2
    generator: they reach compiled operators as the project's own would; its clean architecture does not."""
    texts = {
        tmp_path / "gfpgan" / "__init__.py": b"",
        tmp_path / "gfpgan" / "arch.py": (
            b"from basicsr.archs.stylegan2_arch import StyleGAN2Generator\n"
            b"from basicsr.archs.stylegan2_clean_arch import StyleGAN2GeneratorClean\n"
            b"from basicsr.ops.fused_act import FusedLeakyReLU\n\n\n"
            b"class GeneratorSFT(StyleGAN2Generator):\n    pass\n\n\n"
            b"class ConvUpLayer:\n    def __init__(self, channels):\n        self.act = FusedLeakyReLU(channels)\n\n\n"
            b"class CleanSFT(StyleGAN2GeneratorClean):\n    pass\n"
        ),
    }
    assert extension_functions(PythonFiles(texts)) == (
        "gfpgan.arch.ConvUpLayer",
        "gfpgan.arch.ConvUpLayer.__init__",
        "gfpgan.arch.GeneratorSFT",
    )


def test_a_skip_guard_over_a_dependencys_kernels_stays_cuda(tmp_path):
    """GFPGAN's `if torch.cuda.is_available():` over a test building its architecture on basicsr's ops stays
    CUDA's (on an NPU host the test skips, as before); over its clean architecture it is migrated."""
    write(tmp_path / "gfpgan" / "__init__.py", "")
    write(
        tmp_path / "gfpgan" / "arch.py",
        "from basicsr.archs.stylegan2_arch import StyleGAN2Generator\n\n\n"
        "class GeneratorSFT(StyleGAN2Generator):\n    pass\n\n\nclass Clean:\n    pass\n",
    )
    test = write(
        tmp_path / "tests" / "test_arch.py",
        "import torch\n\nfrom gfpgan.arch import Clean, GeneratorSFT\n\n\ndef test_sft():\n"
        "    if torch.cuda.is_available():\n        net = GeneratorSFT().cuda()\n\n\ndef test_clean():\n"
        "    if torch.cuda.is_available():\n        net = Clean().cuda()\n",
    )
    cli("migrate", tmp_path)
    migrated = test.read_text()
    assert "def test_sft():\n    if torch.cuda.is_available():\n        net = GeneratorSFT().cuda()" in migrated
    assert "def test_clean():\n    if torch.npu.is_available():\n        net = Clean().npu()" in migrated


def test_a_device_choice_in_front_of_extension_ops_stays_cuda(tmp_path):
    """pytorch3d's tests and tutorials (round 60): a CPU fallback in front of the project's compiled operators
    stays, and so does a kernel choice in the file defining them; a device choice for the rest is migrated."""
    write(tmp_path / "pkg" / "__init__.py", "")
    write(
        tmp_path / "pkg" / "layers.py",
        "from torch.autograd import Function\n\nfrom pkg import _C\n" + DEFORM[DEFORM.index("\n\nclass _Deform") :],
    )
    write(
        tmp_path / "pkg" / "uses.py",
        "import torch\n\nfrom pkg.layers import deform_conv\n\n\n"
        "def run(x):\n    device = 'cuda:0' if torch.cuda.is_available() else 'cpu'\n"
        "    return deform_conv(x.to(device), x.to(device))\n\n\n"
        "def train(model):\n    device = 'cuda:0' if torch.cuda.is_available() else 'cpu'\n    return model.to(device)\n",
    )
    write(
        tmp_path / "setup.py",
        "import torch\nfrom setuptools import setup\nfrom torch.utils.cpp_extension import CppExtension, CUDAExtension\n\n"
        "extension = CppExtension\nif torch.cuda.is_available():\n    extension = CUDAExtension\n"
        "setup(ext_modules=[extension('pkg._C', ['csrc/ops.cpp'])])\n",
    )
    cli("migrate", tmp_path)
    uses = (tmp_path / "pkg" / "uses.py").read_text()
    assert "device = 'cuda:0' if torch.cuda.is_available() else 'cpu'\n    return deform_conv" in uses
    assert "device = 'npu:0' if torch.npu.is_available() else 'cpu'\n    return model.to" in uses


def test_a_skip_guard_over_a_test_of_extension_ops_stays_cuda(tmp_path):
    write(tmp_path / "detectron2" / "__init__.py", "")
    write(tmp_path / "detectron2" / "layers" / "__init__.py", "from .nms import batched_nms_rotated\n")
    write(tmp_path / "detectron2" / "layers" / "nms.py", DETECTRON_NMS)
    test = write(
        tmp_path / "tests" / "test_nms.py",
        "import unittest\n\nimport torch\n\nfrom detectron2.layers import batched_nms_rotated\n\n\n"
        "class TestNMS(unittest.TestCase):\n    def test_nms_cpu(self, device='cpu'):\n"
        "        boxes = torch.rand(4, 5, device=device)\n"
        "        batched_nms_rotated(boxes, torch.rand(4, device=device), torch.zeros(4, device=device), 0.5)\n\n"
        "    @unittest.skipIf(not torch.cuda.is_available(), 'CUDA not available')\n"
        "    def test_nms_cuda(self):\n        self.test_nms_cpu(device='cuda')\n",
    )
    cli("migrate", tmp_path)
    text = test.read_text()
    assert "skipIf(not torch.cuda.is_available()" in text and "device='cuda'" in text


def test_a_device_loop_over_extension_ops_stays_cuda(tmp_path):
    """detectron2's (and Ask-Anything's six copies') `for device in ["cpu"] + (["cuda"] if
    torch.cuda.is_available() else [])` over its compiled operators: the CUDA device stays CUDA's
    (the ops have CPU and CUDA kernels only); a loop calling plain torch is migrated (round 13)."""
    write(tmp_path / "detectron2" / "__init__.py", "")
    write(tmp_path / "detectron2" / "layers" / "__init__.py", "from .nms import batched_nms_rotated\n")
    write(tmp_path / "detectron2" / "layers" / "nms.py", DETECTRON_NMS)
    test = write(
        tmp_path / "tests" / "test_loops.py",
        "import torch\n\nfrom detectron2.layers import batched_nms_rotated\n\n\n"
        "def test_nms_devices():\n"
        '    for device in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):\n'
        "        boxes = torch.rand(4, 5, device=device)\n"
        "        batched_nms_rotated(boxes, torch.rand(4, device=device), torch.zeros(4, device=device), 0.5)\n\n\n"
        "def test_matmul_devices():\n"
        '    for device in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):\n'
        "        assert torch.ones(2, 2, device=device).sum() == 4\n",
    )
    cli("migrate", tmp_path)
    first, second = test.read_text().split("def test_matmul_devices")
    assert '(["cuda"] if torch.cuda.is_available() else [])' in first
    assert '(["npu"] if torch.npu.is_available() else [])' in second


def test_extension_functions_follow_callers_in_other_files(tmp_path):
    """detectron2's `structures.rotated_boxes.pairwise_iou` calls `layers.rotated_boxes.pairwise_iou_rotated`
    (its `_C` operator) through an import: it reaches the operator too, and so does its caller in its
    own file; a function of another file that does not call it is not one (round 13)."""
    texts = {
        tmp_path / "detectron2" / "__init__.py": b"",
        tmp_path / "detectron2" / "layers" / "__init__.py": b"",
        tmp_path / "detectron2" / "layers" / "rotated_boxes.py": (
            b"from detectron2 import _C\n\n\ndef pairwise_iou_rotated(a, b):\n    return _C.box_iou_rotated(a, b)\n"
        ),
        tmp_path / "detectron2" / "structures" / "__init__.py": b"",
        tmp_path / "detectron2" / "structures" / "rotated_boxes.py": (
            b"from detectron2.layers.rotated_boxes import pairwise_iou_rotated\n\n\n"
            b"def pairwise_iou(boxes1, boxes2):\n    return pairwise_iou_rotated(boxes1.tensor, boxes2.tensor)\n\n\n"
            b"def matched_iou(boxes1, boxes2):\n    return pairwise_iou(boxes1, boxes2).diag()\n\n\n"
            b"def area(boxes):\n    return boxes.tensor[:, 2] * boxes.tensor[:, 3]\n"
        ),
    }
    assert extension_functions(PythonFiles(texts), ("detectron2._C",)) == (
        "detectron2.layers.rotated_boxes.pairwise_iou_rotated",
        "detectron2.structures.rotated_boxes.matched_iou",
        "detectron2.structures.rotated_boxes.pairwise_iou",
    )


GRAPHS = """
import torch


def make_inference_graphed_callable(fn, sample_args):
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(*sample_args)
    return lambda *args: (graph.replay(), out)[1]
"""
BLOCK = """
import torch

from pkg.cuda_graphs import make_inference_graphed_callable


class Attention(torch.nn.Module):
    def _fast_rotary(self, q):
        return make_inference_graphed_callable(torch.neg, (q,))(q)

    def forward(self, q):
        if q.size(1) == 1 and q.device.type == "cuda":
            return self._fast_rotary(q)
        return torch.neg(q)
"""


def test_r18_a_cuda_graph_fast_path_behind_a_device_test_stays_cudas(tmp_path):
    """petals: `device.type == "cuda"` opens a fast path whose method captures a CUDA graph through a
    function of another module: the test stays CUDA's (reviewed), as for a Triton kernel; the graph
    capturer and the method calling it are project facts."""
    write(tmp_path / "pkg" / "__init__.py", "")
    graphs = write(tmp_path / "pkg" / "cuda_graphs.py", GRAPHS)
    block = write(tmp_path / "pkg" / "block.py", BLOCK)
    found = extension_functions(PythonFiles.read([graphs, block, tmp_path / "pkg" / "__init__.py"]))
    assert "pkg.cuda_graphs.make_inference_graphed_callable" in found
    assert "pkg.block.Attention._fast_rotary" in found
    cli("migrate", tmp_path)
    text = block.read_text()
    assert 'q.device.type == "cuda"' in text and "NPU104 review" in text


def test_r22_a_function_calling_a_launcher_launches_too(tmp_path):
    """AQLM: `triton_matmul` calls `aqlm_gemm_stupid`, which launches `_aqlm_gemv_simple[grid](...)`."""
    kernel = write(
        tmp_path / "triton_kernel.py",
        """
        import triton


        @triton.jit
        def _gemv(x):
            pass


        def gemm(x):
            _gemv[(1,)](x)


        def triton_matmul(x):
            return gemm(x)


        def unrelated(x):
            return x
        """,
    )
    found = triton_functions(PythonFiles.read([kernel]))
    assert found == ("triton_kernel._gemv", "triton_kernel.gemm", "triton_kernel.triton_matmul")


LAZY_OPS = """\
import torch


def _make_lazy_cuda_func(name):
    def call_cuda(*args, **kwargs):
        from ._backend import _C

        return getattr(torch.ops.gsplat, name)(*args, **kwargs)

    return call_cuda


def spherical_harmonics(degree, dirs, coeffs):
    return _make_lazy_cuda_func("spherical_harmonics")(degree, dirs, coeffs)


def lookup(name):
    return getattr(torch.ops.aten, name)  # torch's own namespace: not an extension
"""


def test_an_operator_read_by_name_from_a_custom_namespace_is_an_extension_call(tmp_path):
    """gsplat (round 58) reaches its compiled operators through `getattr(torch.ops.gsplat, name)` in a lazy
    wrapper factory, which its public functions call: both are extension functions, so a skip guard over a
    test calling them stays CUDA's; `torch.ops.aten` is torch's own."""
    texts = {tmp_path / "gsplat" / "__init__.py": b"", tmp_path / "gsplat" / "wrapper.py": LAZY_OPS.encode()}
    assert extension_functions(PythonFiles(texts)) == (
        "gsplat.wrapper._make_lazy_cuda_func",
        "gsplat.wrapper.spherical_harmonics",
    )
