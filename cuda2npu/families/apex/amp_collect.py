"""The pre-pass of the apex.amp migration (cuda2npu/families/apex/amp.py): one walk over the file
that finds ``amp.initialize`` calls, ``with amp.scale_loss(...)`` blocks, the other apex.amp calls,
optimizer steps and gradient clipping, and the names they bind.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.names import NameResolver, dotted_name
from cuda2npu.core.rulebase import COMPOUND_STATEMENTS
from cuda2npu.families.apex.common import apex_name

CLIP_FUNCTIONS = {"torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_value_", "torch.nn.utils.clip_grad_norm"}


class AmpCollector(cst.BatchableCSTVisitor):
    """apex.amp uses, optimizer steps, clipping calls and the callees of every statement."""

    def __init__(self, resolver: NameResolver, old_torch: frozenset[cst.CSTNode] = frozenset()) -> None:
        super().__init__()
        self.resolver = resolver
        self.old_torch = old_torch  # code only a torch older than torch_npu's runs: not migrated
        self.initializes: list[cst.Call] = []
        self.scale_withs: list[tuple[cst.With, cst.Call]] = []
        self.amp_calls: list[tuple[cst.Call, str]] = []
        self.amp_references: list[tuple[cst.CSTNode, str]] = []
        self.steps: list[cst.Call] = []
        self.clips: list[cst.Call] = []
        self.callees: dict[cst.CSTNode, set[str]] = {}  # statement -> dotted names it calls
        self.statement_of: dict[cst.CSTNode, cst.CSTNode] = {}  # call/with -> innermost statement
        self.order: dict[cst.CSTNode, int] = {}  # statement -> position in the file (document order)
        self._statements: list[cst.CSTNode] = []
        self._with_items: set[cst.Call] = set()  # amp.scale_loss calls heading a `with`
        self.wrappings: list[tuple[str, str]] = []  # (target, wrapped): `ddp = DDP(model, ...)`
        self.other_references: list[
            tuple[cst.CSTNode, cst.CSTNode]
        ] = []  # (use, statement): `amp._amp_state`, `amp is None`
        self._called: set[cst.BaseExpression] = set()
        self._inner: set[cst.CSTNode] = set()  # not uses: attribute chains' values and attrs, targets, keywords
        self._in_import = False

    def _amp(self, node: cst.BaseExpression) -> str | None:
        name = apex_name(self.resolver, node) if node not in self.old_torch else None
        return name if name and name.startswith("apex.amp.") else None

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            self._statements.append(node)
            self.order.setdefault(node, len(self.order))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if self._statements and self._statements[-1] is original_node:
            self._statements.pop()

    def get_visitors(self) -> dict:
        visitors = super().get_visitors()  # visit_With, visit_Call, visit_Decorator
        for cls in (cst.SimpleStatementLine, *COMPOUND_STATEMENTS):
            visitors.setdefault(f"visit_{cls.__name__}", self.on_visit)
            visitors.setdefault(f"leave_{cls.__name__}", self.on_leave)
        return visitors

    def visit_With(self, node: cst.With) -> None:
        self.on_visit(node)  # a statement too
        for item in node.items:
            if isinstance(item.item, cst.Call) and self._amp(item.item.func) == "apex.amp.scale_loss":
                self.scale_withs.append((node, item.item))
                self._with_items.add(item.item)
                self.statement_of[node] = node

    def visit_Import(self, node: cst.Import) -> None:
        self._in_import = True

    def leave_Import(self, original_node: cst.Import) -> None:
        self._in_import = False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._in_import = True

    def leave_ImportFrom(self, original_node: cst.ImportFrom) -> None:
        self._in_import = False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._inner.update((node.value, node.attr))  # `args.amp` is not apex.amp
        self._reference(node)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._inner.add(node.target)  # `amp = None` in a fallback rebinds the name, it does not use apex.amp

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._inner.add(node.keyword)  # `build(amp=True)`

    def visit_Param(self, node: cst.Param) -> None:
        self._inner.add(node.name)

    def visit_Name(self, node: cst.Name) -> None:
        self._reference(node)

    def _reference(self, node: cst.BaseExpression) -> None:
        """A use of apex.amp other than calling (or decorating with) one of its functions."""
        if self._in_import or node in self._inner:
            return
        name = self.resolver.qualified_name(node) or ""
        parts = name.split(".")
        if parts[:2] == ["apex", "amp"] and (len(parts) == 2 or node not in self._called) and self._statements:
            self.other_references.append((node, self._statements[-1]))

    def visit_Call(self, node: cst.Call) -> None:
        self._called.add(node.func)
        callee = dotted_name(node.func)
        if callee is not None:
            for stmt in self._statements:
                self.callees.setdefault(stmt, set()).add(callee)
        if self._statements:
            self.statement_of[node] = self._statements[-1]
        name = self._amp(node.func)
        if name == "apex.amp.initialize":
            self.initializes.append(node)
        elif name is not None and node not in self._with_items:
            self.amp_calls.append((node, name))
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "step":
            self.steps.append(node)
        elif (self.resolver.qualified_name(node.func) or callee or "") in CLIP_FUNCTIONS:
            self.clips.append(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        if len(node.targets) == 1 and isinstance(value, cst.Call) and value.args and value.args[0].keyword is None:
            target, wrapped = dotted_name(node.targets[0].target), dotted_name(value.args[0].value)
            if target and wrapped:
                self.wrappings.append((target, wrapped))

    def visit_Decorator(self, node: cst.Decorator) -> None:
        self._called.add(node.decorator)
        name = self._amp(node.decorator)
        if name is not None:
            self.amp_references.append((node, name))
