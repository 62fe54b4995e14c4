"""Whether a project turns on transformers' naive model parallelism: a project fact.

transformers' GPT-2, GPT-J and T5 models (and the modeling files projects copy from them:
Context-Memory's ``ccm_t5.py``) spread their blocks over ``cuda:N`` devices only after
``model.parallelize()``, which sets ``self.model_parallel = True``; their ``forward`` moves tensors
between those devices under ``if self.model_parallel:``. A project that never calls
``.parallelize(...)`` (outside the ``parallelize`` methods themselves, which call each other) nor sets
``model_parallel = True`` never runs those branches, nor ``parallelize``/``deparallelize``: edits there
change nothing anyone runs (round 32: 14 noise hunks). NPU905 marks a ``parallelize()`` call.
"""

from __future__ import annotations

import ast
import re

from cuda2npu.analysis.python_files import PythonFiles

METHODS = ("parallelize", "deparallelize")
TURNING_ON = re.compile(rb"\.parallelize\(|\bmodel_parallel\s*=(?!=)")  # what a file must say to turn it on


def parallelizes(files: PythonFiles) -> bool:
    """Whether any Python file of the project calls ``.parallelize(...)`` or sets ``model_parallel``
    to anything but ``False``, outside a ``parallelize``/``deparallelize`` method."""
    for path, text in files.items():
        if not TURNING_ON.search(text) or (tree := files.tree(path)) is None:
            continue
        inside = {
            id(node)
            for method in ast.walk(tree)
            if isinstance(method, ast.FunctionDef) and method.name in METHODS
            for node in ast.walk(method)
        }
        if any(_turns_on(node) for node in ast.walk(tree) if id(node) not in inside):
            return True
    return False


def _turns_on(node: ast.AST) -> bool:
    """``x.parallelize(...)``, or ``x.model_parallel = <not False>`` (``model_parallel=True`` as a keyword)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "parallelize":
        return True
    if isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Attribute) and t.attr == "model_parallel" for t in node.targets
    ):
        return not (isinstance(node.value, ast.Constant) and node.value.value is False)
    return (
        isinstance(node, ast.keyword)
        and node.arg == "model_parallel"
        and not (isinstance(node.value, ast.Constant) and node.value.value is False)
    )
