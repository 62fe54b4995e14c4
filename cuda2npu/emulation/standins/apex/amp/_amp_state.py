"""Process-wide amp state (``NVIDIA/apex`` ``apex/amp/_amp_state.py``)."""

from __future__ import annotations


class AmpState:
    """Attribute stash shared by the amp modules."""

    def __init__(self) -> None:
        self.hard_override = False
        self.allow_incoming_model_not_fp32 = False
        self.verbosity = 1
        self.casts_active = False  # True while an O1 initialisation is in force


_amp_state = AmpState()


def warn_or_err(msg: str) -> None:
    if _amp_state.hard_override:
        print("Warning:  " + msg)
    else:
        raise RuntimeError(msg)


def master_params(optimizer):
    """Generator over the params owned by ``optimizer`` (the fp32 masters once O2 is set up)."""
    for group in optimizer.param_groups:
        yield from group["params"]
