"""``torch_npu.optim.NpuFused*`` optimizers (docs/reference/torch_npu.md §3).

Update math follows §3 (checked against ``torch_npu/optim/*.py``): Adam = ``torch.optim.Adam``
(L2 added to the gradient), AdamW = ``torch.optim.AdamW`` (decoupled decay ``p *= 1 - lr*wd``),
SGD/Adadelta/RMSprop = their torch counterparts, RMSpropTF = timm's TF-style RMSprop, Lamb =
no bias correction, trust ratio ``clamp(||p||, 0, 10) / ||update||`` (1 if either norm is 0
or ``adam=True``), optional global grad-norm pre-scaling.

Behaviours of the fused base class that a migration must respect, all emulated (§3):

1. only float32 and float16 parameters: anything else (bf16!) raises ``TypeError`` when the
   parameters are first combined (first ``step``/``zero_grad``/``clip_grad_norm_fused_`` that
   sees gradients);
2. ``zero_grad(set_to_none=True)`` raises ``ValueError``; the default is ``set_to_none=False``;
3. ``state['step']`` is a Python int;
4. ``clip_grad_norm_fused_(max_norm, norm_type=2)`` clips all combined gradients;
5. after combining, torch_npu re-points parameter and gradient storages into one fused buffer;
   replacing ``p.data`` or ``p.grad`` afterwards, or giving a parameter its first gradient
   later, makes the hardware optimizer silently ignore it. The emulator keeps separate tensors
   and raises ``RuntimeError`` in those cases instead.

``NpuFusedAdamP`` and ``NpuFusedBertAdam`` are not emulated (their constructors raise
``NotImplementedError``).
"""

from __future__ import annotations

import math

import torch
from torch.optim.optimizer import Optimizer, required

__all__ = [
    "NpuFusedAdadelta",
    "NpuFusedAdam",
    "NpuFusedAdamP",
    "NpuFusedAdamW",
    "NpuFusedBertAdam",
    "NpuFusedLamb",
    "NpuFusedOptimizerBase",
    "NpuFusedRMSprop",
    "NpuFusedRMSpropTF",
    "NpuFusedSGD",
]

_FUSABLE_DTYPES = (torch.float32, torch.float16)


def _check_range(value, name: str, low: float = 0.0, high: float | None = None) -> None:
    if value < low or (high is not None and value >= high):
        raise ValueError(f"Invalid {name}: {value}")


class NpuFusedOptimizerBase(Optimizer):
    """Shared behaviour of the fused optimizers; subclasses define ``_init_state``/``_update``."""

    def __init__(self, params, defaults) -> None:
        super().__init__(params, defaults)
        self._combined: dict | None = None  # param -> (grad object, data_ptr) at combination

    def _params_with_grads(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    yield group, p

    def _maybe_combine(self) -> None:
        """Emulates the first-call tensor fusion: dtype check, then freeze the param/grad set."""
        if self._combined is not None:
            for _, p in self._params_with_grads():
                recorded = self._combined.get(p)
                if recorded is None:
                    raise RuntimeError(
                        f"{type(self).__name__}: a parameter got its first gradient after the fused optimizer "
                        "combined its buffers; torch_npu would never update it "
                        "(docs/reference/torch_npu.md §3)"
                    )
                if p.grad is not recorded[0] or p.data_ptr() != recorded[1]:
                    raise RuntimeError(
                        f"{type(self).__name__}: p.grad or p.data was replaced after the fused optimizer combined "
                        "its buffers; torch_npu would keep updating the old storage "
                        "(docs/reference/torch_npu.md §3)"
                    )
            return
        pairs = list(self._params_with_grads())
        if not pairs:
            return
        for _, p in pairs:
            if p.dtype not in _FUSABLE_DTYPES:
                raise TypeError(
                    f"Fused optimizer's parameters must be either float32 or float16, but received {p.dtype}"
                )
            if p.grad.is_sparse:
                raise RuntimeError(f"{type(self).__name__} does not support sparse gradients")
        self._combined = {p: (p.grad, p.data_ptr()) for _, p in pairs}

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._maybe_combine()
        self._prepare_step()
        for group, p in self._params_with_grads():
            state = self.state[p]
            if not state:
                state["step"] = 0
                self._init_state(p, group, state)
            state["step"] += 1
            self._update(p, p.grad, group, state)
        return loss

    def _prepare_step(self) -> None:
        """Hook run once per step before the per-parameter updates."""

    def _init_state(self, p, group, state) -> None:
        raise NotImplementedError

    def _update(self, p, grad, group, state) -> None:
        raise NotImplementedError

    @torch.no_grad()
    def zero_grad(self, set_to_none: bool = False) -> None:
        if set_to_none:
            raise ValueError("set_to_none is not supported in fused optimizers")
        self._maybe_combine()
        super().zero_grad(set_to_none=False)

    def clip_grad_norm_fused_(self, max_norm, norm_type=2):
        """Clip all combined gradients in place; returns the total norm (fp32 tensor)."""
        with torch.no_grad():
            self._maybe_combine()
            grads = [p.grad for _, p in self._params_with_grads()]
            if not grads:
                return torch.tensor(0.0)
            max_norm, norm_type = float(max_norm), float(norm_type)
            if norm_type == math.inf:
                total = torch.stack([g.float().abs().max() for g in grads]).max()
            else:
                total = torch.stack([g.float().abs().pow(norm_type).sum() for g in grads]).sum().pow(1 / norm_type)
            clip_coef = max_norm / (total + 1e-6)
            if clip_coef < 1:
                for g in grads:
                    g.mul_(clip_coef.to(g.dtype))
            return total


class NpuFusedSGD(NpuFusedOptimizerBase):
    """Same math as ``torch.optim.SGD`` (first momentum buffer = gradient incl. L2)."""

    def __init__(self, params, lr=required, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False) -> None:
        if lr is required:
            raise ValueError("NpuFusedSGD requires a learning rate (lr)")
        _check_range(lr, "learning rate")
        _check_range(momentum, "momentum value")
        _check_range(weight_decay, "weight_decay value")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(
            params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov)
        )

    def _init_state(self, p, group, state) -> None:
        state["momentum_buffer"] = None

    def _update(self, p, grad, group, state) -> None:
        d_p = grad if group["weight_decay"] == 0 else grad.add(p, alpha=group["weight_decay"])
        momentum = group["momentum"]
        if momentum != 0:
            buf = state["momentum_buffer"]
            if buf is None:
                buf = state["momentum_buffer"] = d_p.clone()
            else:
                buf.mul_(momentum).add_(d_p, alpha=1 - group["dampening"])
            d_p = d_p.add(buf, alpha=momentum) if group["nesterov"] else buf
        p.add_(d_p, alpha=-group["lr"])


class _AdamBase(NpuFusedOptimizerBase):
    _decoupled = False

    def __init__(self, params, lr, betas, eps, weight_decay, amsgrad) -> None:
        _check_range(lr, "learning rate")
        _check_range(eps, "epsilon value")
        _check_range(betas[0], "beta parameter at index 0", 0.0, 1.0)
        _check_range(betas[1], "beta parameter at index 1", 0.0, 1.0)
        _check_range(weight_decay, "weight_decay value")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad))

    def _init_state(self, p, group, state) -> None:
        state["exp_avg"] = torch.zeros_like(p)
        state["exp_avg_sq"] = torch.zeros_like(p)
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = torch.zeros_like(p)

    def _update(self, p, grad, group, state) -> None:
        beta1, beta2 = group["betas"]
        lr, wd = group["lr"], group["weight_decay"]
        if wd != 0:
            if self._decoupled:
                p.mul_(1 - lr * wd)
            else:
                grad = grad.add(p, alpha=wd)
        step = state["step"]
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        second = exp_avg_sq
        if group["amsgrad"]:
            torch.maximum(state["max_exp_avg_sq"], exp_avg_sq, out=state["max_exp_avg_sq"])
            second = state["max_exp_avg_sq"]
        denom = (second.sqrt() / math.sqrt(bias_correction2)).add_(group["eps"])
        p.addcdiv_(exp_avg, denom, value=-lr / bias_correction1)


class NpuFusedAdam(_AdamBase):
    """``torch.optim.Adam`` math: L2 weight decay added to the gradient."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad)


class NpuFusedAdamW(_AdamBase):
    """``torch.optim.AdamW`` math: ``p *= 1 - lr*wd`` first, then Adam without L2."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad)


class NpuFusedLamb(NpuFusedOptimizerBase):
    """LAMB as in torch_npu (§3): no bias correction, per-parameter trust ratio."""

    def __init__(
        self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0, adam=False, use_global_grad_norm=False
    ) -> None:
        _check_range(lr, "learning rate")
        _check_range(eps, "epsilon value")
        _check_range(betas[0], "beta parameter at index 0", 0.0, 1.0)
        _check_range(betas[1], "beta parameter at index 1", 0.0, 1.0)
        self.adam = adam
        self.use_global_grad_norm = use_global_grad_norm
        self._grad_divisor = 1.0
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    def _prepare_step(self) -> None:
        self._grad_divisor = 1.0
        if self.use_global_grad_norm:
            squares = [p.grad.float().pow(2).sum() for _, p in self._params_with_grads()]
            if squares:
                norm = float(torch.stack(squares).sum().sqrt())
                self._grad_divisor = norm if norm > 1 else 1.0

    def _init_state(self, p, group, state) -> None:
        state["exp_avg"] = torch.zeros_like(p)
        state["exp_avg_sq"] = torch.zeros_like(p)

    def _update(self, p, grad, group, state) -> None:
        beta1, beta2 = group["betas"]
        if self._grad_divisor != 1.0:
            grad = grad / self._grad_divisor
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        update = exp_avg / exp_avg_sq.sqrt().add(group["eps"])
        if group["weight_decay"] != 0:
            update.add_(p, alpha=group["weight_decay"])
        trust = 1.0
        if not self.adam:
            weight_norm = float(p.float().pow(2).sum().sqrt().clamp(0, 10))
            update_norm = float(update.float().pow(2).sum().sqrt())
            if weight_norm != 0 and update_norm != 0:
                trust = weight_norm / update_norm
        p.add_(update, alpha=-group["lr"] * trust)


class NpuFusedAdadelta(NpuFusedOptimizerBase):
    """Same math as ``torch.optim.Adadelta``."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0) -> None:
        _check_range(lr, "learning rate")
        _check_range(rho, "rho value", 0.0, 1.0 + 1e-12)
        _check_range(eps, "epsilon value")
        _check_range(weight_decay, "weight_decay value")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay))

    def _init_state(self, p, group, state) -> None:
        state["square_avg"] = torch.zeros_like(p)
        state["acc_delta"] = torch.zeros_like(p)

    def _update(self, p, grad, group, state) -> None:
        rho, eps = group["rho"], group["eps"]
        if group["weight_decay"] != 0:
            grad = grad.add(p, alpha=group["weight_decay"])
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
        delta = acc_delta.add(eps).sqrt_().div_(square_avg.add(eps).sqrt_()).mul_(grad)
        acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        p.add_(delta, alpha=-group["lr"])


class NpuFusedRMSprop(NpuFusedOptimizerBase):
    """Same math as ``torch.optim.RMSprop`` (incl. centered and momentum)."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False) -> None:
        _check_range(lr, "learning rate")
        _check_range(eps, "epsilon value")
        _check_range(momentum, "momentum value")
        _check_range(weight_decay, "weight_decay value")
        _check_range(alpha, "alpha value")
        super().__init__(
            params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum, centered=centered)
        )

    def _init_state(self, p, group, state) -> None:
        state["square_avg"] = torch.zeros_like(p)
        if group["momentum"] > 0:
            state["momentum_buffer"] = torch.zeros_like(p)
        if group["centered"]:
            state["grad_avg"] = torch.zeros_like(p)

    def _update(self, p, grad, group, state) -> None:
        alpha = group["alpha"]
        if group["weight_decay"] != 0:
            grad = grad.add(p, alpha=group["weight_decay"])
        square_avg = state["square_avg"]
        square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg.mul_(alpha).add_(grad, alpha=1 - alpha)
            avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_().add_(group["eps"])
        else:
            avg = square_avg.sqrt().add_(group["eps"])
        if group["momentum"] > 0:
            buf = state["momentum_buffer"]
            buf.mul_(group["momentum"]).addcdiv_(grad, avg)
            p.add_(buf, alpha=-group["lr"])
        else:
            p.addcdiv_(grad, avg, value=-group["lr"])


class NpuFusedRMSpropTF(NpuFusedOptimizerBase):
    """timm's TF-style RMSprop (§3): square_avg starts at ones, eps inside the sqrt.

    ``decoupled_decay`` subtracts ``weight_decay * p`` (not scaled by lr, as in torch_npu);
    ``lr_in_momentum`` folds the learning rate into the momentum buffer.
    """

    def __init__(
        self,
        params,
        lr=1e-2,
        alpha=0.9,
        eps=1e-10,
        weight_decay=0,
        momentum=0.0,
        centered=False,
        decoupled_decay=False,
        lr_in_momentum=True,
    ) -> None:
        _check_range(lr, "learning rate")
        _check_range(eps, "epsilon value")
        _check_range(momentum, "momentum value")
        _check_range(weight_decay, "weight_decay value")
        _check_range(alpha, "alpha value")
        super().__init__(
            params,
            dict(
                lr=lr,
                alpha=alpha,
                eps=eps,
                weight_decay=weight_decay,
                momentum=momentum,
                centered=centered,
                decoupled_decay=decoupled_decay,
                lr_in_momentum=lr_in_momentum,
            ),
        )

    def _init_state(self, p, group, state) -> None:
        state["square_avg"] = torch.ones_like(p)
        if group["momentum"] > 0:
            state["momentum_buffer"] = torch.zeros_like(p)
        if group["centered"]:
            state["grad_avg"] = torch.zeros_like(p)

    def _update(self, p, grad, group, state) -> None:
        one_minus_alpha = 1.0 - group["alpha"]
        wd = group["weight_decay"]
        if wd != 0:
            if group["decoupled_decay"]:
                p.add_(p, alpha=-wd)
            else:
                grad = grad.add(p, alpha=wd)
        square_avg = state["square_avg"]
        square_avg.add_(grad.pow(2) - square_avg, alpha=one_minus_alpha)
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg.add_(grad - grad_avg, alpha=one_minus_alpha)
            avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).add_(group["eps"]).sqrt_()
        else:
            avg = square_avg.add(group["eps"]).sqrt_()
        if group["momentum"] > 0:
            buf = state["momentum_buffer"]
            if group["lr_in_momentum"]:
                buf.mul_(group["momentum"]).addcdiv_(grad, avg, value=group["lr"])
                p.sub_(buf)
            else:
                buf.mul_(group["momentum"]).addcdiv_(grad, avg)
                p.add_(buf, alpha=-group["lr"])
        else:
            p.addcdiv_(grad, avg, value=-group["lr"])


class NpuFusedAdamP(NpuFusedOptimizerBase):
    """Not emulated: AdamP's projection step is not specified in the reference (§3)."""

    def __init__(
        self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, delta=0.1, wd_ratio=0.1, nesterov=False
    ) -> None:
        raise NotImplementedError("torch_npu.optim.NpuFusedAdamP is not emulated by cuda2npu")


class NpuFusedBertAdam(NpuFusedOptimizerBase):
    """Not emulated: BertAdam's schedules and clipping are not specified in the reference (§3)."""

    def __init__(
        self,
        params,
        lr=required,
        warmup=-1,
        t_total=-1,
        schedule="warmup_linear",
        b1=0.9,
        b2=0.999,
        e=1e-6,
        weight_decay=0.01,
        max_grad_norm=1.0,
    ) -> None:
        raise NotImplementedError("torch_npu.optim.NpuFusedBertAdam is not emulated by cuda2npu")
