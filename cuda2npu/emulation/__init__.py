"""CPU emulation of the environments cuda2npu migrates between (docs/design.md §6).

* :func:`emulate_npu` (:mod:`cuda2npu.emulation.npu`): the ``npu`` device, ``torch.npu`` and
  a fake ``torch_npu`` on a CPU-only machine.
* :func:`emulate_cuda` (:mod:`cuda2npu.emulation.cuda`): the original side; imported lazily
  so that this package imports even where that module is absent.

``emulate_npu`` takes torch's only private-use backend for the rest of the process: call it
before anything else registers one (see :mod:`cuda2npu.emulation.npu`).
"""

from __future__ import annotations

from cuda2npu.emulation.npu import emulate_npu

__all__ = ["emulate_cuda", "emulate_npu"]


def __getattr__(name: str):
    if name == "emulate_cuda":
        from cuda2npu.emulation.cuda import emulate_cuda

        return emulate_cuda
    raise AttributeError(f"module 'cuda2npu.emulation' has no attribute {name!r}")
