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
        # a file that star-imports and never binds torch gets it from the star
        ("from pkg.utils import *\ntorch.cuda.synchronize()\n", "torch.cuda.synchronize"),
        ("from .utils import *\ndef f():\n    torch.cuda.synchronize()\n", "torch.cuda.synchronize"),
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
        "torch.cuda.synchronize()\n",  # no star import: an unbound name stays unknown
        "from pkg.utils import *\ntorch = Mock()\ntorch.cuda.synchronize()\n",
        "from pkg.utils import *\ndef f(torch):\n    torch.cuda.synchronize()\n",
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


def test_name_uses_leave_out_reads_of_a_function_local_of_the_same_name():
    from libcst.metadata import MetadataWrapper, PositionProvider

    from cuda2npu.core.names import NameUses
    from cuda2npu.core.traversal import walk

    source = (
        "from apex import X\n"
        "a = X\n"  # a read of the import
        "def local():\n"
        "    X = 1\n"
        "    return X\n"  # its own variable
        "def nested():\n"
        "    X = 1\n"
        "    def inner():\n"
        "        return X\n"  # the enclosing function's variable
        "    return inner\n"
        "def declared():\n"
        "    global X\n"
        "    X = 2\n"
        "    return X\n"  # the module's name
        "class C:\n"
        "    X = 3\n"
        "    def method(self):\n"
        "        return X\n"  # class bodies do not scope methods: the import
        "b = [X for X in range(3)]\n"  # the comprehension's variable
    )
    module = cst.parse_module(source)
    uses = NameUses({"X"})
    walk(module, uses)
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    # `a = X`, the `global X` statement and the read after it, the read in the method
    assert [positions[n].start.line for n in uses.uses["X"]] == [2, 12, 14, 18]
    scopes = NameResolver(module).scopes  # a rule's resolver has them already: same reads
    shared = NameUses({"X"}, scopes)
    walk(module, shared)
    assert shared.uses["X"] == uses.uses["X"]
    for known in (None, scopes):
        subtree = NameUses({"X"}, known)
        walk(module.body[2], subtree)  # a subtree walk does not enter the module: every read counts
        assert len(subtree.uses["X"]) == 1
