"""``amp.initialize``, ``amp.state_dict``, ``amp.load_state_dict``
(``NVIDIA/apex`` ``apex/amp/frontend.py``).

Optimisation levels set these properties (``Properties``), any non-None keyword overrides
them, with apex's consistency checks (RuntimeError unless ``_amp_state.hard_override``):

====  =========  ================  ==================  ==============  ==========
level cast_model patch_torch_funcs keep_batchnorm_fp32 master_weights  loss_scale
====  =========  ================  ==================  ==============  ==========
O0    float32    False             None                False           1.0
O1    None       True              None                None            "dynamic"
O2    float16    False             True                True            "dynamic"
O3    float16    False             False               False           1.0
====  =========  ================  ==================  ==============  ==========

What each property does is in :mod:`._initialize`. apex prints the chosen options when
``verbosity > 0``; the stand-in stays silent.
"""

from __future__ import annotations

from collections import OrderedDict

import torch

from ._amp_state import _amp_state, warn_or_err
from ._initialize import _initialize


class Properties:
    """Amp options, routed through ``__setattr__`` for apex's consistency checks."""

    def __init__(self):
        self.options = {
            "enabled": False,
            "opt_level": None,
            "cast_model_type": None,
            "patch_torch_functions": False,
            "keep_batchnorm_fp32": None,
            "master_weights": None,
            "loss_scale": 1.0,
        }

    def __getattr__(self, name):
        options = self.__dict__.get("options")
        if options is not None and name in options:
            return options[name]
        raise AttributeError("'{}' object has no attribute '{}'".format(type(self).__name__, name))

    def __setattr__(self, name, value):
        if "options" not in self.__dict__ or name not in self.options:
            super().__setattr__(name, value)
            return
        if name == "cast_model_type":
            if self.opt_level == "O1" and value is not None and value is not False and value is not torch.float32:
                warn_or_err(
                    "O1 inserts casts around Torch functions rather than model weights, so with O1, the "
                    "model weights themselves should remain FP32. If you wish to cast the model to a "
                    "different type, use opt_level='O2' or 'O3'. cast_model_type was {}".format(value)
                )
        elif name == "patch_torch_functions":
            if self.opt_level != "O1" and value:
                warn_or_err("Currently, patch_torch_functions=True should only be set by selecting opt_level='O1'.")
        elif name == "keep_batchnorm_fp32":
            if self.opt_level == "O1" and value is not None:
                warn_or_err(
                    "With opt_level O1, batchnorm functions are automatically patched to run in FP32, "
                    "so keep_batchnorm_fp32 should be None. keep_batchnorm_fp32 was {}".format(value)
                )
            value = {"False": False, "True": True}.get(value, value)
            if value not in (True, False, None):
                raise AssertionError(
                    "keep_batchnorm_fp32 must be a boolean, the string 'True' or 'False', or None, "
                    "found keep_batchnorm_fp32={}".format(value)
                )
        elif name == "master_weights":
            if self.opt_level == "O1" and value is not None:
                warn_or_err(
                    "It doesn't make sense to use master_weights with O1. "
                    "With O1, your model weights themselves should be FP32."
                )
        elif name == "loss_scale":
            value = value if value == "dynamic" else float(value)
        self.options[name] = value


_OPT_LEVELS = {
    "O0": dict(
        cast_model_type=torch.float32,
        patch_torch_functions=False,
        keep_batchnorm_fp32=None,
        master_weights=False,
        loss_scale=1.0,
    ),
    "O1": dict(
        cast_model_type=None,
        patch_torch_functions=True,
        keep_batchnorm_fp32=None,
        master_weights=None,
        loss_scale="dynamic",
    ),
    "O2": dict(
        cast_model_type=torch.float16,
        patch_torch_functions=False,
        keep_batchnorm_fp32=True,
        master_weights=True,
        loss_scale="dynamic",
    ),
    "O3": dict(
        cast_model_type=torch.float16,
        patch_torch_functions=False,
        keep_batchnorm_fp32=False,
        master_weights=False,
        loss_scale=1.0,
    ),
}


def initialize(
    models,
    optimizers=None,
    enabled=True,
    opt_level="O1",
    cast_model_type=None,
    patch_torch_functions=None,
    keep_batchnorm_fp32=None,
    master_weights=None,
    loss_scale=None,
    cast_model_outputs=None,
    num_losses=1,
    verbosity=1,
    min_loss_scale=None,
    max_loss_scale=2.0**24,
):
    """Prepare models and optimizers for the chosen ``opt_level``; returns them in the given structure."""
    _amp_state.opt_properties = Properties()
    _amp_state.verbosity = verbosity
    _amp_state.casts_active = False
    if not enabled:
        return models if optimizers is None else (models, optimizers)
    if not torch.backends.cudnn.enabled:
        raise RuntimeError("Amp requires torch.backends.cudnn.enabled = True")
    if opt_level not in _OPT_LEVELS:
        raise RuntimeError("Unexpected optimization level {}. Options are 'O0', 'O1', 'O2', 'O3'.".format(opt_level))
    properties = _amp_state.opt_properties
    properties.enabled = True
    properties.opt_level = opt_level
    for name, value in _OPT_LEVELS[opt_level].items():
        setattr(properties, name, value)
    _amp_state.min_loss_scale = min_loss_scale
    _amp_state.max_loss_scale = max_loss_scale
    overrides = dict(
        cast_model_type=cast_model_type,
        patch_torch_functions=patch_torch_functions,
        keep_batchnorm_fp32=keep_batchnorm_fp32,
        master_weights=master_weights,
        loss_scale=loss_scale,
    )
    for name, value in overrides.items():
        if value is not None:
            setattr(properties, name, value)
    return _initialize(models, optimizers, properties, num_losses, cast_model_outputs)


def state_dict(destination=None):
    """``{"loss_scaler<i>": {"loss_scale": ..., "unskipped": ...}}`` for every loss scaler."""
    if destination is None:
        destination = OrderedDict()
    for idx, loss_scaler in enumerate(_amp_state.loss_scalers):
        destination["loss_scaler%d" % idx] = {
            "loss_scale": loss_scaler.loss_scale(),
            "unskipped": loss_scaler._unskipped,
        }
    return destination


def load_state_dict(state_dict):
    """Restore loss scales saved by :func:`state_dict` (apex's warnings and checks included)."""
    if len(state_dict) != len(_amp_state.loss_scalers):
        print(
            "Warning: state_dict contains {} entries, while {} loss_scalers are used".format(
                len(state_dict), len(_amp_state.loss_scalers)
            )
        )
    nb_loss_scalers = len(_amp_state.loss_scalers)
    unexpected_keys = []
    idx = 0
    for key in state_dict:
        if "loss_scaler" not in key:
            unexpected_keys.append(key)
        else:
            if idx > nb_loss_scalers - 1:
                print("Skipping loss_scaler[{}], since num_losses was set to {}".format(idx, nb_loss_scalers))
                break
            _amp_state.loss_scalers[idx]._loss_scale = state_dict[key]["loss_scale"]
            _amp_state.loss_scalers[idx]._unskipped = state_dict[key]["unskipped"]
            idx += 1
    if unexpected_keys:
        raise RuntimeError(
            "Error(s) in loading state_dict. Unexpected key(s) in state_dict: {}. ".format(
                ", ".join('"{}"'.format(k) for k in unexpected_keys)
            )
        )
