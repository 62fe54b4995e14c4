"""Tensors on the emulated ``npu`` device: wrappers around CPU tensors.

Design (``docs/design.md`` §6): torch's private-use backend is renamed to
``npu`` and given no C++ kernels. A tensor on ``npu:0`` is an :class:`NpuTensor`, a wrapper
subclass whose ``_elem`` is an ordinary CPU tensor. Every aten op that sees a wrapper reaches
:meth:`NpuTensor.__torch_dispatch__`, which unwraps, runs the CPU kernel and wraps the results
again. Ops that reach the ``PrivateUse1`` backend key without passing the Python key
(factories such as ``torch.empty(..., device="npu")``, and ``torch.tensor(..., device="npu")``,
which excludes the Python key) go to the same code through a boxed backend fallback.

Pitfalls handled here (each one bit the prototype, docs/design.md §6):

* sizes and strides are *dispatched* to the wrapped tensor (``dispatch_sizes_strides_policy=
  "sizes"``), so out-variants that resize (``torch.arange(..., device="npu")``), ``set_`` and
  in-place shape changes keep the wrapper's metadata right;
* ``_copy_from`` / ``_copy_from_and_resize`` have explicit kernels (``torch.tensor(...,
  device="npu")`` goes through them; via the boxed fallback torch hits an internal assert);
* the wrapper's device carries index 0 (the autograd engine asserts on an index-less device);
* ``data_ptr()`` is forwarded to the wrapped tensor;
* ``__reduce_ex__`` uses torch's own allow-listed rebuild function so that weights-only
  ``torch.load`` accepts saved npu tensors.

Random ops on npu tensors draw from the npu default generator
(:data:`cuda2npu.emulation.npu_device.default_generators`), not from the CPU one, so
``torch.npu.manual_seed`` and ``torch.manual_seed`` behave as on hardware.

Mixing an npu tensor with a CPU tensor that has at least one dimension raises torch's usual
``Expected all tensors to be on the same device`` error, as a missed ``.npu()`` would on
hardware. CPU zero-dim tensors (scalars), CPU index tensors and the source/destination of
copies are allowed, as on CUDA.
"""

from __future__ import annotations

import copy
import functools

import torch

from cuda2npu.emulation import npu_device

__all__ = ["NpuTensor", "install_backend_kernels"]

_CPU = torch.device("cpu")
# ``torch.device("npu", 0)``; set by :func:`install_backend_kernels`, because the string "npu"
# only parses once the private-use backend has been renamed.
_npu_device: torch.device | None = None
_aten = torch.ops.aten

# Ops whose result is metadata about the wrapped tensor: answered from ``_elem`` directly.
_METADATA_OPS = frozenset(
    {
        _aten.sym_size.default,
        _aten.sym_stride.default,
        _aten.sym_numel.default,
        _aten.sym_storage_offset.default,
        _aten.dim.default,
        _aten.is_contiguous.default,
        _aten.is_contiguous.memory_format,
        _aten.is_strides_like_format.default,
        _aten.is_non_overlapping_and_dense.default,
    }
)

# Ops allowed to take CPU tensors that have dimensions next to npu tensors (copies between
# devices; CPU index tensors, which CUDA also accepts).
_CROSS_DEVICE_OPS = frozenset(
    {
        _aten.copy_.default,
        _aten._to_copy.default,
        _aten._copy_from.default,
        _aten._copy_from_and_resize.default,
        _aten.index.Tensor,
        _aten.index_put.default,
        _aten.index_put_.default,
        _aten._index_put_impl_.default,
    }
)


class _OpInfo:
    """What the dispatcher needs to know about one op, computed once from its schema."""

    __slots__ = ("aliased_outputs", "generator_index", "generator_kwarg_only")

    def __init__(self, func: torch._ops.OpOverload) -> None:
        schema = func._schema
        positional = [a for a in schema.arguments if not a.kwarg_only]
        self.generator_index = None
        self.generator_kwarg_only = False
        for index, arg in enumerate(schema.arguments):
            if arg.name == "generator":
                self.generator_index = index
                self.generator_kwarg_only = arg.kwarg_only
        # For each output: the input (position or keyword name) it writes into, or None.
        self.aliased_outputs = []
        for ret in schema.returns:
            target = None
            if ret.alias_info is not None and ret.alias_info.is_write:
                for index, arg in enumerate(schema.arguments):
                    if arg.alias_info is not None and arg.alias_info.before_set == ret.alias_info.before_set:
                        target = index if arg in positional else arg.name
                        break
            self.aliased_outputs.append(target)
        if all(t is None for t in self.aliased_outputs):
            self.aliased_outputs = None


_OP_INFO: dict = {}


def _op_info(func) -> _OpInfo:
    info = _OP_INFO.get(func)
    if info is None:
        info = _OP_INFO[func] = _OpInfo(func)
    return info


def _device_mismatch() -> RuntimeError:
    return RuntimeError("Expected all tensors to be on the same device, but found at least two devices, npu:0 and cpu!")


def _check_npu_index(device: torch.device) -> None:
    if device.index not in (None, 0):
        raise RuntimeError(f"Invalid device {device}: the npu emulator provides exactly one device, npu:0")


class _Unwrapper:
    """Replaces wrappers by their CPU tensors and npu devices by ``cpu``; spots foreign tensors."""

    __slots__ = ("allow_cpu", "saw_npu", "saw_cpu")

    def __init__(self, allow_cpu: bool) -> None:
        self.allow_cpu = allow_cpu
        self.saw_npu = False
        self.saw_cpu = False

    def __call__(self, x):
        cls = type(x)
        if cls is NpuTensor:
            self.saw_npu = True
            return x._elem
        if cls is list or cls is tuple:
            return cls(self(v) for v in x)
        if isinstance(x, torch.Tensor):  # a CPU tensor (npu tensors are NpuTensor)
            if x.dim() > 0 and not self.allow_cpu:
                self.saw_cpu = True
            return x
        if cls is torch.device and x.type == "npu":
            _check_npu_index(x)
            return _CPU
        return x


def _wrap(x):
    """Wrap the CPU tensors a CPU kernel returned (lists and tuples element-wise)."""
    cls = type(x)
    if isinstance(x, torch.Tensor):
        return NpuTensor(x)
    if cls is list or cls is tuple:
        return cls(_wrap(v) for v in x)
    return x


def _native_dropout(elem: torch.Tensor, p: float, train):
    """CPU ``native_dropout`` redone with the npu generator (same formula as ATen's CPU kernel)."""
    if not train or elem.numel() == 0:
        return elem.clone(), torch.ones_like(elem, dtype=torch.bool)
    keep = 1.0 - p
    scale = 0.0 if keep == 0 else 1.0 / keep
    mask = torch.empty_like(elem).bernoulli_(keep, generator=npu_device.default_generators[0])
    return elem * mask * scale, mask.to(torch.bool)


def _run(func, args, kwargs):
    """Run ``func`` on CPU for wrapped arguments and re-wrap (shared by dispatch and fallback)."""
    if func in _METADATA_OPS:
        return func(args[0]._elem if isinstance(args[0], NpuTensor) else args[0], *args[1:])
    if func is _aten._copy_from.default or func is _aten._copy_from_and_resize.default:
        # copy_ on a non-CPU tensor lands here when the Python key is excluded
        # (torch.tensor(..., device="npu")): copy between the underlying CPU tensors.
        src, dst = (t._elem if type(t) is NpuTensor else t for t in args[:2])
        if func is _aten._copy_from_and_resize.default:
            dst.resize_(src.shape)
        dst.copy_(src)
        return args[1]

    info = _op_info(func)
    unwrap = _Unwrapper(func in _CROSS_DEVICE_OPS)
    cpu_args = [unwrap(a) for a in args]
    cpu_kwargs = {k: unwrap(v) for k, v in kwargs.items()} if kwargs else {}
    if unwrap.saw_npu and unwrap.saw_cpu:
        raise _device_mismatch()

    # Where do the results live? On npu unless an explicit non-npu device was requested.
    target = kwargs.get("device") if kwargs else None
    results_on_npu = target is None or target.type == "npu"

    if info.generator_index is not None:
        gen_index = info.generator_index
        if not info.generator_kwarg_only and len(cpu_args) > gen_index:
            if cpu_args[gen_index] is None:
                cpu_args[gen_index] = npu_device.default_generators[0]
        elif cpu_kwargs.get("generator") is None:
            cpu_kwargs["generator"] = npu_device.default_generators[0]

    if func is _aten.native_dropout.default:
        out = _native_dropout(*cpu_args, **cpu_kwargs)
    else:
        out = func(*cpu_args, **cpu_kwargs)

    if info.aliased_outputs is not None:
        # In-place and out= ops return the very tensors they wrote into.
        originals = []
        outs = out if isinstance(out, (tuple, list)) else (out,)
        for index, target_arg in enumerate(info.aliased_outputs):
            if target_arg is None:
                originals.append(_wrap(outs[index]) if results_on_npu else outs[index])
            elif isinstance(target_arg, int):
                originals.append(args[target_arg])
            else:
                originals.append(kwargs[target_arg])
        return tuple(originals) if isinstance(out, (tuple, list)) else originals[0]
    return _wrap(out) if results_on_npu else out


class NpuTensor(torch.Tensor):
    """A tensor on the emulated ``npu:0`` device; ``_elem`` holds its data on CPU."""

    _elem: torch.Tensor

    @staticmethod
    def __new__(cls, elem: torch.Tensor, requires_grad: bool = False):
        if isinstance(elem, NpuTensor):
            raise TypeError("NpuTensor must wrap a CPU tensor, not another NpuTensor")
        wrapper = torch.Tensor._make_wrapper_subclass(
            cls,
            elem.size(),
            strides=elem.stride(),
            storage_offset=elem.storage_offset(),
            dtype=elem.dtype,
            layout=elem.layout,
            device=_npu_device,
            requires_grad=requires_grad,
            dispatch_sizes_strides_policy="sizes",
        )
        wrapper._elem = elem
        return wrapper

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _run(func, args, kwargs)

    def data_ptr(self) -> int:
        return self._elem.data_ptr()

    def untyped_storage(self) -> torch.UntypedStorage:
        """The wrapped CPU storage (so storage-pointer checks see real addresses)."""
        return self._elem.untyped_storage()

    def __deepcopy__(self, memo):
        # torch.Tensor.__deepcopy__ would clone the wrapper's data-less npu storage (segfault).
        if not self.is_leaf:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol "
                "at the moment."
            )
        if id(self) in memo:
            return memo[id(self)]
        new = NpuTensor(self._elem.clone(), requires_grad=self.requires_grad)
        memo[id(self)] = new
        if self.grad is not None:
            new.grad = copy.deepcopy(self.grad, memo)
        for name, value in self.__dict__.items():
            # skip the data and torch's cached size/stride capsules ("_sym_sizes_capsule", ...)
            if name != "_elem" and not name.startswith("_sym_"):
                setattr(new, name, copy.deepcopy(value, memo))
        return new

    def __repr__(self, *, tensor_contents=None) -> str:
        # torch prints subclasses as "NpuTensor(...)"; a real npu tensor prints as "tensor(...)".
        text = torch._tensor_str._str(self, tensor_contents=tensor_contents)
        head = f"{type(self).__name__}("
        shift = len(head) - len("tensor(")
        lines = text.split("\n")
        lines[0] = "tensor(" + lines[0][len(head) :]
        lines[1:] = [line[shift:] if line.startswith(" " * len(head)) else line for line in lines[1:]]
        return "\n".join(lines)

    def tolist(self):
        return self._elem.tolist()

    def __format__(self, format_spec: str) -> str:
        # torch.Tensor.__format__ formats 0-d values only for exact torch.Tensor (printing uses it)
        if self.dim() == 0:
            return self.item().__format__(format_spec)
        return super().__format__(format_spec)

    def __reduce_ex__(self, protocol):
        # torch's own rebuild path for storage-less privateuse1 tensors; allow-listed for
        # weights_only loading (torch/_weights_only_unpickler.py).
        return (
            torch._utils._rebuild_device_tensor_from_cpu_tensor,
            (self._elem.detach(), self.dtype, str(self.device), self.requires_grad),
        )


def _backend_fallback(op, *args, **kwargs):
    """Boxed ``PrivateUse1`` fallback: factories and ops that bypassed the Python key."""
    return _run(op, args, kwargs)


def install_backend_kernels() -> list:
    """Register the ``PrivateUse1`` kernels; returns the ``torch.library.Library`` objects.

    Call once, after ``torch.utils.rename_privateuse1_backend("npu")``. The caller must keep
    the returned objects alive: a collected ``Library`` unregisters its kernels.
    """
    global _npu_device
    _npu_device = torch.device("npu", 0)
    fallback_lib = torch.library.Library("_", "IMPL")
    fallback_lib.fallback(_backend_fallback, "PrivateUse1")
    # Reaching the Python fallback for these two trips "func != nullptr INTERNAL ASSERT" in
    # torch/csrc/utils/python_dispatch.cpp (torch.tensor(..., device="npu")): explicit kernels.
    copy_lib = torch.library.Library("aten", "IMPL")
    for name in ("_copy_from", "_copy_from_and_resize"):
        copy_lib.impl(name, functools.partial(_backend_fallback, getattr(_aten, name).default), "PrivateUse1")
    return [fallback_lib, copy_lib]
