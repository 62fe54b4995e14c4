"""``apex.optimizers.FusedMixedPrecisionLamb`` with the math of apex's CUDA kernels, in float32 on the CPU.

Follows ``NVIDIA/apex`` ``apex/optimizers/fused_mixed_precision_lamb.py`` and
``csrc/multi_tensor_lamb_mp.cu`` (``LAMBStage1Functor`` / ``LAMBStage2Functor``) with
``csrc/multi_tensor_l2norm_kernel_mp.cu``. It is ``FusedLAMB`` (see ``fused_lamb.py``) with:

* ``lr`` (a float32 tensor) and ``step`` (an int32 tensor of one element) in every parameter
  group, both reset to the constructor's values by ``add_param_group`` (apex replaces per-group
  values too);
* ``reduced_precision_dtype``: parameters of that dtype get float32 master copies, made at the
  first ``step()`` (not saved in ``state_dict()``), and float32 moments; the update runs on the
  master copy, which is then copied into the parameter;
* ``step(grad_scaler=...)``: ``found_inf`` from the scaler and ``inv_scale = 1 / scale``. The global
  gradient norm is of the scaled gradients and ``max_grad_norm`` is multiplied by the scale; each
  gradient is multiplied by ``inv_scale`` before it is divided by the clipping factor;
* apex's noop flag: set by ``found_inf`` or by a norm that is not finite (the gradients', then per
  group the parameters' and the updates'), it stops every later kernel of the step, and
  ``group["step"]`` advances only for groups reached while it is clear.

The update is written into the gradients (in their dtype) before its norm is taken, as in apex.
``load_state_dict`` keeps the saved dtypes (float32 moments of reduced-precision parameters) like
apex's override, and moves state and ``lr``/``step`` to the parameters' device.
"""

from __future__ import annotations

import copy

import torch

from .fused_lamb import stage1, trust_ratio


class FusedMixedPrecisionLamb(torch.optim.Optimizer):
    """LAMB with apex ``FusedMixedPrecisionLamb`` semantics (see module docstring)."""

    def __init__(
        self,
        params,
        lr=1e-3,
        step=0,
        bias_correction=True,
        betas=(0.9, 0.999),
        eps=1e-6,
        weight_decay=0.01,
        amsgrad=False,
        adam_w_mode=True,
        grad_averaging=True,
        max_grad_norm=1.0,
        use_nvlamb=False,
        reduced_precision_dtype=None,
    ):
        if amsgrad:
            raise RuntimeError("FusedLAMB does not support the AMSGrad variant.")
        defaults = dict(
            lr=torch.tensor(lr, dtype=torch.float32),
            step=torch.tensor([step], dtype=torch.int),
            bias_correction=bias_correction,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            grad_averaging=grad_averaging,
            max_grad_norm=max_grad_norm,
        )
        super().__init__(params, defaults)
        device = self.param_groups[0]["params"][0].device
        for group in self.param_groups:
            for item in ("lr", "step"):
                group[item] = group[item].to(device=device)
        self._dummy_overflow_buf = torch.tensor([0], dtype=torch.int, device=device)
        self.reduced_precision_dtype = reduced_precision_dtype
        self.param_groups_full_precision = []
        self._step_supports_amp_scaling = True
        self.adam_w_mode = 1 if adam_w_mode else 0
        self.use_nvlamb = use_nvlamb

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        for name, default in self.defaults.items():
            if isinstance(default, torch.Tensor):
                self.param_groups[-1][name] = default.clone()

    def load_state_dict(self, state_dict):
        saved = copy.deepcopy(state_dict)
        super().load_state_dict(state_dict)
        saved_ids = [i for group in saved["param_groups"] for i in group["params"]]
        params = [p for group in self.param_groups for p in group["params"]]
        for saved_id, p in zip(saved_ids, params):
            if saved_id in saved["state"]:
                self.state[p] = {
                    k: v.to(p.device) if torch.is_tensor(v) else v for k, v in saved["state"][saved_id].items()
                }
        for group in self.param_groups:
            if group["params"]:
                for item in ("lr", "step"):
                    group[item] = group[item].to(group["params"][0].device)

    def step(self, closure=None, grad_scaler=None):
        loss = None
        if closure is not None:
            loss = closure()
        with torch.no_grad():
            self._step(grad_scaler)
        return loss

    def _step(self, grad_scaler) -> None:
        if not self.param_groups_full_precision:
            for group in self.param_groups:
                self.param_groups_full_precision.append(
                    {
                        "params": [
                            p.clone().detach().float() if p.dtype == self.reduced_precision_dtype else None
                            for p in group["params"]
                        ]
                    }
                )
        grads = []
        for group in self.param_groups:
            for p in group["params"]:
                assert group["params"][0].dtype == p.dtype
                if p.grad is not None:
                    grads.append(p.grad)
        device = self.param_groups[0]["params"][0].device
        if grad_scaler is not None:
            found_inf = grad_scaler._check_inf_per_device(self)[device]
            scale = grad_scaler._get_scale_async()
            inv_scale = scale.double().reciprocal().float()
        else:
            found_inf, scale, inv_scale = (
                torch.zeros(1, device=device),
                torch.ones(1, device=device),
                torch.ones(1, device=device),
            )
        noop = bool(found_inf.item() != 0)
        max_grad_norm = self.defaults["max_grad_norm"] * scale
        grad_norm = torch.stack([g.float().norm() for g in grads]).norm() if grads else torch.zeros((), device=device)
        noop = noop or not bool(torch.isfinite(grad_norm))
        clip = grad_norm / max_grad_norm if bool(grad_norm > max_grad_norm) else torch.ones(1, device=device)
        for group, group_full in zip(self.param_groups, self.param_groups_full_precision):
            if not noop:
                group["step"] += 1
            members = [(p, full) for p, full in zip(group["params"], group_full["params"]) if p.grad is not None]
            for p, _ in members:
                if len(self.state[p]) == 0:
                    dtype = torch.float32 if p.dtype == self.reduced_precision_dtype else p.dtype
                    self.state[p]["exp_avg"] = torch.zeros_like(p, dtype=dtype)
                    self.state[p]["exp_avg_sq"] = torch.zeros_like(p, dtype=dtype)
            if members:
                noop = self._update_group(group, members, clip, inv_scale, noop)
        self._dummy_overflow_buf.fill_(int(noop))

    def _update_group(self, group, members, clip, inv_scale, noop) -> bool:
        """One ``multi_tensor_lamb_mp`` call; returns the noop flag after it."""
        if self.reduced_precision_dtype is None and members[0][0].dtype not in (torch.float16, torch.float32):
            raise RuntimeError(
                f"FusedMixedPrecisionLamb: {members[0][0].dtype} parameters need reduced_precision_dtype"
            )
        if self.reduced_precision_dtype is not None and any(full is None for _, full in members):
            raise RuntimeError(
                "FusedMixedPrecisionLamb: with reduced_precision_dtype every parameter must have that dtype"
            )
        masters = [full if full is not None else p for p, full in members]
        param_norms = [m.float().norm() for m in masters]
        noop = noop or not all(bool(torch.isfinite(n)) for n in param_norms)
        if noop:
            return True
        for (p, _), master in zip(members, masters):
            stage1(
                p.grad, self.state[p], master.float(), group, group["step"].float(), self.adam_w_mode, clip, inv_scale
            )
        update_norms = [p.grad.float().norm() for p, _ in members]
        if not all(bool(torch.isfinite(n)) for n in update_norms):
            return True
        lr = torch.as_tensor(group["lr"], dtype=torch.float32)
        for (p, full), master, param_norm, update_norm in zip(members, masters, param_norms, update_norms):
            ratio = trust_ratio(lr, param_norm, update_norm, group["weight_decay"], self.use_nvlamb)
            master.copy_(master.float() - ratio * p.grad.float())
            if full is not None:
                p.copy_(master)
        return False
