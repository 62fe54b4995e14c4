"""Names used other than by calling them: what a rule replacing the calls of a library object
must also see (guards, aliases, class tests). Used by the attention, TransformerEngine, ColossalAI
and apex rules."""

from __future__ import annotations

import libcst as cst


class ValueUses:
    """Mixin of a rule: ``value_use(expr, class_test)`` for every name used as a value (call arguments,
    assigned/returned values, parameter defaults, conditions, comparison operands, and items of containers there), with
    ``class_test`` for the classes of ``isinstance``/``issubclass`` and ``is``/``==`` comparators.
    A rule defining ``visit_Call`` calls :meth:`call_value_uses` from it."""

    def value_use(self, expr: cst.BaseExpression, class_test: bool = False) -> None:
        raise NotImplementedError

    def _use(self, expr: cst.BaseExpression | None, class_test: bool = False) -> None:
        seen = self.__dict__.setdefault("_value_uses_seen", set())  # an isinstance class is also an argument
        if isinstance(expr, (cst.Name, cst.Attribute)) and expr not in seen:
            seen.add(expr)
            self.value_use(expr, class_test)
        elif isinstance(expr, (cst.Tuple, cst.List, cst.Set, cst.Dict)):  # items of a container in use
            for element in expr.elements:
                self._use(getattr(element, "value", None))
        elif isinstance(expr, cst.Subscript):  # `{"flash": flash_attn_func}[name]`
            self._use(expr.value)

    def call_value_uses(self, node: cst.Call) -> None:
        if (
            isinstance(node.func, cst.Name)
            and node.func.value in ("isinstance", "issubclass")
            and len(node.args) > 1
            and not self.resolver.lookup(node.func.value)
        ):
            classes = node.args[1].value
            for expr in [e.value for e in classes.elements] if isinstance(classes, cst.Tuple) else [classes]:
                self._use(expr, class_test=True)
        for arg in node.args:
            self._use(arg.value)

    def visit_Call(self, node: cst.Call) -> None:
        self.call_value_uses(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        self._use(node.value)

    def visit_Param(self, node: cst.Param) -> None:  # a default value: `def block(norm_layer=FusedLayerNorm)`
        self._use(node.default)

    def visit_Return(self, node: cst.Return) -> None:
        self._use(node.value)

    def visit_If(self, node: cst.If) -> None:
        self._use(node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        for expr in (node.test, node.body, node.orelse):
            self._use(expr)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        self._use(node.left)
        for target in node.comparisons:
            self._use(target.comparator, isinstance(target.operator, (cst.Is, cst.IsNot, cst.Equal, cst.NotEqual)))

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        self._use(node.left)
        self._use(node.right)

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        self._use(node.expression)
