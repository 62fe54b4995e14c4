"""One side of the whole-script A/B (``validate --run``), in its own child process.

``python -m cuda2npu.validation.trace SPEC`` makes the process the side's strict host
(:mod:`cuda2npu.validation.strict_host`), seeds every generator, puts the comparison mode in place,
installs the :class:`~cuda2npu.validation.recorder.Recorder` and runs the user's script as
``__main__``. After ``steps`` optimizer steps (or a limit the original's run sets) the script is
stopped; in the exact mode the probes run (:mod:`cuda2npu.validation.probes`); the trace is
written as JSON.

The comparison modes (``spec["mode"]``):

* ``exact``: dropout off, and autocast disabled wherever the script enters it (the kernels
  documented as half-precision-only accept float32), so both sides compute in float32 and are
  compared at float32 bounds;
* ``policy``: the script's own precision (autocast, loss scaling), dropout still off, compared at
  the bounds of that precision and for the dtype each module computes in.
"""

from __future__ import annotations

import os
import random
import runpy
import sys
from pathlib import Path

import torch

from cuda2npu.emulation.controls import CONTROLS
from cuda2npu.validation.failures import child_main
from cuda2npu.validation.recorder import Recorder, TraceComplete

DROPOUT_FUNCTIONS = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")


def _share_random_stream() -> None:
    """Random numbers drawn on the emulated npu come from the CPU generator, as the CUDA emulation's
    do, so both runs of a script draw the same data in the same order. (On hardware CUDA's and the
    NPU's generators differ: data drawn on the device differs there whatever the migration.)"""
    from cuda2npu.emulation import npu_device

    npu_device.default_generators = (torch.default_generator,)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy
    except ImportError:
        return
    numpy.random.seed(seed)


def switch_dropout_off() -> None:
    """Every dropout draws nothing: the two sides' kernels draw their masks from different streams."""
    functional = torch.nn.functional

    def no_dropout(input, *args, **kwargs):
        return input

    for name in DROPOUT_FUNCTIONS:
        setattr(functional, name, no_dropout)
    CONTROLS.dropout = False


def force_full_precision() -> None:
    """Autocast is entered disabled (the recorder, installed after, still notes what the script asked
    for); half-only kernels take float32."""
    autocast = torch.amp.autocast_mode.autocast
    original_init = autocast.__init__

    def init(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        original_init(self, device_type, dtype=dtype, enabled=False, cache_enabled=cache_enabled)

    autocast.__init__ = init
    CONTROLS.half_only = False


def run(spec: dict) -> dict:
    """Run the spec's script in its tree and return the trace (also on a normal exit)."""
    from cuda2npu.validation.probes import run_probes
    from cuda2npu.validation.strict_host import install_host

    tree = Path(spec["tree"])
    os.chdir(tree)
    sys.path.insert(0, str(tree))
    backend = install_host(spec["role"], tree, spec.get("autoload", False))
    if backend == "npu (emulated)":
        _share_random_stream()
    seed_everything(spec["seed"])
    recorder = Recorder(spec["steps"], tree, spec.get("limits"))
    switch_dropout_off()
    exact = spec["mode"] == "exact"
    if exact:
        force_full_precision()
    recorder.install()
    argv = spec["command"]
    sys.argv = list(argv)
    status = "finished"
    try:
        runpy.run_path(str(tree / argv[0]), run_name="__main__")
    except TraceComplete as stop:
        status = str(stop)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
    except BaseException as exc:
        if "same device" in str(exc):  # the line that mixed them is not the line to fix
            exc.cuda2npu_place = recorder.device_place()
        raise
    recorder.uninstall()
    return {
        "backend": backend,
        "mode": spec["mode"],
        "status": status,
        **recorder.trace(),
        "probes": run_probes(recorder) if exact else [],
    }


if __name__ == "__main__":
    sys.exit(child_main(sys.argv, run))
