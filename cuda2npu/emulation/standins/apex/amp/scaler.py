"""``apex.amp`` loss scaler: apex's Python fallback path (``NVIDIA/apex`` ``apex/amp/scaler.py``).

This is the code apex itself runs when ``amp_C`` is missing: gradients are unscaled with
``master = model * (1 / scale)``; with dynamic scaling an overflow is detected from
``float(grad.float().sum())`` being inf/NaN. ``update_scale`` halves the scale on overflow
(bounded below by ``min_loss_scale``) and asks the caller to skip the step, and doubles it
after ``scale_window`` (2000) clean steps (bounded by ``max_loss_scale``). Dynamic scaling
starts at ``min(max_loss_scale, 2**16)``.
"""

from __future__ import annotations

import torch


def _has_inf_or_nan(grad: torch.Tensor) -> bool:
    total = float(grad.float().sum())
    return total in (float("inf"), -float("inf")) or total != total


def scale_check_overflow_python(model_grad, master_grad, scale, check_overflow=False):
    if check_overflow and _has_inf_or_nan(model_grad):
        return True
    if master_grad is not model_grad:
        master_grad.copy_(model_grad)
    if scale != 1.0:
        master_grad.mul_(scale)
    return False


def axpby_check_overflow_python(model_grad, stashed_grad, master_grad, a, b, check_overflow=False):
    if check_overflow and _has_inf_or_nan(model_grad):
        return True
    converted_model_grad = model_grad.data.to(master_grad.dtype)
    master_grad.data = a * converted_model_grad.data + b * stashed_grad.data
    return False


class LossScaler:
    """Static (a number) or dynamic (``"dynamic"``) loss scale for one loss."""

    def __init__(
        self,
        loss_scale,
        init_scale=2.0**16,
        scale_factor=2.0,
        scale_window=2000,
        min_loss_scale=None,
        max_loss_scale=2.0**24,
    ):
        if loss_scale == "dynamic":
            self.dynamic = True
            self._loss_scale = min(max_loss_scale, init_scale)
        else:
            self.dynamic = False
            self._loss_scale = loss_scale
        self._max_loss_scale = max_loss_scale
        self._min_loss_scale = min_loss_scale
        self._scale_seq_len = scale_window
        self._unskipped = 0
        self._has_overflow = False

    def loss_scale(self):
        return self._loss_scale

    def unscale(self, model_grads, master_grads, unused_scale, models_are_masters=False, scale_override=None):
        if self._has_overflow:
            return
        scale = self._loss_scale if scale_override is None else scale_override
        if scale == 1.0 and models_are_masters and not self.dynamic:
            return
        for model, master in zip(model_grads, master_grads):
            if model is not None:
                self._has_overflow = scale_check_overflow_python(model, master, 1.0 / scale, self.dynamic)
                if self._has_overflow and self.dynamic:
                    break

    def unscale_with_stashed(self, model_grads, stashed_master_grads, master_grads, scale_override=None):
        if self._has_overflow:
            return
        grads_have_scale, stashed_have_scale, out_scale = self._loss_scale, 1.0, 1.0
        if scale_override is not None:
            grads_have_scale, stashed_have_scale, out_scale = scale_override
        for model, stashed, master in zip(model_grads, stashed_master_grads, master_grads):
            if model is None and stashed is None:
                continue
            self._has_overflow = axpby_check_overflow_python(
                model, stashed, master, out_scale / grads_have_scale, out_scale / stashed_have_scale, self.dynamic
            )
            if self._has_overflow and self.dynamic:
                break

    def clear_overflow_state(self):
        self._has_overflow = False

    def update_scale(self):
        if self._has_overflow and self.dynamic:
            should_skip = True
            if self._min_loss_scale:
                self._loss_scale = max(self._min_loss_scale, self._loss_scale / 2.0)
            else:
                self._loss_scale = self._loss_scale / 2.0
            self._unskipped = 0
        else:
            should_skip = False
            self._unskipped += 1
        if self._unskipped == self._scale_seq_len and self.dynamic:
            self._loss_scale = min(self._max_loss_scale, self._loss_scale * 2.0)
            self._unskipped = 0
        return should_skip
