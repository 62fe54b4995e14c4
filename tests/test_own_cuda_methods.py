"""The project's classes with a `cuda()` method of their own and their subclasses (a project fact,
analysis/receivers.py): `.cuda()` on their instances calls that method, which `.npu()` is not."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import cli, write

from cuda2npu.analysis.receivers import cuda_method_classes

BASE = b"""
import abc


class BaseEngine(abc.ABC):
    @abc.abstractmethod
    def cuda(self):
        pass


class Engine(BaseEngine):
    def cuda(self):
        return self

    def helper(self):
        def cuda():  # a nested function, not a method of the class
            pass
"""

DERIVED = b"""
from pkg.base import Engine
from pkg import base


class VAEDecoder(Engine):
    pass


class TextEncoder(base.Engine):
    pass


class Other:
    pass
"""


def test_classes_with_a_cuda_method_and_their_subclasses_across_files():
    texts = {Path("pkg/base.py"): BASE, Path("pkg/vae.py"): DERIVED, Path("pkg/util.py"): b"def cuda():\n    pass\n"}
    assert cuda_method_classes(texts) == ("BaseEngine", "Engine", "TextEncoder", "VAEDecoder")


def test_no_cuda_method_no_fact():
    assert cuda_method_classes({Path("a.py"): b"class A:\n    def npu(self):\n        pass\n"}) == ()


def test_r50_a_member_of_a_project_class_with_its_own_cuda_method_keeps_the_call(tmp_path):
    """NeMo-Aligner (round 50): `ServerSignal` is the project's IntEnum with a `cuda()` method of its own; its
    callers' `ServerSignal.FORWARD.cuda()` became `.npu()`, which the enum has not: AttributeError, the reward
    and critic servers did not start. The call stays (reviewed), the method's body is migrated."""
    write(tmp_path / "pkg" / "__init__.py", "")
    constants = write(
        tmp_path / "pkg" / "constants.py",
        "from enum import IntEnum\n\nimport torch\n\n\nclass ServerSignal(IntEnum):\n    STOP = 0\n    FORWARD = 1\n\n"
        "    def cuda(self):\n        return torch.cuda.LongTensor([self])\n",
    )
    server = write(
        tmp_path / "pkg" / "server.py",
        "from pkg.constants import ServerSignal\n\n\ndef forward(inputs):\n"
        "    choice = ServerSignal.FORWARD.cuda()\n    return choice, inputs.cuda()\n",
    )
    cli("migrate", tmp_path)
    assert "ServerSignal.FORWARD.cuda()" in server.read_text() and "inputs.npu()" in server.read_text()
    assert "torch.npu.LongTensor([self])" in constants.read_text()
