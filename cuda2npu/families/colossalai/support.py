"""Shared pieces of the ColossalAI rules (NPU5xx).

* which ColossalAI symbol an expression names (``colossalai.booster.plugin.TorchDDPPlugin`` and its
  re-exports all read as ``TorchDDPPlugin``);
* binding call arguments to a signature, reading literals, rebuilding argument lists;
* :class:`ImportEditor`, the one place that adds the imports the ColossalAI rewrites need
  (``from colossalai.accelerator import get_accelerator``, ``import torch``, ``import os``) and drops
  the ColossalAI imports a rewrite left unused. Every ColossalAI rule of a traversal shares it (it
  lives on the rule context), so each import line receives at most one fix.

The module has no rules of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import libcst as cst

from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.imports import bound_name, bound_object, is_docstring, is_import_line
from cuda2npu.core.literals import NOT_LITERAL, literal  # noqa: F401  (re-exported to the family's rules)

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
# arguments


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


@dataclass
class _LineEdit:
    removals: dict[str, _Request] = field(default_factory=dict)  # bound name → who asked
    additions: list[tuple[str, _Request]] = field(default_factory=list)  # import text → who asked


class ImportEditor:
    """Imports added and removed by the ColossalAI rules of one traversal (see the module doc)."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.module: cst.Module = ctx.module
        self.scope = ctx.resolver.module_scope
        self._additions: dict[str, _Request] = {}  # import statement text → first requester
        self._emitted = False
        self._anchor, self._before = self._find_anchor()
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

    def _request(self, text: str, bound: str, code: str, tier: Tier) -> cst.Name | None:
        """Plan ``text`` (an import binding ``bound``); None if ``bound`` is already taken by something else."""
        current = self._additions.get(text)
        if current is None:
            if self.ctx.resolver.is_bound(bound) or any(r.bound == bound for r in self._additions.values()):
                return None
            self._additions[text] = _Request(code, tier, bound)
        elif tier < current.tier:
            self._additions[text] = _Request(code, tier, bound)
        return cst.Name(bound)

    def module_name(self, module: str, alias: str | None = None, *, code: str, tier: Tier) -> cst.Name | None:
        """A name bound to ``module`` (adding ``import module [as alias]`` if needed), or None on a clash."""
        existing = self.bound_to([module])
        if existing is not None:
            return cst.Name(existing)
        if not self._enabled(code) or ("." in module and alias is None):
            return None
        text = f"import {module} as {alias}" if alias else f"import {module}"
        return self._request(text, alias or module, code, tier)

    def from_name(self, module: str, name: str, *, code: str, tier: Tier, also: Sequence[str] = ()) -> cst.Name | None:
        """A name bound to ``module.name`` (adding ``from module import name`` if needed), or None."""
        existing = self.bound_to([f"{module}.{name}", *also])
        if existing is not None:
            return cst.Name(existing)
        if not self._enabled(code):
            return None
        return self._request(f"from {module} import {name}", name, code, tier)

    def snapshot(self) -> dict[str, _Request]:
        return dict(self._additions)

    def restore(self, snapshot: dict[str, _Request]) -> None:
        self._additions = dict(snapshot)

    # ---------------------------------------------------------------- anchor
    def _find_anchor(self) -> tuple[cst.CSTNode | None, bool]:
        """The statement new imports go after (the last import of the leading block), or before."""
        body = list(self.module.body)
        last_import = None
        for stmt in body:
            if is_import_line(stmt):
                last_import = stmt
            elif is_docstring(stmt) and last_import is None:
                continue
            elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) or (
                isinstance(stmt, cst.If) and last_import is not None
            ):
                break
        if last_import is not None:
            return last_import, False
        for stmt in body:
            if not is_docstring(stmt):
                return stmt, True
        return (body[-1], False) if body else (None, False)

    # ---------------------------------------------------------------- emission
    def emit(self, rule, removable: frozenset[str], removal_code: str) -> None:
        """Report the import edits once per traversal, when the last ColossalAI rule leaves the module
        (rules may still request imports in their own ``leave_Module``)."""
        self.rules_left -= 1
        if self._emitted or self.rules_left > 0:
            return
        self._emitted = True
        edits: dict[cst.CSTNode, _LineEdit] = {}
        if self._enabled(removal_code) and self.reads is not None:
            self._plan_removals(edits, removable, removal_code)
        if self._additions and self._anchor is not None:
            edits.setdefault(self._anchor, _LineEdit()).additions = list(self._ordered_additions())
        for line, edit in edits.items():
            self._report(rule, line, edit)

    def _ordered_additions(self):
        plain = sorted(t for t in self._additions if t.startswith("import "))
        froms: dict[str, list[str]] = {}
        requests: dict[str, _Request] = {}
        for text, request in self._additions.items():
            if text.startswith("from "):
                module, _, name = text[5:].partition(" import ")
                froms.setdefault(module, []).append(name)
                requests.setdefault(module, request)
        for text in plain:
            yield text, self._additions[text]
        for module in sorted(froms):
            yield f"from {module} import {', '.join(froms[module])}", requests[module]

    def _plan_removals(self, edits, removable: frozenset[str], code: str) -> None:
        candidates = []
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
                    candidates.append((stmt, bound))
        if not candidates:
            return
        for stmt, bound in candidates:
            if not self.reads.get(bound, 0):
                edits.setdefault(stmt, _LineEdit()).removals[bound] = _Request(code, Tier.EXACT)

    def _report(self, rule, line: cst.CSTNode, edit: _LineEdit) -> None:
        requests = list(edit.removals.values()) + [r for _, r in edit.additions]
        first = min(requests, key=lambda r: (r.tier, r.code))
        added = [text for text, _ in edit.additions]
        new_lines = [cst.parse_statement(text + "\n") for text in added]
        removed = set(edit.removals)
        before = line is self._anchor and self._before
        parts = []
        if removed:
            parts.append(
                "drops the import of " + ", ".join(f"`{n}`" for n in sorted(removed)) + " left unused by the rewrite"
            )
        if added:
            parts.append("adds " + ", ".join(f"`{t}`" for t in added) + " for the rewrites in this file")
        message = "; ".join(parts)

        def fix(updated: cst.CSTNode, removed=removed, new_lines=new_lines, before=before):
            kept = updated
            if removed and isinstance(updated, cst.SimpleStatementLine):
                body = []
                for small in updated.body:
                    aliases = _bound_names(small)
                    keep = [a for a, bound, _ in aliases if bound not in removed]
                    if len(keep) == len(aliases):
                        body.append(small)
                    elif keep:
                        keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                        body.append(small.with_changes(names=keep))
                if body:
                    body[-1] = body[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
                    kept = updated.with_changes(body=body)
                else:
                    kept = None
            if not new_lines:
                return kept if kept is not None else cst.RemoveFromParent()
            if kept is None:
                first_line = new_lines[0].with_changes(leading_lines=updated.leading_lines)
                return cst.FlattenSentinel([first_line, *new_lines[1:]])
            if before:
                first_line = new_lines[0].with_changes(leading_lines=kept.leading_lines)
                return cst.FlattenSentinel([first_line, *new_lines[1:], kept.with_changes(leading_lines=[])])
            return cst.FlattenSentinel([kept, *new_lines])

        rule.report(first.code, line, message, fix, tier=first.tier, needs_torch_npu=False)
