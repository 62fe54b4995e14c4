"""NPU103 / NPU106: a test's patch target naming ``torch.cuda.<api>`` through one of the project's
modules (``mocker.patch("llama_recipes.utils.train_utils.torch.cuda.amp.GradScaler")``, also with
``unittest.mock.patch`` and ``monkeypatch.setattr``). The module is migrated and calls the NPU API, so
the patch no longer reaches it and the test checks something else (llama-recipes' tests count the
calls of a patched ``GradScaler`` the migrated ``train()`` no longer makes).

Where NPU103 renames the API (``torch.npu.amp.GradScaler``) the target follows it. A patched
``torch.cuda.amp.autocast`` (NPU106) is marked: the precision policy decides what the migrated code
calls (``torch.autocast("npu", ...)``, ``functools.partial(torch.npu.amp.autocast, dtype=...)``).
Left as written: a target through another library's module (``transformers.trainer.torch.cuda...``:
that library still calls torch.cuda) and torch's own (``patch("torch.cuda.is_available")``), which
simulates a CUDA or CPU host for whatever code the test runs, the project's or a library's
(``device/device_r7_cuda_mocked_tests``).
"""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import string_value
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.families.device.cuda_api import cuda_api_entry, split_cuda_api

PATCHERS = {"unittest.mock.patch", "mock.patch"}
FIXTURE_PATCHERS = {("mocker", "patch"), ("monkeypatch", "setattr")}  # pytest-mock's and pytest's fixtures
TARGET = re.compile(r"(?:(?P<prefix>[\w.]+)\.)?torch\.cuda\.(?P<api>\w+(?:\.\w+)?)")


@register
class CudaPatchTargets(Rule):
    codes = ("NPU103", "NPU106")
    triggers = (r"""["'](?:[\w.]+\.)?torch\.cuda\.\w""",)

    def visit_Call(self, node: cst.Call) -> None:
        if not self._patcher(node.func):
            return
        literal = _target(node)
        match = TARGET.fullmatch(string_value(literal) or "") if isinstance(literal, cst.SimpleString) else None
        if match is None:
            return
        prefix = match["prefix"]
        if not prefix or prefix.partition(".")[0] not in self.options.project.top_packages:
            return  # torch's own, or another library's `torch`: code that still calls torch.cuda may be under test
        split = split_cuda_api(f"torch.cuda.{match['api']}")
        if split is None:
            return
        sub, name = split
        api = cuda_api_entry(sub, name)
        if api.status != "renamed":
            return  # the API itself is reported where the code calls it
        old, new = f"torch.cuda.{match['api']}", f"torch.npu.{api.npu}"
        if name == "autocast":
            self.report(
                "NPU106",
                literal,
                f"the test patches `{old}`, which the migrated code no longer calls (the precision policy "
                'rewrites it to `torch.autocast("npu", ...)` or to `torch.npu.amp.autocast` with a dtype): '
                "patch what it calls now",
                tier=Tier.REVIEW,
            )
            return
        self.report(
            api.code,
            literal,
            f"patch target `{old}` → `{new}`: the migrated code calls `{new}`, which the patch must replace",
            lambda string: string.with_changes(value=string.value.replace(old, new, 1)),
        )

    def _patcher(self, func: cst.BaseExpression) -> bool:
        """``func`` is ``unittest.mock.patch`` or a pytest fixture's patching method."""
        if self.resolver.qualified_name(func) in PATCHERS:
            return True
        return (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and (func.value.value, func.attr.value) in FIXTURE_PATCHERS
        )


def _target(call: cst.Call) -> cst.BaseExpression | None:
    """The patch target: the first positional argument, or ``target=``."""
    for arg in call.args:
        if arg.keyword is None and arg.star == "":
            return arg.value
        if arg.keyword is not None and arg.keyword.value == "target":
            return arg.value
    return None
