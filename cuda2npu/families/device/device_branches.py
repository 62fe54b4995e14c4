"""What the branches of a device test say: a CUDA-only feature or refusal, a validation chain
that refuses unknown devices, an onnxruntime provider choice, a value a test states, a stub."""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.analysis.cuda_gates import no_cuda_branch
from cuda2npu.core.feature_words import name_tokens
from cuda2npu.core.literals import string_value
from cuda2npu.core.names import dotted_name
from cuda2npu.core.nodes import code_of
from cuda2npu.core.statements import TreeIndex, leaves
from cuda2npu.core.traversal import iter_nodes
from cuda2npu.families.device.device_expressions import is_device_type_expr

# a message saying something needs CUDA: "requires CUDA", "only supported on CUDA GPUs", "CUDA is required",
# "Current device is not cuda, skip numa binding"
CUDA_REQUIRED = re.compile(
    r"\b(?:requires?|needs?|only|supported only)\b[^.;]*\bCUDA\b|\bCUDA\b[^.;]*\b(?:required|only)\b"
    r"|\bnot\b[^.;]*\bCUDA\b[^.;]*\bskip",
    re.IGNORECASE,
)

# a refusal saying a feature needs a GPU: "Quantization is only supported on the GPU", "GPU required"
GPU_REQUIRED = re.compile(
    r"\b(?:requires?|needs?|only|supported only)\b[^.;]*\bGPUs?\b|\bGPUs?\b[^.;]*\b(?:required|only)\b",
    re.IGNORECASE,
)

ORT_PROVIDER = re.compile(r"[A-Z]\w*ExecutionProvider")  # onnxruntime's execution providers

ASSERT_EQUAL = {"assertEqual", "assertDictEqual", "assertListEqual", "assertTupleEqual"}  # unittest's


def contiguous_workaround(node: cst.If) -> bool:
    """The ``if`` (without ``else``) tests a tensor's device type and only makes tensors contiguous:
    transformers' SDPA attention works around a bug of CUDA's memory-efficient kernel with custom
    masks that way (pytorch/pytorch#112577, ``query_states = query_states.contiguous()`` under
    ``query_states.device.type == "cuda"``); on another device the copies only cost time."""
    if node.orelse is not None or not isinstance(node.body, cst.IndentedBlock):
        return False
    if not any(  # a tensor's device: `query_states.device.type == "cuda"`
        isinstance(test.left, cst.Attribute) and (dotted_name(test.left) or "").endswith(".device.type")
        for test in iter_nodes(node.test, cst.Comparison)
    ):
        return False
    smalls = [small for line in node.body.body if isinstance(line, cst.SimpleStatementLine) for small in line.body]
    return len(smalls) == len(node.body.body) and all(
        isinstance(small, cst.Assign)
        and isinstance(small.value, cst.Call)
        and isinstance(small.value.func, cst.Attribute)
        and small.value.func.attr.value == "contiguous"
        for small in smalls
    )


def ort_provider(block: cst.CSTNode) -> str | None:
    """The first onnxruntime execution provider ``block`` names, a GPU one first (``"CUDAExecutionProvider"``
    before a ``"CPUExecutionProvider"`` named earlier), else None."""
    names = [
        value
        for node in iter_nodes(block, cst.SimpleString)
        if ORT_PROVIDER.fullmatch(value := string_value(node) or "")
    ]
    return next((name for name in names if not name.startswith("CPU")), names[0] if names else None)


def picks_ort_provider(body: cst.CSTNode, name: str) -> bool:
    """``body`` has an ``if`` testing ``name`` against a string whose branch names an onnxruntime provider."""
    return any(
        any(string_value(s) is not None for s in iter_nodes(choice.test, cst.SimpleString))
        and any(isinstance(n, cst.Name) and n.value == name for n in iter_nodes(choice.test, cst.Name))
        and ort_provider(choice.body) is not None
        for choice in iter_nodes(body, cst.If)
    )


def validation_arm(ctx, literal: cst.BaseExpression) -> cst.If | None:
    """The ``if``/``elif`` whose test ``literal`` makes true (``d.startswith("cuda")``, ``d == "cuda"``,
    ``d in ["cuda", "xpu"]``, also in an ``and``/``or``) in a chain over strings that ends in ``else:
    raise`` (or whose arms all leave, before a ``raise``): lerobot's ``is_torch_device_available``,
    which a config's ``device="cuda"`` reaches on an NPU host; rewritten to ``"npu"`` it would refuse
    ``"cuda"``, which it answered before. None otherwise."""
    parents = TreeIndex.of(ctx).parents
    node, arm = literal, parents.get(literal)
    while not isinstance(arm, cst.If):
        if isinstance(arm, cst.ComparisonTarget) and not isinstance(arm.operator, (cst.Equal, cst.In)):
            return None
        if isinstance(arm, cst.Call) and not (
            isinstance(arm.func, cst.Attribute) and arm.func.attr.value == "startswith"
        ):
            return None
        if not isinstance(arm, TEST_PARTS):
            return None
        node, arm = arm, parents.get(arm)
    if arm.test is not node:
        return None
    top = arm
    while isinstance(parents.get(top), cst.If) and parents[top].orelse is top:
        top = parents[top]
    arms, last = [], top
    while isinstance(last, cst.If):
        arms.append(last)
        last = last.orelse
    if isinstance(last, cst.Else):
        refuses = ends_in_raise(last.body.body[-1:])
    else:  # `if ...: return a` / `elif ...: return b`, then `raise ValueError(...)`
        refuses = all(leaves(a.body) for a in arms) and ends_in_raise(TreeIndex.of(ctx).following(top)[:1])
    if not refuses:
        return None
    compared = any(list(iter_nodes(other.test, cst.SimpleString)) for other in arms if other is not arm)
    return arm if compared else None  # a lone CUDA arm before `else: raise` is a refusal, not a chain


TEST_PARTS = (
    cst.Element,
    cst.List,
    cst.Tuple,
    cst.Set,
    cst.ComparisonTarget,
    cst.Comparison,
    cst.Arg,
    cst.Call,
    cst.BooleanOperation,
)


def ends_in_raise(statements) -> bool:
    """``statements`` (one or none) is a line ending in ``raise``."""
    return any(isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[-1], cst.Raise) for s in statements)


def stated_value(ctx, literal: cst.BaseExpression) -> bool:
    """``literal`` is part of a value a test states: compared in an ``assert`` (``assert out ==
    {"device": "cuda:0"}``) or an argument of ``assertEqual``, not inside a call there (an input
    passed to the code under test) nor compared with a device (``x.device.type == "cuda"``)."""
    parents = TreeIndex.of(ctx).parents
    node, parent = literal, parents.get(literal)
    compared = False
    while parent is not None and not isinstance(parent, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
        if isinstance(parent, cst.Call):
            equal = isinstance(parent.func, cst.Attribute) and parent.func.attr.value in ASSERT_EQUAL
            devices = any(is_device_type_expr(arg.value) for arg in parent.args)  # assertEqual(x.device.type, "cuda")
            return equal and not devices and isinstance(node, cst.Arg) and node.keyword is None
        if isinstance(parent, cst.Comparison):
            sides = [parent.left, *(target.comparator for target in parent.comparisons)]
            if any(is_device_type_expr(side) for side in sides):
                return False
            compared = True
        node, parent = parent, parents.get(parent)
    return compared and isinstance(parent, cst.Assert)


def does_nothing(statement: cst.BaseSmallStatement) -> bool:
    """``pass``, ``...``, a docstring, ``raise NotImplementedError`` (or ``NotImplementedError(...)``)."""
    if isinstance(statement, cst.Pass):
        return True
    if isinstance(statement, cst.Expr):
        return isinstance(statement.value, (cst.Ellipsis, cst.SimpleString, cst.ConcatenatedString))
    if isinstance(statement, cst.Raise) and statement.exc is not None:
        raised = statement.exc.func if isinstance(statement.exc, cst.Call) else statement.exc
        return dotted_name(raised) == "NotImplementedError"
    return False


def cuda_required(branch: cst.If) -> bool:
    """A message of the branches of ``branch`` says that what they choose needs CUDA ("FP8 training
    requires CUDA", "only supported on CUDA GPUs"): the test is a feature switch whose other side
    the code has written for every other device."""
    blocks = [branch.body, branch.orelse.body if isinstance(branch.orelse, cst.Else) else None]
    return first_message(filter(None, blocks), CUDA_REQUIRED) is not None


def gpu_refusal(ctx, branch: cst.If) -> str | None:
    """The message of a ``raise`` in what runs when ``branch``'s test says no CUDA, saying that the
    feature needs a GPU (``if device.type != "cuda": raise ValueError("... only supported on the GPU.")``)."""
    return first_message(
        [r for block in no_cuda_branch(ctx, branch) for r in iter_nodes(block, cst.Raise)], GPU_REQUIRED
    )


def first_message(roots, message: re.Pattern) -> str | None:
    """The first string under ``roots`` that ``message`` finds."""
    for root in roots:
        for string in iter_nodes(root, (cst.SimpleString, cst.FormattedStringText)):
            text = (string_value(string) if isinstance(string, cst.SimpleString) else string.value) or ""
            if message.search(text):
                return text
    return None


def cuda_named_choice(body: cst.BaseSuite) -> str | None:
    """The project's callable a branch chooses by a name with a ``cuda`` word (``ATT =
    self.cuda_att_seq``), as written; None where it chooses none (``torch.cuda`` is torch's)."""
    for value in iter_nodes(body, (cst.Name, cst.Attribute)):
        name = value.value if isinstance(value, cst.Name) else value.attr.value
        written = code_of(value)
        if "cuda" in name_tokens(name) and name != "cuda" and not written.startswith("torch."):
            return written
    return None
