"""Scope-aware name resolution through imports (cuda2npu.core.names)."""

from __future__ import annotations

import libcst as cst
import pytest

from cuda2npu.core.names import NameResolver


def resolve_calls(source: str) -> list[tuple[str, frozenset]]:
    """(dotted callee text, qualified names) for every call, resolved in its own scope."""
    module = cst.parse_module(source)
    resolver = NameResolver(module)
    found = []

    class Calls(cst.BatchableCSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append((module.code_for_node(node.func), resolver.qualified_names(node.func)))

    cst.visit_batched(module, [resolver, Calls()])
    return found


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import torch as th\nth.cuda.synchronize()\n", "torch.cuda.synchronize"),
        ("from torch import cuda\ncuda.synchronize()\n", "torch.cuda.synchronize"),
        ("from torch.cuda.amp import autocast as ac\nac()\n", "torch.cuda.amp.autocast"),
        ("import torch.cuda\ntorch.cuda.synchronize()\n", "torch.cuda.synchronize"),
        ("import torch.cuda as tc\ntc.synchronize()\n", "torch.cuda.synchronize"),
        ("def f():\n    import torch\n    torch.cuda.synchronize()\n", "torch.cuda.synchronize"),
        (
            "try:\n    from apex import amp\nexcept ImportError:\n    amp = None\namp.initialize()\n",
            "apex.amp.initialize",
        ),
        ("import torch\ndef f():\n    global torch\n    torch.cuda.init()\n", "torch.cuda.init"),
    ],
)
def test_resolves_through_imports(source, expected):
    assert resolve_calls(source)[-1][1] == frozenset({expected})


@pytest.mark.parametrize(
    "source",
    [
        "import torch\ndef f(torch):\n    torch.cuda.synchronize()\n",
        "from torch import cuda\ndef f():\n    cuda = object()\n    cuda.synchronize()\n",
        "import torch\nf = lambda torch: torch.cuda.synchronize()\n",
        "import torch\n[torch.cuda.synchronize() for torch in range(3)]\n",
        "import torch\ndef f():\n    with open('x') as torch:\n        torch.cuda.synchronize()\n",
        "from . import torch\ntorch.cuda.synchronize()\n",
        "cuda.synchronize()\n",
    ],
)
def test_local_names_shadow_imports(source):
    assert resolve_calls(source)[-1][1] == frozenset()


def test_import_wins_over_other_bindings_in_the_same_scope():
    """`try: import x / except ImportError: x = None` must still resolve x to the import."""
    source = "import torch\nif False:\n    torch = None\ntorch.cuda.synchronize()\n"
    assert resolve_calls(source)[-1][1] == frozenset({"torch.cuda.synchronize"})


def test_class_scope_is_invisible_to_methods():
    source = "import torch\nclass A:\n    torch = None\n    def m(self):\n        torch.cuda.synchronize()\n"
    assert resolve_calls(source)[-1][1] == frozenset({"torch.cuda.synchronize"})
