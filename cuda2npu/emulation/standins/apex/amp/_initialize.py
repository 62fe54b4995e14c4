"""What ``amp.initialize`` does to models and optimizers (``NVIDIA/apex`` ``apex/amp/_initialize.py``).

* ``cast_model_type`` (O2/O3, O0 = float32): the model is cast (batch norms with affine
  parameters stay float32 when ``keep_batchnorm_fp32``, apex ``convert_network``); its
  ``forward`` is patched to cast floating-point inputs to that type and outputs to float32
  (or ``cast_model_outputs``).
* ``patch_torch_functions`` (O1): apex patches torch functions process-wide so that
  whitelisted ops (matmul, conv, linear, ...) run in fp16 and blacklisted ones (softmax,
  norms, losses, ...) in fp32 (``apex/amp/lists/*``). The stand-in instead runs each model's
  ``forward`` under ``torch.autocast(<param device>, dtype=torch.float16)`` and the
  optimizer step with autocast off. Differences: torch autocast's op lists (not apex's)
  decide the casts, and code outside the model forward (e.g. a loss computed on the model
  output) is not cast.
* Every optimizer is patched for loss scaling (``_process_optimizer``), and ``num_losses``
  loss scalers are created.
"""

from __future__ import annotations

import functools

import torch

from ..parallel import DistributedDataParallel as ApexDistributedDataParallel
from ._amp_state import _amp_state, warn_or_err
from ._process_optimizer import _process_optimizer
from .handle import disable_casts
from .scaler import LossScaler


def to_type(dtype, t):
    if isinstance(t, torch.Tensor):
        return t.to(dtype) if t.is_floating_point() else t
    return t.to(dtype)


def applier(value, fn):
    """apex ``applier``: apply ``fn`` to tensors (and objects with ``.to``) inside containers."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (str, bytes)) or type(value).__module__ == "numpy":
        return value
    if hasattr(value, "to"):
        return fn(value)
    if isinstance(value, dict):
        return {applier(k, fn): applier(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return type(value)(applier(v, fn) for v in value)
    return value


def convert_network(network, dtype):
    """apex ``fp16_utils.convert_network``: cast all but affine batch norms to ``dtype``."""
    for module in network.modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and module.affine is True:
            continue
        for param in module.parameters(recurse=False):
            if param.data.dtype.is_floating_point:
                param.data = param.data.to(dtype=dtype)
            if param._grad is not None and param._grad.data.dtype.is_floating_point:
                param._grad.data = param._grad.data.to(dtype=dtype)
        for buf in module.buffers(recurse=False):
            if buf is not None and buf.data.dtype.is_floating_point:
                buf.data = buf.data.to(dtype=dtype)
        if isinstance(module, torch.nn.RNNBase):
            module.flatten_parameters()
    return network


def check_models(models):
    for model in models:
        parallel_type = None
        if isinstance(model, torch.nn.parallel.DistributedDataParallel):
            parallel_type = "torch.nn.parallel.DistributedDataParallel"
        if isinstance(model, ApexDistributedDataParallel):
            parallel_type = "apex.parallel.DistributedDataParallel"
        if isinstance(model, torch.nn.parallel.DataParallel):
            parallel_type = "torch.nn.parallel.DataParallel"
        if parallel_type is not None:
            raise RuntimeError(
                "Incoming model is an instance of {}. ".format(parallel_type)
                + "Parallel wrappers should only be applied to the model(s) AFTER \n"
                "the model(s) have been returned from amp.initialize."
            )


def check_params_fp32(models):
    """apex rejects fp16 parameters and buffers; its ``is_cuda`` check is dropped (CPU emulation)."""
    for model in models:
        for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
            if tensor.is_floating_point() and tensor.dtype == torch.float16:
                warn_or_err(
                    "Found param {} with type {}, expected torch.cuda.FloatTensor.\n"
                    "When using amp.initialize, you do not need to call .half() on your model\n"
                    "before passing it, no matter what optimization level you choose.".format(name, tensor.type())
                )


def _patch_casting_forward(model, input_caster, output_caster):
    old_fwd = model.forward

    def new_fwd(*args, **kwargs):
        if input_caster is not None:
            args, kwargs = applier(args, input_caster), applier(kwargs, input_caster)
        return applier(old_fwd(*args, **kwargs), output_caster)

    model.forward = new_fwd


def _patch_autocast_forward(model):
    old_fwd = model.forward

    def new_fwd(*args, **kwargs):
        if not _amp_state.casts_active:
            return old_fwd(*args, **kwargs)
        param = next(model.parameters(), None)
        device_type = "cpu" if param is None else param.device.type
        with torch.autocast(device_type, dtype=torch.float16):
            return old_fwd(*args, **kwargs)

    model.forward = new_fwd


def _patch_step_without_casts(optimizer):
    old_step = optimizer.step

    def new_step(*args, **kwargs):
        with disable_casts():
            return old_step(*args, **kwargs)

    optimizer.step = new_step


def _initialize(models, optimizers, properties, num_losses=1, cast_model_outputs=None):
    optimizers_was_list = False
    if isinstance(optimizers, torch.optim.Optimizer):
        optimizers = [optimizers]
    elif optimizers is None:
        optimizers = []
    elif isinstance(optimizers, list):
        optimizers_was_list = True
    else:
        raise TypeError("optimizers must be either a single optimizer or a list of optimizers.")
    if isinstance(models, torch.nn.Module):
        models_was_list = False
        models = [models]
    elif isinstance(models, list):
        models_was_list = True
    else:
        raise TypeError("models must be either a single model or a list of models.")
    check_models(models)
    if not _amp_state.allow_incoming_model_not_fp32:
        check_params_fp32(models)

    if properties.cast_model_type:
        for model in models:
            if properties.keep_batchnorm_fp32:
                convert_network(model, properties.cast_model_type)
            else:
                model.to(properties.cast_model_type)
            _patch_casting_forward(
                model,
                functools.partial(to_type, properties.cast_model_type),
                functools.partial(to_type, cast_model_outputs or torch.float32),
            )
        for optimizer in optimizers:
            optimizer.load_state_dict(optimizer.state_dict())
    elif cast_model_outputs is not None:
        for model in models:
            _patch_casting_forward(model, None, functools.partial(to_type, cast_model_outputs))

    for i, optimizer in enumerate(optimizers):
        optimizers[i] = _process_optimizer(optimizer, properties)
    _amp_state.loss_scalers = [
        LossScaler(
            properties.loss_scale, min_loss_scale=_amp_state.min_loss_scale, max_loss_scale=_amp_state.max_loss_scale
        )
        for _ in range(num_losses)
    ]
    if properties.patch_torch_functions:
        _amp_state.casts_active = True
        for model in models:
            _patch_autocast_forward(model)
        for optimizer in optimizers:
            _patch_step_without_casts(optimizer)

    if optimizers_was_list:
        return (models if models_was_list else models[0]), optimizers
    if models_was_list:
        return models if not optimizers else (models, optimizers[0])
    return models[0] if not optimizers else (models[0], optimizers[0])
