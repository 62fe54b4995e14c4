"""Triton-kernel modules the project imports only behind a CUDA tensor test: a project fact (no libcst
here), so that NPU603 does not mark kernels an NPU host never launches.

whisper's ``triton_ops.py`` defines its kernels; ``timing.py`` imports it only in the body of ``if
x.is_cuda:`` (``median_filter``, which then calls ``median_filter_cuda``) and in ``dtw_cuda``, which is
called only there (``dtw``) and in a test marked ``@pytest.mark.requires_cuda``. An NPU tensor has
``is_cuda == False``, and cuda2npu keeps such a test when its branch calls a CUDA kernel (the device
rules: a callee named with a ``cuda`` word, analysis/kernel_switch.py ``calls_kernel``), while a test
marked as needing CUDA over a CUDA kernel call is code an NPU host never runs (analysis/never_run.py).

:func:`kernels_behind_cuda_gates` reads the files of the project that define Triton kernels (a regex),
then, with :mod:`ast`, every import of such a module by the project's files that name it: each must be

- in the body of an ``if`` whose test needs ``<expr>.is_cuda`` (``x.is_cuda``, ``x.is_cuda and y``)
  and whose body calls a function named with a ``cuda`` word (so the test stays CUDA's), or
- in a function every other mention of which in the project is the callee of such a call: in such a
  branch, or in a test marked with a ``cuda``/``gpu`` word (``requires_cuda``) when the function's own
  name has a ``cuda`` word.

A module imported nowhere or run as a script (``if __name__ == "__main__":``) is not one: what runs
it is not known.

:func:`triton_functions` names the project's Triton kernels and the functions launching one, for
the files that call them (slime's ``if grad.is_cuda: from ...deterministic_route_kernels import
ordered_route_grad``, the fallback in ``else``): such a test stays CUDA's (analysis/cuda_gates.py).
"""

from __future__ import annotations

import ast
import functools
import os
import re
from pathlib import Path

from cuda2npu.analysis.cuda_gates import CUDA_GRAPH_APIS
from cuda2npu.analysis.cuda_only_modules import cuda_module, kernel_modules, npu_release
from cuda2npu.analysis.kernel_switch import TORCH_OPS
from cuda2npu.analysis.never_run import CUDA_MARK_WORDS
from cuda2npu.analysis.project_imports import absolute_module
from cuda2npu.analysis.python_files import PythonFiles, import_nodes, parse
from cuda2npu.core.feature_words import CUDA_WORD

TRITON_KERNEL = re.compile(rb"^[ \t]*@[ \t]*triton\.(?:jit|autotune|heuristics)\b", re.M)
CUDA_GRAPH_TEXT = re.compile(b"(?:%b)\\b" % b"|".join(re.escape(api.encode()) for api in sorted(CUDA_GRAPH_APIS)))
# a custom operator namespace, or a `_C` extension bound or read (not `torch._C`): the files worth parsing
EXTENSION_TEXT = re.compile(rb"torch\.ops\.\w|(?<![\w.])_C\b|^[ \t]*(?:from|import)[ \t][^\n]*\b_C\b", re.M)
RUN_AS_SCRIPT = re.compile(rb"""^if[ \t]+__name__[ \t]*==[ \t]*['"]__main__['"]""", re.M)


def kernels_behind_cuda_gates(files: PythonFiles) -> tuple[str, ...]:
    """The real paths of the project's modules of Triton kernels that it imports only behind a CUDA
    tensor test (see the module docstring), sorted; ``files``: the project's Python files."""
    kernel_files = _kernel_files(files)
    if not kernel_files:
        return ()
    trees = _Trees(files)
    found = []
    for path in kernel_files:
        module = files.modules.get(path)
        if module is None or RUN_AS_SCRIPT.search(files[path]) is not None or trees.imported_at_top(module):
            continue
        sites = trees.imports_of(module)
        if sites and all(trees.gated_import(site) for site in sites):
            found.append(os.path.realpath(path))
    return tuple(sorted(found))


def triton_functions(files: PythonFiles) -> tuple[str, ...]:
    """``module.function`` of each Triton kernel of the project (``@triton.jit``, ``@triton.autotune``,
    ``@triton.heuristics``) and of each module-level function launching one (``kernel[grid](...)``,
    also through another function or class of its file: :func:`_closure`),
    sorted: another file calling one runs code written for CUDA GPUs (analysis/cuda_gates.py
    ``cuda_only_use``), so a ``.is_cuda`` test or a skip guard over the call stays CUDA's. A file
    outside a package counts under its own name (``kernels.launch``)."""
    found = []
    for path in _kernel_files(files):
        tree = files.tree(path)
        if tree is None:
            continue
        functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
        kernels = {f.name for f in functions if any(_triton_decorator(d) for d in f.decorator_list)}
        launchers = {
            f.name
            for f in functions
            if any(
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Subscript)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in kernels
                for node in ast.walk(f)
            )
        }
        launchers |= _closure(tree, set(), launchers)  # AQLM's `triton_matmul` → `aqlm_gemm_stupid` → `kernel[grid]`
        module = files.modules.get(path, path.stem)
        found.extend(f"{module}.{name}" for name in kernels | launchers)
    return tuple(sorted(found))


def extension_functions(files: PythonFiles, extensions: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``module.name`` of each module-level function or class of the project that calls an operator of a
    compiled extension (``torch.ops.detectron2.nms_rotated(...)``, not torch's or torch_npu's own
    namespaces; a function of a module its setup.py builds, ``extensions``, ``_C.nms(...)`` after
    ``from detectron2 import _C``) or captures a CUDA graph (:func:`_graph_capturers`), or a function
    of its file that does, and the
    names a package's ``__init__.py`` re-exports them under (``detectron2.layers.nms_rotated``),
    sorted: the ops have CPU and CUDA kernels only, so an NPU tensor must not reach them (a skip guard
    over a test calling one stays CUDA's: analysis/cuda_gates.py ``cuda_only_use``)."""
    found: set[str] = set()
    for path, text in files.items():
        graphs = CUDA_GRAPH_TEXT.search(text) is not None
        kernels = _dependency_text().search(text) is not None
        if not (EXTENSION_TEXT.search(text) or graphs or kernels) or (tree := files.tree(path)) is None:
            continue
        capturers = _graph_capturers(tree) if graphs else set()
        bound = _extension_names(tree, extensions)
        names = _closure(tree, bound, capturers) | capturers
        names |= _methods_calling(tree, bound, names)
        found.update(f"{files.modules.get(path, path.stem)}.{name}" for name in names)
    while found:  # the re-exports, then other files' functions calling any of them, to a fixed point
        more = (_reexports(files, found) | _callers_elsewhere(files, found)) - found
        if not more:
            break
        found |= more
    return tuple(sorted(found))


def extension_definitions(files: PythonFiles, functions: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(real path, name) of each of ``functions`` (:func:`extension_functions`) a file defines or binds at
    module level, sorted: its own calls name no module (pytorch3d's ``graph_conv.py`` calls
    ``gather_scatter = GatherScatter.apply`` under ``verts.is_cuda``, round 60)."""
    by_module: dict[str, set[str]] = {}
    for function in functions:
        module, _, name = function.rpartition(".")
        by_module.setdefault(module, set()).add(name)
    return tuple(
        sorted(
            (os.path.realpath(path), name)
            for path in files
            for name in by_module.get(files.modules.get(path, path.stem), ())
        )
    )


def _methods_calling(tree: ast.Module, extensions: set[str], local: set[str]) -> set[str]:
    """``Class.method`` for each method of a module-level class of ``tree`` that calls an extension
    operator or one of ``local`` (petals' ``OptimizedLlamaAttention._optimized_apply_rotary`` calling
    ``make_inference_graphed_callable``): a ``self.method(...)`` under a device test is CUDA-only code."""
    return {
        f"{node.name}.{method.name}"
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        for method in node.body
        if isinstance(method, ast.FunctionDef) and _calls_extension(method, extensions, local)
    }


def _graph_capturers(tree: ast.Module) -> set[str]:
    """The module-level functions of ``tree`` that capture a CUDA graph (they call ``torch.cuda.CUDAGraph()``,
    ``torch.cuda.graph(...)`` or ``torch.cuda.make_graphed_callables(...)``; a mere reference is not
    one): petals' ``make_inference_graphed_callable``,
    whose callers' ``device.type == "cuda"`` fast path must stay CUDA's."""
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any(isinstance(inner, ast.Call) and ast.unparse(inner.func) in CUDA_GRAPH_APIS for inner in ast.walk(node))
    }


def _closure(tree: ast.Module, extensions: set[str], local: set[str]) -> set[str]:
    """The module-level functions, classes and aliases of ``tree`` calling an extension operator
    (``extensions``: the names bound to one) or one of ``local`` (names the file binds to extension
    functions), or one another of them (``batched_nms_rotated`` calling ``nms_rotated``)."""
    definitions = [f for f in tree.body if isinstance(f, (ast.FunctionDef, ast.ClassDef))]
    names: set[str] = set()
    while True:
        known = names | local
        more = {f.name for f in definitions if f.name not in names and _calls_extension(f, extensions, known)}
        more |= _aliases(tree, known | more) - names - local
        if not more:
            return names
        names |= more


def _callers_elsewhere(files: PythonFiles, functions: set[str]) -> set[str]:
    """``module.name`` of the functions and classes of other files that call one of ``functions``
    through an import of it (detectron2's ``structures.rotated_boxes.pairwise_iou`` calling
    ``layers.rotated_boxes.pairwise_iou_rotated``), with their callers in their own file."""
    words = {name.rpartition(".")[2].encode() for name in functions}
    found = set()
    for path, text in files.items():
        if not any(word in text for word in words) or path not in files.modules or (tree := files.tree(path)) is None:
            continue
        module = files.modules[path]
        imported = {
            alias.asname or alias.name
            for node in tree.body
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
            if f"{absolute_module(module, path.name == '__init__.py', node.level, node.module or '')}.{alias.name}"
            in functions
        }
        if imported:
            callers = _closure(tree, set(), imported)
            callers |= _methods_calling(tree, set(), callers | imported)
            found.update(f"{module}.{name}" for name in callers)
    return found


def _extension_names(tree: ast.Module, extensions: tuple[str, ...]) -> set[str]:
    """The names a file binds to one of the project's compiled extensions (``from detectron2 import
    _C``, ``import tensormask._C as ext``) or to what a dependency's module of CUDA kernels defines
    (:func:`_dependency_kernels`: ``from basicsr.ops.fused_act import FusedLeakyReLU``), and the
    extensions' own dotted names."""
    names = set(extensions)
    for node in ast.walk(tree):  # also in a `try` (detectron2's `try: from detectron2 import _C`)
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            kernels = _dependency_kernels(node.module)
            names.update(a.asname or a.name for a in node.names if kernels or f"{node.module}.{a.name}" in extensions)
        elif isinstance(node, ast.Import):
            names.update(a.asname or a.name for a in node.names if a.name in extensions or _dependency_kernels(a.name))
    return names


@functools.lru_cache(maxsize=None)
def _dependency_text() -> re.Pattern[bytes]:
    """An import naming a dependency's module of CUDA kernels (:func:`_dependency_kernels`): the files worth parsing."""
    modules = b"|".join(re.escape(module.encode()) for module in kernel_modules())
    return re.compile(rb"^[ \t]*(?:from|import)[ \t]+(?:%b)\b" % modules, re.M)


def _dependency_kernels(module: str) -> bool:
    """``module`` belongs to a dependency whose kernels fail on an NPU host, with no release that runs there
    (rules/tables/cuda_only_packages.toml ``kernels``: basicsr's ops, nvdiffrast; GFPGAN, round 61)."""
    found = cuda_module(module)
    return found is not None and found[0] == "kernels" and npu_release(module) is None


def _aliases(tree: ast.Module, names: set[str]) -> set[str]:
    """Module-level names assigned one of ``names`` or its ``apply`` (``deform_conv = _DeformConv.apply``)."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = (
                node.value.value if isinstance(node.value, ast.Attribute) and node.value.attr == "apply" else node.value
            )
            if isinstance(value, ast.Name) and value.id in names:
                found.add(node.targets[0].id)
    return found


def _calls_extension(definition: ast.FunctionDef | ast.ClassDef, extensions: set[str], local: set[str]) -> bool:
    """``definition`` (a function, or any method of a class) calls an operator of a custom ``torch.ops``
    namespace or of a compiled extension (``extensions``: the names bound to one, called or, for a class,
    subclassed), or a function, class or alias of its file among ``local`` (``Cls.apply`` too)."""
    if isinstance(definition, ast.ClassDef) and any(  # GFPGAN's `StyleGAN2GeneratorSFT(StyleGAN2Generator)`
        ast.unparse(base) in extensions or ast.unparse(base) in local for base in definition.bases
    ):
        return True
    for node in ast.walk(definition):
        if not isinstance(node, ast.Call):
            continue
        func = node.func.value if isinstance(node.func, ast.Attribute) and node.func.attr == "apply" else node.func
        if isinstance(func, ast.Name) and (func.id in local or func.id in extensions):
            return True
        parts = ast.unparse(node.func).split(".")
        if parts[:2] == ["torch", "ops"] and len(parts) > 3 and parts[2] not in TORCH_OPS:
            return True
        if parts == ["getattr"] and node.args:  # gsplat's `getattr(torch.ops.gsplat, name)(...)`, round 58
            namespace = ast.unparse(node.args[0]).split(".")
            if namespace[:2] == ["torch", "ops"] and len(namespace) == 3 and namespace[2] not in TORCH_OPS:
                return True
        if len(parts) > 1 and ".".join(parts[:-1]) in extensions:
            return True
    return False


def _reexports(files: PythonFiles, functions: set[str]) -> set[str]:
    """``package.name`` for each ``from .module import name`` of a package's ``__init__.py`` naming one
    of ``functions``."""
    found = set()
    modules = files.modules
    for path in files:
        if path.name != "__init__.py" or path not in modules or (tree := files.tree(path)) is None:
            continue
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                source = absolute_module(modules[path], True, node.level, node.module or "")
                found.update(
                    f"{modules[path]}.{alias.asname or alias.name}"
                    for alias in node.names
                    if f"{source}.{alias.name}" in functions
                )
    return found


def _kernel_files(files: PythonFiles) -> list[Path]:
    """The project's files defining a Triton kernel (a regex over their text)."""
    return [path for path, text in files.items() if b"triton" in text and TRITON_KERNEL.search(text) is not None]


def _triton_decorator(decorator: ast.expr) -> bool:
    """``@triton.jit``, ``@triton.autotune(...)``, ``@triton.heuristics(...)``."""
    if isinstance(decorator, ast.Call):
        decorator = decorator.func
    return (
        isinstance(decorator, ast.Attribute)
        and isinstance(decorator.value, ast.Name)
        and decorator.value.id == "triton"
        and decorator.attr in ("jit", "autotune", "heuristics")
    )


class _Trees:
    """The project's parsed files (:meth:`PythonFiles.tree`), their import statements and, where a site
    is judged, their parents: each computed once, for the files whose text could hold what is asked."""

    def __init__(self, files: PythonFiles) -> None:
        self.files = files
        self._parents: dict[Path, dict[ast.AST, tuple[ast.AST, str]]] = {}
        self._imports: dict[Path, list[ast.Import | ast.ImportFrom]] = {}

    def _tree(self, path: Path) -> tuple[ast.Module, dict[ast.AST, tuple[ast.AST, str]]] | None:
        tree = self.files.tree(path)
        if tree is None:
            return None
        return tree, self.parents(path, tree)

    def parents(self, path: Path, tree: ast.Module) -> dict[ast.AST, tuple[ast.AST, str]]:
        if path not in self._parents:
            self._parents[path] = {
                child: (node, field)
                for node in ast.walk(tree)
                for field, value in ast.iter_fields(node)
                for child in (value if isinstance(value, list) else [value])
                if isinstance(child, ast.AST)
            }
        return self._parents[path]

    def _naming(self, word: str):
        """(path, tree, parents) of each file whose text holds ``word``."""
        needle = word.encode()
        for path, text in self.files.items():
            if needle in text and (parsed := self._tree(path)) is not None:
                yield path, *parsed

    def _may_import(self, path: Path, module: bytes, named: re.Pattern[bytes]) -> bool:
        """Whether an import statement of ``path`` may import ``module`` (a regex over its text first:
        most files that hold a module's last name do not import it): one naming the module, its
        package and its last name (``named``), or a relative one naming its last name."""
        package = module.rpartition(b".")[0]
        return any(
            module in statement
            or (named.search(statement) and (package in statement or statement.lstrip().startswith(b"from .")))
            for statement in self.files.import_statements(path)
        )

    def _import_nodes(self, path: Path) -> list[ast.Import | ast.ImportFrom]:
        if path not in self._imports:
            tree = self.files.tree(path)
            self._imports[path] = import_nodes(tree) if tree is not None else []
        return self._imports[path]

    def imported_at_top(self, module: str) -> bool:
        """Whether an import statement at a file's first column imports ``module``: a top-level import,
        which no test gates (each such statement parsed alone, so that the files need no tree)."""
        named = re.compile(rb"\b" + re.escape(module.rpartition(".")[2].encode()) + rb"\b")
        for path in self.files:
            if not self._may_import(path, module.encode(), named):
                continue
            importer = self.files.modules.get(path, path.stem)
            for statement in self.files.import_statements(path):
                if statement[:1] in (b"f", b"i") and (tree := parse(statement)) is not None:
                    if any(module in _imported(node, importer, path) for node in tree.body):
                        return True
        return False

    def imports_of(self, module: str) -> list[tuple[ast.AST, dict]]:
        """(import statement, its file's parents) for each import of ``module`` in the project."""
        sites = []
        named = re.compile(rb"\b" + re.escape(module.rpartition(".")[2].encode()) + rb"\b")
        for path in self.files:
            if not self._may_import(path, module.encode(), named):
                continue
            importer = self.files.modules.get(path, path.stem)
            for node in self._import_nodes(path):
                if module in _imported(node, importer, path):
                    sites.append((node, self.parents(path, self.files.tree(path))))
        return sites

    def gated_import(self, site: tuple[ast.AST, dict]) -> bool:
        node, parents = site
        if _in_cuda_branch(node, parents):
            return True
        function = next((o for o, _ in _owners(node, parents) if isinstance(o, ast.FunctionDef)), None)
        return function is not None and self._called_behind_gates(function, node)

    def _called_behind_gates(self, function: ast.FunctionDef, site: ast.AST) -> bool:
        """Every mention of ``function``'s name in the project calls it behind a gate (no other use)."""
        name = function.name
        calls = 0
        for _, tree, parents in self._naming(name):
            for node in ast.walk(tree):
                if node is function or isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                if (isinstance(node, ast.Name) and node.id == name) or (
                    isinstance(node, ast.Attribute) and node.attr == name
                ):
                    call, field = parents.get(node, (None, ""))
                    if not (isinstance(call, ast.Call) and field == "func" and _gated_call(call, name, parents)):
                        return False
                    calls += 1
                elif isinstance(node, ast.FunctionDef) and node.name == name:
                    return False  # another definition of the name: which one a call reaches is not known
        return calls > 0


def _imported(node: ast.Import | ast.ImportFrom, importer: str, path: Path) -> set[str]:
    """The modules an import statement of the module ``importer`` imports (``from pkg import mod``: both)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    source = absolute_module(importer, path.name == "__init__.py", node.level, node.module or "")
    return {source, *(f"{source}.{alias.name}" if source else alias.name for alias in node.names)}


def _owners(node: ast.AST, parents: dict) -> list[tuple[ast.AST, str]]:
    """The nodes around ``node``, innermost first, each with the field holding the way down."""
    found = []
    while node in parents:
        node, field = parents[node]
        found.append((node, field))
    return found


def _in_cuda_branch(node: ast.AST, parents: dict) -> bool:
    """``node`` is in the body of an ``if`` whose test needs ``.is_cuda`` and whose body calls a
    function named with a ``cuda`` word."""
    return any(
        isinstance(owner, ast.If) and field == "body" and _needs_is_cuda(owner.test) and _calls_cuda_named(owner.body)
        for owner, field in _owners(node, parents)
    )


def _needs_is_cuda(test: ast.expr) -> bool:
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_needs_is_cuda(value) for value in test.values)
    return isinstance(test, ast.Attribute) and test.attr == "is_cuda"


def _calls_cuda_named(body: list[ast.stmt]) -> bool:
    return any(
        isinstance(node, ast.Call) and _cuda_named(_callee(node)) for statement in body for node in ast.walk(statement)
    )


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _cuda_named(name: str) -> bool:
    return name != "cuda" and CUDA_WORD.search(name) is not None


def _gated_call(call: ast.Call, name: str, parents: dict) -> bool:
    """A call of ``name`` behind a kept ``.is_cuda`` test, or, for a name with a ``cuda`` word, in a
    test function marked as needing CUDA."""
    if _in_cuda_branch(call, parents):
        return True
    return _cuda_named(name) and any(
        isinstance(owner, ast.FunctionDef) and any(_cuda_mark(d) for d in owner.decorator_list)
        for owner, _ in _owners(call, parents)
    )


def _cuda_mark(decorator: ast.expr) -> bool:
    """``@pytest.mark.requires_cuda``, ``@pytest.mark.gpu``: a pytest mark with a ``cuda``/``gpu`` word."""
    if isinstance(decorator, ast.Call):
        decorator = decorator.func
    return (
        isinstance(decorator, ast.Attribute)
        and isinstance(decorator.value, ast.Attribute)
        and decorator.value.attr == "mark"
        and bool(CUDA_MARK_WORDS & set(decorator.attr.lower().split("_")))
    )
