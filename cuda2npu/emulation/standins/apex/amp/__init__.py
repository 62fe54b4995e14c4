"""``apex.amp`` stand-in: ``initialize``, ``scale_loss``, ``master_params``, ``state_dict``,
``load_state_dict``, ``disable_casts`` and the O1 cast decorators/registrations.

Loss scaling is apex's own algorithm (:mod:`.scaler`), so dynamic loss scales evolve exactly
as apex's would for the same gradients; O1 casting uses torch autocast (:mod:`._initialize`).
"""

from ._amp_state import master_params
from .amp import (
    float_function,
    half_function,
    promote_function,
    register_float_function,
    register_half_function,
    register_promote_function,
)
from .frontend import initialize, load_state_dict, state_dict
from .handle import disable_casts, scale_loss

__all__ = [
    "disable_casts",
    "float_function",
    "half_function",
    "initialize",
    "load_state_dict",
    "master_params",
    "promote_function",
    "register_float_function",
    "register_half_function",
    "register_promote_function",
    "scale_loss",
    "state_dict",
]
