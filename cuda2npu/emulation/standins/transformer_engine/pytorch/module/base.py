"""Shared behaviour of the TE module stand-ins (``NVIDIA/TransformerEngine``
``transformer_engine/pytorch/module/base.py``, ``TransformerEngineBaseModule``).

* Activation dtype (TE ``set_activation_dtype``): inside autocast it is the autocast dtype
  of the input's device; otherwise the input dtype, and every parameter must have that
  dtype (AssertionError with TE's message otherwise).
* ``_extra_state``: TE modules store their FP8 metadata as extra state. Outside FP8 runs,
  ``TransformerEngineBaseModule.get_extra_state`` returns ``torch.empty(0, dtype=torch.uint8)``;
  the stand-in returns exactly that, so checkpoints have TE's keys and values.
  ``set_extra_state`` accepts TE's formats (byte tensor, legacy ``io.BytesIO``, None) and
  ignores FP8 scaling state, which has no use when computing in high precision.
* Devices: ``device="cuda"`` (TE's default) and CUDA indices create parameters on the CPU;
  ``"meta"`` and ``"cpu"`` are kept.
* Single process only: ``tp_size > 1``, a ``tp_group`` with more than one rank, and options
  that change the math (``fuse_wgrad_accumulation``, ``delay_wgrad_compute``) raise
  NotImplementedError; communication-overlap and tuning options (``ub_*``, ``name``,
  ``seq_length``, ...) and parallel-layout flags (no effect with one rank) are accepted.
* Default weight init: ``torch.nn.init.normal_(mean=0.0, std=0.023)`` (TE
  ``get_default_init_method``); biases and LayerNorm beta 0, gamma 1 (0 when
  ``zero_centered_gamma``). Random values come from the CPU generator.
"""

from __future__ import annotations

import io
from typing import Any, Callable, Optional

import torch
import torch.distributed as dist

_NO_EFFECT_IN_ONE_PROCESS = frozenset(
    {
        "sequence_parallel",
        "set_parallel_mode",
        "parallel_mode",
        "return_layernorm_output_gathered",
        "get_rng_state_tracker",
        "rng_tracker_name",
        "name",
        "seq_length",
        "micro_batch_size",
        "symmetric_ar_type",
        "save_original_input",
        "checkpoint",
        "sm_margin",
        "ub_name",
        "ub_tp_comm_overlap",
        "ub_overlap_ag",
        "ub_overlap_rs",
        "ub_overlap_rs_dgrad",
        "ub_bulk_dgrad",
        "ub_bulk_wgrad",
        "ub_split_rs",
        "ub_split_ag",
        "ub_atomic_gemm_rs",
        "ub_atomic_gemm_ag",
        "cp_comm_type",
        "cp_global_ranks",
        "cp_stream",
    }
)
_DEFAULT_ONLY = {
    "fuse_wgrad_accumulation": False,
    "delay_wgrad_compute": False,
    "tp_size": 1,
    "cp_group": None,
}


def check_options(owner: str, options: dict[str, Any]) -> None:
    """Accept TE options without effect in one CPU process; reject the others."""
    for name, value in options.items():
        if name in _NO_EFFECT_IN_ONE_PROCESS:
            continue
        if name == "tp_group":
            if value is not None and dist.get_world_size(value) > 1:
                raise NotImplementedError(f"{owner}: tensor parallelism (tp_group of size > 1)")
            continue
        if name not in _DEFAULT_ONLY:
            raise TypeError(f"{owner}() got an unexpected keyword argument '{name}'")
        if value != _DEFAULT_ONLY[name]:
            raise NotImplementedError(f"{owner}({name}={value!r}) has no CPU stand-in")


def standin_device(device: Any) -> torch.device:
    """TE's ``device="cuda"`` default (and CUDA indices) map to the CPU."""
    if isinstance(device, int) or torch.device(device).type == "cuda":
        return torch.device("cpu")
    return torch.device(device)


def default_init_method() -> Callable[[torch.Tensor], torch.Tensor]:
    """TE ``get_default_init_method``: ``normal_(mean=0.0, std=0.023)``."""
    return lambda tensor: torch.nn.init.normal_(tensor, mean=0.0, std=0.023)


def init_parameter(tensor: torch.Tensor, init_fn: Callable[[torch.Tensor], Any]) -> torch.nn.Parameter:
    """Initialise ``tensor`` in place (skipped on the meta device) and wrap it as a Parameter."""
    if tensor.device.type != "meta":
        with torch.no_grad():
            init_fn(tensor)
    return torch.nn.Parameter(tensor)


def high_precision(tensor: torch.Tensor):
    """Autocast off for the device of ``tensor``: TE kernels are not autocast ops."""
    return torch.autocast(tensor.device.type, enabled=False)


def autocast_dtype(tensor: torch.Tensor) -> Optional[torch.dtype]:
    """The autocast dtype of ``tensor``'s device, or None outside autocast."""
    device_type = tensor.device.type
    return torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None


class StandinModule(torch.nn.Module):
    """Base of the TE module stand-ins: extra state and activation dtype."""

    def get_extra_state(self) -> torch.Tensor:
        return torch.empty(0, dtype=torch.uint8)

    def set_extra_state(self, state: Any) -> None:
        if state is None or isinstance(state, (torch.Tensor, io.BytesIO)):
            return
        raise RuntimeError("Unsupported checkpoint format.")

    def activation_dtype(self, inp: torch.Tensor) -> torch.dtype:
        dtype = autocast_dtype(inp)
        if dtype is not None:
            return dtype
        for name, param in self.named_parameters():
            if param.dtype != inp.dtype:
                raise AssertionError(
                    "Data types for parameters must match when outside of autocasted region. "
                    f" Found input dtype: {inp.dtype} and {name!r} dtype: {param.dtype}"
                )
        return inp.dtype
