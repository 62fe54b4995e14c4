"""O1 cast decorators and registries (``NVIDIA/apex`` ``apex/amp/amp.py``).

``half_function`` / ``float_function`` / ``promote_function`` wrap a function so that, while
an O1 ``amp.initialize`` is in force (and not inside ``disable_casts``), its floating-point
tensor arguments (also inside lists, tuples and dicts) are cast to fp16, to fp32, or to the
widest floating dtype among them, as apex's ``maybe_half`` / ``maybe_float`` /
``promote`` wrappers do.

``register_half_function(module, name)`` and friends only RECORD the request in
``_USER_CAST_REGISTRY`` / ``_USER_PROMOTE_REGISTRY``: apex would replace ``module.name``
process-wide at ``amp.initialize``; the stand-in does not rewrite third-party modules (that
would leak into the migrated model running in the same process). The O1 casting it applies
is torch autocast around the models' forward passes (see ``_initialize``).
"""

from __future__ import annotations

import functools

import torch

from ._amp_state import _amp_state

_USER_CAST_REGISTRY: set = set()
_USER_PROMOTE_REGISTRY: set = set()


def _cast_floats(value, dtype):
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_floats(v, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast_floats(v, dtype) for k, v in value.items()}
    return value


def _float_dtypes(value):
    if isinstance(value, torch.Tensor):
        return [value.dtype] if value.is_floating_point() else []
    if isinstance(value, (list, tuple)):
        return [d for v in value for d in _float_dtypes(v)]
    if isinstance(value, dict):
        return [d for v in value.values() for d in _float_dtypes(v)]
    return []


def _decorate(fn, choose_dtype):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not _amp_state.casts_active:
            return fn(*args, **kwargs)
        dtype = choose_dtype(_float_dtypes((args, kwargs)))
        if dtype is None:
            return fn(*args, **kwargs)
        return fn(*_cast_floats(args, dtype), **_cast_floats(kwargs, dtype))

    return wrapper


def half_function(fn):
    return _decorate(fn, lambda dtypes: torch.float16)


def float_function(fn):
    return _decorate(fn, lambda dtypes: torch.float32)


def promote_function(fn):
    return _decorate(fn, lambda dtypes: functools.reduce(torch.promote_types, dtypes) if dtypes else None)


def register_half_function(module, name):
    if not hasattr(module, name):
        raise ValueError("No function named {} in module {}.".format(name, module))
    _USER_CAST_REGISTRY.add((module, name, torch.float16))


def register_float_function(module, name):
    if not hasattr(module, name):
        raise ValueError("No function named {} in module {}.".format(name, module))
    _USER_CAST_REGISTRY.add((module, name, torch.float32))


def register_promote_function(module, name):
    if not hasattr(module, name):
        raise ValueError("No function named {} in module {}.".format(name, module))
    _USER_PROMOTE_REGISTRY.add((module, name))
