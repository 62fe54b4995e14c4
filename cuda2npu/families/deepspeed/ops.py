"""DeepSpeed ops the NPU accelerator does not build (NPU911) or builds in part (NPU912).

``deepspeed.ops.op_builder.<Name>Builder`` is the current accelerator's builder: on an NPU host, a
class of ``op_builder/npu/`` or, for a name that directory lacks, ``NotImplementedBuilder``, whose
``load()`` raises ValueError. The ops that load such a builder fail on the NPU; those whose builder
is there (``FusedAdam``, ``DeepSpeedCPUAdam``, ...) are left alone. docs/reference/deepspeed.md §3.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import literal
from cuda2npu.core.rulebase import Rule, register

OP_BUILDER = "deepspeed.ops.op_builder"
# DeepSpeed v0.19.5 op_builder/npu/__init__.py (FusedAdam since v0.11.2, the CPU optimizers since
# v0.12.4, AsyncIO since v0.13.0, Inference since v0.13.2, PinMemory later)
NPU_BUILDERS = {
    "FusedAdamBuilder",
    "AsyncIOBuilder",
    "PinMemoryBuilder",
    "CPUAdamBuilder",
    "CPUAdagradBuilder",
    "CPULionBuilder",
    "InferenceBuilder",
}
PARTIAL_BUILDERS = {"InferenceBuilder"}  # op_builder/npu/inference.py: a subset of the kernels, in plain torch

_LAYER = "TransformerBuilder has no NPU build (op_builder/npu): use the model's own torch layer"
_SPARSE = "Triton kernels (deepspeed/ops/sparse_attention/matmul.py) and no NPU SparseAttnBuilder: use dense attention"
# the op → why it fails on the NPU (the builder it loads, DeepSpeed v0.19.5)
WITHOUT_NPU_BUILD = {
    **dict.fromkeys(
        ("deepspeed.ops.lamb.FusedLamb", "deepspeed.ops.lamb.fused_lamb.FusedLamb"),
        "FusedLambBuilder has no NPU build (op_builder/npu): its load() raises ValueError; use another "
        "optimizer (deepspeed.ops.adam.FusedAdam has an NPU build)",
    ),
    **dict.fromkeys(
        ("deepspeed.ops.lion.FusedLion", "deepspeed.ops.lion.fused_lion.FusedLion"),
        "FusedLionBuilder has no NPU build (op_builder/npu): its load() raises ValueError; "
        "deepspeed.ops.lion.DeepSpeedCPULion has one (with the optimizer offloaded to the CPU)",
    ),
    **dict.fromkeys(
        (
            "deepspeed.DeepSpeedTransformerLayer",
            "deepspeed.ops.DeepSpeedTransformerLayer",
            "deepspeed.ops.transformer.DeepSpeedTransformerLayer",
            "deepspeed.ops.transformer.transformer.DeepSpeedTransformerLayer",
        ),
        _LAYER,
    ),
    **dict.fromkeys(
        (
            f"deepspeed.ops.sparse_attention.{name}"
            for name in ("SparseSelfAttention", "BertSparseSelfAttention", "SparseAttentionUtils")
        ),
        _SPARSE,
    ),
    **dict.fromkeys(
        (
            f"deepspeed.inference.{path}{name}"
            for path in ("", "v2.", "v2.engine_factory.", "v2.engine_v2.")
            for name in ("build_hf_engine", "build_engine_from_ds_checkpoint", "InferenceEngineV2")
        ),
        "DeepSpeed's inference v2 (FastGen, DeepSpeed-MII's engine) loads RaggedOpsBuilder, RaggedUtilsBuilder and "
        "InferenceCoreBuilder, which have no NPU build (op_builder/npu): their load() raises ValueError; serve "
        "with vLLM on Ascend (vllm-ascend) instead",
    ),
    **dict.fromkeys(
        ("deepspeed.ops.deepspeed4science.DS4Sci_EvoformerAttention",),
        "EvoformerAttnBuilder (CUTLASS kernels) has no NPU build (op_builder/npu)",
    ),
}
# DeepSpeed's inference kernels: on the NPU, InferenceBuilder's plain-torch subset (DeepSpeed >= 0.13.2)
INFERENCE_KERNELS = {
    "deepspeed.ops.transformer.DeepSpeedTransformerInference",
    "deepspeed.ops.transformer.DeepSpeedMoEInference",
    "deepspeed.model_implementations.transformers.ds_transformer.DeepSpeedTransformerInference",
    "deepspeed.ops.transformer.inference.moe_inference.DeepSpeedMoEInference",
}
PARTIAL = (
    "DeepSpeed's NPU InferenceBuilder (op_builder/npu/inference.py, DeepSpeed >= 0.13.2) implements a subset "
    "of the CUDA inference kernels in plain torch; the others fall back or raise NotImplementedError: test "
    "this model on the NPU"
)
INIT_INFERENCE = ("deepspeed.init_inference",)
KERNEL_INJECT = ("replace_with_kernel_inject", "kernel_inject")  # deepspeed/inference/config.py: the alias


@register
class OpsWithoutNpuBuild(Rule):
    """NPU911: constructing a DeepSpeed op, or its builder, that has no NPU build; NPU912: the
    inference kernels the NPU builds only in part (also ``init_inference(replace_with_kernel_inject=True)``)."""

    codes = ("NPU911", "NPU912")
    triggers = (
        r"FusedLamb",
        r"FusedLion",
        r"DeepSpeedTransformer",
        r"sparse_attention",
        r"Builder\b",
        r"Evoformer",
        r"MoEInference",
        r"kernel_inject",
        r"build_hf_engine|build_engine_from_ds_checkpoint|InferenceEngineV2",
    )

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.resolver.qualified_name(node.func) or ""
        if not qualified.startswith("deepspeed.") or is_cuda_alternative(self.ctx, node):
            return
        name = qualified.rpartition(".")[2]
        if qualified in WITHOUT_NPU_BUILD:
            self._manual(node, f"`{name}`: {WITHOUT_NPU_BUILD[qualified]}")
        elif qualified in INFERENCE_KERNELS:
            self._partial(node, f"`{name}`: {PARTIAL}")
        elif qualified.startswith(f"{OP_BUILDER}.") and name.endswith("Builder"):
            self._builder(node, qualified, name)
        elif qualified in INIT_INFERENCE and self._injects_kernels(node):
            self._partial(node, f"`replace_with_kernel_inject=True`: {PARTIAL}, or inject no kernels")

    def _builder(self, node: cst.Call, qualified: str, name: str) -> None:
        module = qualified[len(OP_BUILDER) + 1 :].rpartition(".")[0]
        if module and module != "npu":  # `from deepspeed.ops.op_builder.fused_adam import FusedAdamBuilder`
            self._manual(
                node,
                f"`{name}` imported from `{OP_BUILDER}.{module}` is the CUDA builder itself; "
                + (
                    f"`from {OP_BUILDER} import {name}` gives the accelerator's (NPU) builder"
                    if name in NPU_BUILDERS
                    else "it has no NPU build (op_builder/npu)"
                ),
            )
        elif name in PARTIAL_BUILDERS:
            self._partial(node, f"`{name}`: {PARTIAL}")
        elif not module and name not in NPU_BUILDERS:
            self._manual(node, f"`{name}` has no NPU build (op_builder/npu): its load() raises ValueError on the NPU")

    def _injects_kernels(self, node: cst.Call) -> bool:
        return any(
            arg.keyword is not None and arg.keyword.value in KERNEL_INJECT and literal(arg.value) is True
            for arg in node.args
        )

    def _manual(self, node: cst.Call, message: str) -> None:
        self.report("NPU911", node, message, tier=Tier.MANUAL, needs_torch_npu=False)

    def _partial(self, node: cst.Call, message: str) -> None:
        self.report("NPU912", node, message, tier=Tier.REVIEW, needs_torch_npu=False)
