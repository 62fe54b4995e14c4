"""The package's layers: imports flow one way (function-level imports included), with no cycle.

Each top-level subpackage of ``cuda2npu`` is a layer; a module may import its own layer and the
layers listed before it. ``templates`` (the companions generated into users' projects) import
nothing of cuda2npu. ``emulation`` (the CPU stand-ins of torch_npu, apex, TE, flash-attn) is
self-contained but for the templates, whose apex semantics its stand-ins share: only ``validation``
and the commands use it.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "cuda2npu"
LAYERS = [
    "templates",
    "core",
    "analysis",
    "families",
    "filekinds",
    "project",
    "output",
    "emulation",
    "validation",
    "commands",
]
TOP_LEVEL = {"cuda2npu": "core", "cuda2npu.__main__": "commands"}  # the version constant; `python -m`
INDEPENDENT = {"templates": set(), "emulation": {"emulation", "templates"}}  # layers that may import only these


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    return modules


MODULES = _modules()


def _imports(name: str) -> set[str]:
    """cuda2npu modules that ``name`` imports anywhere in its body."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target.startswith("cuda2npu") and target != name:
                found.add(target)
    return found


GRAPH = {name: _imports(name) for name in MODULES}


def layer(name: str) -> str:
    if name in TOP_LEVEL:
        return TOP_LEVEL[name]
    return name.split(".")[1]


def test_every_module_is_in_a_layer():
    assert {layer(name) for name in MODULES} <= set(LAYERS), sorted(
        name for name in MODULES if layer(name) not in LAYERS
    )


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_flow_down(name):
    own = layer(name)
    allowed = INDEPENDENT.get(own, set(LAYERS[: LAYERS.index(own) + 1]))
    upward = sorted(target for target in GRAPH[name] if layer(target) not in allowed)
    assert not upward, f"{name} ({own}) imports a higher or foreign layer: {upward}"


def family_of(name: str) -> str | None:
    """The rule family of a module of ``cuda2npu.families``: its subpackage, or the module itself for a
    one-module family; None outside the families."""
    parts = name.split(".")
    if len(parts) < 3 or parts[1] != "families":
        return None
    return parts[2]


@pytest.mark.parametrize("name", sorted(n for n in MODULES if family_of(n) is not None))
def test_families_import_the_core_and_the_analyses_never_each_other(name):
    """A family imports ``core`` and ``analysis`` (what two families need lives there), never another family."""
    own = family_of(name)
    wrong = sorted(target for target in GRAPH[name] if family_of(target) not in (None, own))
    assert not wrong, f"{name} ({own}) imports another family: {wrong}"


def test_no_import_cycles():
    """Tarjan's strongly connected components of the import graph: all of size one."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in GRAPH[node]:
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            connect(node)
    assert not cycles, cycles
