"""Shapes of real apex.amp training scripts that the native migration (``families.apex.amp``) recognises.

* :func:`if_chain` / :func:`chain_head`: ``if``/``elif``/``else`` chains, such as NVIDIA BERT's
  ``if args.loss_scale == 0: amp.initialize(..., loss_scale="dynamic") else: amp.initialize(...,
  loss_scale=args.loss_scale)``, whose branches are alternatives of one ``amp.initialize``;
* :func:`loss_scale_args`: apex's ``loss_scale`` as GradScaler arguments (apex: ``"dynamic"``, or
  None under O1/O2, is a dynamic scale starting at 2**16; anything else is ``float(loss_scale)``,
  a static scale: no overflow check, every step runs);
* :func:`availability_check`: ``if not is_apex_available(): raise ...`` / ``assert has_apex``
  next to ``amp.initialize``, which the migrated code no longer needs.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.literals import NOT_LITERAL, literal
from cuda2npu.core.names import dotted_name
from cuda2npu.core.nodes import code_of, is_pure

DYNAMIC_SCALE = {"fp16": "2.0**14", "keep": "2.0**16"}  # initial dynamic scale per --precision


# --- if / elif / else ------------------------------------------------------------------------


def if_chain(head: cst.If) -> list[tuple[cst.BaseExpression | None, cst.BaseSuite]] | None:
    """``[(test, block), ..., (None, else block)]`` of an ``if``/``elif``/``else`` chain; None
    without a final ``else`` (then no branch need run)."""
    branches: list[tuple[cst.BaseExpression | None, cst.BaseSuite]] = []
    node: cst.If | cst.Else | None = head
    while isinstance(node, cst.If):
        branches.append((node.test, node.body))
        node = node.orelse
    if not isinstance(node, cst.Else):
        return None
    branches.append((None, node.body))
    return branches


def chain_head(index, node: cst.If) -> cst.If | None:
    """The ``if`` statement whose chain ``node`` (an ``if`` or one of its ``elif``) belongs to."""
    if node in index.placement:
        return node
    for stmt in index.placement:
        branch = stmt
        while isinstance(branch, cst.If):
            if branch.orelse is node:
                return stmt
            branch = branch.orelse
    return None


def mirror_chain(tests: list, sources: list[str]) -> str:
    """``if t1:\\n    s1\\nelif t2: ... else:\\n    sn`` (a statement per branch, same tests)."""
    lines = []
    for position, (test, source) in enumerate(zip(tests, sources)):
        keyword = "else" if test is None else ("if" if position == 0 else "elif")
        lines.append(f"{keyword}:" if test is None else f"{keyword} {code_of(test)}:")
        lines.append(f"    {source}")
    return "\n".join(lines) + "\n"


# --- loss scale ----------------------------------------------------------------------------


def _number(value) -> float | int | None:
    """A static loss scale: a number or a numeric string (apex accepts "128.0"), not "dynamic"."""
    if isinstance(value, bool) or value is None or value is NOT_LITERAL:
        return None
    if isinstance(value, (int, float)):
        return value
    try:
        return float(value)
    except ValueError:
        return None


def loss_scale_args(arg: cst.Arg | None, precision: str, readable: bool = True) -> tuple[list[str], str | None]:
    """(GradScaler keyword arguments, note) for apex's ``loss_scale`` argument (None: absent).

    A literal is decided now; a name or attribute (``args.loss_scale``) is decided when the
    scaler is created, as apex decided it: ``"dynamic"`` or None → dynamic, else
    ``float(value)`` static. Other expressions (they would be evaluated twice), and names the
    scaler cannot read where it is created (``readable=False``), leave the scaler dynamic, which
    the note says.
    """
    dynamic = [f"init_scale={DYNAMIC_SCALE[precision]}"] if precision == "fp16" else []
    if arg is None:
        return dynamic, None
    value = literal(arg.value)
    static = _number(value)
    if static is not None:
        return [f"init_scale={static!r}", "dynamic=False"], None
    if value is not NOT_LITERAL:  # "dynamic" (or None)
        return dynamic, None
    source = code_of(arg.value)
    if (
        not readable
        or not is_pure(arg.value)
        or isinstance(
            arg.value, (cst.Comparison, cst.BooleanOperation, cst.UnaryOperation, cst.Subscript, cst.BinaryOperation)
        )
    ):
        return dynamic, f"loss_scale={source} not carried over: the scaler is dynamic"
    is_dynamic = f'{source} in (None, "dynamic")'
    start = DYNAMIC_SCALE.get(precision, "2.0**16")
    return [f"init_scale={start} if {is_dynamic} else float({source})", f"dynamic={is_dynamic}"], (
        f'loss_scale={source} is read when the scaler is created, as apex read it: None or "dynamic" is a dynamic '
        f"scale, a number a static one"
    )


# --- names ---------------------------------------------------------------------------------


def first_param(function: cst.FunctionDef | None) -> str | None:
    params = function.params.params if function is not None else ()
    return params[0].name.value if params else None


# --- apex availability checks ----------------------------------------------------------------


def _names_apex(node: cst.BaseExpression) -> bool:
    """``is_apex_available()``, ``APEX_AVAILABLE``, ``_has_apex``: a test of whether apex imports."""
    if isinstance(node, cst.Call) and not node.args:
        node = node.func
    name = dotted_name(node)
    return name is not None and "apex" in name.rsplit(".", 1)[-1].lower()


def availability_check(stmt: cst.CSTNode) -> bool:
    """``if not is_apex_available(): raise ImportError(...)`` or ``assert has_apex, "..."``."""
    if isinstance(stmt, cst.If) and stmt.orelse is None and isinstance(stmt.body, cst.IndentedBlock):
        body = stmt.body.body
        test = stmt.test
        return (
            len(body) == 1
            and isinstance(body[0], cst.SimpleStatementLine)
            and len(body[0].body) == 1
            and isinstance(body[0].body[0], cst.Raise)
            and isinstance(test, cst.UnaryOperation)
            and isinstance(test.operator, cst.Not)
            and _names_apex(test.expression)
        )
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assert):
        return _names_apex(stmt.body[0].test)
    return False


def consecutive_runs(positions: list[int]) -> list[tuple[int, int]]:
    """``[(2, 3), (7, 7)]`` for ``[2, 3, 7]``: runs of consecutive positions."""
    runs: list[tuple[int, int]] = []
    for position in sorted(set(positions)):
        if runs and position == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], position)
        else:
            runs.append((position, position))
    return runs
