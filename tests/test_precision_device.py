"""The "already handles the NPU" detection (cuda2npu.analysis.npu_aware) that device, distributed
and torch.cuda rules share: which CUDA-side nodes it keeps, and which it does not."""

from __future__ import annotations

import libcst as cst
import pytest

from cuda2npu.analysis.npu_aware import cuda_alternatives
from cuda2npu.core.options import Options
from cuda2npu.core.rulebase import RuleContext


def kept_strings(source: str) -> list[str]:
    """Values of the string literals left alone, in source order."""
    module = cst.parse_module(source)
    kept = cuda_alternatives(RuleContext(module, Options(), source.encode()))
    found: list[str] = []

    class Strings(cst.CSTVisitor):
        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            if node in kept:
                found.append(node.evaluated_value)

    module.visit(Strings())
    return found


@pytest.mark.parametrize(
    ("source", "kept"),
    [
        ('if d == "cuda":\n    a = "cuda:0"\nelif d == "npu":\n    a = "npu:0"\n', ["cuda", "cuda:0"]),
        ('if d == "cuda":\n    pass\nif d == "npu":\n    pass\n', ["cuda"]),  # adjacent ifs
        ('ok = d == "cuda" or d == "npu"\n', ["cuda"]),
        ('ok = d in ("cuda", "npu", "cpu")\n', ["cuda"]),
        ('t = {"cuda": "nccl", "npu": "hccl", "cpu": "gloo"}\n', ["cuda", "nccl"]),
        ('k = "npu" if is_npu else "cuda"\n', ["cuda"]),
        ('self.is_cuda = d == "cuda"\nself.is_npu = d == "npu"\n', ["cuda"]),
        # a test handling both: its CUDA operand is kept, the body is no alternative
        ('if d == "cuda" or d == "npu":\n    a = "cuda"\n', ["cuda"]),
        # branches taken only on another accelerator (mmengine's MUSA/MLU paths)
        ('if d == "cuda":\n    a = "cuda"\nelif d == "musa":\n    a = "cuda"\n', ["cuda"]),
        ('if is_mlu_available() and ok:\n    a = "cuda"\n', ["cuda"]),
        ('if torch.backends.mps.is_available():\n    a = "cuda"\n', ["cuda"]),
        ('d = "cuda" if is_torch_xla_available() else t\n', ["cuda"]),
        # the NPU tested in a middle branch: the final `else` is CUDA's (accelerate)
        (
            'if is_mlu_available():\n    a = "mlu"\nelif is_npu_available():\n    a = "npu"\nelse:\n    a = "cuda"\n',
            ["mlu", "cuda"],  # the MLU branch is another accelerator's
        ),
    ],
)
def test_cuda_side_of_npu_aware_code_is_kept(source, kept):
    assert kept_strings(source) == kept


@pytest.mark.parametrize(
    "source",
    [
        'if d == "cuda":\n    a = "cuda:0"\nelse:\n    a = "cpu"\n',  # no NPU alternative
        'if d == "cuda":\n    pass\nx = 1\nif d == "npu":\n    pass\n',  # not adjacent
        'ok = d in ("cuda", "cpu")\n',
        'if not is_xpu_available():\n    a = "cuda"\n',  # taken on every other device
        'if d != "mps":\n    a = "cuda"\n',
        'if d == "musa" or force:\n    a = "cuda"\n',
    ],
)
def test_code_without_an_npu_alternative_is_not_kept(source):
    assert kept_strings(source) == []


def test_else_of_an_npu_check_is_the_cuda_side():
    source = 'if is_torch_npu_available():\n    a = "npu"\nelse:\n    a = "cuda"\n'
    assert kept_strings(source) == ["cuda"]
    flag = 'if args.npu_fused:\n    a = "npu"\nelse:\n    a = "cuda"\n'  # a feature switch, not a device check
    assert kept_strings(flag) == []
    detected = 'if SUPPORT_NPU:\n    a = "npu"\nelse:\n    a = "cuda"\n'  # ColossalAI: set where torch_npu imports
    assert kept_strings(detected) == ["cuda"]


def test_cuda_inside_a_branch_taken_only_on_npu_is_deliberate():
    source = 'if device_type == "npu":\n    device_type = "cuda"\nkey = "cuda" if d.type == "npu" else d.type\n'
    assert kept_strings(source) == ["cuda", "cuda"]


def test_a_file_that_never_spells_another_device_is_not_walked():
    """The text precheck: the same tree, told its text has no NPU or backend word, keeps nothing."""
    module = cst.parse_module('if d == "cuda":\n    a = 1\nelif d == "npu":\n    a = 2\n')
    assert cuda_alternatives(RuleContext(module, Options(), module.bytes))
    assert not cuda_alternatives(RuleContext(module, Options(), b'if d == "cuda":\n    a = 1\n'))


@pytest.mark.parametrize(
    ("text", "may"),
    [
        (b"x = input(); y = inputs", False),  # `npu` inside a word
        (b"d == 'npu:0'", True),
        (b"self.is_npu = True", True),
        (b"NPU_VISIBLE_DEVICES", True),
        (b"backend = 'hccl'", True),
        (b"class CPU_Accelerator:", True),
        (b"attention_backend = 'flash'", False),
    ],
)
def test_the_text_precheck_is_a_word_level_superset(text, may):
    from cuda2npu.analysis.npu_aware import may_mention_another_device

    assert may_mention_another_device(text) is may
