"""The transformers releases that decide a rewrite (docs/reference/transformers.md), and what the
project's pin guarantees (``options.project.pins``, cuda2npu/core/pins.py)."""

from __future__ import annotations

import re

from cuda2npu.analysis.flash_attention2_classes import FA2_ON_NPU
from cuda2npu.core.pins import pin_at_least, pin_predates, pinned

ATTN_IMPLEMENTATION = "4.36.0"  # attn_implementation= and "sdpa" exist (§2)
BF16_ON_NPU = "4.34.0"  # TrainingArguments accepts bf16 on an NPU device (§4)
TRAINER_ON_NPU = "4.32.0"  # TrainingArguments picks the NPU (rules/tables/npu_first_releases.toml)
SDPA_TORCH = "2.1.1"  # transformers' "sdpa" raises ImportError under older torch (§2)


def guaranteed(options, version: str) -> bool:
    """Whether every transformers release the project's pin allows is ``version`` or newer."""
    return pin_at_least(options.project.pins, "transformers", version) is True


def pin_text(options) -> str:
    spec = pinned(options.project.pins, "transformers")
    return f"the pin `transformers{spec}` allows older releases" if spec is not None else "no transformers pin found"


def predates(options, version: str) -> str | None:
    """The project's transformers specifier when it allows no release from ``version`` on (the
    feature is missing whatever gets installed), else None."""
    return pin_predates(options.project.pins, "transformers", version)


def fp16_under_pin(options) -> str | None:
    """Why an fp16 training flag stays fp16 under the bf16 policy with the project's transformers pin:
    None when it becomes bf16; "" when it runs as it is and asks nothing (4.32 and 4.33 know the NPU but
    reject bf16 there: Qwen-VL's QLoRA scripts under 4.32.0); else the reason, to say beside it."""
    spec = predates(options, BF16_ON_NPU)
    if spec is None:
        return None
    if predates(options, TRAINER_ON_NPU) is None:
        return ""
    return (
        f"the pin `transformers{spec}` predates {TRAINER_ON_NPU}, the first release whose TrainingArguments "
        f"knows the NPU (it sets up CUDA/NCCL or the CPU, fp16 alike): raise the pin to >={BF16_ON_NPU}, "
        "then train in BF16, the NPU's native type"
    )


def bf16_flag_rejected(options, spelled: str) -> str | None:
    """NPU906's message for ``bf16=True`` (``spelled``: ``--bf16``, ``bf16=True``) under a pin whose
    TrainingArguments cannot train in bf16 on an NPU device, else None: before 4.32 it does not know
    the NPU at all (fp16 fails the same way), in 4.32 and 4.33 it raises ValueError for bf16 there."""
    spec = predates(options, BF16_ON_NPU)
    if spec is None:
        return None
    if predates(options, TRAINER_ON_NPU):
        return (
            f"`{spelled}` cannot train on an NPU host under the pin `transformers{spec}`: its TrainingArguments "
            f"does not know the NPU before {TRAINER_ON_NPU} (it sets up CUDA/NCCL or the CPU, fp16 alike): raise "
            f"the pin to >={BF16_ON_NPU}"
        )
    return (
        f"`{spelled}` makes TrainingArguments raise ValueError on an NPU host under the pin `transformers{spec}` "
        f"(bf16 on an NPU device is accepted from {BF16_ON_NPU}): raise the pin to >={BF16_ON_NPU}, or train "
        "with fp16 (with loss scaling)"
    )


def flash_flag_off_advice(options, off: str, pass_phrase: str) -> str:
    """What to do with a ``use_flash_attention_2`` kept as written: ``off`` (turn it off), with
    ``pass_phrase`` (its ``{value}``: the ``attn_implementation`` to pass instead) where the pin allows
    releases that have ``attn_implementation`` (4.36.0), or require the release running FlashAttention
    on the NPU."""
    advice = off
    if predates(options, ATTN_IMPLEMENTATION) is None:
        value, _ = fa2_replacement(options)
        since = "" if guaranteed(options, ATTN_IMPLEMENTATION) else f", transformers >= {ATTN_IMPLEMENTATION}"
        advice += f" (and {pass_phrase.format(value=value)}{since})"
    return f"{advice}, or require transformers >= {FA2_ON_NPU} (flash attention on the NPU)"


# Gemma-2 checkpoints and model families ("google/gemma-2-9b-it", "gemma2", "Skywork-Reward-Gemma-2-27B"),
# not Gemma-1's "gemma-2b": their attention softcaps its logits (Gemma2Config.attn_logit_softcapping),
# which transformers' eager attention applies (and flash-attn >= 2.6) but its sdpa_attention_forward
# never reads (docs/reference/transformers.md §1.3)
SOFTCAPPED_MODELS = re.compile(r"gemma[-_]?2(?![\dbB])", re.IGNORECASE)


def names_softcapped_model(texts) -> bool:
    """One of ``texts`` (a file's strings, a script) names a Gemma-2 model (:data:`SOFTCAPPED_MODELS`)."""
    return any(SOFTCAPPED_MODELS.search(text) for text in texts)


def fa2_replacement(options, remote_code: bool = False, softcapped: bool = False) -> tuple[str, str]:
    """The ``attn_implementation`` that replaces ``flash_attention_2`` under the project's pins, and
    why: "sdpa", or "eager" where the torch pin allows no release SDPA runs on, for a model whose
    code comes with its checkpoint (``trust_remote_code``): such a class need not declare SDPA, and
    transformers raises for one that does not (LMFlow's Phi-3-vision script), while every model runs
    eager; and where the file names a Gemma-2 model (``softcapped``), whose logit softcapping sdpa drops."""
    if remote_code:
        return "eager", (
            "not sdpa: the model's own code (trust_remote_code) need not support SDPA, and transformers raises "
            "for a class that does not declare it; numerics differ slightly"
        )
    if softcapped:
        return "eager", (
            "not sdpa: this file names a Gemma-2 model, whose attention logit softcapping transformers applies in "
            "eager attention (as flash-attn >= 2.6 does) but not in sdpa"
        )
    spec = pin_predates(options.project.pins, "torch", SDPA_TORCH)
    if spec is None:
        return "sdpa", "torch's scaled_dot_product_attention, numerics differ slightly"
    return "eager", (
        f"not sdpa: the pin `torch{spec}` predates {SDPA_TORCH}, which transformers' sdpa requires; "
        "numerics differ slightly"
    )
