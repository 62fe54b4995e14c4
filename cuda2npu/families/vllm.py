"""vLLM on Ascend (NPU931–NPU934).

vLLM runs on Ascend through the vllm-ascend platform plugin, found through its
``vllm.platform_plugins`` entry point once installed: a script that builds an ``LLM`` needs no
change, but the plugin must be installed (NPU931, one review note per file). What the plugin does
not replace: vLLM's NCCL communicator, which disables itself without NCCL, so the collectives of
weight-sync code do nothing (NPU932), and vLLM's CUDA kernels, ``vllm._C`` / ``vllm._custom_ops``,
absent from the vLLM build the plugin runs on (NPU933); nor a project's subclass of vLLM's CUDA
GPU worker or model runner, which, installed as the worker, replaces the plugin's NPU worker
(NPU934). Facts: docs/reference/vllm.md.
"""

from __future__ import annotations

import re

import libcst as cst

from cuda2npu.analysis.file_notes import FileNote
from cuda2npu.analysis.npu_aware import in_npu_branch
from cuda2npu.analysis.vllm_adapters import first_ascend_vllm
from cuda2npu.core.imports import import_root, in_import_try
from cuda2npu.core.names import dotted_name
from cuda2npu.core.pins import pin_predates
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex

ENGINES = frozenset(
    {
        "vllm.LLM",
        "vllm.entrypoints.llm.LLM",
        "vllm.LLMEngine.from_engine_args",
        "vllm.AsyncLLMEngine.from_engine_args",
        "vllm.engine.llm_engine.LLMEngine.from_engine_args",
        "vllm.engine.async_llm_engine.AsyncLLMEngine.from_engine_args",
        "vllm.EngineArgs",
        "vllm.AsyncEngineArgs",
        "vllm.engine.arg_utils.EngineArgs",
        "vllm.engine.arg_utils.AsyncEngineArgs",
    }
)
PYNCCL = "vllm.distributed.device_communicators.pynccl.PyNcclCommunicator"
CUDA_MODULES = ("vllm._C", "vllm._custom_ops")
KERNEL_MODULE = re.compile(r"vllm\._\w+_C")  # vLLM's other compiled extensions: `vllm._moe_C`, `vllm._punica_C`
CUDA_WORKERS = frozenset(  # vLLM's GPU worker and model runner, V0 and V1
    {
        "vllm.worker.worker.Worker",
        "vllm.worker.model_runner.ModelRunner",
        "vllm.v1.worker.gpu_worker.Worker",
        "vllm.v1.worker.gpu_model_runner.GPUModelRunner",
    }
)
# vLLM's worker and executor interfaces: a project class implementing one is its own (forked) worker or
# executor, whose CUDA device setup vllm-ascend's plugin does not replace
WORKER_INTERFACES = frozenset(
    {
        "vllm.worker.worker_base.WorkerBase",
        "vllm.worker.worker_base.LoraNotSupportedWorkerBase",
        "vllm.worker.model_runner_base.ModelRunnerBase",
        "vllm.executor.executor_base.ExecutorBase",
        "vllm.executor.executor_base.ExecutorAsyncBase",
    }
)
PLUGIN_NOTE = (
    "vLLM runs on Ascend through the vllm-ascend plugin: install the vllm-ascend release made for this "
    "vllm version (its compatibility matrix), which vLLM loads by itself (entry point "
    "`vllm.platform_plugins`); the call stays as it is"
)
# NPU931 in a project carrying its own `vllm` package (ProjectFacts.own_vllm): the plugin pairs with released vLLM
FORK_NOTE = (
    "this project carries its own vLLM (its `vllm` package, release {release}), which the vllm-ascend plugin is not "
    "made for: each vllm-ascend release pairs with one released vLLM, the first with {first}; port the fork's "
    "changes onto a vLLM release vllm-ascend supports and install that vllm-ascend (the migrated calls alone do "
    "not run this engine on Ascend: its kernels are CUDA, `vllm._C`)"
)
# NPU931 where the project's pin allows only vLLM releases older than vllm-ascend's first: at the first import
OLD_PIN_NOTE = (
    "the project pins `vllm{spec}`, for which no vllm-ascend release is made (the first is made for vLLM {first}): "
    "on an NPU host this vLLM cannot be imported (its CUDA kernels, `vllm._C`); move to a vLLM release vllm-ascend "
    "supports (NPU705 at the pin), install that vllm-ascend, and check this file's vLLM calls against it"
)
PYNCCL_NOTE = (
    "`PyNcclCommunicator` disables itself where the NCCL library cannot be loaded (an Ascend host): its "
    "all_reduce/broadcast/send/recv then return without communicating, so synced weights silently stay "
    "stale; vllm-ascend's counterpart is `vllm_ascend.distributed.device_communicators.pyhccl."
    "PyHcclCommunicator` (same constructor, all_reduce and broadcast only)"
)
CUSTOM_OPS_NOTE = (
    "holds vLLM's CUDA kernels, which the vLLM build that vllm-ascend runs on (VLLM_TARGET_DEVICE=empty) "
    "does not have: the import warns or fails and every `torch.ops._C` op is missing; use torch ops or "
    "vllm-ascend's kernels instead"
)


@register
class VllmPlugin(FileNote):
    """The first vLLM engine the file builds: one review note that vllm-ascend must be installed."""

    codes = ("NPU931",)
    triggers = (r"\bvllm\b",)
    entry_points = ENGINES
    note = PLUGIN_NOTE
    counterpart = b"vllm_ascend"

    def message(self) -> str:
        """The plugin note, or, in a project that is a fork of vLLM (vllm-ltr, round 31: vLLM 0.4.1), what
        its own vLLM needs: the plugin loads into none but the vLLM release it was made for."""
        release = self.options.project.own_vllm
        if not release:
            return PLUGIN_NOTE
        return FORK_NOTE.format(release=release, first=first_ascend_vllm())

    def visit_Import(self, node: cst.Import) -> None:
        self._old_release_import(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._old_release_import(node)

    def _old_release_import(self, node: cst.Import | cst.ImportFrom) -> None:
        """The note at the file's first vLLM import where the project pins a vLLM older than vllm-ascend's
        first (Eurus' `vllm==0.2.7`, round 39; DeepSeek-Math's 0.2.0, round 37): that import fails on an
        NPU host, so the marker belongs there, not at a later engine call. Not an import guarded by a
        handler of the ImportError, nor one in code that handles the NPU."""
        if self.noted or self.options.project.own_vllm or import_root(node) != "vllm":
            return
        spec = pin_predates(self.options.project.pins, "vllm", first_ascend_vllm())
        if spec is None or in_npu_branch(self.ctx, node) or in_import_try(TreeIndex.of(self.ctx), self.ctx.statement):
            return
        self.noted = True
        self.report(
            self.codes[0], node, OLD_PIN_NOTE.format(spec=spec, first=first_ascend_vllm()), needs_torch_npu=False
        )


@register
class PyNccl(Rule):
    codes = ("NPU932",)
    triggers = (r"PyNcclCommunicator",)

    def visit_Call(self, node: cst.Call) -> None:
        if self.resolver.qualified_name(node.func) == PYNCCL and not in_npu_branch(self.ctx, node):
            self.report("NPU932", node, PYNCCL_NOTE, needs_torch_npu=False)


@register
class CustomOps(Rule):
    codes = ("NPU933",)
    triggers = (r"_custom_ops", r"vllm\._C\b", r"\b_C\b", r"vllm\._\w+_C\b")
    requires = (r"\bvllm\b",)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            self._module(node, dotted_name(alias.name) or "")

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            return
        module = dotted_name(node.module) or ""
        if module == "vllm" and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                self._module(node, f"vllm.{dotted_name(alias.name)}")
        else:
            self._module(node, module)

    def _module(self, node: cst.CSTNode, module: str) -> None:
        name = next((m for m in CUDA_MODULES if module == m or module.startswith(f"{m}.")), None)
        if name is None and KERNEL_MODULE.fullmatch(module):
            name = module
        if name is not None and not in_npu_branch(self.ctx, node):
            self.report("NPU933", node, f"`{name}` {CUSTOM_OPS_NOTE}", needs_torch_npu=False)


@register
class CudaWorker(Rule):
    """NPU934: a project class derived from vLLM's CUDA GPU worker or model runner, or implementing vLLM's
    worker, model runner or executor interface itself (LlamaGen's fork of vLLM 0.4.1's serving stack)."""

    codes = ("NPU934",)
    triggers = (r"\bWorker\b|ModelRunner|WorkerBase|ExecutorBase|ExecutorAsyncBase",)
    requires = (r"\bvllm\b",)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        base = next(
            (
                q
                for arg in node.bases
                for q in [self.resolver.qualified_name(arg.value)]
                if q in CUDA_WORKERS or q in WORKER_INTERFACES
            ),
            None,
        )
        if base is None or in_npu_branch(self.ctx, node):
            return
        self.report("NPU934", node, _worker_message(node.name.value, base), needs_torch_npu=False)


def _worker_message(name: str, base: str) -> str:
    if base in WORKER_INTERFACES:
        kind = "executor" if "executor" in base else "model runner" if "ModelRunner" in base else "worker"
        return (
            f"`{name}` implements vLLM's {kind} interface itself (`{base}`): a project {kind} (a copy of vLLM's "
            "CUDA one: its device setup, model runner, communicators, CUDA graphs) is not what vllm-ascend's plugin "
            "replaces, so it runs CUDA code on an NPU host, and vLLM internals it imports may not exist in the vLLM "
            "releases vllm-ascend supports; port it onto vllm-ascend's NPUWorker / NPUModelRunner, or run the model "
            "with vLLM's own engine"
        )
    if "ModelRunner" in base:
        return (
            f"`{name}` derives from vLLM's CUDA model runner (`{base}`): vllm-ascend's NPU worker runs its own "
            "`NPUModelRunner`, and this runner's CUDA device setup fails on an NPU host: on Ascend derive it "
            "from vllm-ascend's `NPUModelRunner` (its module depends on the vllm-ascend release)"
        )
    return (
        f"`{name}` derives from vLLM's CUDA GPU worker (`{base}`): installed as the worker (`worker_cls=...`, or "
        'assigned over vLLM\'s class) it replaces the NPU worker vllm-ascend chooses for `worker_cls="auto"` '
        "(`vllm_ascend.worker.worker.NPUWorker`), and the CUDA worker's device setup fails on an NPU host: on "
        "Ascend derive it from vllm-ascend's `NPUWorker` (its module depends on the vllm-ascend release)"
    )
