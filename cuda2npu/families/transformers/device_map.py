"""NPU905: a CUDA ``device_map`` given to transformers (``device_map="cuda:0"``, ``{"": "cuda"}``), also
through a project's own subclass of a transformers model (``MyModel.from_pretrained(..., device_map="cuda")``,
also in a file that does not import transformers: Monkey's evaluation scripts load ``MonkeyLMHeadModel``
from the project's modeling file, round 52).

transformers turns a device string into ``{"": torch.device(s)}`` and accelerate places the
weights there (docs/reference/transformers.md §5): ``"npu:0"`` is a torch device once torch_npu is
imported, so ``"cuda:N"`` becomes ``"npu:N"`` (exact). A bare ``"cuda"`` becomes ``"npu"``, for
review where it can differ: transformers 5 reads ``"cuda"`` as the GPU of ``LOCAL_RANK``, while
``"npu"`` is the current NPU, which matters only in a multi-process run (the file reads
``LOCAL_RANK`` or sets up torch.distributed, accelerate or DeepSpeed) under a transformers pin that
allows 5 (none: any release), unless the function around the call (module level: the module's own
code) calls ``torch.cuda.set_device`` (or torch.npu's) before it, which makes the current NPU the
process's (Qwen2-Audio's evaluation scripts); elsewhere both are the current device and the rewrite is exact.
Each arm of a conditional value (``"cpu" if flag else "cuda"``) is read the same way; a device whose
index is computed (``f"cuda:{gpu_id}"``, ``"cuda:" + str(i)``, ``"cuda:{}".format(i)``) becomes the same
``npu:`` index (exact).
``model.parallelize()`` (transformers' naive model parallelism, which places blocks on ``cuda:N``
whatever the device_map) is a manual item in a file importing transformers (RL4LMs).
Integer values (``{"": torch.cuda.current_device()}``, whose call NPU103 migrates) are left: accelerate
(0.26.0 and later) maps them to ``npu:N`` on an NPU host. ``"auto"`` and other strategies are left, but
for a review once a file where the project's accelerate pin allows no release from 0.26.0 on (it sizes no
NPU memory before).
"""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.analysis.hf_sources import imports_hf, is_hf_call, keyword, loads_through_hf, statement_of
from cuda2npu.analysis.npu_aware import in_npu_branch
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import device_literals, string_value
from cuda2npu.core.nodes import code_of
from cuda2npu.core.pins import pin_predates
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.families.transformers.releases import predates

CUDA_DEVICE = re.compile(r"cuda(?::(\d+))?")
STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")  # accelerate's, not devices
NPU_MEMORY = "0.26.0"  # accelerate's get_max_memory reads NPU memory (docs/reference/transformers.md §5)
LOCAL_RANK_CUDA = "5.0.0"  # `device_map="cuda"` → f"cuda:{LOCAL_RANK}" (docs/reference/transformers.md §5)
# a file that runs in several processes: it reads the launcher's rank or sets up a process group
MULTI_PROCESS = re.compile(
    rb"LOCAL_RANK|local_rank|init_process_group|torch\.distributed|\bAccelerator\b|deepspeed\.initialize"
)
SET_DEVICE = {"torch.cuda.set_device", "torch.npu.set_device", "torch_npu.npu.set_device"}
PARALLELIZE = (
    "transformers' naive model parallelism (`parallelize()`: GPT-2, GPT-J, T5) places the blocks on "
    "`cuda:N` devices, spread over `range(torch.cuda.device_count())` unless a device_map is given: on an "
    'NPU host it raises (no CUDA device); turn it off and move the model with `.to("npu")`, or load it '
    'spread over the NPUs with `from_pretrained(..., device_map="auto")`'
)


@register
class CudaDeviceMap(Rule):
    codes = ("NPU905",)
    triggers = (r"device_map", r"\.parallelize\(")

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._strategy_reported = False
        self._loader: str | None = None  # the project's `X.from_pretrained` at hand, in a file without transformers

    def visit_Call(self, node: cst.Call) -> None:
        if (
            _parallelize(node)
            and imports_hf(self.ctx)
            and not in_npu_branch(self.ctx, node)
            and not _in_parallelize_api(self.ctx)
        ):
            self.report("NPU905", node, PARALLELIZE, tier=Tier.MANUAL)
            return
        arg = keyword(node, "device_map")
        if arg is None or in_npu_branch(self.ctx, node):
            return
        hf = is_hf_call(self.resolver, node) or loads_through_hf(self.ctx, node)
        if not (hf or _project_loader(node)):
            return
        self._loader = None if hf else code_of(node.func)
        if isinstance(arg.value, cst.Dict):
            values = [e.value for e in arg.value.elements if isinstance(e, cst.DictElement)]
        else:
            values = [arg.value]
        for value in values:
            for arm in _arms(value):
                if not in_npu_branch(self.ctx, arm):
                    self._device(node, arm)

    def _device(self, call: cst.Call, value: cst.BaseExpression) -> None:
        if not isinstance(value, cst.SimpleString):
            self._built_index(value)
            return
        text = string_value(value)
        if text in STRATEGIES:
            self._strategy(value, text)
            return
        match = CUDA_DEVICE.fullmatch(text) if text is not None else None
        if match is None:
            return
        if match.group(1) is not None:
            self._rename(value, f'`device_map` "{text}" → "npu:{match.group(1)}"')
            return
        if not self._rank_matters():
            self._rename(value, '`device_map="cuda"` → "npu": the current device')
            return
        if self._device_set_before(call):
            message = '`device_map="cuda"` → "npu": the current NPU, which the `set_device` call before it chose'
            self._rename(value, message)
            return
        message = (
            '`device_map="cuda"` → "npu": the current NPU; transformers 5 reads "cuda" as the GPU of LOCAL_RANK: '
            'in a multi-process run call torch.npu.set_device(local_rank) first or pass f"npu:{local_rank}"'
        )
        self._rename(value, message, Tier.REVIEW)

    def _rename(self, value: cst.CSTNode, message: str, tier: Tier | None = None) -> None:
        """The ``"npu"`` rewrite of ``value``; for review where the loader is the project's (REST's
        ``RestModel.from_pretrained(path, **kwargs)``): which device it makes of the string is not seen."""
        if self._loader is not None:
            message += f"; `{self._loader}` is the project's loader: check that it passes `device_map` to transformers"
            tier = Tier.REVIEW
        self.report("NPU905", value, message, fix=_npu, tier=tier)

    def _strategy(self, value: cst.BaseExpression, text: str | None) -> None:
        """``device_map="auto"`` (or another strategy) under an accelerate pin that allows no release
        from :data:`NPU_MEMORY` on: accelerate sizes no NPU memory before it, so the whole model loads
        on the CPU of an NPU host (Spec-Bench's ``accelerate==0.21.0``, MGM's; rounds 26 and 28), also
        through a project's own loader in a file that does not import transformers (REST's
        ``RestModel.from_pretrained(path, device_map="auto")``, round 31: accelerate sizes the memory
        whoever passes the strategy on). Reported once a file (review)."""
        spec = pin_predates(self.options.project.pins, "accelerate", NPU_MEMORY)
        if spec is None or text not in STRATEGIES or self._strategy_reported:
            return
        self._strategy_reported = True
        self.report(
            "NPU905",
            value,
            f'`device_map="{text}"` under `accelerate{spec}`: accelerate sizes NPU memory only from {NPU_MEMORY} '
            "on (get_max_memory), so an older one finds no accelerator and loads the whole model on the CPU of an "
            "NPU host: it runs there, slowly, where the inputs follow `model.device`, and fails where they are moved "
            f"to the NPU; require accelerate>={NPU_MEMORY} (and check what the newer "
            "release changes)",
            tier=Tier.REVIEW,
        )

    def _built_index(self, value: cst.BaseExpression) -> None:
        """``f"cuda:{gpu_id}"``, ``"cuda:" + str(i)``, ``"cuda:{}".format(i)``: a CUDA device with an
        index computed at run time becomes the same NPU index."""
        for literal in device_literals(value):
            text = string_value(literal) if isinstance(literal, cst.SimpleString) else literal.value
            if text is not None and text.startswith("cuda:"):
                self._rename(literal, f'`device_map` built from "{text}" → "npu:..."')

    def _rank_matters(self) -> bool:
        """Whether "cuda" and "npu" may name different devices: the file runs in several processes
        and the project's transformers pin allows 5 (which reads "cuda" as the GPU of LOCAL_RANK)."""
        if predates(self.options, LOCAL_RANK_CUDA):
            return False
        return MULTI_PROCESS.search(self.ctx.source) is not None

    def _device_set_before(self, node: cst.Call) -> bool:
        """Whether the function around ``node`` (or the module's own code, at module level) calls
        ``torch.cuda.set_device`` / ``torch.npu.set_device`` before it."""
        index = TreeIndex.of(self.ctx)
        function = index.function.get(self.ctx.statement)
        for call in index.calls:
            if call is node:
                return False
            if (
                self.resolver.qualified_name(call.func) in SET_DEVICE
                and index.function.get(statement_of(self.ctx, call)) is function
            ):
                return True
        return False


def _in_parallelize_api(ctx) -> bool:
    """The current statement is in the body of a ``parallelize``/``deparallelize`` method: a model's own
    implementation of the API (a vendored ``modeling_t5.py`` parallelizing its encoder), not a use of it."""
    function = TreeIndex.of(ctx).function.get(ctx.statement) if ctx.statement is not None else None
    return function is not None and function.name.value in ("parallelize", "deparallelize")


def _parallelize(call: cst.Call) -> bool:
    """``model.parallelize()`` / ``model.parallelize(device_map)`` (transformers' PreTrainedModel API)."""
    func = call.func
    return (
        isinstance(func, cst.Attribute)
        and func.attr.value == "parallelize"
        and len(call.args) <= 1
        and all(arg.keyword is None or arg.keyword.value == "device_map" for arg in call.args)
    )


def _arms(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The values ``value`` can take: the arms of ``"cpu" if flag else "cuda"`` (nested ones too)."""
    if isinstance(value, cst.IfExp):
        return _arms(value.body) + _arms(value.orelse)
    return [value]


def _project_loader(call: cst.Call) -> bool:
    """``X.from_pretrained(...)`` of a class the file does not take from transformers: a project's loader,
    which passes ``device_map`` on to transformers' (REST's ``RestModel.from_pretrained(path, **kwargs)``)."""
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "from_pretrained"


def _npu(node: cst.SimpleString | cst.FormattedStringText) -> cst.SimpleString | cst.FormattedStringText:
    return node.with_changes(value=node.value.replace("cuda", "npu", 1))
