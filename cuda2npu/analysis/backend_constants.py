"""Module constants another file of the project passes to torch.distributed as its backend: a project
fact (no libcst here), so that NPU201 rewrites ``BACKEND = "nccl"`` where it is defined.

mistral-finetune defines ``BACKEND = "nccl"`` in ``finetune/distributed.py`` and ``train.py`` calls
``dist.init_process_group(backend=BACKEND)`` after ``from finetune.distributed import BACKEND``: the
defining file alone does not show where the value goes. :func:`backend_constants` reads the files
that call ``init_process_group`` / ``new_group`` (a text prefilter, then :mod:`ast`), takes the
name in their backend position (``backend=NAME``, ``backend=mod.NAME``, or positionally) when torch's
function is called (``dist.init_process_group``, ``torch.distributed.new_group``, a name imported
from ``torch.distributed``), and follows the file's import of it to the project module defining it.
A name the importing files also pass to another call's ``*backend*`` keyword or to a Ray call (Ray's
collectives have no HCCL) is left out: its value serves more than torch.distributed.
"""

from __future__ import annotations

import ast
import os

from cuda2npu.analysis.project_imports import absolute_module
from cuda2npu.analysis.python_files import PythonFiles

# torch.distributed's callables whose backend is followed → the position of their `backend` parameter
BACKEND_POSITIONS = {"init_process_group": 0, "new_group": 2}
TORCH_DISTRIBUTED = "torch.distributed"


def backend_constants(files: PythonFiles) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``(real path of a project module, its names other project files pass to torch.distributed as
    the backend)``, sorted; ``files``: the project's Python files."""
    callers = [path for path, text in files.items() if b"backend" in text and _calls_torch_backend(text)]
    if not callers:
        return ()
    modules = files.modules
    paths = {name: path for path, name in modules.items()}
    passed: set[tuple[str, str]] = set()
    elsewhere: set[tuple[str, str]] = set()
    for path in callers:
        tree = files.tree(path)
        if tree is None:
            continue
        uses = _FileUses(modules.get(path, path.stem), path.name == "__init__.py")
        uses.visit(tree)
        passed |= uses.passed
        elsewhere |= uses.elsewhere
    found: dict[str, set[str]] = {}
    for module, name in passed - elsewhere:
        path = paths.get(module)
        if path is not None:
            found.setdefault(os.path.realpath(path), set()).add(name)
    return tuple(sorted((path, tuple(sorted(names))) for path, names in found.items()))


def _calls_torch_backend(text: bytes) -> bool:
    return any(name.encode() in text for name in BACKEND_POSITIONS)


class _FileUses(ast.NodeVisitor):
    """(module, name) pairs of one file's imports that it passes to torch.distributed as the backend
    (``passed``), or to another ``*backend*`` keyword or Ray call (``elsewhere``)."""

    def __init__(self, module: str, is_package: bool) -> None:
        self.module = module
        self.is_package = is_package
        self.names: dict[str, tuple[str, str]] = {}  # bound name → (module, name) of `from m import name`
        self.modules: dict[str, str] = {}  # bound name → module of `import m as x`, `from pkg import m`
        self.passed: set[tuple[str, str]] = set()
        self.elsewhere: set[tuple[str, str]] = set()
        self._calls: list[ast.Call] = []

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.modules[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.modules.setdefault(top, top)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        source = absolute_module(self.module, self.is_package, node.level, node.module or "")
        for alias in node.names:
            bound = alias.asname or alias.name
            self.names[bound] = (source, alias.name)
            self.modules[bound] = f"{source}.{alias.name}" if source else alias.name

    def visit_Call(self, node: ast.Call) -> None:
        self._calls.append(node)
        self.generic_visit(node)

    def _dotted(self, node: ast.expr) -> str | None:
        """The qualified name of a name or attribute chain through this file's imports."""
        if isinstance(node, ast.Name):
            if node.id in self.names:
                module, name = self.names[node.id]
                return f"{module}.{name}"
            return self.modules.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            head = self._dotted(node.value)
            return f"{head}.{node.attr}" if head else None
        return None

    def _constant(self, node: ast.expr) -> tuple[str, str] | None:
        """(module, name) of an imported name (``BACKEND``) or a module's attribute (``dist_utils.BACKEND``)."""
        if isinstance(node, ast.Name) and node.id in self.names:
            return self.names[node.id]
        if isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Name, ast.Attribute)):
            module = self._dotted(node.value)
            if module and not module.startswith("torch"):
                return module, node.attr
        return None

    def finish(self) -> None:
        for call in self._calls:
            qualified = self._dotted(call.func) or ""
            module, _, function = qualified.rpartition(".")
            torch_call = module == TORCH_DISTRIBUTED and function in BACKEND_POSITIONS
            positional = [arg for arg in call.args if not isinstance(arg, ast.Starred)]
            for keyword in call.keywords:
                constant = self._constant(keyword.value) if keyword.arg else None
                if constant is None or "backend" not in keyword.arg:
                    continue
                (self.passed if torch_call and keyword.arg == "backend" else self.elsewhere).add(constant)
            if torch_call and len(positional) > BACKEND_POSITIONS[function]:
                constant = self._constant(positional[BACKEND_POSITIONS[function]])
                if constant is not None:
                    self.passed.add(constant)
            elif qualified.startswith("ray."):
                self.elsewhere.update(c for arg in positional if (c := self._constant(arg)) is not None)

    def visit_Module(self, node: ast.Module) -> None:
        self.generic_visit(node)
        self.finish()
