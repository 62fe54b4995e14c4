"""The emulated ``torch.npu`` device module (= ``torch_npu.npu``), docs/reference/torch_npu.md §4.2.

This module object itself is registered as ``torch.npu`` by :func:`cuda2npu.emulation.emulate_npu`.
It exposes the ``torch.cuda``-style API that torch_npu provides, for exactly one device,
``npu:0``, whose kernels run synchronously on the host CPU. Consequences, all deliberate:

* streams and events exist with the documented constructor arguments, but there is nothing
  to overlap: ``query()`` is always True and ``synchronize()`` returns at once. Events created
  with ``enable_timing=True`` do measure host wall time, so ``elapsed_time`` is meaningful.
* memory statistics are all zero (the emulator allocates plain CPU tensors and does not
  track them); ``mem_get_info`` reports host memory.
* ``get_device_capability()`` returns None unless ``TORCH_NPU_DEVICE_CAPABILITY="major.minor"``
  is set, as torch_npu documents (§4.2).
* the npu random stream is its own generator (seeded by ``torch.manual_seed`` through
  :func:`manual_seed_all`, which never calls back into ``torch.manual_seed``).
* ``matmul.allow_hf32`` / ``conv.allow_hf32`` are stored but change nothing: CPU kernels
  compute in full fp32. Their default values are UNVERIFIED (not in the reference).
"""

from __future__ import annotations

import contextlib
import os
import time

import torch

from cuda2npu.emulation import npu_amp as amp

__all__ = [
    "Event",
    "Stream",
    "amp",
    "conv",
    "current_device",
    "current_stream",
    "default_generators",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "empty_cache",
    "get_amp_supported_dtype",
    "get_autocast_dtype",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_rng_state",
    "get_rng_state_all",
    "init",
    "initial_seed",
    "is_autocast_enabled",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "matmul",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "memory_summary",
    "reset_max_memory_allocated",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_autocast_dtype",
    "set_autocast_enabled",
    "set_device",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "stream",
    "synchronize",
]

DEVICE_NAME = "cuda2npu emulated NPU (CPU)"

default_generators: tuple[torch.Generator, ...] = (torch.Generator(),)
"""The npu default generator (a CPU generator: the emulated device's kernels run on CPU)."""


def _index(dev=None) -> int:
    """Normalise a device argument to an index; only 0 exists."""
    if dev is None:
        return 0
    if isinstance(dev, str):
        dev = torch.device(dev)
    if isinstance(dev, torch.device):
        if dev.type != "npu":
            raise ValueError(f"Expected an npu device, got {dev}")
        index = 0 if dev.index is None else dev.index
    else:
        index = int(dev)
    if index != 0:
        raise RuntimeError(f"Invalid device argument {dev!r}: the emulator has one device, npu:0")
    return 0


# --- device management ----------------------------------------------------------------------


def is_available() -> bool:
    return True


def device_count() -> int:
    return 1


def current_device() -> int:
    return 0


def set_device(device) -> None:
    _index(device)


def is_initialized() -> bool:
    return True


def init() -> None:
    """Nothing to initialise: the emulated device exists as soon as it is installed."""


def _is_in_bad_fork() -> bool:
    return False


def synchronize(device=None) -> None:
    """Kernels run synchronously on CPU: there is never outstanding work."""
    _index(device)


def get_device_name(device_name=None) -> str:
    _index(device_name)
    return DEVICE_NAME


def get_device_capability(device=None):
    """None unless ``TORCH_NPU_DEVICE_CAPABILITY="major.minor"`` is set (docs/reference/torch_npu.md §4.2)."""
    _index(device)
    value = os.environ.get("TORCH_NPU_DEVICE_CAPABILITY")
    if not value:
        return None
    major, minor = value.split(".")
    return int(major), int(minor)


class _DeviceProperties:
    """The five fields torch_npu fills in (§4.2); cores and L2 are 0 for the emulator."""

    def __init__(self) -> None:
        self.name = DEVICE_NAME
        self.total_memory = _host_memory()[1]
        self.L2_cache_size = 0
        self.cube_core_num = 0
        self.vector_core_num = 0

    def __repr__(self) -> str:
        return f"_NPUDeviceProperties(name='{self.name}', total_memory={self.total_memory // 2**20}MB)"


def get_device_properties(device_name=None) -> _DeviceProperties:
    _index(device_name)
    return _DeviceProperties()


def is_bf16_supported() -> bool:
    return True


def get_amp_supported_dtype() -> list:
    """Used by ``torch.autocast("npu")``; bf16 included as on 910B+ (§4.4)."""
    return [torch.float16, torch.bfloat16, torch.float32]


class device:
    """Context manager selecting an npu device (only ``npu:0`` exists)."""

    def __init__(self, device) -> None:
        self.idx = _index(device)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


class device_of(device):
    """Context manager selecting the device of a tensor (npu:0 for npu tensors)."""

    def __init__(self, obj: torch.Tensor) -> None:
        super().__init__(obj.device if obj.device.type == "npu" else None)


class _Flag:
    def __init__(self, name: str, allow_hf32: bool) -> None:
        self._name = name
        self.allow_hf32 = allow_hf32

    def __repr__(self) -> str:
        return f"torch.npu.{self._name}(allow_hf32={self.allow_hf32})"


matmul = _Flag("matmul", False)
conv = _Flag("conv", True)


# --- streams and events ---------------------------------------------------------------------


class Event:
    """``torch.npu.Event(enable_timing=False, blocking=False, interprocess=False)`` (§4.2)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.enable_timing = enable_timing
        self.blocking = blocking
        self.interprocess = interprocess
        self._time = None

    def record(self, stream=None) -> None:
        self._time = time.perf_counter()

    def wait(self, stream=None) -> None:
        """Work is already complete when recorded."""

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        """Work is already complete when recorded."""

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds of host time between two recorded timing events."""
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self._time is None or end_event._time is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event._time - self._time) * 1000.0


class Stream:
    """``torch.npu.Stream(device=None, priority=0)``; work on it completes synchronously."""

    def __init__(self, device=None, priority: int = 0) -> None:
        _index(device)
        self.device = torch.device("npu", 0)
        self.priority = priority

    def wait_event(self, event: Event) -> None:
        """Work is already complete."""

    def wait_stream(self, stream: Stream) -> None:
        """Work is already complete."""

    def record_event(self, event: Event | None = None) -> Event:
        event = Event() if event is None else event
        event.record(self)
        return event

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        """Work is already complete."""


# Created on first use: ``torch.device("npu")`` only parses once the backend is renamed.
_streams: list[Stream] = []  # [default stream, *streams entered with ``stream(...)``]


def default_stream(device=None) -> Stream:
    _index(device)
    if not _streams:
        _streams.append(Stream())
    return _streams[0]


def current_stream(device=None) -> Stream:
    return default_stream(device) if len(_streams) <= 1 else _streams[-1]


def set_stream(stream: Stream) -> None:
    default_stream()
    if len(_streams) == 1:
        _streams.append(stream)
    else:
        _streams[-1] = stream


@contextlib.contextmanager
def stream(stream: Stream | None):
    """Make ``stream`` the current stream inside the block (None: leave it unchanged)."""
    if stream is None:
        yield
        return
    default_stream()
    _streams.append(stream)
    try:
        yield
    finally:
        _streams.pop()


# --- random number generation ---------------------------------------------------------------


def manual_seed(seed: int) -> None:
    """Seed the npu generator only (never calls ``torch.manual_seed``: that calls us)."""
    default_generators[0].manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    manual_seed(seed)


def seed() -> None:
    default_generators[0].seed()


def seed_all() -> None:
    seed()


def initial_seed() -> int:
    return default_generators[0].initial_seed()


def get_rng_state(device="npu") -> torch.Tensor:
    _index(device)
    return default_generators[0].get_state()


def set_rng_state(new_state: torch.Tensor, device="npu") -> None:
    _index(device)
    default_generators[0].set_state(new_state)


def get_rng_state_all() -> list:
    return [get_rng_state()]


def set_rng_state_all(new_states) -> None:
    for state in new_states:
        set_rng_state(state)


# --- memory (the emulator does not track allocations: zeros) --------------------------------


def _host_memory() -> tuple[int, int]:
    page = os.sysconf("SC_PAGE_SIZE")
    return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes of *host* memory, which is what the emulated device allocates from."""
    _index(device)
    return _host_memory()


def memory_allocated(device=None) -> int:
    _index(device)
    return 0


def max_memory_allocated(device=None) -> int:
    _index(device)
    return 0


def memory_reserved(device=None) -> int:
    _index(device)
    return 0


def max_memory_reserved(device=None) -> int:
    _index(device)
    return 0


def memory_stats(device=None) -> dict:
    _index(device)
    keys = ("allocated_bytes", "reserved_bytes", "active_bytes", "inactive_split_bytes")
    stats = {}
    for key in keys:
        for kind in ("current", "peak", "allocated", "freed"):
            stats[f"{key}.all.{kind}"] = 0
    return stats


def memory_summary(device=None, abbreviated: bool = False) -> str:
    _index(device)
    return "cuda2npu npu emulator: allocations are plain CPU tensors and are not tracked.\n"


def empty_cache() -> None:
    """No caching allocator to empty."""


def reset_peak_memory_stats(device=None) -> None:
    _index(device)


def reset_max_memory_allocated(device=None) -> None:
    _index(device)


# --- autocast state (§5.2) ------------------------------------------------------------------


def is_autocast_enabled() -> bool:
    return torch.is_autocast_enabled("npu")


def set_autocast_enabled(enabled: bool) -> None:
    torch.set_autocast_enabled("npu", enabled)


def get_autocast_dtype() -> torch.dtype:
    return torch.get_autocast_dtype("npu")


def set_autocast_dtype(dtype: torch.dtype) -> None:
    torch.set_autocast_dtype("npu", dtype)
