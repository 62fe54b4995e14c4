"""Run options shared by ``migrate`` and ``check``, and which rule codes they enable."""

from __future__ import annotations

from dataclasses import dataclass

from cuda2npu.diagnostics import Tier


STRATEGY_CHOICES = {
    "precision": ("bf16", "fp16", "keep"),
    "apex": ("native", "ascend"),
    "colossalai": ("keep", "native"),
}


@dataclass(frozen=True)
class Options:
    """Everything that changes what the rules report or rewrite (part of the cache key)."""

    select: tuple[str, ...] = ("NPU",)
    ignore: tuple[str, ...] = ()
    max_tier: Tier = Tier.REVIEW
    markers: bool = True
    fix: bool = True
    precision: str = "bf16"
    apex: str = "native"
    colossalai: str = "keep"
    fuse_sdpa: bool = False
    target_torch_npu: str | None = None  # None: the newest version documented in the reference

    def code_enabled(self, code: str, opt_in: bool = False) -> bool:
        """ruff-style selection: the longest matching prefix wins; opt-in rules need their full code."""
        best_select = max((len(p) for p in self.select if code.startswith(p)), default=-1)
        best_ignore = max((len(p) for p in self.ignore if code.startswith(p)), default=-1)
        if best_select < 0 or best_ignore >= best_select:
            return False
        return not opt_in or code in self.select
