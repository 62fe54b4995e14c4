"""``TrainingArguments(optim=...)`` names whose optimizer needs CUDA (NPU727), the one decision the
Python rule, the launch-script flags and the run-config files share: ``paged_adamw_32bit``
(bitsandbytes' paged AdamW, 32-bit states) and ``adamw_apex_fused`` (apex's FusedAdam) become
``adamw_torch``, the same AdamW update from ``torch.optim.AdamW`` (docs/reference/transformers.md
§8); the other bitsandbytes optimizers (8-bit states, Lion, RMSprop, AdEMAMix) are manual items."""

from __future__ import annotations

SAME_ADAMW = "adamw_torch"
# optim names whose optimizer computes torch's AdamW update in a CUDA-only implementation, with
# float32 moments whatever the parameters' dtype (§8): what it builds, whose it is, what else changes
ADAMW_ALIASES = {
    "paged_adamw_32bit": (
        "bitsandbytes' paged AdamW",
        "bitsandbytes",
        "; they stay in device memory, where paging could move them to the host",
    ),
    "adamw_apex_fused": ("apex's FusedAdam (a CUDA extension)", "apex", ""),
}
# transformers' OptimizerNames built from bitsandbytes (trainer.py get_optimizer_cls_and_kwargs)
BNB_OPTIMIZERS = {
    "adamw_bnb_8bit",
    "adamw_8bit",
    "paged_adamw_8bit",
    "lion_32bit",
    "lion_8bit",
    "paged_lion_32bit",
    "paged_lion_8bit",
    "rmsprop_bnb",
    "rmsprop_bnb_8bit",
    "rmsprop_bnb_32bit",
    "ademamix",
    "ademamix_8bit",
    "paged_ademamix_32bit",
    "paged_ademamix_8bit",
}


def optim_decision(value: str, shown: str) -> tuple[str | None, str] | None:
    """(``adamw_torch`` or None: manual, message) for an ``optim`` naming a CUDA-only optimizer;
    ``shown``: how the setting is written (`` `optim: X` ``, `` `--optim X` ``)."""
    if value in ADAMW_ALIASES:
        what, whose, memory = ADAMW_ALIASES[value]
        return SAME_ADAMW, (
            f"{shown} builds {what}, which has no NPU path: `{SAME_ADAMW}` (torch.optim.AdamW) computes "
            "the same AdamW update from the same Trainer arguments; its moments take the parameters' dtype, where "
            f"{whose} kept float32 ones (the same for float32 parameters, not for a model loaded in bf16/fp16){memory}"
        )
    if value in BNB_OPTIMIZERS:
        paged = " (paged states need CUDA managed memory)" if "paged" in value else ""
        if "8bit" in value:
            what, choice = "8-bit optimizer states", f"`{SAME_ADAMW}` (32-bit states: more memory, other numerics)"
        else:
            what, choice = "an update no torch optimizer computes the same way", "one the Trainer builds from torch"
        return None, (
            f"{shown} builds a bitsandbytes optimizer ({what}); bitsandbytes has no Ascend kernels{paged}: "
            f"choose {choice}"
        )
    return None
