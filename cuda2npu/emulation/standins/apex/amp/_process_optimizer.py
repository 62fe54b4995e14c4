"""Optimizer patching for amp (``NVIDIA/apex`` ``apex/amp/_process_optimizer.py``).

Two regimes, chosen by the ``master_weights`` property:

* without master weights (O0, O1, O3): before backward the existing gradients are stashed and
  cleared; after backward the new (scaled) gradients are unscaled and the stash is added
  back (``unscale_with_stashed``), so gradient accumulation over several ``scale_loss``
  blocks sums unscaled gradients.
* with master weights (O2): on first use every fp16 parameter in the optimizer's groups is
  replaced by an fp32 copy (the "master"); after backward the fp16 model gradients are
  unscaled into fp32 master gradients; ``step()`` updates the masters and copies them back
  into the fp16 model; ``zero_grad()`` zeroes model gradients and drops master gradients.

apex special-cases its own ``FusedAdam``/``FusedSGD`` here (fused unscale inside their CUDA
kernels; for FusedAdam without master weights apex even leaves the gradients scaled and
skips the overflow check). The stand-in uses the generic path for every optimizer, which is
the math those kernels intend.
"""

from __future__ import annotations

import types

import torch

_AMP_METHODS = (
    "_lazy_init_maybe_master_weights",
    "_master_params_to_model_params",
    "_prepare_amp_backward",
    "_post_amp_backward",
    "_amp_lazy_init",
)


class AmpOptimizerState:
    """Per-optimizer stash (``optimizer._amp_stash``)."""


def _check_param_dtype(param) -> None:
    if param.dtype not in (torch.float16, torch.float32):
        raise TypeError(
            "Optimizer's parameters must be either torch.cuda.FloatTensor or torch.cuda.HalfTensor. Received {}".format(
                param.type()
            )
        )


def _master_params_to_model_params(self):
    for fp16_group, fp32_from_fp16_group in zip(self._amp_stash.fp16_groups, self._amp_stash.fp32_from_fp16_groups):
        for model, master in zip(fp16_group, fp32_from_fp16_group):
            model.data.copy_(master.data)


def lazy_init_with_master_weights(self):
    stash = self._amp_stash
    stash.fp16_groups, stash.fp32_from_fp16_groups, stash.fp32_from_fp32_groups = [], [], []
    for param_group in self.param_groups:
        fp16_params, fp32_params, fp32_from_fp16_params = [], [], []
        for i, param in enumerate(param_group["params"]):
            if not param.requires_grad:
                continue
            _check_param_dtype(param)
            if param.dtype == torch.float16:
                fp16_params.append(param)
                master_param = param.detach().clone().float()
                master_param.requires_grad = True
                param_group["params"][i] = master_param
                fp32_from_fp16_params.append(master_param)
                if param in self.state:
                    self.state[master_param] = self.state.pop(param)
            else:
                fp32_params.append(param)
        stash.fp16_groups.append(fp16_params)
        stash.fp32_from_fp16_groups.append(fp32_from_fp16_params)
        stash.fp32_from_fp32_groups.append(fp32_params)
    stash.all_fp16_params = [p for group in stash.fp16_groups for p in group]
    stash.all_fp32_from_fp16_params = [p for group in stash.fp32_from_fp16_groups for p in group]
    stash.all_fp32_from_fp32_params = [p for group in stash.fp32_from_fp32_groups for p in group]
    stash.all_fp32_from_fp32_grad_stash = [None for _ in stash.all_fp32_from_fp32_params]
    for param in stash.all_fp32_from_fp16_params + stash.all_fp32_from_fp32_params:
        param.grad = None
    # Recast pre-existing per-param state tensors to the masters' dtype.
    self.load_state_dict(self.state_dict())


def post_backward_models_are_masters(scaler, params, stashed_grads):
    grads_needing_unscale, grads_needing_unscale_with_stash, stashed = [], [], []
    for param, stashed_grad in zip(params, stashed_grads):
        if param.grad is None and stashed_grad is not None:
            param.grad = stashed_grad
        elif param.grad is not None and stashed_grad is None:
            grads_needing_unscale.append(param.grad)
        elif param.grad is not None and stashed_grad is not None:
            grads_needing_unscale_with_stash.append(param.grad)
            stashed.append(stashed_grad)
    if grads_needing_unscale:
        scaler.unscale(grads_needing_unscale, grads_needing_unscale, scaler.loss_scale(), models_are_masters=True)
    if grads_needing_unscale_with_stash:
        scaler.unscale_with_stashed(grads_needing_unscale_with_stash, stashed, grads_needing_unscale_with_stash)
    for i in range(len(stashed_grads)):
        stashed_grads[i] = None


def prepare_backward_with_master_weights(self):
    stash = self._amp_stash
    self._amp_lazy_init()
    for param in stash.all_fp16_params:
        param.grad = None
    for i, param in enumerate(stash.all_fp32_from_fp32_params):
        stash.all_fp32_from_fp32_grad_stash[i] = param.grad
        param.grad = None


def post_backward_with_master_weights(self, scaler):
    stash = self._amp_stash
    self._amp_lazy_init()
    fp16_grads_needing_unscale, new_fp32_grads = [], []
    fp16_grads_needing_unscale_with_stash, preexisting_fp32_grads = [], []
    for fp16_param, fp32_param in zip(stash.all_fp16_params, stash.all_fp32_from_fp16_params):
        if fp16_param.grad is not None and fp32_param.grad is None:
            fp32_param.grad = torch.empty_like(fp32_param)
            fp16_grads_needing_unscale.append(fp16_param.grad)
            new_fp32_grads.append(fp32_param.grad)
        elif fp16_param.grad is not None and fp32_param.grad is not None:
            fp16_grads_needing_unscale_with_stash.append(fp16_param.grad)
            preexisting_fp32_grads.append(fp32_param.grad)
    if fp16_grads_needing_unscale:
        scaler.unscale(fp16_grads_needing_unscale, new_fp32_grads, scaler.loss_scale(), models_are_masters=False)
    if fp16_grads_needing_unscale_with_stash:
        scaler.unscale_with_stashed(
            fp16_grads_needing_unscale_with_stash, preexisting_fp32_grads, preexisting_fp32_grads
        )
    post_backward_models_are_masters(scaler, stash.all_fp32_from_fp32_params, stash.all_fp32_from_fp32_grad_stash)


def lazy_init_no_master_weights(self):
    stash = self._amp_stash
    stash.all_fp16_params, stash.all_fp32_params = [], []
    for param_group in self.param_groups:
        for param in param_group["params"]:
            _check_param_dtype(param)
            (stash.all_fp16_params if param.dtype == torch.float16 else stash.all_fp32_params).append(param)
    stash.all_fp16_grad_stash = [None for _ in stash.all_fp16_params]
    stash.all_fp32_grad_stash = [None for _ in stash.all_fp32_params]


def prepare_backward_no_master_weights(self):
    stash = self._amp_stash
    self._amp_lazy_init()
    for params, grad_stash in (
        (stash.all_fp16_params, stash.all_fp16_grad_stash),
        (stash.all_fp32_params, stash.all_fp32_grad_stash),
    ):
        for i, param in enumerate(params):
            grad_stash[i] = param.grad
            param.grad = None


def post_backward_no_master_weights(self, scaler):
    stash = self._amp_stash
    self._amp_lazy_init()
    for params, stashed_grads in (
        (stash.all_fp16_params, stash.all_fp16_grad_stash),
        (stash.all_fp32_params, stash.all_fp32_grad_stash),
    ):
        post_backward_models_are_masters(scaler, params, stashed_grads)


def _amp_lazy_init(self):
    if not self._amp_stash.lazy_init_called:
        self._lazy_init_maybe_master_weights()
        self._amp_stash.lazy_init_called = True


def _patch_master_weight_step_and_zero_grad(optimizer) -> None:
    old_step = optimizer.step

    def new_step(self, closure=None):
        if closure is not None:
            raise RuntimeError("Currently, Amp does not support closure use with optimizers.")
        retval = old_step()
        self._master_params_to_model_params()
        for param in self._amp_stash.all_fp32_from_fp16_params:
            param.grad = None
        return retval

    def new_zero_grad(self, set_to_none=None):
        stash = self._amp_stash
        self._amp_lazy_init()
        for param in stash.all_fp16_params + stash.all_fp32_from_fp32_params:
            if param.grad is not None:
                param.grad.detach_()
                param.grad.zero_()
        for param in stash.all_fp32_from_fp16_params:
            param.grad = None

    optimizer.step = types.MethodType(new_step, optimizer)
    optimizer.zero_grad = types.MethodType(new_zero_grad, optimizer)


def _process_optimizer(optimizer, properties):
    if hasattr(optimizer, "_amp_stash"):
        raise RuntimeError("A given optimizer should only be passed through amp.initialize once.")
    for name in _AMP_METHODS:
        if hasattr(optimizer, name):
            raise RuntimeError("Incoming optimizer already has {} defined.".format(name))
    stash = optimizer._amp_stash = AmpOptimizerState()
    stash.lazy_init_called = False
    stash.already_patched = False
    stash.params_have_scaled_gradients = False
    if properties.master_weights:
        bind = {
            "_lazy_init_maybe_master_weights": lazy_init_with_master_weights,
            "_master_params_to_model_params": _master_params_to_model_params,
            "_prepare_amp_backward": prepare_backward_with_master_weights,
            "_post_amp_backward": post_backward_with_master_weights,
        }
        _patch_master_weight_step_and_zero_grad(optimizer)
    else:
        bind = {
            "_lazy_init_maybe_master_weights": lazy_init_no_master_weights,
            "_prepare_amp_backward": prepare_backward_no_master_weights,
            "_post_amp_backward": post_backward_no_master_weights,
        }
    bind["_amp_lazy_init"] = _amp_lazy_init
    for name, function in bind.items():
        setattr(optimizer, name, types.MethodType(function, optimizer))
    return optimizer
