"""What the migration leaves behind: apex imports (NPU330), emptied blocks and needed imports.

This rule finishes the NPU3xx rules' work at the end of the traversal (``leave_Module``). The
other rules register, while they visit the file, the statements they edit and the apex references
their fixes remove (:class:`~cuda2npu.families.apex.common.FileEdits`). Then:

1. an apex import is removed when every use of the name it binds is removed by a fix that
   ``migrate`` applies with these options (with ``--apex=native`` also when it has no use at all);
2. ``try: <apex imports only> except ImportError: <fallback imports or definitions>``: the fallback is
   what an NPU host, where apex is not installed, runs already; the ``try`` becomes the fallback
   where the migration rewrote the uses of what it imports (native only), else it stays as written;
3. an apex import that stays is reported (``manual``) unless an ``except ImportError`` guards it;
   an import whose ``try`` also sets a flag (``has_apex = True``, or ``has_apex = False`` in its
   handler) or returns one (``def has_apex(): try: import apex; return True``) stays: the flag
   records whether apex imports, and would always say so without it (see :func:`_detection_flags`);
   it is reported where code reads the flag (or calls the probe), which may select migrated code;
4. blocks the migration emptied are collapsed: ``if <pure test>: <all removed>`` is removed and
   ``try: <all removed> except ...`` keeps only its ``else``/``finally`` statements;
5. the imports the fixes' code needs (``import torch``, ``from apex.optimizers import NpuFusedAdamW``
   with ``--apex=ascend``) are added once, by a fix on the module.

Portable output (``--portable``): no fallback replaces its ``try`` (CUDA hosts import apex), and an
import whose remaining uses are apex calls on the CUDA side of code that already handles the NPU is
guarded, ``try: <import> except ImportError: <names> = None`` (only the NPU branch runs where apex
is missing).
"""

from __future__ import annotations

from typing import NamedTuple

import libcst as cst

from cuda2npu.analysis import portable
from cuda2npu.analysis.exports import exported
from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.catalogue import all_rules
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.edits import clause_statements
from cuda2npu.core.imports import (
    ImportNeed,
    bound_name,
    catches_import_error,
    describe_imports,
    has_import,
    import_root,
    imported_module,
    remove_import_names,
)
from cuda2npu.core.names import NameUses, dotted_name, target_names
from cuda2npu.core.nodes import code_of, is_pure
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.traversal import walk
from cuda2npu.families.apex.common import (
    APEX_ROOTS,
    FP16_UTILS_EXPORTS,
    FileEdits,
    enabled,
    import_guarded,
    not_run_on_npu,
)
from cuda2npu.families.apex.modules import cuda_only_note


def _bound_names(node: cst.Import | cst.ImportFrom) -> list[tuple[cst.ImportAlias | None, str]]:
    """(alias, name it binds) for each alias; a star import binds apex.fp16_utils' exports."""
    if isinstance(node, cst.ImportFrom) and isinstance(node.names, cst.ImportStar):
        module = dotted_name(node.module) if node.module is not None else ""
        return [(None, name) for name in FP16_UTILS_EXPORTS] if module == "apex.fp16_utils" else []
    return [(alias, bound_name(alias, node)) for alias in node.names]


@register
class ApexImports(Rule):
    """NPU330 and the finishing edits of every NPU3xx rule (see the module docstring)."""

    codes = tuple(code for code in all_rules() if code.startswith("NPU3"))
    # it must run wherever an NPU3xx fix may edit statements or need an import: apex files and
    # NPU340's autocast rewrites (which may need `import torch`)
    triggers = (r"\bapex\b", r"\bamp_C\b", r"autocast", r"custom_fwd")
    portable_support = True  # its edits are those of the rules' fixes, made only by portable ones

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._imports: list[tuple[cst.SimpleStatementSuite | cst.SimpleStatementLine, cst.Import | cst.ImportFrom]] = []
        self._tries: list[cst.Try] = []

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine | cst.SimpleStatementSuite) -> None:
        if not_run_on_npu(self.ctx, node):
            return
        for small in node.body:
            if isinstance(small, (cst.Import, cst.ImportFrom)) and import_root(small) in APEX_ROOTS:
                self._imports.append((node, small))

    visit_SimpleStatementSuite = visit_SimpleStatementLine  # `if x: from apex ... import ...`

    def visit_Try(self, node: cst.Try) -> None:
        self._tries.append(node)

    def leave_Module(self, original_node: cst.Module) -> None:
        edits = FileEdits.of(self.ctx)
        if self._imports and enabled(self.ctx, "NPU330"):
            uses = self._uses()
            native = self.options.apex == "native" and not self.options.portable
            fallbacks = self._fallbacks(uses) if native else set()
            for statement, node in self._imports:
                if statement not in fallbacks:
                    self._import(edits, statement, node, uses)
        self._collapse_emptied_blocks(edits)
        self._add_needed_imports(edits, original_node)

    # 1-3: apex imports -------------------------------------------------------------------------

    def _uses(self) -> dict[str, list[cst.Name]]:
        names = {name for _, node in self._imports for _, name in _bound_names(node)}
        collector = NameUses(names, self.resolver.scopes)
        walk(self.ctx.module, collector)
        return collector.uses

    def _removable(self, edits: FileEdits, uses: list[cst.Name]) -> Tier | None:
        """The tier at which an import binding these uses can go, or None if it must stay."""
        if not uses:
            return Tier.EXACT if self.options.apex == "native" else None
        tiers = [edits.removed_refs.get(use) for use in uses]
        if any(t is None or not edits.applies(t) for t in tiers):
            return None
        return max(tiers)

    def _import(self, edits: FileEdits, statement, node, uses) -> None:
        text = _import_text(self.ctx.module, node)
        reexported = {name: why for _, name in _bound_names(node) if (why := exported(self.ctx, node, name))}
        if isinstance(node.names, cst.ImportStar):
            why = exported(self.ctx, node, "*")  # `from apex.fp16_utils import *` in an `__init__.py`
            verdicts = [(None, None if why else self._star_verdict(edits, node, uses))]
        else:
            verdicts = [
                (alias, None if name in reexported else self._removable(edits, uses.get(name, [])))
                for alias, name in _bound_names(node)
            ]
        removable = [(alias, tier) for alias, tier in verdicts if tier is not None]
        kept = [alias for alias, tier in verdicts if tier is None]
        at = _marked_statement(edits.index, statement)  # where a marker goes
        detection = _detection_flags(edits, statement)
        if detection and (removable or not any(uses.get(name) for _, name in _bound_names(node))):
            # kept as written; with --apex=ascend (Ascend's apex imports where it is installed) or when
            # nothing reads what it sets (a probe such as `has_apex()` no code calls), nothing to say
            if self.options.apex == "native" and self._detection_read(edits, detection):
                self._report_flagged(at, node, detection)
            return
        guard = None  # portable output: the tier at which the kept names are guarded
        if self.options.portable and kept and not import_guarded(edits.index, statement):
            guard = self._for_cuda(edits, [uses.get(name, []) for alias, name in _bound_names(node) if alias in kept])
        if removable and not kept:
            tier = max(t for _, t in removable)
            message = f"`{text}` removed: nothing uses it after the migration"
            if self.options.apex == "native":
                message += " (apex is not installed on NPU hosts)"
            if isinstance(statement, cst.SimpleStatementSuite):
                self._remove_from_suite(edits, statement, node, message, tier)
            elif len(statement.body) == 1:
                edits.remove(statement, "NPU330", tier)
                edits.report(self, "NPU330", statement, message, tier=tier, needs_torch_npu=False)
            else:
                self.report("NPU330", node, message, lambda _: cst.RemoveFromParent(), tier=tier, needs_torch_npu=False)
        elif removable and not (guard is not None and isinstance(statement, cst.SimpleStatementLine)):
            # (else the guard drops them)
            gone = {dotted_name(alias.name) for alias, _ in removable}
            names = ", ".join(f"`{name}`" for name in sorted(gone))
            self.report(
                "NPU330",
                node,
                f"{names} removed from `{text}`: unused after the migration",
                remove_import_names(node, _removed_names(node, removable)),
                tier=max(t for _, t in removable),
                needs_torch_npu=False,
            )
        if guard is not None:
            self._guard(at, node, kept, removable, guard)
        elif kept and self.options.apex == "native" and not _falls_back(edits.index, statement):
            left = [use for alias, name in _bound_names(node) if alias in kept for use in uses.get(name, [])]
            left = [use for use in left if use not in edits.removed_refs]
            self._report_kept(at, node, kept, left, next(iter(reexported.values()), None))

    def _remove_from_suite(self, edits: FileEdits, suite: cst.SimpleStatementSuite, node, message: str, tier) -> None:
        """Remove an import from a one-line suite: ``try: <import>`` goes as the indented form does
        (only its ``else``/``finally`` statements stay); an import alone in any other suite becomes
        ``pass``."""
        owner = edits.index.parents.get(suite)
        if isinstance(owner, cst.Try) and owner.body is suite and len(suite.body) == 1:
            edits.collapsed[owner] = [*clause_statements(owner.orelse), *clause_statements(owner.finalbody)]
            edits._edit(owner, "NPU330", tier)
            message += "; the `try` around it goes too (its `else`/`finally` statements stay)"
            edits.report(self, "NPU330", owner, message, tier=tier, needs_torch_npu=False)
            return
        removal = cst.Pass() if len(suite.body) == 1 else cst.RemoveFromParent()
        self.report("NPU330", node, message, lambda _: removal, tier=tier, needs_torch_npu=False)

    def _for_cuda(self, edits: FileEdits, uses: list[list[cst.Name]]) -> Tier | None:
        """The tier at which kept names' uses are only CUDA calls (on the CUDA side of code that
        already handles the NPU, such as an earlier run's portable output) and removed references,
        with at least one such call; None otherwise."""
        cuda_refs = {use: Tier.EXACT for names in uses for use in names if is_cuda_alternative(self.ctx, use)}
        tiers = [cuda_refs.get(use, edits.removed_refs.get(use)) for names in uses for use in names]
        if not any(use in cuda_refs for names in uses for use in names):
            return None
        return None if any(t is None or not edits.applies(t) for t in tiers) else max(tiers)

    def _guard(self, statement, node, kept: list, removable: list, tier: Tier) -> None:
        """Portable output: the import of apex names kept for CUDA hosts, in ``try``/``except ImportError``."""
        names = [name for alias, name in _bound_names(node) if alias in kept]
        edit = (
            remove_import_names(node, _removed_names(node, removable)) if removable else None
        )  # instead of its own fix
        portable.report_import_guard(self, statement, node, names, "apex", "NPU330", tier, edit)

    def _detection_read(self, edits: FileEdits, detection: "Detection") -> bool:
        """Whether code reads what ``detection`` sets: its flags in the scope that sets them, the
        probe function anywhere in the file; or, at module level, in another module (:func:`exported`)."""
        function = edits.index.function.get(detection.guard)
        flags = NameUses(set(detection.flags))
        walk(function if function is not None else self.ctx.module, flags)
        names = {detection.probe.name.value} if detection.probe is not None else set()
        calls = NameUses(names, self.resolver.scopes)
        walk(self.ctx.module, calls)
        parents = edits.index.parents
        for use in (use for found in (flags, calls) for uses in found.uses.values() for use in uses):
            parent = parents.get(use)
            if not (isinstance(parent, cst.AnnAssign) and parent.target is use):  # `flag: bool = True` sets it
                return True
        exported_names = detection.flags if function is None else names
        return any(exported(self.ctx, function or detection.guard, name) for name in exported_names)

    def _report_flagged(self, statement, node, detection: "Detection") -> None:
        """An import kept because its ``try`` sets flags, or returns a value, that say whether apex imports."""
        text = _import_text(self.ctx.module, node)
        if detection.flags:
            names = ", ".join(f"`{name}`" for name in detection.flags)
            told = (
                f"{names}, set in the same `try`, tell whether apex imports; without the import they would "
                "always take their apex values while the code they select"
            )
            by_hand = "set the flags by hand"
        else:  # a probe function: `try: import apex; return True`
            told = (
                f"the value `{detection.probe.name.value}()` returns tells whether apex imports; without the "
                "import it would always be its apex value while the code it selects"
            )
            by_hand = "make it return that value by hand"
        self.report_in(
            statement,
            "NPU330",
            node,
            f"`{text}` kept: {told} (here or in other modules) may still need apex. "
            "Where apex is missing (NPU hosts) the `except ImportError` branch runs; to use the migrated code there, "
            f"{by_hand} and drop the import",
            tier=Tier.MANUAL,
        )

    def _star_verdict(self, edits: FileEdits, node: cst.ImportFrom, uses) -> Tier | None:
        """A star import goes when every name it may provide that the file reads is migrated."""
        read = [name for _, name in _bound_names(node) if uses.get(name) and not self.resolver.is_bound(name)]
        if not read:
            return Tier.EXACT if self.options.apex == "native" else None
        tiers = [self._removable(edits, uses[name]) for name in read]
        return None if any(t is None for t in tiers) else max(tiers)

    def _report_kept(
        self, statement, node: cst.Import | cst.ImportFrom, kept: list, left: list[cst.Name], reexport: str | None
    ) -> None:
        """A kept apex import no other rule explains (CUDA-only modules are NPU324's); ``left``: the
        uses of its names that were not migrated, the first of which the message quotes; ``reexport``:
        why other modules read its names (analysis/exports.py)."""
        if isinstance(node.names, cst.ImportStar):
            qualified = [dotted_name(node.module) or ""]
        else:
            qualified = [imported_module(alias, node) for alias in kept]
        unexplained = [name for name in qualified if cuda_only_note(name) is None]
        if unexplained and reexport and not left:
            self.report_in(
                statement,
                "NPU330",
                node,
                f"apex import stays: {', '.join(f'`{n}`' for n in unexplained)} may be read by other modules "
                f"({reexport}); apex is not installed on NPU hosts: migrate the modules that use it, "
                "then replace or drop the import",
                tier=Tier.MANUAL,
            )
        elif unexplained and not self._amp_told_in_function(statement, unexplained, left):
            such_as = f", such as `{_use_text(FileEdits.of(self.ctx).index, left[0])}`" if left else ""
            self.report_in(
                statement,
                "NPU330",
                node,
                f"apex import stays: {', '.join(f'`{n}`' for n in unexplained)} still used by code that was "
                f"not migrated{such_as}; apex is not installed on NPU hosts",
                tier=Tier.MANUAL,
            )

    def _amp_told_in_function(self, statement, kept: list[str], left: list[cst.Name]) -> bool:
        """``from apex import amp`` inside a function that uses it, left as written: NPU310 marks those
        uses a few lines below (apex.amp not migrated), and a second marker at the import would repeat it
        (BAdam's jiant copy, round 47). ``left``: the uses of its names left in the file, in any function."""
        index = FileEdits.of(self.ctx).index
        function = index.function.get(statement)
        return (
            kept == ["apex.amp"]
            and function is not None
            and any(index.function.get(index.statement_of(use)) is function for use in left)
        )

    def _fallbacks(self, uses: dict[str, list[cst.Name]]) -> set[cst.SimpleStatementLine]:
        """The apex imports of ``try: <apex imports> except ImportError: <fallback>``, which are not
        reported: the fallback is what an NPU host, where apex is not installed, runs already. The
        ``try`` collapses into its fallback where the migration rewrote a use of what it imports
        (BingBertSquad's ``BertLayerNorm(...)`` → ``torch.nn.LayerNorm(...)``: the import is unused
        then); else it stays as written (Lumina-T2X's RMSNorm: a collapse would change nothing anyone runs)."""
        edits = FileEdits.of(self.ctx)
        by_statement = {statement: node for statement, node in self._imports}
        handled: set[cst.SimpleStatementLine] = set()
        for node in self._tries:
            statements = _fallback_guarded_imports(node, by_statement)
            if not statements:
                continue
            handled.update(statements)
            names = {name for statement in statements for _, name in _bound_names(by_statement[statement])}
            if not any(use in edits.removed_refs for name in names for use in uses.get(name, [])):
                continue
            edits.replace(node, lambda updated: list(updated.handlers[0].body.body), "NPU330", Tier.REVIEW)
            edits.report(
                self,
                "NPU330",
                node,
                "apex import with a fallback, unused after the migration: the `except ImportError` branch is "
                "what runs on an NPU host (apex is not installed there), so it replaces the `try`",
                tier=Tier.REVIEW,
                needs_torch_npu=False,
            )
        return handled

    # 4: emptied blocks -------------------------------------------------------------------------

    def _collapse_emptied_blocks(self, edits: FileEdits) -> None:
        if not edits.edits:
            return
        index = edits.index
        pending = {index.placement[s].block for s in list(edits.edits) if s in index.placement and edits.gone(s)}
        while pending:
            block = max(pending, key=lambda b: index.depth.get(b, 0))
            pending.discard(block)
            if block not in index.owner or not all(edits.gone(s) for s in block.body):
                continue
            owner, role = index.owner[block]
            if role != "body" or owner in edits.collapsed:
                continue
            first = edits.edits[block.body[0]]
            tier = max(edits.edits[s].tier for s in block.body)
            if isinstance(owner, cst.If) and owner.orelse is None and is_pure(owner.test):
                message = f"`if {self.ctx.module.code_for_node(owner.test)}:` removed: the migration emptied its body"
                edits.remove(owner, first.code, tier)
            elif isinstance(owner, cst.Try):
                edits.collapsed[owner] = [*clause_statements(owner.orelse), *clause_statements(owner.finalbody)]
                edits._edit(owner, first.code, tier)
                message = "`try` removed: the migration emptied its body (its `else`/`finally` statements stay)"
            else:
                continue
            if enabled(self.ctx, first.code):
                inner = owner.test if isinstance(owner, cst.If) else owner.body
                edits.report(self, first.code, owner, message, inner, tier=tier, needs_torch_npu=False)
            if owner in index.placement and edits.gone(owner):
                pending.add(index.placement[owner].block)

    # 5: imports the fixes need -----------------------------------------------------------------

    def _add_needed_imports(self, edits: FileEdits, module: cst.Module) -> None:
        missing = {key: need for key, need in edits.imports.items() if not has_import(module, ImportNeed(*key))}
        if not missing:
            return
        tier = min(need.tier for need in missing.values())
        code = next(need.code for need in missing.values())
        self.report(
            code,
            module,
            f"{describe_imports(list(missing))} added for the migrated code",
            lambda m: m,  # the engine adds the imports
            tier=tier,
            needs_torch_npu=False,
            imports=list(missing),
        )


def _import_text(module: cst.Module, node: cst.Import | cst.ImportFrom) -> str:
    """The import's code for messages (without the `;` that may follow it on its line)."""
    return module.code_for_node(node).rstrip().rstrip(";")


def _removed_names(node: cst.Import | cst.ImportFrom, removable: list) -> set[str]:
    """The names the ``removable`` (alias, tier) pairs of ``node`` bind."""
    aliases = [alias for alias, _ in removable]
    return {name for alias, name in _bound_names(node) if alias in aliases}


def _falls_back(index, statement: cst.CSTNode) -> bool:
    """``statement`` is guarded by a ``try`` whose ``except ImportError`` goes on without apex; not one
    that raises again (DoRA's CLIP-ViL: ``except ImportError: raise ImportError("Please install apex")``),
    which fails at import on an NPU host as the bare import would."""
    return any(
        isinstance(owner, cst.Try) and any(catches_import_error(h) and not _raises(h) for h in owner.handlers)
        for owner in index.ancestors(statement)
    )


def _raises(handler: cst.ExceptHandler) -> bool:
    """The handler's block ends in a ``raise``."""
    body = handler.body.body if isinstance(handler.body, cst.IndentedBlock) else [handler.body]
    last = body[-1] if body else None
    small = (
        last.body[-1] if isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and last.body else None
    )
    return isinstance(small, cst.Raise)


def _fallback_guarded_imports(node: cst.Try, by_statement: dict) -> list:
    """The apex import statements of ``try: <apex imports only> except ImportError: <fallback>``
    when the fallback defines every name they bind (by import, def or class: a real
    implementation, not ``amp = None`` guarding code that stays); else []."""
    statements = list(node.body.body) if isinstance(node.body, cst.IndentedBlock) else []
    if not statements or not all(s in by_statement and len(s.body) == 1 for s in statements):
        return []
    if node.orelse is not None or node.finalbody is not None or len(node.handlers) != 1:
        return []
    handler = node.handlers[0]
    if handler.name is not None or not catches_import_error(handler) or not isinstance(handler.body, cst.IndentedBlock):
        return []
    bound = {name for s in statements for _, name in _bound_names(by_statement[s])}
    return statements if bound and bound <= _defined_names(handler.body.body) else []


class Detection(NamedTuple):
    """What tells whether an apex import in a ``try`` catching ImportError succeeds (see
    :func:`_detection_flags`)."""

    guard: cst.Try | None
    flags: list[str]  # names set in the `try` from values that do not come from the import
    probe: cst.FunctionDef | None  # the function returning such a value

    def __bool__(self) -> bool:
        return bool(self.flags) or self.probe is not None


def _detection_flags(edits: FileEdits, statement) -> Detection:
    """The ``try`` catching ImportError around the apex import ``statement`` and what tells whether
    that import succeeds: names assigned in its body or ``else`` from values that do not come from
    the import (``has_apex = True``, ``LNImpl = OtherFusedNorm``), or in its handlers (``has_apex =
    False`` under a default set earlier); the function around it when the ``try`` returns such a
    value (``def has_apex(): try: import apex; return True / except ImportError: return False``).
    ``norm = FusedLayerNorm(...)``, an alias of a class defined there, and the handler's values for
    those names (``amp = None``) follow the import's names, whose uses the migration rewrites or keeps."""
    if isinstance(statement, cst.SimpleStatementSuite):  # `try: from apex ... import ...`
        owner = edits.index.parents[statement]
        role = "body" if getattr(owner, "body", None) is statement else None
    else:
        place = edits.index.placement.get(statement)
        owner, role = edits.index.owner.get(place.block, (None, None)) if place else (None, None)
    if not (isinstance(owner, cst.Try) and role == "body" and any(catches_import_error(h) for h in owner.handlers)):
        return Detection(None, [], None)
    body = clause_statements(owner)
    derived = {
        name
        for s in body
        if isinstance(s, cst.SimpleStatementLine)
        for small in s.body
        if isinstance(small, (cst.Import, cst.ImportFrom)) and import_root(small) in APEX_ROOTS
        for _, name in _bound_names(small)
    }
    derived |= {s.name.value for s in body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}
    flags: list[str] = []
    for small, names in _assignments([*body, *clause_statements(owner.orelse)]):
        reads = NameUses(derived)
        walk(small.value, reads)
        if any(reads.uses.values()):
            derived.update(names)  # follows the import
        else:
            flags += names
    for _, names in _assignments(s for h in owner.handlers for s in clause_statements(h)):
        flags += [name for name in names if name not in derived and name not in flags]
    function = edits.index.function.get(owner)
    probe = function if function is not None and _returns_outcome(owner, derived) else None
    return Detection(owner, flags, probe)


def _returns_outcome(owner: cst.Try, derived: set[str]) -> bool:
    """The ``try`` returns a value that does not come from the import, in its body or ``else``
    (``return True``), or in a handler (``except ImportError: return False``): an availability
    probe, whose answer is the import's outcome."""
    for clause, from_import in ((owner, True), (owner.orelse, True), *((h, False) for h in owner.handlers)):
        for stmt in clause_statements(clause):
            for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.Return) and small.value is not None:
                    reads = NameUses(derived)
                    walk(small.value, reads)
                    if not (from_import and any(reads.uses.values())):
                        return True
    return False


def _assignments(statements):
    """(assignment, names it binds) for the simple assignments of ``statements``."""
    for stmt in statements:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Assign):
                targets = [t.target for t in small.targets]
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                targets = [small.target]
            else:
                continue
            yield small, [name for target in targets for name in target_names(target) or [dotted_name(target)] if name]


def _defined_names(statements) -> set[str]:
    """Names bound by the import, def and class statements of a block (real fallbacks)."""
    names: set[str] = set()
    for statement in statements:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            names.add(statement.name.value)
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    names.update(name for _, name in _bound_names(small))
    return names


def _marked_statement(index, statement: cst.SimpleStatementLine | cst.SimpleStatementSuite) -> cst.CSTNode:
    """The statement a finding on an import of ``statement`` is marked above: the line itself, or
    the compound statement of a one-line suite (``if x: from apex ... import ...``)."""
    return statement if isinstance(statement, cst.SimpleStatementLine) else index.ancestors(statement)[0]


def _use_text(index, use: cst.Name) -> str:
    """Where ``use`` is read: the call it is the callee or an argument of (DeepSpeed-Domino's
    ``isinstance(optimizer, Adam)``), else its attribute chain; one line, at most 60 characters."""
    node: cst.CSTNode = use
    while isinstance(index.parents.get(node), cst.Attribute):
        node = index.parents[node]
    text = " ".join(code_of(index.call_of(node) or node).split())
    return text if len(text) <= 60 else text[:57] + "..."
