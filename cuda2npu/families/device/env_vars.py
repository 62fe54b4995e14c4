"""CUDA and NCCL environment variable names (NPU202, NPU203).

A string literal that is exactly a known variable name is unambiguous, so it is rewritten wherever
it appears (``os.environ[...]``, ``os.getenv``, ``env={...}`` dicts), except on the CUDA side of
code that already handles the NPU (``npu_aware``). Mapping data: ``rules/tables/env_vars.toml``.

Portable output (``--portable``) keeps the CUDA name, which CUDA hosts need, and reports the
Ascend one to set or read as well (tier review): which one applies is not known before torch
starts, when such variables are usually set.
"""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.catalogue import table
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import rename_fix, string_value
from cuda2npu.core.names import dotted_name
from cuda2npu.core.nodes import code_of
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes

# `NAME=` (or `export NAME=`) at a command's start in a string: the string's start, or after a space, a
# line break, `;`, `&`, `|`, `(`, a backtick or a quote (a shell script held in a Python string)
ASSIGNED = re.compile(r"(?:^|(?<=[\s;&|(`\"']))(?:export[ \t]+)?([A-Z_][A-Z0-9_]*)=")
INSIDE = re.compile(ASSIGNED.pattern.replace("(?:^|", "(?:"))  # the same in a part after an f-string's `{...}`


@register
class EnvironmentVariables(Rule):
    codes = ("NPU202", "NPU203")
    triggers = (r"CUDA_\w+", r"NCCL_\w+", r"PYTORCH_\w*CUDA")
    portable_support = True

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        """``f"CUDA_VISIBLE_DEVICES={','.join(gpus)}"``: an ``env`` argument or a shell command built in
        Python (h2o-llmstudio's ``["env", f"CUDA_VISIBLE_DEVICES=...", "torchrun", ...]``)."""
        for number, part in enumerate(node.parts):
            if isinstance(part, cst.FormattedStringText):
                self._assignment(part, part.value, node, ASSIGNED if number == 0 else INSIDE)

    def _assignment(
        self, literal: cst.CSTNode, text: str, whole: cst.BaseExpression, assigned: re.Pattern[str] = ASSIGNED
    ) -> None:
        """A string assigning CUDA variables as a command does (``NAME=...`` at a command's start, LLM2LLM's
        shell templates: ``"export CUDA_VISIBLE_DEVICES={cuda_devices}\\n..."``, round 35): the names are
        renamed as variable names are, reviewed where a device list may not be ascending."""
        cuda = table("env_vars")["cuda"]
        names = list(dict.fromkeys(match[1] for match in assigned.finditer(text) if match[1] in cuda))
        if not names or self.options.portable or is_cuda_alternative(self.ctx, whole):
            return
        if isinstance(TreeIndex.of(self.ctx).parents.get(whole), cst.Expr):
            return  # a docstring (or another bare string): an example for the reader, not a command
        fix = _assignments_renamed(assigned, cuda)
        visible = "CUDA_VISIBLE_DEVICES" in names and not isinstance(whole, cst.SimpleString)
        why = _out_of_order(whole) if visible else None
        if why is not None:
            name, new = "CUDA_VISIBLE_DEVICES", cuda["CUDA_VISIBLE_DEVICES"]
            message = f"`{name}` → `{new}`; its IDs must be ascending, and `{code_of(whole)}` {why}"
            self.report("NPU202", literal, message, fix, tier=Tier.REVIEW, needs_torch_npu=False)
            return
        renamed = ", ".join(f"`{name}=` → `{cuda[name]}=`" for name in names)
        self.report("NPU202", literal, renamed, fix, needs_torch_npu=False)

    def _lowercase_key(self, node: cst.SimpleString, name: str) -> bool:
        """``name`` is an element of a list of names whose lower-case forms the file uses as keys: verl's
        ``WorkerMeta.keys = [..., "CUDA_VISIBLE_DEVICES"]`` read as ``store[f"_{key.lower()}"]`` where
        ``Worker.__init__`` stores ``store['_cuda_visible_devices']`` (rllm, round 45)."""
        if not isinstance(TreeIndex.of(self.ctx).parents.get(node), cst.Element):
            return False
        return name.lower() in self.ctx.file_state(_lowercase_key_names)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        name = string_value(node)
        if name is None or not ("CUDA" in name or "NCCL" in name) or is_cuda_alternative(self.ctx, node):
            return
        env = table("env_vars")
        if self.options.portable and (name in env["cuda"] or name in env["nccl"]):
            code, new = ("NPU202", env["cuda"][name]) if name in env["cuda"] else ("NPU203", env["nccl"][name])
            self.report(
                code,
                node,
                f"`{name}` kept for CUDA hosts (portable output); on Ascend hosts the variable is "
                f"`{new}`: set or read it as well",
                tier=Tier.REVIEW,
                needs_torch_npu=False,
            )
        elif name in env["cuda"] and self._lowercase_key(node, name):
            self.report(
                "NPU202",
                node,
                f"`{name}` kept: this file also stores it under its lower-case name (`{name.lower()}`), which code "
                f'derives from this list (verl\'s WorkerMeta: `f"_{{key.lower()}}"`); renamed alone to '
                f"`{env['cuda'][name]}`, the lookups would miss what is stored: rename both, or neither",
                tier=Tier.REVIEW,
                needs_torch_npu=False,
            )
        elif name in env["cuda"]:
            new = env["cuda"][name]
            value = _set_value(TreeIndex.of(self.ctx), node) if name == "CUDA_VISIBLE_DEVICES" else None
            why = _out_of_order(value) if value is not None else None
            if why is not None:
                self.report(
                    "NPU202",
                    node,
                    f"`{name}` → `{new}`; its IDs must be ascending (parsing stops at the first one out of "
                    f"order), and `{code_of(value)}` {why}",
                    rename_fix(name, new),
                    tier=Tier.REVIEW,
                    needs_torch_npu=False,
                )
                return
            self.report("NPU202", node, f"`{name}` → `{new}`", rename_fix(name, new), needs_torch_npu=False)
        elif name in env["nccl"]:
            new = env["nccl"][name]
            value = string_value(_set_value(TreeIndex.of(self.ctx), node) or cst.Name("None"))
            problem = hccl_value_problem(new, value)
            if problem is not None:
                self.report("NPU203", node, f"`{name}` → `{new}` {problem}", tier=Tier.MANUAL)
                return
            self.report(
                "NPU203",
                node,
                f"`{name}` → `{new}` (closest HCCL analog; no official mapping table exists)",
                rename_fix(name, new),
                needs_torch_npu=False,
            )
        elif name in env["nccl_manual"]:
            self.report("NPU203", node, f"`{name}`: {env['nccl_manual'][name]}", tier=Tier.MANUAL)
        else:  # "CUDA_VISIBLE_DEVICES=0 python train.py"
            self._assignment(node, name, node)


def _lowercase_key_names(ctx) -> frozenset[str]:
    """The lower-case strings of the file (``'_cuda_visible_devices'``), without a leading underscore."""
    return frozenset(
        (string_value(node) or "").lstrip("_")
        for node in iter_nodes(ctx.module, cst.SimpleString)
        if (string_value(node) or "").islower()
    )


def _assignments_renamed(assigned: re.Pattern[str], cuda: dict[str, str]):
    """A fix renaming every CUDA variable a string literal assigns (``assigned``: where an assignment starts)."""

    def rename(node: cst.SimpleString | cst.FormattedStringText):
        def renamed(match: re.Match[str]) -> str:
            name = match[1]
            return match[0][: match.start(1) - match.start()] + cuda[name] + "=" if name in cuda else match[0]

        return node.with_changes(value=assigned.sub(renamed, node.value))

    return rename


def hccl_value_problem(variable: str, value: str | None) -> str | None:
    """Why ``value`` cannot be carried over to the HCCL ``variable`` (rules/tables/env_vars.toml
    ``[hccl_ranges]``: ``NCCL_IB_TIMEOUT=22`` is out of HCCL_RDMA_TIMEOUT's 5-20), None when it can
    or is not a literal number."""
    limits = table("env_vars")["hccl_ranges"].get(variable)
    if limits is None or value is None or not value.strip().isdigit():
        return None
    number = int(value)
    if limits["min"] <= number <= limits["max"] and number % limits.get("multiple", 1) == 0:
        return None
    return f"takes {limits['note']}: {value} is not one of them; choose an HCCL value by hand"


def _set_value(index: TreeIndex, name: cst.SimpleString) -> cst.BaseExpression | None:
    """The value a variable named by ``name`` is set to: ``os.environ[name] = v``, ``{name: v}``,
    ``os.environ.setdefault(name, v)``, ``os.putenv(name, v)`` (None: a read, or not known)."""
    parent = index.parents.get(name)
    if isinstance(parent, cst.DictElement) and parent.key is name:
        return parent.value
    if isinstance(parent, cst.Arg):
        call = index.parents.get(parent)
        if isinstance(call, cst.Call) and len(call.args) >= 2 and call.args[0] is parent:
            method = call.func.attr.value if isinstance(call.func, cst.Attribute) else ""
            return call.args[1].value if method in ("setdefault", "putenv") else None
        return None
    while parent is not None and not isinstance(parent, (cst.Subscript, cst.BaseStatement)):
        parent = index.parents.get(parent)
    target = index.parents.get(parent) if isinstance(parent, cst.Subscript) else None
    assign = index.parents.get(target) if isinstance(target, cst.AssignTarget) else None
    return assign.value if isinstance(assign, cst.Assign) else None


def _out_of_order(value: cst.BaseExpression) -> str | None:
    """Why the device list ``value`` may not be ascending: a literal that is not, or one built at
    run time (a ``join``, a comma in its text); None: one ID, or an ascending literal."""
    literal = string_value(value)
    if literal is not None:
        ids = [part.strip() for part in literal.split(",")]
        ascending = not all(i.isdigit() for i in ids) or [int(i) for i in ids] == sorted(int(i) for i in ids)
        return None if ascending else "is not"
    if _joins_a_range(value):
        return None
    texts = [string_value(s) or "" for s in iter_nodes(value, cst.SimpleString)]
    texts += [part.value for part in iter_nodes(value, cst.FormattedStringText)]
    if ".join(" in code_of(value) or any("," in text for text in texts):
        return "may list them in another order (one list per worker, rotated)"
    return None


def _joins_a_range(value: cst.BaseExpression) -> bool:
    """``",".join(str(i) for i in range(n))`` or ``",".join(map(str, range(a, b)))``: the IDs of a
    ``range`` without a step, ascending (trl's ``CUDA_VISIBLE_DEVICES``, round 53; lmms-eval, round 38)."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "join"):
        return False
    if len(value.args) != 1:
        return False
    joined = value.args[0].value
    if isinstance(joined, (cst.GeneratorExp, cst.ListComp)) and joined.for_in.inner_for_in is None:
        element, target, iterable = joined.elt, joined.for_in.target, joined.for_in.iter
        plain = (
            isinstance(element, cst.Call)
            and dotted_name(element.func) == "str"
            and len(element.args) == 1
            and element.args[0].value.deep_equals(target)
        )
        return plain and not joined.for_in.ifs and _stepless_range(iterable)
    if isinstance(joined, cst.Call) and dotted_name(joined.func) == "map" and len(joined.args) == 2:
        return dotted_name(joined.args[0].value) == "str" and _stepless_range(joined.args[1].value)
    return False


def _stepless_range(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and dotted_name(expr.func) == "range" and 1 <= len(expr.args) <= 2
