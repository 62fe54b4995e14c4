"""Shared pieces of the ColossalAI rules (NPU5xx).

* which ColossalAI symbol an expression names (``colossalai.booster.plugin.TorchDDPPlugin`` and its
  re-exports all read as ``TorchDDPPlugin``);
* reading literals (``literal``, re-exported from ``cuda2npu.core.literals``);
* what the project's ColossalAI pin guarantees (:func:`accelerator_api`);
* :class:`ImportEditor`, which plans the imports the ColossalAI rewrites need (``from
  colossalai.accelerator import get_accelerator``, ``import torch``, ``import numpy as np``: the name
  each binds, refusing a name the file already uses) and which ColossalAI imports a rewrite left
  unused. Every ColossalAI rule of a traversal shares it (``ctx.file_state``); the last one to leave
  the module reports the removals (one fix per import statement) and the additions (on the report's
  ``imports``, added by the engine).

The module has no rules of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import libcst as cst

from cuda2npu.analysis.exports import exported
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.imports import (
    ImportNeed,
    bound_name,
    bound_object,
    describe_imports,
    is_import_line,
    remove_import_names,
)
from cuda2npu.core.literals import NOT_LITERAL, literal  # noqa: F401  (re-exported to the family's rules)
from cuda2npu.core.pins import pin_at_least, pin_predates

TRIGGERS = (r"colossalai",)

LAUNCHERS = ("launch", "launch_from_torch", "launch_from_slurm", "launch_from_openmpi")
PLUGINS = (
    "TorchDDPPlugin",
    "LowLevelZeroPlugin",
    "GeminiPlugin",
    "HybridParallelPlugin",
    "MoeHybridParallelPlugin",
    "TorchFSDPPlugin",
)
OPTIMIZERS = ("HybridAdam", "CPUAdam", "FusedAdam", "FusedLAMB", "FusedSGD")

_SYMBOL_MODULES: dict[str, Callable[[str], bool]] = {
    **{name: (lambda m: m in ("colossalai", "colossalai.initialize")) for name in LAUNCHERS},
    "get_current_device": lambda m: (
        m
        in (
            "colossalai.utils",
            "colossalai.utils.common",
            "colossalai.utils.device",
            "colossalai.utils.cuda",
        )
    ),
    "set_accelerator": lambda m: m in ("colossalai.accelerator", "colossalai.accelerator.api"),
    "get_accelerator": lambda m: m in ("colossalai.accelerator", "colossalai.accelerator.api"),
    "Booster": lambda m: m in ("colossalai.booster", "colossalai.booster.booster"),
    **{name: (lambda m: m.startswith("colossalai.booster")) for name in PLUGINS},
    **{name: (lambda m: m.startswith("colossalai.nn")) for name in OPTIMIZERS},
    "DistCoordinator": lambda m: m.startswith("colossalai.cluster"),
    # ZeRO/Gemini entry points whose optimizer must stay a ColossalAI one (GeminiOptimizer asserts the type)
    **{
        name: (lambda m: m.startswith("colossalai.zero"))
        for name in ("GeminiOptimizer", "GeminiDDP", "zero_optim_wrapper")
    },
}

# Imports the keep strategy may drop once its rewrites left them unused; native drops more.
REMOVABLE_KEEP = frozenset({"get_current_device", "HybridAdam", "CPUAdam", "FusedAdam", "FusedSGD"})
REMOVABLE_NATIVE = REMOVABLE_KEEP | {
    "colossalai",
    *LAUNCHERS,
    "Booster",
    "TorchDDPPlugin",
    "LowLevelZeroPlugin",
    "get_accelerator",
}


# The first release with the accelerator API (PR #5239, docs/reference/colossalai.md): get_accelerator() probes
# cuda, npu, cpu; launch() takes the backend from it; utils.get_current_device() wraps it; HybridAdam updates
# npu parameters with a pure-PyTorch path.
ACCELERATOR_API = "0.3.5"


def accelerator_api(options) -> bool | None:
    """Whether every ColossalAI the project's pin allows has the accelerator API (True), none has
    (False: the pin predates 0.3.5), or either may be installed (None: not pinned, or both allowed)."""
    if pin_at_least(options.project.pins, "colossalai", ACCELERATOR_API):
        return True
    return False if pin_predates(options.project.pins, "colossalai", ACCELERATOR_API) else None


def symbol_of(qualified: str | None) -> str | None:
    """``'TorchDDPPlugin'`` for ``colossalai.booster.plugin.torch_ddp_plugin.TorchDDPPlugin``, etc."""
    if not qualified or not (qualified == "colossalai" or qualified.startswith("colossalai.")):
        return None
    if qualified == "colossalai":
        return "colossalai"
    module, _, name = qualified.rpartition(".")
    check = _SYMBOL_MODULES.get(name)
    return name if check is not None and check(module) else None


# --------------------------------------------------------------------------------------------
# imports


def _bound_names(small: cst.BaseSmallStatement) -> list[tuple[cst.ImportAlias, str, str]]:
    """(alias, bound name, qualified name of what it binds) for each alias of an absolute import."""
    if isinstance(small, cst.Import) or (
        isinstance(small, cst.ImportFrom) and not small.relative and not isinstance(small.names, cst.ImportStar)
    ):
        return [(alias, bound_name(alias, small), bound_object(alias, small)) for alias in small.names]
    return []


@dataclass
class _Request:
    code: str
    tier: Tier
    bound: str = ""  # the name an added import binds


class ImportEditor:
    """Imports added and removed by the ColossalAI rules of one traversal (see the module doc)."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.module: cst.Module = ctx.module
        self.scope = ctx.resolver.module_scope
        self._additions: dict[ImportNeed, _Request] = {}  # import → the requester with the lowest tier
        self._emitted = False
        self.rules_left = 0  # ColossalAI rules of this traversal that have not left the module yet
        self.reads: dict[str, int] | None = None  # filled by the NPU510 rule during the traversal

    @classmethod
    def of(cls, ctx) -> "ImportEditor":
        return ctx.file_state(cls)

    # ---------------------------------------------------------------- requests
    def _enabled(self, code: str) -> bool:
        from cuda2npu.core.catalogue import rule as rule_doc

        return self.ctx.options.code_enabled(code, rule_doc(code).opt_in)

    def bound_to(self, qualified: Iterable[str]) -> str | None:
        wanted = set(qualified)
        for name, targets in self.scope.imports.items():
            if len(targets) == 1 and next(iter(targets)) in wanted and name not in self.scope.others:
                return name
        return None

    def _request(self, need: ImportNeed, bound: str, code: str, tier: Tier) -> cst.Name | None:
        """Plan ``need`` (an import binding ``bound``); None if ``bound`` is already taken by something else."""
        current = self._additions.get(need)
        if current is None:
            if self.ctx.resolver.is_bound(bound) or any(r.bound == bound for r in self._additions.values()):
                return None
            self._additions[need] = _Request(code, tier, bound)
        elif tier < current.tier:
            self._additions[need] = _Request(code, tier, bound)
        return cst.Name(bound)

    def module_name(self, module: str, alias: str | None = None, *, code: str, tier: Tier) -> cst.Name | None:
        """A name bound to ``module`` (adding ``import module [as alias]`` if needed), or None on a clash."""
        existing = self.bound_to([module])
        if existing is not None:
            return cst.Name(existing)
        if not self._enabled(code) or ("." in module and alias is None):
            return None
        return self._request(ImportNeed(module, None, alias), alias or module, code, tier)

    def from_name(self, module: str, name: str, *, code: str, tier: Tier, also: Sequence[str] = ()) -> cst.Name | None:
        """A name bound to ``module.name`` (adding ``from module import name`` if needed), or None."""
        existing = self.bound_to([f"{module}.{name}", *also])
        if existing is not None:
            return cst.Name(existing)
        if not self._enabled(code):
            return None
        return self._request(ImportNeed(module, name), name, code, tier)

    def snapshot(self) -> dict[ImportNeed, _Request]:
        return dict(self._additions)

    def restore(self, snapshot: dict[ImportNeed, _Request]) -> None:
        self._additions = dict(snapshot)

    # ---------------------------------------------------------------- emission
    def emit(self, rule, removable: frozenset[str], removal_code: str) -> None:
        """Report the import edits once per traversal, when the last ColossalAI rule leaves the module
        (rules may still request imports in their own ``leave_Module``): one fix per import line
        that loses names, and one report naming the added imports (the engine adds them)."""
        self.rules_left -= 1
        if self._emitted or self.rules_left > 0:
            return
        self._emitted = True
        if self._enabled(removal_code) and self.reads is not None:
            for statement, names in self._plan_removals(removable).items():
                rule.report(
                    removal_code,
                    statement,
                    f"drops the import of {', '.join(f'`{n}`' for n in sorted(names))} left unused by the rewrite",
                    remove_import_names(statement, names),
                    tier=Tier.EXACT,
                    needs_torch_npu=False,
                )
        if self._additions:
            first = min(self._additions.values(), key=lambda r: (r.tier, r.code))
            rule.report(
                first.code,
                self.module,
                f"adds {describe_imports(self._additions)} for the rewrites in this file",
                lambda module: module,  # the engine adds the imports
                tier=first.tier,
                needs_torch_npu=False,
                imports=list(self._additions),
            )

    def _plan_removals(self, removable: frozenset[str]) -> dict[cst.CSTNode, list[str]]:
        """import statement -> the names it binds that are removable and no longer read."""
        removals: dict[cst.CSTNode, list[str]] = {}
        for stmt in self.module.body:
            if not is_import_line(stmt):
                continue
            for small in stmt.body:
                for alias, bound, qualified in _bound_names(small):
                    symbol = symbol_of(qualified)
                    if symbol is None or symbol not in removable:
                        continue
                    if isinstance(small, cst.Import) and symbol != "colossalai":
                        continue
                    if not self.reads.get(bound, 0) and not exported(self.ctx, small, bound):  # (a re-export)
                        removals.setdefault(small, []).append(bound)
        return removals
