"""Statement-level reads and builders of the apex.amp plan (amp_plan.py): the names an expression reads
or a statement assigns, whether a block only calls ``backward`` on a name, the ``self.`` attributes
it touches, and the statements that replace a ``with amp.scale_loss(...)`` block.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.core import noqa
from cuda2npu.core.arguments import bind
from cuda2npu.core.names import dotted_name
from cuda2npu.core.nodes import atom, code_of, expression
from cuda2npu.core.traversal import walk

CORE_CODES = ("NPU310", "NPU311", "NPU312", "NPU313", "NPU314", "NPU315")  # migrated together or not at all
SCALE_LOSS_PARAMS = ("loss", "optimizers", "loss_id", "model", "delay_unscale", "delay_overflow_check")


def dotted_names(node) -> list[str]:
    """``["model"]`` for ``model``, ``["netD", "netG"]`` for ``[netD, netG]``; [] for other expressions."""
    if node is None:
        return []
    value = node.value if isinstance(node, cst.Arg) else node
    elements = [e.value for e in value.elements] if isinstance(value, (cst.List, cst.Tuple)) else [value]
    return [name for name in (dotted_name(e) for e in elements) if name is not None]


def conjunction(conditions: list) -> str | None:
    parts = [code_of(c) for c in conditions]
    parts = [
        f"({p})" if isinstance(c, (cst.BooleanOperation, cst.IfExp, cst.NamedExpr)) and len(parts) > 1 else p
        for p, c in zip(parts, conditions)
    ]
    return " and ".join(parts) or None


def given_optimizers(bound: dict) -> bool:
    """amp.initialize was given optimizers (``[]``, as in ``model, _ = amp.initialize(model, [])``, is none)."""
    arg = bound.get("optimizers")
    return arg is not None and not (isinstance(arg.value, (cst.List, cst.Tuple)) and not arg.value.elements)


class _SelfAttributes(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[cst.Attribute] = []

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, cst.Name) and node.value.value == "self":
            self.found.append(node)


def self_attributes(node: cst.CSTNode) -> list[cst.Attribute]:
    """Every ``self.<name>`` in ``node``."""
    visitor = _SelfAttributes()
    walk(node, visitor)
    return visitor.found


class _NameReads(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()
        self._attrs: set[cst.Name] = set()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._attrs.add(node.attr)

    def visit_Name(self, node: cst.Name) -> None:
        if node not in self._attrs:
            self.names.add(node.value)


def names_read(node: cst.BaseExpression) -> set[str]:
    reads = _NameReads()
    walk(node, reads)
    return reads.names


class _Assigned(cst.CSTVisitor):
    """Names a statement binds (targets, loop variables, ``as`` names), outside nested scopes."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def _targets(self, node) -> None:
        if isinstance(node, cst.Name):
            self.names.add(node.value)
        elif isinstance(node, (cst.Tuple, cst.List)):
            for element in node.elements:
                self._targets(element.value)
        elif isinstance(node, cst.StarredElement):
            self._targets(node.value)

    def visit_FunctionDef(self, node) -> bool:
        return False

    def visit_ClassDef(self, node) -> bool:
        return False

    def visit_Lambda(self, node) -> bool:
        return False

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._targets(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._targets(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._targets(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._targets(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._targets(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._targets(node.name)


def assigns(stmt: cst.CSTNode, names: set[str]) -> bool:
    assigned = _Assigned()
    walk(stmt, assigned)
    return bool(assigned.names & names)


class _BackwardOnly(cst.CSTVisitor):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.allowed: set[cst.Name] = set()
        self.seen: list[cst.Name] = []

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "backward" and isinstance(func.value, cst.Name):
            self.allowed.add(func.value)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name:
            self.seen.append(node)


def only_backward(body: cst.IndentedBlock, name: str) -> bool:
    """The scaled loss is only used as ``name.backward(...)``."""
    visitor = _BackwardOnly(name)
    body.visit(visitor)
    return bool(visitor.seen) and all(n in visitor.allowed for n in visitor.seen)


class _ReplaceScaled(cst.CSTTransformer):
    def __init__(self, name: str, replacement: cst.BaseExpression) -> None:
        super().__init__()
        self.name = name
        self.replacement = replacement

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.Attribute:
        if (
            updated_node.attr.value == "backward"
            and isinstance(updated_node.value, cst.Name)
            and updated_node.value.value == self.name
        ):
            return updated_node.with_changes(value=self.replacement)
        return updated_node


def backward_statements(updated: cst.With, scaled: str, scaler: str | None) -> list:
    """The body of ``with amp.scale_loss(loss, ...) as scaled:`` with ``scaled`` replaced by the loss,
    scaled by ``scaler`` (``self.scaler``) where there is one."""
    loss = bind(updated.items[0].item, SCALE_LOSS_PARAMS)["loss"].value
    replacement = expression(f"{scaler}.scale({code_of(loss)})") if scaler else atom(loss)
    transformer = _ReplaceScaled(scaled, replacement)
    return [s.visit(transformer) for s in updated.body.body]


def replace_call(stmt: cst.SimpleStatementLine, source: str) -> cst.SimpleStatementLine:
    small = stmt.body[0]
    return stmt.with_changes(body=[small.with_changes(value=expression(source))])


def with_statement(header: str, members: list) -> cst.With:
    return cst.With(items=[cst.WithItem(expression(header))], body=cst.IndentedBlock(body=members))


def suppressed(stmt: cst.CSTNode) -> bool:
    """The statement's own line carries a ``# noqa`` for one of the apex.amp codes."""
    if isinstance(stmt, cst.SimpleStatementLine):
        comment = stmt.trailing_whitespace.comment
    else:
        comment = getattr(getattr(stmt.body, "header", None), "comment", None)
    directive = noqa.parse_comment(comment.value) if comment is not None else None
    return directive is not None and any(directive.matches(code) for code in CORE_CODES)


def statement_source(stmt: cst.CSTNode) -> str:
    """A statement's code without the comments and blank lines above it."""
    return code_of(stmt.with_changes(leading_lines=[]) if hasattr(stmt, "leading_lines") else stmt).strip()


def brief(stmt: cst.CSTNode) -> str:
    text = statement_source(stmt)
    first = text.splitlines()[0] if text else ""
    return first if len(first) <= 60 else first[:57] + "..."
