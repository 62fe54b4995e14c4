"""The read-only walks visit what libcst's own traversal visits, in the same order."""

from pathlib import Path

import libcst as cst
import pytest

from cuda2npu.core.traversal import iter_nodes, release, walk, walk_batched

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted(ROOT.glob("cuda2npu/**/*.py")) + sorted(ROOT.glob("fixtures/rules/**/*.py"))
# Nodes libcst visits that the walks leave out: whitespace, comments, brackets, separators, operators.
SYNTAX = (
    cst.BaseParenthesizableWhitespace,
    cst.Comment,
    cst.EmptyLine,
    cst.Newline,
    cst.TrailingWhitespace,
    cst.Comma,
    cst.Colon,
    cst.Dot,
    cst.AssignEqual,
    cst.Semicolon,
    cst.LeftParen,
    cst.RightParen,
    cst.LeftSquareBracket,
    cst.RightSquareBracket,
    cst.LeftCurlyBrace,
    cst.RightCurlyBrace,
    cst.BaseBinaryOp,
    cst.BaseBooleanOp,
    cst.BaseCompOp,
    cst.BaseUnaryOp,
    cst.BaseAugOp,
    cst.ImportStar,
    cst.ParenthesizedWhitespace,
    cst.SimpleWhitespace,
)
EXTRA = """
from package.module import *
@decorator
async def f[T](a, /, b: int = 1, *args, c, **kw) -> T:
    async for x in y:
        pass
    async with a as b, c:
        pass
    match x:
        case [1, *rest] if rest:
            pass
    return [i async for i in z if i] or (b if c else d) or s[1:2:3]
try:
    pass
except* E as e:
    pass
from ..a import (b as c)
print(f"{x!r:>{width}}", *a, **k)
type Alias[T] = list[T]
"""


class Recorder(cst.CSTVisitor):
    def __init__(self):
        self.events = []

    def on_visit(self, node):
        self.events.append(("visit", node))
        return True

    def on_leave(self, node):
        self.events.append(("leave", node))


class Typed(cst.BatchableCSTVisitor):
    """Records every node type the engine's rules visit."""

    def __init__(self, tag, events):
        super().__init__()
        self.tag, self.events = tag, events

    def visit_Call(self, node):
        self.events.append((self.tag, "visit", node))

    def leave_Call(self, node):
        self.events.append((self.tag, "leave", node))

    def visit_Name(self, node):
        self.events.append((self.tag, "visit", node))

    def visit_FunctionDef(self, node):
        self.events.append((self.tag, "visit", node))

    def leave_FunctionDef(self, node):
        self.events.append((self.tag, "leave", node))


class Walked(cst.CSTVisitor):
    """What ``walk`` calls, through generic hooks installed for every node type."""

    def __init__(self):
        self.events = []


for _name in dir(cst):
    _type = getattr(cst, _name)
    if isinstance(_type, type) and issubclass(_type, cst.CSTNode):
        setattr(Walked, f"visit_{_name}", lambda self, node: self.events.append(("visit", node)))
        setattr(Walked, f"leave_{_name}", lambda self, node: self.events.append(("leave", node)))


def _modules():
    yield "synthetic", cst.parse_module(EXTRA)
    for path in SAMPLES[::5]:
        yield str(path.relative_to(ROOT)), cst.parse_module(path.read_bytes())


@pytest.mark.parametrize("name,module", list(_modules()), ids=lambda v: v if isinstance(v, str) else "")
def test_walk_matches_libcst_order(name, module):
    reference = Recorder()
    module.visit(reference)
    expected = [(kind, node) for kind, node in reference.events if not isinstance(node, SYNTAX)]
    walked = Walked()
    walk(module, walked)
    assert [(k, id(n)) for k, n in walked.events] == [(k, id(n)) for k, n in expected]
    hooks = Recorder()
    walk(module, hooks)
    assert [(k, id(n)) for k, n in hooks.events] == [(k, id(n)) for k, n in expected]
    assert [id(n) for n in iter_nodes(module)] == [id(n) for k, n in expected if k == "visit"]


def test_walk_batched_matches_visit_batched():
    module = cst.parse_module(EXTRA + (ROOT / "cuda2npu/filekinds/python.py").read_text())
    ours, theirs = [], []
    walk_batched(module, [Typed("a", ours), Typed("b", ours)])
    cst.visit_batched(module, [Typed("a", theirs), Typed("b", theirs)])
    assert ours and [(t, k, id(n)) for t, k, n in ours] == [(t, k, id(n)) for t, k, n in theirs]


def test_walk_skips_children_when_visit_returns_false():
    class Outer(cst.CSTVisitor):
        def __init__(self):
            self.names = []

        def visit_Call(self, node):
            return False

        def visit_Name(self, node):
            self.names.append(node.value)

    visitor = Outer()
    walk(cst.parse_module("a = f(b)\nc\n"), visitor)
    assert visitor.names == ["a", "c"]


def test_subtree_walks_read_the_flattened_module_and_match_libcst():
    module = cst.parse_module(EXTRA + (ROOT / "cuda2npu/core/traversal.py").read_text())
    list(iter_nodes(module))  # the module's flat tree is now kept
    other = cst.parse_module("def g():\n    return h(1)\n")  # a tree the kept one does not hold
    for subtree in [*iter_nodes(module, cst.FunctionDef), other.body[0]]:
        reference = Recorder()
        subtree.visit(reference)
        expected = [(kind, id(node)) for kind, node in reference.events if not isinstance(node, SYNTAX)]
        walked = Walked()
        walk(subtree, walked)
        assert [(kind, id(node)) for kind, node in walked.events] == expected
        assert [id(n) for n in iter_nodes(subtree)] == [i for kind, i in expected if kind == "visit"]


class Sparse(cst.CSTVisitor):
    """A few node types, a leave without a visit, and a visit that skips its children."""

    def __init__(self):
        self.events = []

    def visit_Call(self, node):
        self.events.append(("visit", node))
        return not isinstance(node.func, cst.Attribute)  # skip the arguments of method calls

    def leave_Call(self, node):
        self.events.append(("leave", node))

    def leave_FunctionDef(self, node):
        self.events.append(("leave", node))

    def visit_Name(self, node):
        self.events.append(("visit", node))


def test_walk_reads_only_the_handled_types_with_libcst_skips_and_leaves():
    module = cst.parse_module(EXTRA + (ROOT / "cuda2npu/core/traversal.py").read_text())
    reference, walked = Sparse(), Sparse()
    module.visit(reference)
    walk(module, walked)
    assert reference.events and [(k, id(n)) for k, n in walked.events] == [(k, id(n)) for k, n in reference.events]
    for subtree in iter_nodes(module, cst.FunctionDef):
        reference, walked = Sparse(), Sparse()
        subtree.visit(reference)
        walk(subtree, walked)
        assert [(k, id(n)) for k, n in walked.events] == [(k, id(n)) for k, n in reference.events]
    assert [id(n) for n in iter_nodes(module, cst.BaseCompoundStatement)] == [
        id(n) for n in iter_nodes(module) if isinstance(n, cst.BaseCompoundStatement)
    ]


@pytest.mark.parametrize("name,module", list(_modules())[:8], ids=lambda v: v if isinstance(v, str) else "")
def test_tree_index_parents_and_blocks_match_libcst_metadata(name, module):
    from libcst.metadata import MetadataWrapper, ParentNodeProvider

    from cuda2npu.core.statements import TreeIndex

    release()
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    expected = {
        node: parent for node, parent in wrapper.resolve(ParentNodeProvider).items() if not isinstance(node, SYNTAX)
    }
    index = TreeIndex(module)
    assert index.parents == expected
    assert index.calls == [n for n in iter_nodes(module) if isinstance(n, cst.Call)]
    assert index.functions == [n for n in iter_nodes(module) if isinstance(n, cst.FunctionDef)]
    for statement, placement in index.placement.items():
        assert placement.block.body[placement.index] is statement
    for function in index.functions:  # a function's own statements say it encloses them
        if isinstance(function.body, cst.IndentedBlock):
            assert all(index.function[s] is function for s in function.body.body)


def test_tree_index_ancestors_of_a_one_line_suite_start_with_its_compound_statement():
    from cuda2npu.core.statements import TreeIndex

    module = cst.parse_module(
        "def f():\n    try: import a\n    except ImportError: b = 1\n    else: c = 2\n    while x: import d\n"
    )
    index = TreeIndex(module)
    function = module.body[0]
    try_, while_ = function.body.body
    assert index.ancestors(try_.body) == [try_, function]
    assert index.ancestors(try_.handlers[0].body) == [try_, function]
    assert index.ancestors(try_.orelse.body) == [try_, function]
    assert index.ancestors(while_.body) == [while_, function]
    assert index.ancestors(while_) == [function]
