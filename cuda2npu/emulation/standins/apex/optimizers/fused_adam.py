"""``apex.optimizers.FusedAdam`` with the math of apex's CUDA kernel, in float32 on the CPU.

Follows ``NVIDIA/apex`` ``apex/optimizers/fused_adam.py`` (constructor, ``step``, state
layout) and ``csrc/multi_tensor_adam.cu`` (``AdamFunctor``). Per parameter group, each call
increments ``group["step"]`` (stored in the param group, as apex does, so it appears in
``state_dict()["param_groups"]``), then for every parameter with a gradient::

    bc1, bc2 = (1 - beta1**step, 1 - beta2**step) if bias_correction else (1, 1)
    adam_w_mode=False (L2):   g = g + weight_decay * p
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    update = (m / bc1) / (sqrt(v / bc2) + eps)
    adam_w_mode=True (default, decoupled, = torch.optim.AdamW):  update += weight_decay * p
    p = p - lr * update

``exp_avg``/``exp_avg_sq`` are float32 whatever the parameter dtype; the update is computed
in float32 and written back in the parameter's dtype (fp16, bf16 or fp32; others raise, as
apex does). The default ``adam_w_mode=True`` means FusedAdam is AdamW, not Adam.
Parameter groups without parameters are skipped (their step does not advance), as in apex.
``capturable=True`` (the CUDA-graph variant, also needed by ``master_weights=True``) raises
NotImplementedError; ``master_weights=True`` without it raises apex's RuntimeError.
"""

from __future__ import annotations

import torch

from ._base import ApexOptimizer

_SUPPORTED = (torch.float16, torch.bfloat16, torch.float32)


class FusedAdam(ApexOptimizer):
    """Adam / AdamW with apex ``FusedAdam`` semantics (see module docstring)."""

    def __init__(
        self,
        params,
        lr=1e-3,
        bias_correction=True,
        betas=(0.9, 0.999),
        eps=1e-8,
        adam_w_mode=True,
        weight_decay=0.0,
        amsgrad=False,
        set_grad_none=True,
        capturable=False,
        master_weights=False,
    ):
        if amsgrad:
            raise RuntimeError("FusedAdam does not support the AMSGrad variant.")
        if master_weights and not capturable:
            raise RuntimeError("Master weights is currently only supported with the capturable version.")
        if capturable:
            raise NotImplementedError("FusedAdam(capturable=True) has no CPU stand-in")
        defaults = dict(lr=lr, bias_correction=bias_correction, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)
        self.adam_w_mode = 1 if adam_w_mode else 0
        self.set_grad_none = set_grad_none

    def step(self, closure=None, grads=None, output_params=None, scale=None, grad_norms=None, grad_scaler=None):
        if any(p is not None for p in [grads, output_params, scale, grad_norms]):
            raise RuntimeError(
                "FusedAdam has been updated.  Simply initialize it identically to torch.optim.Adam, "
                "and call step() with no arguments."
            )
        loss = None
        if closure is not None:
            loss = closure()
        with torch.no_grad():
            for group in self.param_groups:
                if len(group["params"]) == 0:
                    continue
                group["step"] = group["step"] + 1 if "step" in group else 1
                self._update_group(group)
        return loss

    def _update_group(self, group) -> None:
        beta1, beta2 = group["betas"]
        step = group["step"]
        if group["bias_correction"]:
            bias_correction1, bias_correction2 = 1 - beta1**step, 1 - beta2**step
        else:
            bias_correction1, bias_correction2 = 1.0, 1.0
        decay = group["weight_decay"]
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                raise RuntimeError("FusedAdam does not support sparse gradients, please consider SparseAdam instead")
            if p.dtype not in _SUPPORTED:
                raise RuntimeError("FusedAdam only support fp16 and fp32.")
            state = self.state[p]
            if len(state) == 0:
                state["exp_avg"] = torch.zeros_like(p, dtype=torch.float32)
                state["exp_avg_sq"] = torch.zeros_like(p, dtype=torch.float32)
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            grad, param = p.grad.float(), p.float()
            if not self.adam_w_mode:
                grad = grad + decay * param
            exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = (exp_avg_sq / bias_correction2).sqrt_().add_(group["eps"])
            update = (exp_avg / bias_correction1) / denom
            if self.adam_w_mode:
                update = update + decay * param
            p.copy_(param - group["lr"] * update)
