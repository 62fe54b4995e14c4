"""Python-level patches the private-use backend registration cannot provide (architecture §6).

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

The first two are undone by :func:`remove_patches`; the deserializer is permanent, like the
device it belongs to.
"""

from __future__ import annotations

import torch

__all__ = ["apply_patches", "patches_applied", "register_deserializer", "remove_patches"]

_ORIGINAL_GENERATOR = torch.Generator
_ORIGINAL_PIN_MEMORY = torch.Tensor.pin_memory


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


def apply_patches() -> None:
    torch.Generator = _Generator
    torch.Tensor.pin_memory = _pin_memory


def remove_patches() -> None:
    torch.Generator = _ORIGINAL_GENERATOR
    torch.Tensor.pin_memory = _ORIGINAL_PIN_MEMORY


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
