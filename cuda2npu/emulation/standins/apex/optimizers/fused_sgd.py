"""``apex.optimizers.FusedSGD`` with the math of apex's CUDA kernel, in float32 on the CPU.

Follows ``NVIDIA/apex`` ``apex/optimizers/fused_sgd.py`` and ``csrc/multi_tensor_sgd_kernel.cu``
(``SGDFunctor``). Per group, fp16 and fp32 parameters are processed as two lists; for each
parameter with a gradient ``g`` and value ``w``::

    if weight_decay != 0 and not wd_after_momentum:  g = g + weight_decay * w
    if momentum != 0:
        buf = g                                  on the list's first run
        buf = momentum * buf + (1 - dampening) * g   afterwards
        g = g + momentum * buf if nesterov else buf
    if weight_decay != 0 and wd_after_momentum:      g = g + weight_decay * w
    w = w - lr * g

This equals ``torch.optim.SGD`` when ``wd_after_momentum=False``. Two apex details are kept:
"first run" is decided per list by its LAST parameter (``get_momentums``), and parameters of
any other dtype (e.g. bf16) are silently skipped, exactly as the apex kernel launcher does.
``materialize_master_grads`` only concerns apex amp's fused O2 path and has no effect here.
"""

from __future__ import annotations

import torch
from torch.optim.optimizer import required

from cuda2npu.templates.apex_npu_optimizers import _ApexOptimizer as ApexOptimizer  # apex's zero_grad


class FusedSGD(ApexOptimizer):
    """SGD with apex ``FusedSGD`` semantics (see module docstring)."""

    def __init__(
        self,
        params,
        lr=required,
        momentum=0,
        dampening=0,
        weight_decay=0,
        nesterov=False,
        wd_after_momentum=False,
        materialize_master_grads=True,
        set_grad_none=False,
    ):
        if lr is not required and lr < 0.0:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if momentum < 0.0:
            raise ValueError("Invalid momentum value: {}".format(momentum))
        if weight_decay < 0.0:
            raise ValueError("Invalid weight_decay value: {}".format(weight_decay))
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)
        self.wd_after_momentum = wd_after_momentum
        self.materialize_master_grads = materialize_master_grads
        self.set_grad_none = set_grad_none

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)

    def _momentums(self, params):
        """apex ``get_momentums``: buffers, and whether this is the first run (last param decides)."""
        buffers, first_run = [], True
        for p in params:
            state = self.state[p]
            first_run = "momentum_buffer" not in state
            if first_run:
                state["momentum_buffer"] = torch.zeros_like(p)
            buffers.append(state["momentum_buffer"])
        return buffers, first_run

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()
        with torch.no_grad():
            for group in self.param_groups:
                for dtype in (torch.float16, torch.float32):
                    params = [p for p in group["params"] if p.dtype == dtype and p.grad is not None]
                    if params:
                        self._update_list(group, params)
        return loss

    def _update_list(self, group, params) -> None:
        buffers, first_run = self._momentums(params)
        weight_decay, momentum = group["weight_decay"], group["momentum"]
        for p, buf in zip(params, buffers):
            grad, weight = p.grad.float(), p.float()
            if weight_decay != 0 and not self.wd_after_momentum:
                grad = grad + weight_decay * weight
            if momentum != 0:
                new_buf = grad if first_run else buf.float() * momentum + (1 - group["dampening"]) * grad
                grad = grad + momentum * new_buf if group["nesterov"] else new_buf
                buf.copy_(new_buf)
            if weight_decay != 0 and self.wd_after_momentum:
                grad = grad + weight_decay * weight
            p.copy_(weight + (-group["lr"] * grad))
