"""``amp.scale_loss`` and ``amp.disable_casts`` (``NVIDIA/apex`` ``apex/amp/handle.py``).

``scale_loss`` yields ``loss.float() * loss_scale`` (just ``loss`` when amp is disabled, and
``loss.float()`` for a static scale of 1 without master weights), marked with its scale
(:func:`cuda2npu.emulation.controls.mark_loss_scale`) so that the validation records the loss unscaled. On exit, unless
``delay_unscale``, the optimizers' gradients are unscaled (see ``_process_optimizer``), the
scaler is updated, and on overflow each optimizer's next ``step()`` is replaced by a one-shot
skip, exactly as apex does.
"""

from __future__ import annotations

import contextlib

import torch

from cuda2npu.emulation.controls import mark_loss_scale

from ._amp_state import _amp_state


@contextlib.contextmanager
def scale_loss(loss, optimizers, loss_id=0, model=None, delay_unscale=False, delay_overflow_check=False):
    if not hasattr(_amp_state, "opt_properties"):
        raise RuntimeError(
            "Invoked 'with amp.scale_loss`, but internal Amp state has not been initialized.  "
            "model, optimizer = amp.initialize(model, optimizer, opt_level=...) must be called "
            "before `with amp.scale_loss`."
        )
    if not _amp_state.opt_properties.enabled:
        yield loss
        return
    if isinstance(optimizers, torch.optim.Optimizer):
        optimizers = [optimizers]
    loss_scaler = _amp_state.loss_scalers[loss_id]
    loss_scale = loss_scaler.loss_scale()
    if not _amp_state.opt_properties.master_weights and not loss_scaler.dynamic and loss_scale == 1.0:
        yield loss.float()
        return
    if not delay_unscale:
        for optimizer in optimizers:
            if not optimizer._amp_stash.params_have_scaled_gradients:
                optimizer._prepare_amp_backward()
    yield mark_loss_scale(loss.float() * loss_scale, loss_scale)
    if delay_unscale:
        for optimizer in optimizers:
            optimizer._amp_stash.params_have_scaled_gradients = True
        return
    loss_scaler.clear_overflow_state()
    for optimizer in optimizers:
        optimizer._post_amp_backward(loss_scaler)
        optimizer._amp_stash.params_have_scaled_gradients = False
    should_skip = False if delay_overflow_check else loss_scaler.update_scale()
    if should_skip:
        for optimizer in optimizers:
            if not optimizer._amp_stash.already_patched:
                _skip_next_step(optimizer)


def _skip_next_step(optimizer) -> None:
    opt_step = optimizer.step

    def skip_step(closure=None):
        if closure is not None:
            raise RuntimeError("Currently, Amp does not support closure use with optimizers.")
        for param in getattr(optimizer._amp_stash, "all_fp32_from_fp16_params", ()):
            param.grad = None
        optimizer.step = opt_step
        optimizer._amp_stash.already_patched = False

    optimizer.step = skip_step
    optimizer._amp_stash.already_patched = True


@contextlib.contextmanager
def disable_casts():
    """Suspend O1 casting (the decorators and the autocast around model forwards)."""
    active = _amp_state.casts_active
    _amp_state.casts_active = False
    try:
        with contextlib.ExitStack() as stack:
            for device_type in ("cpu", "cuda"):
                if torch.is_autocast_enabled(device_type):
                    stack.enter_context(torch.autocast(device_type, enabled=False))
            yield
    finally:
        _amp_state.casts_active = active
