"""Python-level patches the private-use backend registration cannot provide (docs/design.md §6).

* ``torch.Generator(device="npu")``: torch asks the backend's C++ hooks for a new generator,
  which a Python backend cannot provide. The patched ``torch.Generator`` returns a CPU
  generator for npu devices (the emulated kernels run on CPU); its ``.device`` therefore reads
  ``cpu``. ``isinstance(x, torch.Generator)`` keeps working for every generator.
* ``Tensor.pin_memory()``: torch asks the backend's C++ hooks for a pinned allocator. Host and
  "device" memory are the same on the emulator, so pinning returns a copy in ordinary memory
  (``is_pinned()`` stays False). Factories with ``pin_memory=True`` are not patched and raise.
* ``torch.load(..., map_location="npu")``: torch's default deserializer would allocate an npu
  storage (segfault: no allocator). A higher-priority deserializer hands back the CPU storage
  marked as npu, and ``Tensor.set_`` on the npu wrapper adopts it (aliasing between saved
  tensors is preserved).

* ``RNNBase.load_state_dict``: the emulation loads parameters by swapping whole tensors (see
  :mod:`.npu`), and ``torch.nn.LSTM``/``GRU`` keep weak references to their weights
  (``_flat_weight_refs``), which ``torch.utils.swap_tensors`` refuses ("Cannot swap t1 because
  it has weakref"). The patch drops the references while loading and rebuilds them after, as
  ``RNNBase._apply`` does around ``.to()``.

* ``torch.accelerator`` synchronisation and memory queries: torch asks the backend's C++
  device guard and caching allocator, which a Python backend has none of ("Backend doesn't
  support synchronizing", an internal assert). They are answered by ``torch.npu`` (the
  device selection and stream functions of ``torch.accelerator`` already work).

* ``torch.distributed.get_default_backend_for_device("npu")``: torch_npu registers its ``hccl``
  backend for the npu device (``Backend.register_backend(..., devices=["npu"])``); the map entry
  answers the query (the emulation has no collective backend).

* ``torch.nn.DataParallel``: scattering calls ``torch._C._scatter``, a CUDA/NPU C++ kernel.
  With the emulator's one device a DataParallel module runs its module directly, which is what
  scatter/gather over one device amounts to. (Current torch_npu runs DataParallel on npu devices,
  torch_npu's test/distributed/test_data_parallel.py; older Ascend migration guides said it was
  unsupported.)

* ``Tensor.data = value`` where either is an npu tensor (PEFT assigns npu tensors to the ``.data``
  of adapter weights still on the CPU, and new values to the ``.data`` of npu weights): on
  hardware both are dense tensors and torch moves the variable. The emulated npu tensor is a
  Python wrapper: ``set_data`` refuses a CPU/npu pair ("incompatible tensor type") and, between
  two wrappers, changes the wrapper's metadata but not the CPU tensor it holds. The patched setter
  swaps the variable with a tensor of the value (``torch.utils.swap_tensors``, as ``Module.to``
  does here), keeping ``requires_grad``.

The first seven are undone by :func:`remove_patches`; the deserializer is permanent, like the
device it belongs to.
"""

from __future__ import annotations

import torch

from cuda2npu.emulation import npu_device

__all__ = ["apply_patches", "patches_applied", "register_deserializer", "remove_patches"]

_ORIGINAL_GENERATOR = torch.Generator
_ORIGINAL_PIN_MEMORY = torch.Tensor.pin_memory
_ORIGINAL_RNN_LOAD = torch.nn.RNNBase._load_from_state_dict
_ORIGINAL_DATA_PARALLEL_FORWARD = torch.nn.DataParallel.forward


class _GeneratorMeta(type(_ORIGINAL_GENERATOR)):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, _ORIGINAL_GENERATOR)

    def __subclasscheck__(cls, sub) -> bool:
        return issubclass(sub, _ORIGINAL_GENERATOR)


class _Generator(_ORIGINAL_GENERATOR, metaclass=_GeneratorMeta):
    """``torch.Generator`` accepting ``device="npu"`` (returns a CPU generator for it)."""

    def __new__(cls, device="cpu"):
        target = torch.device(device)
        if target.type == "npu":
            if target.index not in (None, 0):
                raise RuntimeError(f"Invalid device {target}: the npu emulator provides exactly one device, npu:0")
            return _ORIGINAL_GENERATOR()
        return _ORIGINAL_GENERATOR(device)


def _pin_memory(self, device=None):
    """Pinned and pageable memory are the same thing for the emulated device: return a copy."""
    if self.device.type != "cpu":
        return _ORIGINAL_PIN_MEMORY(self)
    return self.clone()


def _rnn_load_from_state_dict(self, *args, **kwargs):
    """Load without the weak references that block tensor swapping, then rebuild them."""
    self._flat_weight_refs = []
    try:
        return _ORIGINAL_RNN_LOAD(self, *args, **kwargs)
    finally:
        self._init_flat_weights()


def _data_parallel_forward(self, *inputs, **kwargs):
    """One device: scatter and gather are the identity, so run the module itself."""
    return self.module(*inputs, **kwargs)


_DATA = torch._C.TensorBase.data


def _is_npu(tensor) -> bool:
    from cuda2npu.emulation.npu_tensor import NpuTensor

    return isinstance(tensor, NpuTensor)


def _set_data(self, value) -> None:
    """``self.data = value``, also between a CPU tensor and an npu one (see the module docstring)."""
    if not isinstance(value, torch.Tensor) or not (_is_npu(self) or _is_npu(value)):
        _DATA.__set__(self, value)
        return
    replacement = value.detach()
    if isinstance(self, torch.nn.Parameter):
        replacement = torch.nn.Parameter(replacement, requires_grad=self.requires_grad)
    else:
        replacement.requires_grad_(self.requires_grad)
    torch.utils.swap_tensors(self, replacement)


_DATA_PROPERTY = property(_DATA.__get__, _set_data, doc=_DATA.__doc__)


# torch.accelerator function -> the torch.npu function answering it (same arguments).
_ACCELERATOR_FUNCTIONS = {
    "synchronize": npu_device.synchronize,
    "empty_cache": npu_device.empty_cache,
    "get_memory_info": npu_device.mem_get_info,
    "memory_allocated": npu_device.memory_allocated,
    "max_memory_allocated": npu_device.max_memory_allocated,
    "memory_reserved": npu_device.memory_reserved,
    "max_memory_reserved": npu_device.max_memory_reserved,
    "memory_stats": npu_device.memory_stats,
    "reset_peak_memory_stats": npu_device.reset_peak_memory_stats,
    "reset_accumulated_memory_stats": npu_device.reset_peak_memory_stats,
}
_ACCELERATOR_MODULES = tuple(
    m for m in (getattr(torch, "accelerator", None), getattr(getattr(torch, "accelerator", None), "memory", None)) if m
)
_ORIGINAL_ACCELERATOR = {
    (m, n): getattr(m, n) for m in _ACCELERATOR_MODULES for n in _ACCELERATOR_FUNCTIONS if hasattr(m, n)
}
_BACKEND_MAP = torch.distributed.Backend.default_device_backend_map if torch.distributed.is_available() else {}
_HAD_NPU_BACKEND = "npu" in _BACKEND_MAP


def apply_patches() -> None:
    torch.Generator = _Generator
    torch.Tensor.data = _DATA_PROPERTY
    torch.Tensor.pin_memory = _pin_memory
    torch.nn.RNNBase._load_from_state_dict = _rnn_load_from_state_dict
    torch.nn.DataParallel.forward = _data_parallel_forward
    for module, name in _ORIGINAL_ACCELERATOR:
        setattr(module, name, _ACCELERATOR_FUNCTIONS[name])
    if torch.distributed.is_available():
        _BACKEND_MAP.setdefault("npu", "hccl")


def remove_patches() -> None:
    torch.Generator = _ORIGINAL_GENERATOR
    if "data" in vars(torch.Tensor):
        del torch.Tensor.data
    torch.Tensor.pin_memory = _ORIGINAL_PIN_MEMORY
    torch.nn.RNNBase._load_from_state_dict = _ORIGINAL_RNN_LOAD
    torch.nn.DataParallel.forward = _ORIGINAL_DATA_PARALLEL_FORWARD
    for (module, name), original in _ORIGINAL_ACCELERATOR.items():
        setattr(module, name, original)
    if not _HAD_NPU_BACKEND:
        _BACKEND_MAP.pop("npu", None)


def patches_applied() -> bool:
    return torch.Generator is _Generator


class _NpuHostStorage(torch.UntypedStorage):
    """A CPU storage that reports the npu device, so ``torch.load`` builds npu tensors on it."""

    @property
    def device(self) -> torch.device:
        return torch.device("npu", 0)


def _deserialize_to_npu(storage, location: str):
    if location != "npu" and not location.startswith("npu:"):
        return None
    target = torch.device(location)
    if target.index not in (None, 0):
        raise RuntimeError(f"Attempting to deserialize object on {location}, but the npu emulator only has npu:0")
    storage.__class__ = _NpuHostStorage
    return storage


def register_deserializer() -> None:
    """Register the npu deserializer ahead of torch's privateuse1 one (priority 23)."""
    torch.serialization.register_package(5, lambda obj: None, _deserialize_to_npu)
