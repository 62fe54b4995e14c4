"""FP8 contexts (``NVIDIA/TransformerEngine`` ``transformer_engine/pytorch/fp8.py`` /
``quantization.py``) as HIGH-PRECISION no-ops.

``fp8_autocast`` / ``autocast`` accept TE's arguments and change nothing computed: the stand-in
modules compute in the activation dtype (bf16/fp16/fp32), so an original run that used FP8
GEMMs carries FP8 quantisation error (~1e-2 relative) that the CPU run does not. They mark the
region (:data:`cuda2npu.emulation.controls.CONTROLS` ``.fp8``) for the validation's precision check.
``check_fp8_support`` reports that FP8 is unavailable. ``fp8_model_init(enabled=True)``
(parameters stored in FP8) raises NotImplementedError.
"""

from __future__ import annotations

import contextlib

from cuda2npu.emulation.controls import CONTROLS


@contextlib.contextmanager
def fp8_autocast(enabled=True, calibrating=False, fp8_recipe=None, fp8_group=None, _graph=False):
    """Accepted; computation stays in high precision (``CONTROLS.fp8`` says the program is in an FP8
    region, for the validation)."""
    CONTROLS.fp8 += bool(enabled)
    try:
        yield
    finally:
        CONTROLS.fp8 -= bool(enabled)


def autocast(enabled=True, calibrating=False, recipe=None, amax_reduction_group=None, _graph=False):
    """TE 2.x name of :func:`fp8_autocast`."""
    return fp8_autocast(enabled, calibrating, recipe, amax_reduction_group, _graph)


@contextlib.contextmanager
def fp8_model_init(enabled=True, recipe=None, preserve_high_precision_init_val=False):
    if enabled:
        raise NotImplementedError("fp8_model_init(enabled=True) (FP8 parameters) has no CPU stand-in")
    yield


def check_fp8_support():
    """``(available, reason)``, as TE returns it."""
    return False, "FP8 is not emulated by the cuda2npu CPU stand-in"
