"""``torch.npu.amp`` (= ``torch_npu.npu.amp``): autocast, GradScaler, custom_fwd/bwd
(docs/reference/torch_npu.md §5.1).

The op-level casting behind ``torch.autocast("npu")`` lives in
:mod:`cuda2npu.emulation.npu_autocast`; this module is only the public API.
"""

from __future__ import annotations

from collections import defaultdict

import torch
from torch.amp.grad_scaler import _refresh_per_optimizer_state

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd"]


class autocast(torch.amp.autocast):
    """``torch.npu.amp.autocast(enabled=True, dtype=torch.float16, cache_enabled=True)``.

    Identical to ``torch.autocast("npu", ...)`` (§5.1).
    """

    def __init__(self, enabled: bool = True, dtype: torch.dtype = torch.float16, cache_enabled: bool = True) -> None:
        super().__init__("npu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """``torch.npu.amp.GradScaler`` (§5.1): ``torch.amp.GradScaler("npu")`` plus ``dynamic``.

    ``dynamic=False`` is a static loss scale: gradients are multiplied by ``1/scale`` with no
    inf/NaN check, every ``step`` runs, and ``update`` never changes the scale. The
    overflow all-reduce across ranks done by torch_npu on SoCs without INF/NaN mode does not
    apply (the emulator is one device with IEEE arithmetic).
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        dynamic: bool = True,
        enabled: bool = True,
    ) -> None:
        super().__init__("npu", init_scale, growth_factor, backoff_factor, growth_interval, enabled)
        self._dynamic = dynamic

    def _unscale_grads_(self, optimizer, inv_scale, found_inf, allow_fp16):
        per_device_found_inf = super()._unscale_grads_(optimizer, inv_scale, found_inf, allow_fp16)
        if not self._dynamic:
            for flag in per_device_found_inf.values():
                flag.zero_()
        return per_device_found_inf

    def update(self, new_scale=None) -> None:
        if self._dynamic or not self._enabled:
            super().update(new_scale)
            return
        if new_scale is not None:
            scale = self._check_scale_growth_tracker("update")[0]
            if isinstance(new_scale, float):
                scale.fill_(new_scale)
            else:
                scale.copy_(new_scale)
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """Deprecated torch_npu alias of ``torch.amp.custom_fwd(device_type="npu")``."""
    return torch.amp.custom_fwd(fwd, device_type="npu", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """Deprecated torch_npu alias of ``torch.amp.custom_bwd(device_type="npu")``."""
    return torch.amp.custom_bwd(bwd, device_type="npu")
