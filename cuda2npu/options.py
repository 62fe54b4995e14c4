"""Run options shared by ``migrate`` and ``check``, and which rule codes they enable."""

from __future__ import annotations

from dataclasses import dataclass, field

from cuda2npu.diagnostics import Tier


@dataclass(frozen=True)
class Options:
    select: tuple[str, ...] = ("NPU",)
    ignore: tuple[str, ...] = ()
    max_tier: Tier = Tier.REVIEW
    markers: bool = True
    fix: bool = True
    strategies: dict = field(default_factory=dict, hash=False, compare=True)

    def code_enabled(self, code: str, opt_in: bool = False) -> bool:
        """ruff-style selection: the longest matching prefix wins; opt-in rules need their full code."""
        best_select = max((len(p) for p in self.select if code.startswith(p)), default=-1)
        best_ignore = max((len(p) for p in self.ignore if code.startswith(p)), default=-1)
        if best_select < 0 or best_ignore >= best_select:
            return False
        return not opt_in or code in self.select

    def strategy(self, name: str, default: str) -> str:
        return self.strategies.get(name, default)
