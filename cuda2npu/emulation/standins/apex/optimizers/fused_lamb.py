"""``apex.optimizers.FusedLAMB`` with the math of apex's CUDA kernels, in float32 on the CPU.

Follows ``NVIDIA/apex`` ``apex/optimizers/fused_lamb.py`` and ``csrc/multi_tensor_lamb.cu``
(``LAMBStage1Functor`` / ``LAMBStage2Functor``). One ``step()``:

1. ``global_grad_norm`` = L2 norm over the gradients of ALL parameter groups (apex computes
   fp32 and fp16 gradients separately and combines the two norms, which is the same value);
   ``clip = global_grad_norm / max_grad_norm`` if ``global_grad_norm > max_grad_norm`` else 1.
   ``max_grad_norm`` is read from the constructor defaults, not per group, as apex does.
2. Per group: ``group["step"] += 1``; ``bc1, bc2 = 1 - beta1**step, 1 - beta2**step`` (1 without
   ``bias_correction``); ``beta3 = 1 - beta1`` if ``grad_averaging`` else 1. Per parameter
   (``g`` its gradient, ``p`` its value, ``p`` taken as 0 when ``weight_decay == 0``)::

       g = g / clip
       adam_w_mode=False:  g = g + weight_decay * p                      (L2)
       m = beta1 * m + beta3 * g
       v = beta2 * v + (1 - beta2) * g * g
       update = (m / bc1) / (sqrt(v / bc2) + eps)
       adam_w_mode=True (default):  update += weight_decay * p           (decoupled)

3. Trust ratio: with ``param_norm = ||p||`` (before the update) and ``update_norm = ||update||``,
   ``ratio = lr * param_norm / update_norm`` when ``use_nvlamb or weight_decay != 0`` and both
   norms are non-zero, else ``ratio = lr``; then ``p = p - ratio * update``.

As in the kernel, the update is written into ``p.grad`` (apex reuses the gradient buffer),
``exp_avg``/``exp_avg_sq`` have the parameter's dtype, and only fp16/fp32 parameters are
accepted. ``max_grad_norm = 0`` divides every gradient by ``inf`` (the kernel's formula),
i.e. zeroes them.
"""

from __future__ import annotations

import torch

from ._base import ApexOptimizer

_SUPPORTED = (torch.float16, torch.float32)


class FusedLAMB(ApexOptimizer):
    """LAMB with apex ``FusedLAMB`` semantics (see module docstring)."""

    def __init__(
        self,
        params,
        lr=1e-3,
        bias_correction=True,
        betas=(0.9, 0.999),
        eps=1e-6,
        weight_decay=0.01,
        amsgrad=False,
        adam_w_mode=True,
        grad_averaging=True,
        set_grad_none=True,
        max_grad_norm=1.0,
        use_nvlamb=False,
    ):
        if amsgrad:
            raise RuntimeError("FusedLAMB does not support the AMSGrad variant.")
        defaults = dict(
            lr=lr,
            bias_correction=bias_correction,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            grad_averaging=grad_averaging,
            max_grad_norm=max_grad_norm,
        )
        super().__init__(params, defaults)
        self.adam_w_mode = 1 if adam_w_mode else 0
        self.set_grad_none = set_grad_none
        self.use_nvlamb = use_nvlamb

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()
        with torch.no_grad():
            with_grads = [p for group in self.param_groups for p in group["params"] if p.grad is not None]
            if any(p.dtype not in _SUPPORTED for p in with_grads):
                raise RuntimeError("FusedLAMB only support fp16 and fp32.")
            grads = [p.grad for p in with_grads]
            global_grad_norm = torch.zeros((), dtype=torch.float32)
            if grads:
                global_grad_norm = torch.linalg.vector_norm(
                    torch.stack([torch.linalg.vector_norm(g.float()) for g in grads])
                )
            max_grad_norm = self.defaults["max_grad_norm"]
            clip = global_grad_norm / max_grad_norm if global_grad_norm > max_grad_norm else 1.0
            for group in self.param_groups:
                group["step"] = group["step"] + 1 if "step" in group else 1
                self._update_group(group, clip)
        return loss

    def _update_group(self, group, clip) -> None:
        decay = group["weight_decay"]
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                raise RuntimeError("FusedLAMB does not support sparse gradients, please consider SparseAdam instead")
            state = self.state[p]
            if len(state) == 0:
                state["exp_avg"] = torch.zeros_like(p)
                state["exp_avg_sq"] = torch.zeros_like(p)
            param = p.float()
            param_norm = torch.linalg.vector_norm(param)
            stage1(p.grad, state, param, group, group["step"], self.adam_w_mode, clip)
            stored_update = p.grad.float()
            ratio = trust_ratio(
                group["lr"], param_norm, torch.linalg.vector_norm(stored_update), decay, self.use_nvlamb
            )
            p.copy_(param - ratio * stored_update)


def stage1(grad, state, param, group, step, adam_w_mode, clip, inv_scale=1.0) -> None:
    """``LAMBStage1Functor`` on one tensor: the moments advance and the update is written into ``grad``
    (in its dtype). ``param`` is the float32 weight; the gradient enters as ``grad * inv_scale / clip``."""
    beta1, beta2 = group["betas"]
    if group["bias_correction"]:
        bias_correction1, bias_correction2 = 1 - beta1**step, 1 - beta2**step
    else:
        bias_correction1, bias_correction2 = 1.0, 1.0
    beta3 = 1 - beta1 if group["grad_averaging"] else 1.0
    decay = group["weight_decay"]
    decayed = param if decay != 0 else torch.zeros_like(param)
    scaled = grad.float() * inv_scale / clip
    if not adam_w_mode:
        scaled = scaled + decay * decayed
    exp_avg = state["exp_avg"].float() * beta1 + beta3 * scaled
    exp_avg_sq = state["exp_avg_sq"].float() * beta2 + (1 - beta2) * scaled * scaled
    update = (exp_avg / bias_correction1) / ((exp_avg_sq / bias_correction2).sqrt() + group["eps"])
    if adam_w_mode:
        update = update + decay * decayed
    state["exp_avg"].copy_(exp_avg)
    state["exp_avg_sq"].copy_(exp_avg_sq)
    grad.copy_(update)


def trust_ratio(lr, param_norm, update_norm, decay, use_nvlamb):
    """``LAMBStage2Functor``'s step size: ``lr * ||p|| / ||update||`` for groups with weight decay (or
    ``use_nvlamb``) when both norms are non-zero, else ``lr``."""
    if (use_nvlamb or decay != 0.0) and update_norm != 0 and param_norm != 0:
        return lr * (param_norm / update_norm)
    return lr
