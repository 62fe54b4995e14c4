"""Shared machinery of the apex and mixed-precision rules (NPU3xx).

* :func:`canonical` / :func:`apex_name` resolve a reference to apex's public name
  (``apex.optimizers.fused_adam.FusedAdam`` → ``apex.optimizers.FusedAdam``);
* :class:`ApexRule` is the base of the rules that only act in files importing apex;
* :class:`FileEdits` is the per-file registry through which several rules remove, insert and
  replace statements, and wrap runs of statements of a block (a fix on the block). Each edited
  statement gets one composed fix, evaluated lazily when the engine applies fixes, so the edits of
  different rules on one block stay consistent. It also
  records the references to apex names that fixes remove and the imports fixes need; the
  finalizer (``apex_imports``) turns those into import edits and collapses blocks a migration
  emptied (``if args.fp16: <removed>``, ``try: <removed apex import> except ImportError: ...``).
  A name whose ``except ImportError`` assigns it another implementation (``FusedLayerNorm =
  LayerNorm``) is not apex's to the rules (:attr:`FileEdits.fallback_names`): NPU hosts run that one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import libcst as cst

from cuda2npu.analysis.cuda_only_modules import APEX_EXTENSIONS, APEX_ROOTS
from cuda2npu.analysis.old_torch import old_torch_only
from cuda2npu.core.catalogue import rule as rule_doc
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.imports import bound_name, catches_import_error, import_root
from cuda2npu.core.literals import NOT_LITERAL, literal
from cuda2npu.core.names import dotted_name, target_names
from cuda2npu.core.nodes import root_name
from cuda2npu.core.rulebase import Rule
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import walk

CANONICAL_PACKAGES = ("amp", "optimizers", "normalization", "parallel", "fp16_utils")

BuildStatements = Callable[[cst.CSTNode], list]


# --- names ---------------------------------------------------------------------------------


def canonical(qualified: str | None) -> str | None:
    """apex's public name for an object reached through one of its submodules."""
    if not qualified:
        return None
    parts = qualified.split(".")
    if parts[0] == "apex" and len(parts) > 3 and parts[1] in CANONICAL_PACKAGES:
        return f"apex.{parts[1]}.{parts[-1]}"
    return qualified


def apex_name(resolver, node: cst.BaseExpression) -> str | None:
    """The canonical apex name ``node`` refers to, or None (not apex, local, or ambiguous)."""
    name = canonical(resolver.qualified_name(node))
    return name if name and name.split(".")[0] in APEX_ROOTS else None


# --- the per-file edit registry ------------------------------------------------------------


@dataclass
class ImportRequest:
    code: str
    tier: Tier


@dataclass
class Region:
    """Statements ``start..end`` (original positions) of one block moved into ``build(statements)``."""

    start: int
    end: int
    build: Callable[[list], cst.BaseStatement]


@dataclass
class StatementEdit:
    code: str
    tier: Tier
    remove: bool = False
    before: list = field(default_factory=list)
    after: list = field(default_factory=list)
    replace: BuildStatements | None = None


class FileEdits:
    """Statement edits, removed apex references and needed imports of one file (see module doc)."""

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.edits: dict[cst.CSTNode, StatementEdit] = {}
        self.removed_refs: dict[cst.Name, Tier] = {}
        self.imports: dict[tuple[str, str | None], ImportRequest] = {}
        self.collapsed: dict[cst.CSTNode, list] = {}  # try statements replaced by else/finally bodies
        self.regions: dict[cst.CSTNode, list[Region]] = {}  # block -> regions to wrap
        self._produced: dict[cst.CSTNode, int] = {}  # statement -> how many statements its fix produced
        self._block_fixes: set[cst.CSTNode] = set()  # blocks whose fix removes their first statement
        self._claimed: set[cst.CSTNode] = set()
        self._scan: _ApexImportScan | None = None

    @classmethod
    def of(cls, ctx) -> "FileEdits":
        """The file's registry, shared by every apex rule of the traversal."""
        return ctx.file_state(cls)

    @classmethod
    def for_rule(cls, rule) -> "FileEdits":
        """The registry as ``rule`` writes to it: under ``--portable`` a rule without a portable
        rewrite makes no fix (rulebase ``Rule.report``), so it registers no edit either."""
        edits = cls.of(rule.ctx)
        return _Unapplied(edits) if rule.options.portable and not rule.portable_support else edits

    @property
    def index(self) -> TreeIndex:
        return TreeIndex.of(self.ctx)

    def _scanned(self) -> "_ApexImportScan":
        if self._scan is None:
            self._scan = _ApexImportScan()
            walk(self.ctx.module, self._scan)
        return self._scan

    @property
    def apex_imported(self) -> bool:
        """Whether the file imports apex (or amp_C) anywhere: the apex rules do nothing otherwise."""
        return self._scanned().found

    @property
    def star_modules(self) -> set[str]:
        """apex modules the file star-imports."""
        return self._scanned().star_modules

    @property
    def fallback_names(self) -> set[str]:
        """Names an apex import binds in a ``try`` whose ``except ImportError`` assigns them another
        implementation (``except: FusedLayerNorm = LayerNorm``, a class of the project): what
        they are where apex is missing (NPU hosts), so their uses are left as written."""
        return self._scanned().fallback_names

    def applies(self, tier: Tier) -> bool:
        """Whether a fix of this tier is applied by ``migrate`` with these options."""
        return tier <= self.ctx.options.max_tier

    # registering ---------------------------------------------------------------------------

    def _edit(self, stmt: cst.CSTNode, code: str, tier: Tier) -> StatementEdit:
        edit = self.edits.get(stmt)
        if edit is None:
            edit = self.edits[stmt] = StatementEdit(code, tier)
        else:
            edit.tier = max(edit.tier, tier)
        return edit

    def remove(self, stmt: cst.CSTNode, code: str, tier: Tier) -> None:
        self._edit(stmt, code, tier).remove = True

    def insert_before(self, stmt: cst.CSTNode, nodes: list, code: str, tier: Tier) -> None:
        self._edit(stmt, code, tier).before.extend(nodes)

    def insert_after(self, stmt: cst.CSTNode, nodes: list, code: str, tier: Tier) -> None:
        self._edit(stmt, code, tier).after.extend(nodes)

    def replace(self, stmt: cst.CSTNode, build: BuildStatements, code: str, tier: Tier) -> None:
        """``build(updated statement)`` returns the statements that take its place."""
        self._edit(stmt, code, tier).replace = build

    def wrap(self, block: cst.CSTNode, start: int, end: int, build: Callable[[list], cst.BaseStatement]) -> None:
        """Move statements ``start..end`` of ``block`` into ``build(updated statements)``.

        The wrap is a fix on the block (report it with :meth:`wrap_fix`): it runs after the
        statements' own fixes and finds them again by the number of statements each produced.
        """
        self.regions.setdefault(block, []).append(Region(start, end, build))

    def drop_ref(self, name: cst.Name | None, tier: Tier) -> None:
        """A fix removes this reference to an imported apex name."""
        if name is not None:
            self.removed_refs[name] = max(tier, self.removed_refs.get(name, Tier.EXACT))

    def need_import(self, code: str, tier: Tier, module: str, obj: str | None = None) -> None:
        """A fix of ``code`` emits code using ``module`` (``import module``) or ``from module import obj``."""
        need = self.imports.get((module, obj))
        if need is None or tier < need.tier:
            self.imports[(module, obj)] = ImportRequest(code, tier)

    def claim(self, stmt: cst.CSTNode) -> bool:
        """True for the first report on an edited statement: that report carries :meth:`fix`."""
        if stmt in self._claimed:
            return False
        self._claimed.add(stmt)
        return True

    def report(self, rule, code: str, stmt: cst.CSTNode, message: str, inner: cst.CSTNode | None = None, **kw) -> None:
        """Report a finding whose fix is ``stmt``'s composed edit (``inner`` if already claimed)."""
        if not self.claim(stmt):
            rule.report(code, inner if inner is not None else stmt, message, lambda node: node, **kw)
        elif self._opens_block(stmt):
            block = self.index.placement[stmt].block
            self._block_fixes.add(block)
            rule.report(code, block, message, lambda updated: _without_first(updated, stmt not in self._produced), **kw)
        else:
            rule.report(code, stmt, message, self.fix(stmt), **kw)

    def _opens_block(self, stmt: cst.CSTNode) -> bool:
        """A removed first statement of an indented block: its block's fix removes it, so that the
        blank lines that separated it from the next statement do not open the block. (The block's
        position is the statement's, so the finding stays where it was.)"""
        edit = self.edits.get(stmt)
        place = self.index.placement.get(stmt)
        return (
            edit is not None
            and edit.remove
            and not edit.before
            and not edit.after
            and stmt not in self.collapsed
            and place is not None
            and place.index == 0
            and isinstance(place.block, cst.IndentedBlock)
            and place.block not in self.regions
            and place.block not in self._block_fixes
        )

    # applying -----------------------------------------------------------------------------

    def gone(self, stmt: cst.CSTNode) -> bool:
        """The statement disappears and nothing takes its place (when its fix applies)."""
        edit = self.edits.get(stmt)
        if edit is None or edit.before or edit.after or not self.applies(edit.tier):
            return False
        if stmt in self.collapsed:
            return not self.collapsed[stmt]
        return edit.remove

    def fix(self, stmt: cst.CSTNode):
        return lambda updated: self._apply(stmt, updated)

    def _apply(self, stmt: cst.CSTNode, updated: cst.CSTNode):
        edit = self.edits[stmt]
        nodes: list = [] if edit.remove else [updated]
        if stmt in self.collapsed:
            nodes = _collapsed_statements(updated)
        elif edit.replace is not None and nodes:
            nodes = list(edit.replace(updated))
        nodes = [*edit.before, *nodes, *edit.after]
        if (
            nodes
            and nodes[0] is not updated
            and hasattr(updated, "leading_lines")
            and hasattr(nodes[0], "leading_lines")
        ):
            nodes[0] = nodes[0].with_changes(leading_lines=updated.leading_lines)
        self._produced[stmt] = len(nodes)
        if not nodes:
            return cst.RemoveFromParent()
        return nodes[0] if len(nodes) == 1 else cst.FlattenSentinel(nodes)

    def wrap_fix(self, block: cst.CSTNode):
        return lambda updated: self._wrap(block, updated)

    def _wrap(self, block: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:
        spans = []
        position = 0
        for stmt in block.body:
            count = self._produced.get(stmt, 1)
            spans.append((position, position + count))
            position += count
        if position != len(updated.body):
            raise ValueError("another fix changed the statements of this block")  # the engine drops this fix
        body = list(updated.body)
        for region in sorted(self.regions[block], key=lambda r: r.start, reverse=True):
            first, last = spans[region.start][0], spans[region.end][1]
            if first < last:
                body[first:last] = [_wrapped(region.build, body[first:last])]
        return updated.with_changes(body=body)


class _Unapplied:
    """A :class:`FileEdits` whose registering methods do nothing (see :meth:`FileEdits.for_rule`)."""

    def __init__(self, edits: FileEdits) -> None:
        self._edits = edits

    def __getattr__(self, name: str):
        return getattr(self._edits, name)

    def _ignored(self, *args, **kwargs) -> None:
        return None

    remove = insert_before = insert_after = replace = wrap = drop_ref = need_import = _ignored


def _wrapped(build: Callable[[list], cst.BaseStatement], members: list) -> cst.BaseStatement:
    """``build`` applied to the members, the first member's comments moved above the result."""
    first = members[0]
    leading = getattr(first, "leading_lines", ())
    members = [first.with_changes(leading_lines=()) if leading else first, *members[1:]]
    return build(members).with_changes(leading_lines=leading)


def _without_first(block: cst.IndentedBlock, still_there: bool) -> cst.IndentedBlock:
    """``block`` without its first statement (unless another fix removed it already) and without
    the blank lines that now open it."""
    body = list(block.body[1:] if still_there else block.body)
    if body and hasattr(body[0], "leading_lines"):
        lines = list(body[0].leading_lines)
        while lines and lines[0].comment is None:
            lines.pop(0)
        body[0] = body[0].with_changes(leading_lines=lines)
    return block.with_changes(body=body)


def _collapsed_statements(updated: cst.Try) -> list:
    """What remains of a ``try`` whose body the migration emptied: its else and finally bodies."""
    return [*clause_statements(updated.orelse), *clause_statements(updated.finalbody)]


def clause_statements(clause: cst.CSTNode | None) -> list:
    """The statements of a clause's or compound statement's body (a one-line suite's as one line)."""
    if clause is None:
        return []
    if isinstance(clause.body, cst.SimpleStatementSuite):
        return [cst.SimpleStatementLine(body=clause.body.body)]
    return list(clause.body.body)


def import_guarded(index: TreeIndex, statement: cst.CSTNode) -> bool:
    """``statement`` (an import's line or one-line suite) is inside ``try: ... except ImportError:``."""
    return any(
        isinstance(owner, cst.Try) and any(catches_import_error(h) for h in owner.handlers)
        for owner in index.ancestors(statement)
    )


# --- file facts ----------------------------------------------------------------------------


def behind_apex_import(index: TreeIndex, stmt: cst.CSTNode) -> bool:
    """``stmt`` is in the body of a ``try`` that imports apex and catches ImportError: where apex
    is missing (NPU hosts) that body stops at the import and ``stmt`` never runs."""
    return apex_guard(index, stmt) is not None


def apex_guard(index: TreeIndex, stmt: cst.CSTNode) -> cst.Try | None:
    """The ``try`` importing apex and catching ImportError whose body holds ``stmt`` (None: none)."""
    block = index.placement[stmt].block if stmt in index.placement else None
    while block is not None and block in index.owner:
        owner, role = index.owner[block]
        if isinstance(owner, cst.Try) and role == "body" and any(catches_import_error(h) for h in owner.handlers):
            if any(_imports_apex(s) for s in owner.body.body):
                return owner
        block = index.placement[owner].block if owner in index.placement else None
    return None


def apex_dependent(index: TreeIndex, stmt: cst.CSTNode | None) -> bool:
    """``stmt`` is behind an apex import (``LEAF_MODULES.append(FusedLayerNorm)``, a decorator
    registering it) and is not the availability pattern's assignment (``X = FusedLayerNorm`` /
    ``except: X = None``): it never runs where apex is missing, so renaming in it changes nothing there."""
    guard = apex_guard(index, stmt) if stmt is not None else None
    return guard is not None and not is_fallback_assignment(guard, stmt)


def is_fallback_assignment(guard: cst.Try, stmt: cst.CSTNode) -> bool:
    """``stmt`` assigns a name that a handler of ``guard`` assigns too (``X = apex...`` / ``except: X = None``):
    the availability pattern, whose ``try`` body runs on NPU hosts once its apex uses are migrated."""
    assigned = _assigned_names(stmt)
    return any(assigned & _assigned_names(s) for handler in guard.handlers for s in clause_statements(handler))


def _assigned_names(stmt: cst.CSTNode) -> set[str]:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return set()
    return {
        n for small in stmt.body if isinstance(small, cst.Assign) for t in small.targets for n in target_names(t.target)
    }


def _imports_apex(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and any(
        isinstance(small, (cst.Import, cst.ImportFrom)) and import_root(small) in APEX_ROOTS for small in stmt.body
    )


class _ApexImportScan(cst.CSTVisitor):
    """Statement-level scan: which apex modules the file imports (functions and try blocks too)."""

    def __init__(self) -> None:
        super().__init__()
        self.found = False
        self.star_modules: set[str] = set()
        self.fallback_names: set[str] = set()

    def visit_Try(self, node: cst.Try) -> None:
        imported = {
            bound_name(alias, small)
            for stmt in clause_statements(node)
            if isinstance(stmt, cst.SimpleStatementLine)
            for small in stmt.body
            if isinstance(small, (cst.Import, cst.ImportFrom))
            and import_root(small) in APEX_ROOTS
            and not isinstance(small.names, cst.ImportStar)
            for alias in small.names
        }
        for handler in node.handlers:
            if not catches_import_error(handler):
                continue
            for stmt in clause_statements(handler):
                for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                    if isinstance(small, cst.Assign) and literal(small.value) is NOT_LITERAL:  # not `X = None`
                        names = {n for t in small.targets for n in target_names(t.target)}
                        self.fallback_names |= names & imported

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine | cst.SimpleStatementSuite) -> bool:
        for small in node.body:
            if isinstance(small, cst.Import):
                roots = {(dotted_name(a.name) or "").split(".")[0] for a in small.names}
                self.found |= bool(roots & {*APEX_ROOTS, *APEX_EXTENSIONS})
            elif isinstance(small, cst.ImportFrom) and import_root(small) in (*APEX_ROOTS, *APEX_EXTENSIONS):
                self.found = True
                if isinstance(small.names, cst.ImportStar):
                    self.star_modules.add(dotted_name(small.module) or "")
        return False

    visit_SimpleStatementSuite = visit_SimpleStatementLine  # `if x: from apex ... import ...`


FP16_UTILS_EXPORTS = (
    "to_python_float",
    "FP16_Optimizer",
    "FP16Model",
    "network_to_half",
    "BN_convert_float",
    "convert_network",
    "convert_module",
    "tofp16",
    "prep_param_lists",
    "model_grads_to_master_grads",
    "master_params_to_model_params",
    "clip_grad_norm",
    "LossScaler",
    "DynamicLossScaler",
)


def star_imported(resolver, edits: "FileEdits", node: cst.BaseExpression) -> str | None:
    """``apex.fp16_utils.<name>`` for a name only a ``from apex.fp16_utils import *`` provides."""
    if (
        isinstance(node, cst.Name)
        and node.value in FP16_UTILS_EXPORTS
        and "apex.fp16_utils" in edits.star_modules
        and not resolver.is_bound(node.value)
    ):
        return f"apex.fp16_utils.{node.value}"
    return None


def enabled(ctx, code: str) -> bool:
    """Whether findings of ``code`` are reported with these options."""
    return ctx.options.code_enabled(code, rule_doc(code).opt_in)


APEX_IMPORTS = (r"\bapex\b", r"\bamp_C\b", r"fused_layer_norm_cuda", r"fused_adam_cuda", r"\bsyncbn\b")


class ApexRule(Rule):
    """A rule that only looks at files importing apex, with apex name resolution and the file's edits.

    It reports nothing in a file without an apex import (``active``), so the words of those imports
    are its triggers: a file that only names ``FusedLayerNorm``, ``SyncBatchNorm`` or
    ``multi_tensor_applier`` of its own (Megatron's) is not parsed for it.
    """

    triggers = APEX_IMPORTS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.edits = FileEdits.for_rule(self)
        self.active = self.edits.apex_imported

    def apex(self, node: cst.BaseExpression) -> str | None:
        """The apex name ``node`` reads; None also inside a class or function of its root name
        (``try: from apex... import FusedLayerNorm as BertLayerNorm / except ImportError: class
        BertLayerNorm(nn.Module): ... super(BertLayerNorm, self)``: the fallback's own name) and
        for a name with an assigned fallback (:attr:`FileEdits.fallback_names`)."""
        root = root_name(node)
        if root is not None and (self.ctx.inside_definition_of(root.value) or root.value in self.edits.fallback_names):
            return None
        if old_torch_only(self.ctx, node):
            return None  # code only a torch older than any torch_npu's runs
        return apex_name(self.resolver, node) or star_imported(self.resolver, self.edits, node)

    def replaced(
        self, code: str, node: cst.CSTNode, reference: cst.BaseExpression, message: str, fix, needs_torch_npu=False
    ) -> None:
        """Report a fix (of the code's tier) that removes ``reference`` and emits ``torch.`` code (plain
        torch needs no ``import torch_npu``; ``needs_torch_npu``: the fix also writes ``torch.npu``)."""
        tier = rule_doc(code).tier
        self.edits.drop_ref(root_name(reference), tier)
        self.edits.need_import(code, tier, "torch")
        self.report(code, node, message, fix, tier=tier, needs_torch_npu=needs_torch_npu)
