"""NPU117: a library loader whose device defaults to CUDA, else the CPU, called without one.

openai-whisper's ``whisper.load_model(name, device=None)`` (``device = "cuda" if torch.cuda.is_available()
else "cpu"``, whisper/__init__.py), OpenAI CLIP's ``clip.load(name, device="cuda" if
torch.cuda.is_available() else "cpu")`` (clip/clip.py), Real-ESRGAN's ``RealESRGANer(..., device=None)``
(realesrgan/utils.py) and GFPGAN's ``GFPGANer(..., device=None)`` (gfpgan/utils.py) choose the device
themselves. On an NPU host that is the CPU, while the migrated code moves its data to the NPU:
WhisperSpeech's ``whmodel = whisper.load_model('tiny.en')`` beside ``padded.npu()`` (round 56) then fails
with a device mismatch, where on a GPU host both were on CUDA; SadTalker's ``RealESRGANer(...,
half=True)`` behind a migrated ``torch.npu.is_available()`` runs in half precision on the CPU (round 57).
The call gets the library's own choice with the NPU in CUDA's place: ``device="npu" if
torch.npu.is_available() else "cpu"`` (exact). Not a call that passes a device (also positionally, through
``*``/``**`` arguments, or RealESRGANer's ``gpu_id``), nor CLIP's ``jit=True`` (its TorchScript archive
patches CUDA device constants: manual), nor code that already handles the NPU, nor the project's own
loaders (GFPGAN's tests of its ``GFPGANer``, round 61: the run migrates its default itself).
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.npu_aware import in_npu_branch
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.imports import ImportNeed
from cuda2npu.core.literals import literal
from cuda2npu.core.nodes import keyword_arg, with_args
from cuda2npu.core.rulebase import Rule, register

# qualified name -> position of its device parameter (the library's signature, see the module docstring)
LOADERS = {
    "whisper.load_model": 1,
    "clip.load": 1,
    "realesrgan.RealESRGANer": 8,
    "realesrgan.utils.RealESRGANer": 8,
    "gfpgan.GFPGANer": 5,
    "gfpgan.utils.GFPGANer": 5,
}
DEVICE_ARGS = ("device", "gpu_id")  # RealESRGANer's `gpu_id=` picks `cuda:<id>` itself
CHOICE = '"npu" if torch.npu.is_available() else "cpu"'


@register
class LibraryDefaultDevice(Rule):
    codes = ("NPU117",)
    triggers = (r"\bload_model\b", r"\bclip\.load\b", r"\bRealESRGANer\b", r"\bGFPGANer\b")
    requires = (r"\bwhisper\b|\bclip\b|\brealesrgan\b|\bgfpgan\b",)

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.resolver.qualified_name(node.func)
        position = LOADERS.get(qualified or "")
        if position is None or in_npu_branch(self.ctx, node):
            return
        if qualified.partition(".")[0] in self.options.project.top_packages:
            return  # the project is that library (GFPGAN's tests, round 61): the run migrates its default itself
        if any(a.star for a in node.args) or any(
            a.keyword is not None and a.keyword.value in DEVICE_ARGS for a in node.args
        ):
            return
        if len([a for a in node.args if a.keyword is None]) > position:
            return  # the device given positionally
        jit = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "jit"), None)
        if jit is not None and literal(jit) is not False:
            self.report(
                "NPU117",
                node,
                f"`{qualified}(..., jit=...)` picks CUDA, else the CPU, and its TorchScript model patches CUDA "
                "device constants: on an NPU host it runs on the CPU; load it with `jit=False` and "
                f"`device={CHOICE}`",
                tier=Tier.MANUAL,
            )
            return
        self.report(
            "NPU117",
            node,
            f"`{qualified}(...)` without a device picks CUDA, else the CPU (the library's default): the CPU on an "
            f"NPU host, while the migrated code runs on the NPU; pass `device={CHOICE}`",
            lambda updated: with_args(updated, [*updated.args, keyword_arg("device", CHOICE)]),
            imports=[ImportNeed("torch")],
        )
