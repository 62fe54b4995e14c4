"""The project's classes with a `cuda()` method of their own and their subclasses (a project fact,
analysis/receivers.py): `.cuda()` on their instances calls that method, which `.npu()` is not."""

from __future__ import annotations

from pathlib import Path

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
