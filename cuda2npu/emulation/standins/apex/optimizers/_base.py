"""What every apex fused optimizer shares: ``zero_grad`` honouring ``set_grad_none``."""

from __future__ import annotations

import torch


class ApexOptimizer(torch.optim.Optimizer):
    """``torch.optim.Optimizer`` with apex's ``set_grad_none`` (set by each subclass's constructor)."""

    set_grad_none = True

    def zero_grad(self, set_to_none=None):
        """apex: ``set_grad_none`` drops the grads, otherwise defer to ``torch.optim.Optimizer``."""
        if set_to_none is None and self.set_grad_none:
            for group in self.param_groups:
                for p in group["params"]:
                    p.grad = None
        elif set_to_none is None:
            super().zero_grad()
        else:
            super().zero_grad(set_to_none=set_to_none)
