"""The transformers releases that decide a rewrite (docs/reference/transformers.md), and what the
project's pin guarantees (``Options.pins``, cuda2npu/core/pins.py)."""

from __future__ import annotations

from cuda2npu.core.pins import pin_at_least, pinned

FA2_ON_NPU = "4.51.0"  # flash_attention_2 runs on torch_npu's npu_fusion_attention (§1)
ATTN_IMPLEMENTATION = "4.36.0"  # attn_implementation= and "sdpa" exist (§2)


def guaranteed(options, version: str) -> bool:
    """Whether every transformers release the project's pin allows is ``version`` or newer."""
    return pin_at_least(options.pins, "transformers", version) is True


def pin_text(options) -> str:
    spec = pinned(options.pins, "transformers")
    return f"the pin `transformers{spec}` allows older releases" if spec is not None else "no transformers pin found"
