"""What a rule is: a libcst visitor that reports findings, each with an optional fix.

Rules observe, the engine edits (docs/design.md §1): a rule never changes the
tree. A fix is a function from the *updated* node (children already rewritten) to its
replacement, so fixes on nested nodes compose in a single pass.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, ClassVar, Iterable, TypeVar, Union

import libcst as cst

from cuda2npu.core.catalogue import rule as rule_doc
from cuda2npu.core.decoding import decode
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.imports import ImportNeed
from cuda2npu.core.names import NameResolver
from cuda2npu.core.options import Options

Replacement = Union[cst.CSTNode, cst.RemovalSentinel, cst.FlattenSentinel]
Fix = Callable[[cst.CSTNode], Replacement]
State = TypeVar("State")

COMPOUND_STATEMENTS = (
    cst.FunctionDef,
    cst.ClassDef,
    cst.If,
    cst.For,
    cst.While,
    cst.Try,
    cst.TryStar,
    cst.With,
    cst.Match,
)


@dataclass
class Report:
    """A finding as a rule raised it, before positions are known."""

    code: str
    node: cst.CSTNode
    message: str
    fix: Fix | None
    tier: Tier
    needs_torch_npu: bool
    statement: cst.CSTNode | None
    companion: str | None = None  # a generated file (cuda2npu/templates) the fix makes the file import
    imports: tuple[ImportNeed, ...] = ()  # imports the fix's code needs, added by the engine when it applies the fix
    sole: bool = False  # the file cannot run on an NPU host: the engine keeps this report alone (filekinds/python.py)


class RuleContext(cst.BatchableCSTVisitor):
    """Shared state of one traversal: name resolution, the enclosing statement, the reports."""

    def __init__(self, module: cst.Module, options: Options, text: bytes | None = None) -> None:
        super().__init__()
        self.module = module
        self.options = options
        self.text = text  # the bytes ``module`` was parsed from (None: unknown), for cheap regex prechecks
        self.resolver = NameResolver(module)
        self.reports: list[Report] = []
        self._statements: list[cst.CSTNode] = []
        self._file_state: dict[Callable, object] = {}

    @functools.cached_property
    def code(self) -> str:
        """The module's code: its decoded text when known (no code generation), else generated once."""
        return decode(self.text) if self.text is not None else self.module.code

    @functools.cached_property
    def source(self) -> bytes:
        """The module's bytes: ``text`` when known, else its generated code (for regex checks)."""
        return self.text if self.text is not None else self.code.encode()

    def file_state(self, build: Callable[["RuleContext"], State]) -> State:
        """The one ``build(self)`` of this file (its pre-pass results, an edit registry), shared by
        every rule of the traversal that asks for the same ``build``."""
        if build not in self._file_state:
            self._file_state[build] = build(self)
        return self._file_state[build]  # type: ignore[return-value]

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine,) + COMPOUND_STATEMENTS):
            self._statements.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if self._statements and self._statements[-1] is original_node:
            self._statements.pop()

    def get_visitors(self) -> dict:
        visitors = {f"visit_{cls.__name__}": self.on_visit for cls in (cst.SimpleStatementLine,) + COMPOUND_STATEMENTS}
        visitors.update(
            {f"leave_{cls.__name__}": self.on_leave for cls in (cst.SimpleStatementLine,) + COMPOUND_STATEMENTS}
        )
        return visitors

    @property
    def statement(self) -> cst.CSTNode | None:
        return self._statements[-1] if self._statements else None

    def inside_definition_of(self, name: str) -> bool:
        """Whether the traversal is inside a class or function named ``name``."""
        return any(isinstance(s, (cst.ClassDef, cst.FunctionDef)) and s.name.value == name for s in self._statements)

    def report(
        self,
        code: str,
        node: cst.CSTNode,
        message: str,
        fix: Fix | None = None,
        *,
        tier: Tier | None = None,
        needs_torch_npu: bool = True,
        companion: str | None = None,
        imports: Iterable[ImportNeed] = (),
        sole: bool = False,
    ) -> None:
        if not self.options.code_enabled(code, rule_doc(code).opt_in):
            return
        self.reports.append(
            Report(
                code=code,
                node=node,
                message=message,
                fix=fix,
                tier=tier or rule_doc(code).tier,
                needs_torch_npu=needs_torch_npu,
                statement=self.statement,
                companion=companion,
                imports=tuple(imports),
                sole=sole,
            )
        )


class Rule(cst.BatchableCSTVisitor):
    """Base class of every rule: subclasses define ``codes``, ``triggers`` and visit methods.

    ``triggers`` are regular-expression fragments; a file is parsed only when one of the enabled
    rules' triggers (``triggers_for``) occurs in its raw text (the prefilter) and, for that rule,
    every fragment of ``requires`` too (a conjunction: NPU804 needs a training call *and* a host sync).
    """

    codes: ClassVar[tuple[str, ...]] = ()
    triggers: ClassVar[tuple[str, ...]] = ()
    requires: ClassVar[tuple[str, ...]] = ()
    portable_support: ClassVar[bool] = False  # its fixes write portable code under --portable (see report)

    def __init__(self, ctx: RuleContext) -> None:
        super().__init__()
        self.ctx = ctx

    @classmethod
    def triggers_for(cls, options: Options) -> tuple[str, ...]:
        """The triggers in a run with ``options``: ``triggers``, plus what the project's facts add."""
        return cls.triggers

    @classmethod
    def requires_for(cls, options: Options) -> tuple[str, ...]:
        """The fragments a file must also hold in a run with ``options``: ``requires``, or what the
        project's facts widen it to."""
        return cls.requires

    def get_visitors(self) -> dict:
        """libcst's lookup (``inspect.getmembers`` on every instance, ~20 ms) cached per class."""
        return {name: getattr(self, name) for name in _visitor_names(type(self))}

    @property
    def resolver(self) -> NameResolver:
        return self.ctx.resolver

    @property
    def options(self) -> Options:
        return self.ctx.options

    def report(self, code: str, node: cst.CSTNode, message: str, fix: Fix | None = None, **kw) -> None:
        """Under ``--portable`` the fixes of a rule without ``portable_support`` (NPU-only code) are
        not made: the original code, which runs on CUDA, stays, reported as a manual item."""
        if fix is not None and self.options.portable and not self.portable_support:
            if isinstance(node, cst.Module):
                return  # the imports/helpers of rewrites that are not made
            fix, kw = None, {**kw, "tier": Tier.MANUAL}
            message = f"not portable yet, kept as written (it runs on CUDA); the NPU-only rewrite: {message}"
        self.ctx.report(code, node, message, fix, **kw)

    def report_in(self, statement: cst.CSTNode | None, code: str, node: cst.CSTNode, message: str, *args, **kw) -> None:
        """``report`` for a node decided on outside the traversal (in ``leave_Module``, where no
        statement is current): its marker goes above ``statement``."""
        self.ctx._statements.append(statement)
        try:
            self.report(code, node, message, *args, **kw)
        finally:
            self.ctx._statements.pop()


@functools.lru_cache(maxsize=None)
def _visitor_names(cls: type) -> tuple[str, ...]:
    """Names of the ``visit_*``/``leave_*`` methods a rule class defines (libcst's no-op stubs excluded)."""
    return tuple(
        name
        for name in dir(cls)
        if name.startswith(("visit_", "leave_"))
        and callable(getattr(cls, name))
        and not getattr(getattr(cls, name), "_is_no_op", False)
    )


REGISTRY: list[type[Rule]] = []


def register(cls: type[Rule]) -> type[Rule]:
    """Class decorator adding a rule to the registry."""
    REGISTRY.append(cls)
    return cls


def enabled_in(rules: list[type[Rule]], options: Options) -> list[type[Rule]]:
    """The classes of ``rules`` with at least one enabled code."""
    return [cls for cls in rules if any(options.code_enabled(code, rule_doc(code).opt_in) for code in cls.codes)]
