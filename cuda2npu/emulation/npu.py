"""``emulate_npu()``: make the ``npu`` device and ``torch_npu`` usable on a CPU-only machine.

Usage::

    from cuda2npu.emulation import emulate_npu

    emulate_npu()                    # install for the rest of the process (idempotent)
    with emulate_npu():              # or: install, and on exit remove what can be removed
        import torch_npu
        x = torch.randn(2, 3).npu()
    emulate_npu(autoload=False)      # the device appears at `import torch_npu` only

``autoload`` follows torch_npu: since TorchNPU 2.5.1 torch imports it through the
``torch.backends`` entry point at ``import torch`` (docs/reference/torch_npu.md §4.1), so the
``npu`` device and ``torch.npu`` exist at once (``autoload=True``, the default). With
``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` or an older release they exist only after some module ran
``import torch_npu``: ``autoload=False`` defers the whole installation to that import, so code
that needs the device without importing torch_npu fails as it would there (``torch.npu`` is
missing, ``"npu"`` is not a device type).

What gets installed (docs/design.md §6, docs/reference/torch_npu.md §4):

* permanent for the process (torch cannot unregister a backend): the private-use backend
  renamed to ``npu`` with Python kernels (:mod:`.npu_tensor`), autocast kernels
  (:mod:`.npu_autocast`), ``torch.npu`` (:mod:`.npu_device`, also ``torch.npu.amp``),
  ``Tensor.npu``/``Tensor.is_npu``/``Module.npu`` and an npu deserializer for ``torch.load``;
* removable: the fake ``torch_npu`` package in ``sys.modules`` (:mod:`.torch_npu_module`)
  and the ``torch.Generator`` / ``Tensor.pin_memory`` patches (:mod:`.npu_patches`). Leaving
  a ``with emulate_npu():`` block removes them if that call installed them.

Only one private-use backend can exist per process: call ``emulate_npu()`` before anything
else registers one (another emulator, a real accelerator plug-in). If the backend is already
taken by something else, ``RuntimeError`` is raised.

Known limitations (deliberate, or not worth emulating):

* one device, ``npu:0``; streams and events are synchronous (see :mod:`.npu_device`);
* ``untyped_storage()`` of an npu tensor is its CPU storage (real addresses, device ``cpu``);
* npu tensors saved with ``torch.save`` come back as separate copies: two saved views of one
  npu storage no longer alias after loading (a CPU checkpoint loaded with
  ``map_location="npu"`` keeps its aliasing);
* ``torch.Generator(device="npu").device`` reads ``cpu``; factories with
  ``pin_memory=True`` raise (only ``Tensor.pin_memory()`` is patched);
* the fused ops exist as ``torch_npu.<name>`` only, not as ``torch.ops.npu.<name>``;
* ``torch.compile`` on npu tensors is not supported.

When a real, working torch_npu is importable (an NPU host), nothing is installed and the
returned handle has ``emulated == False``. A torch_npu that is installed but cannot start
(no CANN, no device) is reported with ``RuntimeError``: it may already own the backend (torch
auto-loads it at ``import torch``), and emulating next to it would be unsound.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

import torch

__all__ = ["NpuEmulation", "emulate_npu"]

_backend_libraries: list = []  # torch.library.Library objects; dropping them unregisters kernels
_finder = None


class NpuEmulation:
    """Handle returned by :func:`emulate_npu`; a context manager undoing its removable parts."""

    def __init__(self, emulated: bool, installed_modules: bool, installed_patches: bool) -> None:
        self.emulated = emulated
        self._installed_modules = installed_modules
        self._installed_patches = installed_patches

    def __enter__(self) -> NpuEmulation:
        return self

    def __exit__(self, *exc) -> None:
        if self._installed_modules:
            _remove_torch_npu_modules()
        if self._installed_patches:
            from cuda2npu.emulation import npu_patches

            npu_patches.remove_patches()

    def __repr__(self) -> str:
        return f"NpuEmulation(emulated={self.emulated})"


def _is_fake(module) -> bool:
    from cuda2npu.emulation.torch_npu_module import MARKER

    return getattr(module, MARKER, False)


def _real_torch_npu_works() -> bool:
    """True if a real torch_npu is (or can be) imported and reports a device."""
    module = sys.modules.get("torch_npu")
    if module is not None and _is_fake(module):
        return False
    if module is None and importlib.util.find_spec("torch_npu") is None:
        return False
    try:
        import torch_npu  # noqa: F401  (real package: registers the device)
    except Exception as error:  # noqa: BLE001 - any failure means "not usable"
        for name in [n for n in sys.modules if n == "torch_npu" or n.startswith("torch_npu.")]:
            del sys.modules[name]
        if torch._C._get_privateuse1_backend_name() != "privateuseone":
            raise RuntimeError(
                "torch_npu is installed but failed to import "
                f"({type(error).__name__}: {error}) after claiming the private-use backend; "
                "the npu emulator cannot run in this process. Run where torch_npu is not installed, "
                "or with TORCH_DEVICE_BACKEND_AUTOLOAD=0."
            ) from error
        return False
    if torch.npu.is_available():
        return True
    raise RuntimeError(
        "torch_npu is installed and owns the npu backend, but no NPU is available; the npu emulator "
        "cannot run in this process. Run where torch_npu is not installed."
    )


def _install_backend() -> None:
    """The permanent part: backend, kernels, torch.npu, deserializer (once per process)."""
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    from cuda2npu.emulation import (
        npu_amp,
        npu_autocast,
        npu_device,
        npu_patches,
        npu_rnn,
        npu_tensor,
    )

    _setup_privateuseone_for_python_backend(rename="npu", backend_module=npu_device)
    sys.modules["torch.npu.amp"] = npu_amp
    _backend_libraries.extend(npu_tensor.install_backend_kernels())
    _backend_libraries.extend(npu_autocast.install_autocast_kernels())
    _backend_libraries.append(npu_rnn.install_rnn_kernels())
    npu_patches.register_deserializer()
    # Module.to()/half() on wrapper-subclass parameters must swap whole tensors: assigning
    # `param.data` changes the wrapper's dtype but not the CPU tensor it holds.
    torch.__future__.set_swap_module_params_on_conversion(True)


def _install_torch_npu_modules() -> bool:
    global _finder
    from cuda2npu.emulation import torch_npu_module

    if "torch_npu" in sys.modules:
        return False
    sys.modules.update(torch_npu_module.build_modules())
    _finder = torch_npu_module.NotEmulatedFinder()
    sys.meta_path.insert(0, _finder)
    return True


def _remove_torch_npu_modules() -> None:
    global _finder
    for name in [n for n in sys.modules if n == "torch_npu" or n.startswith("torch_npu.")]:
        del sys.modules[name]
    for finder in (_finder, _DEFERRED):
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)
    _finder = None


class _DeferredTorchNpu(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import torch_npu`` installs the emulation, as importing the real package registers the
    device where torch does not auto-load it (``emulate_npu(autoload=False)``)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch_npu":
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=True)

    def create_module(self, spec):
        sys.meta_path.remove(self)
        _install_device()
        _install_torch_npu_modules()
        return sys.modules["torch_npu"]

    def exec_module(self, module) -> None:
        return None


_DEFERRED = _DeferredTorchNpu()


def _install_device() -> bool:
    """The backend (once per process) and the patches; True if this call applied the patches."""
    backend = torch._C._get_privateuse1_backend_name()
    if not _backend_libraries:
        if backend != "privateuseone":
            raise RuntimeError(
                f"The private-use backend is already registered as {backend!r}; only one can exist per "
                "process, so the npu emulator cannot be installed. Call emulate_npu() first."
            )
        _install_backend()
    from cuda2npu.emulation import npu_patches

    if npu_patches.patches_applied():
        return False
    npu_patches.apply_patches()
    return True


def emulate_npu(autoload: bool = True) -> NpuEmulation:
    """Install the CPU emulation of the npu device and torch_npu (see module docstring); with
    ``autoload=False`` only once something imports ``torch_npu``."""
    if _real_torch_npu_works():
        return NpuEmulation(emulated=False, installed_modules=False, installed_patches=False)
    if not autoload and not _backend_libraries and "torch_npu" not in sys.modules:
        if _DEFERRED not in sys.meta_path:
            sys.meta_path.insert(0, _DEFERRED)
        return NpuEmulation(emulated=True, installed_modules=True, installed_patches=True)
    installed_patches = _install_device()
    return NpuEmulation(
        emulated=True, installed_modules=_install_torch_npu_modules(), installed_patches=installed_patches
    )
