"""``apex.optimizers.FusedNovoGrad`` with the math of apex's CUDA kernel, in float32 on the CPU.

Follows ``NVIDIA/apex`` ``apex/optimizers/fused_novograd.py`` and ``csrc/multi_tensor_novograd.cu``
(``NovoGradFunctor``, with ``multi_tensor_norm_out_cuda`` of ``csrc/multi_tensor_l2norm_kernel.cu``).
Per group, each call increments ``group["step"]``; float16 and float32 parameters form two lists
whose per-tensor gradient norms are kept, as float32 tensors, in ``group["exp_avg_sq"] = [float16
list, float32 list]`` (so they are part of ``state_dict()["param_groups"]``). At the first step
they are the gradients' norms (``init_zero``: zeros). Then, per tensor (``g`` its gradient, ``p``
its value, ``m`` its ``exp_avg`` in the parameter's dtype)::

    norm = sqrt(beta2 * norm**2 + (1 - beta2) * sum(g**2))      norm_type=2 (L2)
    norm = beta2 * norm + (1 - beta2) * max|g|                 norm_type=0 (L-inf)
    bc1, bc2 = 1 - beta1**step, sqrt(1 - beta2**step)          (1, 1 without bias_correction)
    beta3 = 1 - beta1 if grad_averaging else 1
    denom = norm / bc2 + eps
    reg_inside_moment=False (default):  m = beta1 * m + beta3 * g
                                        p = p - lr * ((m / bc1) / denom + weight_decay * p)
    reg_inside_moment=True:             g = g / denom + weight_decay * p
                                        m = beta1 * m + beta3 * g
                                        p = p - lr * (m / bc1)

Other dtypes raise, as in apex; so does a norm_type other than 0 and 2 without ``init_zero``
(with it the kernel's L2 path runs).
"""

from __future__ import annotations

import math

import torch

from ._base import ApexOptimizer

_SUPPORTED = (torch.float16, torch.float32)


class FusedNovoGrad(ApexOptimizer):
    """NovoGrad with apex ``FusedNovoGrad`` semantics (see module docstring)."""

    def __init__(
        self,
        params,
        lr=1e-3,
        bias_correction=True,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0.0,
        amsgrad=False,
        reg_inside_moment=False,
        grad_averaging=True,
        norm_type=2,
        init_zero=False,
        set_grad_none=True,
    ):
        if amsgrad:
            raise RuntimeError("FusedNovoGrad does not support the AMSGrad variant.")
        defaults = dict(
            lr=lr,
            bias_correction=bias_correction,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            grad_averaging=grad_averaging,
            norm_type=norm_type,
            init_zero=init_zero,
        )
        super().__init__(params, defaults)
        self.moment_mode = 0 if reg_inside_moment else 1
        self.set_grad_none = set_grad_none

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        for group in self.param_groups:
            if len(group["params"]) > 0:
                group["exp_avg_sq"][0] = group["exp_avg_sq"][0].to(group["params"][0].device)
                group["exp_avg_sq"][1] = group["exp_avg_sq"][1].to(group["params"][0].device)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()
        with torch.no_grad():
            for group in self.param_groups:
                group["step"] = group["step"] + 1 if "step" in group else 1
                self._update_group(group)
        return loss

    def _lists(self, group):
        """The fp16 and fp32 parameters with a gradient, creating their ``exp_avg`` on first use."""
        lists = {torch.float16: [], torch.float32: []}
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                raise RuntimeError(
                    "FusedNovoGrad does not support sparse gradients, please consider SparseAdam instead"
                )
            if p.dtype not in _SUPPORTED:
                raise RuntimeError("FusedNovoGrad only support fp16 and fp32.")
            if len(self.state[p]) == 0:
                self.state[p]["exp_avg"] = torch.zeros_like(p)
            lists[p.dtype].append(p)
        return lists[torch.float16], lists[torch.float32]

    def _update_group(self, group) -> None:
        p_16, p_32 = self._lists(group)
        device = self.param_groups[0]["params"][0].device
        if "exp_avg_sq" not in group:
            if group["init_zero"]:
                group["exp_avg_sq"] = [torch.zeros(len(p_16), device=device), torch.zeros(len(p_32), device=device)]
            elif group["norm_type"] == 0:
                group["exp_avg_sq"] = [
                    torch.tensor([p.grad.float().abs().max().item() for p in ps], device=device) for ps in (p_16, p_32)
                ]
            elif group["norm_type"] == 2:
                group["exp_avg_sq"] = [
                    torch.tensor([p.grad.float().pow(2).sum().sqrt().item() for p in ps], device=device)
                    for ps in (p_16, p_32)
                ]
            else:
                raise RuntimeError("FusedNovoGrad only support l2/inf norm now.")
        else:
            assert len(p_16) == group["exp_avg_sq"][0].numel()
            assert len(p_32) == group["exp_avg_sq"][1].numel()
        for params, norms in ((p_16, group["exp_avg_sq"][0]), (p_32, group["exp_avg_sq"][1])):
            if params:
                self._update_list(group, params, norms)

    def _update_list(self, group, params, norms) -> None:
        beta1, beta2 = group["betas"]
        step = group["step"]
        if group["bias_correction"]:
            bias_correction1, bias_correction2 = 1 - beta1**step, math.sqrt(1 - beta2**step)
        else:
            bias_correction1, bias_correction2 = 1.0, 1.0
        beta3 = 1 - beta1 if group["grad_averaging"] else 1.0
        decay, lr, eps = group["weight_decay"], group["lr"], group["eps"]
        for i, p in enumerate(params):
            grad = p.grad.float()
            if group["norm_type"] == 0:
                norms[i] = beta2 * norms[i] + (1 - beta2) * grad.abs().max()
            else:
                norms[i] = torch.sqrt(beta2 * norms[i] * norms[i] + (1 - beta2) * (grad * grad).sum())
        for i, p in enumerate(params):
            grad, param = p.grad.float(), p.float()
            exp_avg = self.state[p]["exp_avg"].float()
            denom = norms[i] / bias_correction2 + eps
            if self.moment_mode == 0:
                grad = grad / denom + decay * param
                exp_avg = beta1 * exp_avg + beta3 * grad
                param = param - lr * (exp_avg / bias_correction1)
            else:
                exp_avg = beta1 * exp_avg + beta3 * grad
                param = param - lr * ((exp_avg / bias_correction1) / denom + decay * param)
            self.state[p]["exp_avg"].copy_(exp_avg)
            p.copy_(param)
