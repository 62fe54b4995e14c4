"""The hosts a validation side runs on: a strict emulated NPU host for the migrated tree, a strict
emulated CUDA host for the original.

On an Ascend machine the CUDA-only packages cannot be installed, whatever this machine has: the
migrated side's imports of them fail here as they would there (:class:`Unavailable`, from the
CUDA-only table of NPU606, the project's declared ``CUDAExtension`` modules, ``*_cuda`` extension
names and NVIDIA's apex), unless the tree itself holds a module of that name. ``torch_npu`` and the
``npu`` device exist only once something imports ``torch_npu`` (``autoload=False``, what
``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` or TorchNPU < 2.5.1 give), or from ``import torch`` on
(``autoload=True``, docs/reference/torch_npu.md §4.1). The CPU build of torch already answers
``torch.cuda.is_available()`` with False, fails ``.cuda()`` and has no NCCL.

The original side mirrors it: CUDA through the emulation (or real CUDA), the CPU stand-ins of
flash-attn, apex and TransformerEngine where those are missing, and no ``torch_npu``.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from pathlib import Path
from typing import Callable

from cuda2npu.analysis.cuda_only_modules import APEX_EXTENSIONS, APEX_ROOTS, cuda_only_module, declared_extensions

APEX_NOTE = "NVIDIA apex is built for CUDA (Ascend's apex fork is another package: validate it on an NPU host)"
TORCH_NPU_NOTE = "torch_npu exists only on Ascend hosts"


class Unavailable(importlib.abc.MetaPathFinder):
    """Hides every module ``reason`` names, as the host would not have it installed.

    A module that no other finder finds is absent already: the import fails as usual and
    ``importlib.util.find_spec`` answers None (libraries probe packages that way, transformers'
    ``is_torch_npu_available`` among them). One that this machine does have installed is refused
    with the reason (``find_spec`` raises then: the only way a finder can hide an installed module).
    """

    def __init__(self, host: str, reason: Callable[[str], str | None]) -> None:
        self.host = host
        self.reason = reason

    def find_spec(self, fullname, path=None, target=None):
        why = self.reason(fullname)
        if why is None or not self._installed(fullname, path, target):
            return None
        raise ModuleNotFoundError(f"No module named {fullname!r} on {self.host}: {why}", name=fullname)

    def _installed(self, fullname, path, target) -> bool:
        others = [finder for finder in sys.meta_path if finder is not self and hasattr(finder, "find_spec")]
        return any(finder.find_spec(fullname, path, target) is not None for finder in others)


def _local(tree: Path, module: str) -> bool:
    """The tree itself holds this top-level module (migrating flash-attn itself, say)."""
    return importlib.machinery.PathFinder.find_spec(module.split(".")[0], [str(tree)]) is not None


def npu_host_reason(tree: Path) -> Callable[[str], str | None]:
    """Why a module cannot be imported on an NPU host, for the migrated ``tree``; None if it can."""
    declared = declared_extensions(tree.rglob("setup.py"))

    def reason(module: str) -> str | None:
        top = module.split(".")[0]
        if top in APEX_ROOTS + APEX_EXTENSIONS:
            why = APEX_NOTE
        else:
            why = cuda_only_module(module, declared)
        if why is None or _local(tree, module):
            return None
        return f"CUDA-only ({why})"

    return reason


def cuda_host_reason(module: str) -> str | None:
    return TORCH_NPU_NOTE if module.split(".")[0] == "torch_npu" else None


def install_host(role: str, tree: Path, autoload: bool = False) -> str:
    """Make this process the side's host; return what runs it (for the report)."""
    import torch

    if role == "original":
        sys.meta_path.insert(0, Unavailable("a CUDA host", cuda_host_reason))
        if torch.cuda.is_available():
            return "cuda"
        from cuda2npu.emulation import emulate_cuda

        emulate_cuda()
        return "cpu (emulated cuda)"
    from cuda2npu.emulation import emulate_npu

    emulation = emulate_npu(autoload=autoload)
    sys.meta_path.insert(0, Unavailable("an NPU host", npu_host_reason(tree)))
    return "npu (emulated)" if emulation.emulated else "npu"
