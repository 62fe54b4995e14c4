"""Names a module gives to other modules: an import of one is not unused although nothing in its file reads it.

``from apex.normalization import MixedFusedRMSNorm as RMSNorm`` in a package's ``__init__.py``,
read by ``from pkg import RMSNorm`` in two other modules, is a re-export. The rules that remove an
import whose names nothing in the file reads (NPU330, NPU405, NPU416, NPU510, portable NPU103) keep
a module-level import of a name that is

- bound in a package's ``__init__.py`` (every module-level name of a package is its API);
- bound in a module another file imports with ``*``, where the module has no ``__all__`` (with one, the star
  import takes the names ``__all__`` lists: TRELLIS' ``full_attn.py``, round 58);
- listed in the module's ``__all__``;
- imported from this module by another file of the project (``options.file.exports``, from a project fact:
  cuda2npu/analysis/project_imports.py, folded per file by ``Options.for_path``).

Such an import stays, and is reported as a used one would be (a CUDA-only target is marked).
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.literals import string_value
from cuda2npu.core.options import PACKAGE_API
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes

SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def exported(ctx, node: cst.CSTNode, name: str) -> str | None:
    """Why the name ``name`` an import ``node`` binds is given to other modules (see the module
    doc), else None."""
    exports = ctx.options.file.exports
    if PACKAGE_API in exports:
        why = "a name of a package's `__init__.py`"
    elif "*" in exports and not all_names(ctx):  # with `__all__`, a star import takes its names alone
        why = "imported with `*` by another module of the project"
    elif name in exports:
        why = "imported from here by another module of the project"
    elif name in all_names(ctx):
        why = "listed in `__all__`"
    else:
        return None
    parents = TreeIndex.of(ctx).parents
    parent = parents.get(node)
    while parent is not None:
        if isinstance(parent, SCOPES):
            return None  # a function's or class's own import
        parent = parents.get(parent)
    return why


def all_names(ctx) -> frozenset[str]:
    """The strings of the module's ``__all__`` (assigned, ``+=``, ``.extend([...])``, ``.append(...)``)."""
    return ctx.file_state(_all_names)


def _all_names(ctx) -> frozenset[str]:
    if ctx.text is not None and b"__all__" not in ctx.text:
        return frozenset()
    values: list[cst.BaseExpression] = []
    for statement in iter_nodes(ctx.module, cst.SimpleStatementLine):
        for small in statement.body:
            if isinstance(small, cst.Assign) and any(_is_all(t.target) for t in small.targets):
                values.append(small.value)
            elif isinstance(small, (cst.AnnAssign, cst.AugAssign)) and _is_all(small.target) and small.value:
                values.append(small.value)
            elif (
                isinstance(small, cst.Expr)
                and isinstance(small.value, cst.Call)
                and isinstance(small.value.func, cst.Attribute)
                and _is_all(small.value.func.value)
                and small.value.func.attr.value in ("extend", "append")
            ):
                values += [arg.value for arg in small.value.args]
    names = set()
    for value in values:
        for string in iter_nodes(value, cst.SimpleString):
            text = string_value(string)
            if text and text.isidentifier():
                names.add(text)
    return frozenset(names)


def _is_all(target: cst.BaseExpression) -> bool:
    return isinstance(target, cst.Name) and target.value == "__all__"
