"""Shared machinery of the apex and mixed-precision rules (NPU3xx).

* :func:`canonical` / :func:`apex_name` resolve a reference to apex's public name
  (``apex.optimizers.fused_adam.FusedAdam`` → ``apex.optimizers.FusedAdam``);
* :class:`ApexRule` is the base of the rules that only act in files importing apex;
* :class:`FileEdits` is the apex rules' edit transaction of one file (``core.edits.StatementEdits``:
  several rules remove, insert and replace statements, and wrap runs of statements of a block,
  one composed fix per statement). It also
  records the references to apex names that fixes remove and the imports fixes need; the
  finalizer (``apex_imports``) turns those into import edits and collapses blocks a migration
  emptied (``if args.fp16: <removed>``, ``try: <removed apex import> except ImportError: ...``).
  A name whose ``except ImportError`` assigns it another implementation (``FusedLayerNorm =
  LayerNorm``) is not apex's to the rules (:attr:`FileEdits.fallback_names`): NPU hosts run that one.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from cuda2npu.analysis.cuda_only_modules import APEX_EXTENSIONS, APEX_ROOTS
from cuda2npu.analysis.never_run import never_run_nodes
from cuda2npu.analysis.old_torch import old_torch_only
from cuda2npu.core.catalogue import rule as rule_doc
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.edits import StatementEdits, clause_statements
from cuda2npu.core.imports import bound_name, catches_import_error, import_root
from cuda2npu.core.literals import NOT_LITERAL, literal
from cuda2npu.core.names import dotted_name, target_names
from cuda2npu.core.nodes import root_name
from cuda2npu.core.rulebase import Rule
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import walk

CANONICAL_PACKAGES = ("amp", "optimizers", "normalization", "parallel", "fp16_utils")


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


class FileEdits(StatementEdits):
    """The apex rules' edit transaction of one file (``core.edits``), with the references to apex
    names that fixes remove and the imports fixes need (see the module docstring)."""

    REGISTERING = (*StatementEdits.REGISTERING, "drop_ref", "need_import")

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.removed_refs: dict[cst.Name, Tier] = {}
        self.imports: dict[tuple[str, str | None], ImportRequest] = {}
        self._scan: _ApexImportScan | None = None

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

    def drop_ref(self, name: cst.Name | None, tier: Tier) -> None:
        """A fix removes this reference to an imported apex name."""
        if name is not None:
            self.removed_refs[name] = max(tier, self.removed_refs.get(name, Tier.EXACT))

    def need_import(self, code: str, tier: Tier, module: str, obj: str | None = None) -> None:
        """A fix of ``code`` emits code using ``module`` (``import module``) or ``from module import obj``."""
        need = self.imports.get((module, obj))
        if need is None or tier < need.tier:
            self.imports[(module, obj)] = ImportRequest(code, tier)


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


def not_run_on_npu(ctx, node: cst.CSTNode) -> bool:
    """``node`` is code only a torch older than any torch_npu's runs (``if version.parse(torch.__version__)
    < version.parse("1.6"): from apex import amp``), or that no NPU host runs (analysis/never_run.py:
    ``if get_accelerator().device_name() == "cuda": import amp_C``)."""
    return old_torch_only(ctx, node) or node in never_run_nodes(ctx)


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
        if not_run_on_npu(self.ctx, node):
            return None
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
