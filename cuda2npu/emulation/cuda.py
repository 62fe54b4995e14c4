"""Run PyTorch code written for CUDA on the CPU: :func:`emulate_cuda`.

The validation harness runs the user's ORIGINAL (CUDA) program next to the migrated NPU
program. On a machine without an NVIDIA GPU the original needs its CUDA device mapped to the
CPU, and its CUDA-only libraries replaced by CPU stand-ins. ``emulate_cuda()`` does both, in
this process, and undoes both when the returned handle is closed::

    with emulate_cuda():              # or: handle = emulate_cuda(); ...; handle.close()
        model = Net().cuda()          # parameters stay on the CPU
        x = torch.randn(8, 4, device="cuda")
        import flash_attn             # the CPU stand-in, if the real package is missing

Activations nest: the first call installs, the last close uninstalls.

What is mapped
--------------
* Every torch function call goes through a :class:`torch.overrides.TorchFunctionMode` that
  rewrites CUDA devices to ``cpu`` (and ``torch.device(0)``, which names the current accelerator,
  to ``cuda:0`` as on a CUDA machine, where a CPU build has none): ``device=`` keywords of factory functions
  (``zeros/ones/empty/full/rand/randn/randint/arange/linspace/eye/tensor/as_tensor/*_like``,
  ``new_*``), the device argument of ``Tensor.to``, ``Tensor.cuda()`` / ``Module.cuda()``
  (``Module.to``/``cuda`` call the tensor methods), ``Tensor.type("torch.cuda.*Tensor")``.
  ``pin_memory`` becomes a no-op (page-locked memory only speeds up host-to-GPU copies).
  Only device index 0 exists: ``cuda:1`` raises, as on a one-GPU machine. torch keeps the mode
  stack per thread: threads started while the emulation is active (``threading.Thread``, so
  thread pools too: transformers loads weights in one) enter a mode of their own; threads that
  already ran before it do not.
* ``torch.load``: every ``map_location`` that is not explicitly a non-CUDA device (None, a
  CUDA device, a dict, a callable) becomes ``"cpu"``; checkpoints saved from CUDA load onto
  the CPU. A callable ``map_location`` is therefore not called.
* ``torch.set_default_device``: CUDA devices map to the CPU.
* ``torch.cuda``: ``is_available()`` -> True, ``device_count()`` -> 1, ``current_device()`` -> 0,
  ``set_device`` / ``synchronize`` / ``device(...)`` accept index 0 (CPU kernels are already
  synchronous), ``get_device_name()`` says it is an emulation, ``is_bf16_supported()`` -> True;
  ``get_device_capability()`` -> (8, 0), ``get_device_properties()`` and ``mem_get_info()`` describe
  an 80 GiB device (:data:`DEVICE_PROPERTIES`), ``memory_stats()`` answers 0 for every key
  (``"active_bytes.all.peak"``...), and the peak-statistics resets do nothing.
  The CUDA random stream IS the CPU generator: ``manual_seed(_all)``, ``seed(_all)``,
  ``initial_seed``, ``get/set_rng_state(_all)`` act on ``torch.default_generator`` (without
  calling ``torch.manual_seed``, which itself calls ``torch.cuda.manual_seed_all``).
  The other memory statistics keep torch's own CPU-build behaviour (0, CUDA is never initialised).
* Autocast: ``torch.autocast("cuda", ...)``, ``torch.amp.autocast("cuda")`` and
  ``torch.cuda.amp.autocast(...)`` become CPU autocast with the same dtype (CUDA's default
  float16 when none is given). CPU autocast's op lists differ slightly from CUDA's (see
  torch's "Autocast Op Reference"): e.g. CUDA runs ``mv``/``addmv``/``addr``/
  ``chain_matmul``/``multi_dot`` and the RNN cells in lower precision where CPU keeps
  float32, CPU casts ``scaled_dot_product_attention``, and the float32 lists differ; results
  differ by the rounding of the ops that are cast differently. ``torch.is_autocast_enabled()`` /
  ``get_autocast_dtype("cuda")`` / ``get_autocast_gpu_dtype()`` report the CPU state, and
  ``torch.amp.custom_fwd/custom_bwd(device_type="cuda")`` (also ``torch.cuda.amp.custom_*``)
  decorate for the CPU; functions decorated before ``emulate_cuda()`` keep ``"cuda"`` and do
  not get ``cast_inputs`` applied.
* ``torch.amp.GradScaler("cuda")`` / ``torch.cuda.amp.GradScaler()`` become the CPU
  GradScaler (same growth/backoff algorithm) instead of torch's "CUDA not available,
  disabling" fallback.
* ``torch.backends.cuda.matmul.allow_tf32`` / ``cudnn.allow_tf32`` stay settable (torch
  allows it on CPU builds); CPU matmuls always compute in full float32, so original runs
  that enabled TF32 on Ampere GPUs carry ~1e-3 relative error that the CPU run does not.
* Imports: :func:`cuda2npu.emulation.standins.install_finder` makes ``flash_attn``, ``apex``,
  ``transformer_engine`` and apex's ``amp_C`` (multi-tensor scale/axpby/l2norm) resolve to CPU
  stand-ins when the real package is missing. Other CUDA extension modules stay unavailable
  (ImportError), so guarded imports take their fallback paths.

What is deliberately not emulated
---------------------------------
* Tensors are ordinary CPU tensors: ``x.is_cuda`` is False and ``x.device`` is ``cpu``. Code
  that branches on ``x.is_cuda`` / ``x.device.type == "cuda"`` takes its CPU branch. Marking
  tensors as CUDA would need a tensor subclass on every op, for no numerical benefit.
* ``x.cuda()`` on a tensor returns that same tensor (``Tensor.to`` semantics for a tensor
  already on the target device); on a real GPU it returns a copy of a CPU tensor, so
  in-place writes through the result now alias the source.
* ``torch.accelerator`` answers as the one emulated CUDA device for the program's own code
  (``current_accelerator()`` -> ``cuda``, ``device_count()`` -> 1, ``synchronize`` and the
  memory queries as ``torch.cuda``'s above), so device-agnostic code runs its CUDA path; torch's
  own modules keep the CPU build's answer (no accelerator): claiming a CUDA accelerator there
  would send torch's internals (the optimizers' graph-capture check calls
  ``torch.accelerator.current_stream()``, the DataLoader pins memory) into C++ paths a CPU
  build cannot serve. ``torch.get_device_module()`` without a device, answered in C++, still
  says ``cpu``.
* ``torch.cuda.Stream/Event/stream/current_stream``, CUDA graphs, NCCL,
  ``torch.Generator("cuda")`` and ``DataParallel`` are not mapped and raise as on any CPU-only
  build.
"""

from __future__ import annotations

import sys
import threading
from collections import defaultdict
from types import SimpleNamespace
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from cuda2npu.emulation import standins
from cuda2npu.emulation.controls import mark_emulated_cuda

__all__ = ["CudaEmulation", "emulate_cuda", "to_cpu_device"]

_CPU = torch.device("cpu")
_EMULATED_DEVICE_NAME = "CPU (cuda2npu CUDA emulation)"
# The emulated device answers as an 80 GiB compute-capability-8.0 GPU (bfloat16 and TF32 capable, as
# is_bf16_supported() says): code that asks before choosing a path takes the one a current data-centre
# GPU takes.
DEVICE_CAPABILITY = (8, 0)
DEVICE_MEMORY = 80 * 2**30
DEVICE_PROPERTIES = SimpleNamespace(
    name=_EMULATED_DEVICE_NAME,
    major=DEVICE_CAPABILITY[0],
    minor=DEVICE_CAPABILITY[1],
    total_memory=DEVICE_MEMORY,
    multi_processor_count=108,
    is_integrated=False,
    is_multi_gpu_board=False,
)


def _check_index(index: int | None) -> None:
    if index is not None and index > 0:
        raise RuntimeError(f"CUDA error: invalid device ordinal {index} (the CUDA emulation has one device, 0)")


def _cuda_index(device: Any) -> int | None:
    """Device index of a CUDA spec (``None`` for the current device)."""
    if isinstance(device, torch.device):
        return device.index
    if isinstance(device, str):
        return torch.device(device).index
    return device


def to_cpu_device(device: Any) -> Any:
    """Map a CUDA device spec (``"cuda"``, ``"cuda:0"``, ``torch.device("cuda")``, index 0) to CPU.

    Other values (CPU, meta, dtypes, tensors, None) are returned unchanged.
    """
    if isinstance(device, torch.device):
        is_cuda = device.type == "cuda"
    elif isinstance(device, str):
        is_cuda = device.split(":", 1)[0] == "cuda"
    else:
        is_cuda = isinstance(device, int) and not isinstance(device, bool) and device >= 0
    if not is_cuda:
        return device
    _check_index(_cuda_index(device))
    return _CPU


_TENSOR_CUDA = torch.Tensor.cuda
_TENSOR_TO = torch.Tensor.to
_TENSOR_TYPE = torch.Tensor.type
_TENSOR_PIN_MEMORY = torch.Tensor.pin_memory


def _tensor_cuda(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
    _check_index(_cuda_index(device))
    return self.to(_CPU, non_blocking=non_blocking, memory_format=memory_format)


class _CudaToCpuMode(TorchFunctionMode):
    """Rewrite CUDA device arguments of every torch call to the CPU; mark what they return as put
    on the emulated CUDA device (:func:`cuda2npu.emulation.controls.mark_emulated_cuda`)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func is _TENSOR_CUDA:
            return mark_emulated_cuda(_tensor_cuda(*args, **kwargs))
        if func is _TENSOR_PIN_MEMORY:
            return args[0]
        if func is torch.device and len(args) == 1 and isinstance(args[0], int) and not isinstance(args[0], bool):
            _check_index(args[0])  # a bare index names the current accelerator: the emulated CUDA device
            return torch.device("cuda", args[0])
        on_cuda = False
        if func is _TENSOR_TO and len(args) > 1:
            target = to_cpu_device(args[1])
            on_cuda = target is not args[1]
            args = (args[0], target, *args[2:])
        elif func is _TENSOR_TYPE and len(args) > 1 and isinstance(args[1], str):
            args = (args[0], args[1].replace("torch.cuda.", "torch."), *args[2:])
        if "device" in kwargs:
            target = to_cpu_device(kwargs["device"])
            on_cuda = on_cuda or target is not kwargs["device"]
            kwargs["device"] = target
        if kwargs.get("pin_memory"):
            kwargs["pin_memory"] = False
        result = func(*args, **kwargs)
        return mark_emulated_cuda(result) if on_cuda else result


def _for_the_program(original: Callable, answer: Callable) -> Callable:
    """``answer`` for calls from the program, ``original`` for calls from torch's own modules."""

    def patched(*args, **kwargs):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller == "torch" or caller.startswith("torch."):
            return original(*args, **kwargs)
        return answer(*args, **kwargs)

    return patched


def _accelerator_answers(cuda) -> dict[str, Callable]:
    """torch.accelerator's functions as the emulated CUDA device answers them (see the module doc)."""
    set_index = lambda device: _check_index(_cuda_index(device))  # noqa: E731
    answers = {
        "current_accelerator": lambda check_available=False: torch.device("cuda"),
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device_index": lambda: 0,
        "current_device_idx": lambda: 0,
        "set_device_index": set_index,
        "set_device_idx": set_index,
        "synchronize": lambda device=None: _check_index(_cuda_index(device)),
        "device_index": cuda.device,
        "get_memory_info": cuda.mem_get_info,
    }
    memory = (
        "empty_cache",
        "memory_allocated",
        "max_memory_allocated",
        "memory_reserved",
        "max_memory_reserved",
        "memory_stats",
        "reset_peak_memory_stats",
        "reset_accumulated_memory_stats",
    )
    return {**answers, **{name: getattr(cuda, name) for name in memory}}


def _autocast_device(device_type: str | None) -> str | None:
    return "cpu" if device_type in (None, "cuda") else device_type


def _cpu_map_location(map_location: Any) -> Any:
    if isinstance(map_location, (str, torch.device)) and to_cpu_device(map_location) is map_location:
        return map_location
    return "cpu"


class _Patches:
    """Replacement functions; each one closes over the original it wraps."""

    def __init__(self) -> None:
        self.original: dict[tuple[Any, str], Any] = {}

    def table(self) -> list[tuple[Any, str, Callable]]:
        cuda = torch.cuda
        generator = torch.default_generator
        orig_load = torch.load
        orig_set_default_device = torch.set_default_device
        orig_is_autocast_enabled = torch.is_autocast_enabled
        orig_get_autocast_dtype = torch.get_autocast_dtype
        orig_custom_fwd = torch.amp.custom_fwd
        orig_custom_bwd = torch.amp.custom_bwd
        orig_autocast_init = torch.amp.autocast_mode.autocast.__init__
        orig_scaler_init = torch.amp.grad_scaler.GradScaler.__init__
        cuda_default_autocast_dtype = orig_get_autocast_dtype("cuda")

        def autocast_init(self, device_type, dtype=None, enabled=True, cache_enabled=None):
            if device_type == "cuda":
                device_type, dtype = "cpu", cuda_default_autocast_dtype if dtype is None else dtype
            orig_autocast_init(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

        def scaler_init(self, device="cuda", *args, **kwargs):
            orig_scaler_init(self, "cpu" if device == "cuda" else device, *args, **kwargs)

        def device_enter(self):
            _check_index(self.idx)
            self.prev_idx = 0

        def manual_seed(seed):
            generator.manual_seed(int(seed))

        def seed():
            generator.seed()

        return [
            (cuda, "is_available", lambda: True),
            (cuda, "device_count", lambda: 1),
            (cuda, "current_device", lambda: 0),
            (cuda, "set_device", lambda device: _check_index(_cuda_index(device))),
            (cuda, "synchronize", lambda device=None: _check_index(_cuda_index(device))),
            (cuda, "get_device_name", lambda device=None: _EMULATED_DEVICE_NAME),
            (cuda, "is_bf16_supported", lambda including_emulation=True: True),
            (cuda, "get_device_capability", lambda device=None: _check_index(_cuda_index(device)) or DEVICE_CAPABILITY),
            (cuda, "get_device_properties", lambda device=None: _check_index(_cuda_index(device)) or DEVICE_PROPERTIES),
            (
                cuda,
                "mem_get_info",
                lambda device=None: _check_index(_cuda_index(device)) or (DEVICE_MEMORY, DEVICE_MEMORY),
            ),
            (cuda, "memory_stats", lambda device=None: _check_index(_cuda_index(device)) or defaultdict(int)),
            (cuda, "reset_peak_memory_stats", lambda device=None: _check_index(_cuda_index(device))),
            (cuda, "reset_accumulated_memory_stats", lambda device=None: _check_index(_cuda_index(device))),
            (cuda, "reset_max_memory_allocated", lambda device=None: _check_index(_cuda_index(device))),
            (cuda.device, "__enter__", device_enter),
            (cuda.device, "__exit__", lambda self, *exc: False),
            (cuda, "manual_seed", manual_seed),
            (cuda, "manual_seed_all", manual_seed),
            (cuda, "seed", seed),
            (cuda, "seed_all", seed),
            (cuda, "initial_seed", generator.initial_seed),
            (cuda, "get_rng_state", lambda device="cuda": generator.get_state()),
            (cuda, "set_rng_state", lambda new_state, device="cuda": generator.set_state(new_state)),
            (cuda, "get_rng_state_all", lambda: [generator.get_state()]),
            (cuda, "set_rng_state_all", lambda new_states: generator.set_state(new_states[0])),
            (
                torch,
                "load",
                lambda f, map_location=None, *args, **kwargs: orig_load(
                    f, _cpu_map_location(map_location), *args, **kwargs
                ),
            ),
            (torch, "set_default_device", lambda device: orig_set_default_device(to_cpu_device(device))),
            (
                torch,
                "is_autocast_enabled",
                lambda device_type=None: orig_is_autocast_enabled(_autocast_device(device_type)),
            ),
            (torch, "get_autocast_dtype", lambda device_type: orig_get_autocast_dtype(_autocast_device(device_type))),
            (torch, "get_autocast_gpu_dtype", lambda: orig_get_autocast_dtype("cpu")),
            (
                torch.amp,
                "custom_fwd",
                lambda fwd=None, *, device_type, cast_inputs=None: orig_custom_fwd(
                    fwd, device_type=_autocast_device(device_type), cast_inputs=cast_inputs
                ),
            ),
            (
                torch.amp,
                "custom_bwd",
                lambda bwd=None, *, device_type: orig_custom_bwd(bwd, device_type=_autocast_device(device_type)),
            ),
            (torch.amp.autocast_mode.autocast, "__init__", autocast_init),
            (torch.amp.grad_scaler.GradScaler, "__init__", scaler_init),
            *(
                (module, name, _for_the_program(getattr(module, name), answer))
                for name, answer in _accelerator_answers(cuda).items()
                for module in (
                    getattr(torch, "accelerator", None),
                    getattr(getattr(torch, "accelerator", None), "memory", None),
                )
                if module is not None and hasattr(module, name)
            ),
        ]

    def apply(self) -> None:
        for owner, name, replacement in self.table():
            self.original[(owner, name)] = vars(owner).get(name, _INHERITED)
            setattr(owner, name, replacement)

    def restore(self) -> None:
        for (owner, name), original in reversed(list(self.original.items())):
            if original is _INHERITED:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        self.original.clear()


_INHERITED = object()


class _Installation:
    """The process-wide emulation state shared by all nested activations."""

    def __init__(self) -> None:
        self.depth = 0
        self.patches = _Patches()
        self.mode: _CudaToCpuMode | None = None

    def acquire(self) -> None:
        if self.depth == 0:
            self.patches.apply()
            self.mode = _CudaToCpuMode()
            self.mode.__enter__()
            standins.install_finder()
            threading.Thread.run = _run_in_mode
        self.depth += 1

    def release(self) -> None:
        if self.depth == 1 and torch.overrides._get_current_function_mode() is not self.mode:
            raise RuntimeError("emulate_cuda() closed while a TorchFunctionMode entered after it is still active")
        self.depth -= 1
        if self.depth > 0:
            return
        standins.uninstall_finder()
        threading.Thread.run = _THREAD_RUN
        self.mode.__exit__(None, None, None)
        self.mode = None
        self.patches.restore()


_INSTALLATION = _Installation()
_THREAD_RUN = threading.Thread.run


def _run_in_mode(thread: threading.Thread) -> None:
    """A thread started under the emulation maps CUDA to the CPU too (modes are per thread)."""
    if _INSTALLATION.mode is None:
        return _THREAD_RUN(thread)
    with _CudaToCpuMode():
        return _THREAD_RUN(thread)


class CudaEmulation:
    """One activation of the CUDA emulation; a context manager. :meth:`close` is idempotent."""

    def __init__(self) -> None:
        self._open = True
        _INSTALLATION.acquire()

    def __enter__(self) -> CudaEmulation:
        return self

    def __exit__(self, *exc_info) -> bool:
        self.close()
        return False

    def close(self) -> None:
        """Undo this activation; the last open activation restores torch and ``sys.meta_path``."""
        if self._open:
            self._open = False
            _INSTALLATION.release()


def emulate_cuda() -> CudaEmulation:
    """Map CUDA to the CPU in this process and enable the library stand-ins (see module doc)."""
    return CudaEmulation()
