"""ColossalAI kept as the training framework, running on its NPU accelerator (``--colossalai keep``).

* NPU501 ``colossalai.launch*``: ``backend="hccl"`` and an explicit ``set_accelerator("npu")`` where the
  project's pin allows a ColossalAI without the accelerator API (nothing where it guarantees one);
* NPU504 plugin precision under the BF16 policy, and ``Booster(mixed_precision=...)``;
* NPU505 ``GeminiPlugin`` on NPU (static placement only);
* NPU506 ShardFormer kernel switches that need CUDA (fused normalization, JIT fusion);
* NPU507 tensor/pipeline/sequence/expert parallelism, kept and listed for review;
* NPU508 constructs that only run on CUDA (``TorchFSDPPlugin``, ``Booster`` without a plugin).

Semantics and version facts are in ``rules/colossalai.toml``.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.arguments import has_star, positional_count
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import NOT_LITERAL, literal
from cuda2npu.core.nodes import code_of, keyword_arg, string, with_args
from cuda2npu.core.pins import pinned
from cuda2npu.core.rulebase import register
from cuda2npu.families.colossalai.common import ColossalRule
from cuda2npu.families.colossalai.support import ACCELERATOR_API, accelerator_api

# Parameters of the launchers once ``config`` was dropped (ColossalAI 0.3.8: initialize.py of the
# 0.3.7 and 0.3.8 sdists on PyPI); older releases put ``config`` first. ``backend`` is the argument
# this rule cares about.
LAUNCH_PARAMS = {
    "launch": ("rank", "world_size", "host", "port", "backend", "local_rank", "seed", "verbose"),
    "launch_from_torch": ("backend", "seed", "verbose"),
    "launch_from_slurm": ("host", "port", "backend", "seed", "verbose"),
    "launch_from_openmpi": ("host", "port", "backend", "seed", "verbose"),
}
SHARDFORMER_PLUGINS = ("HybridParallelPlugin", "MoeHybridParallelPlugin", "GeminiPlugin")
# How many leading positional arguments a plugin may have before ``precision`` could be among them.
PRECISION_POSITION = {
    "LowLevelZeroPlugin": 1,
    "GeminiPlugin": 0,
    "HybridParallelPlugin": 2,
    "MoeHybridParallelPlugin": 3,
}


def _keyword(node: cst.Call, name: str) -> cst.Arg | None:
    return next((a for a in node.args if a.keyword is not None and a.keyword.value == name), None)


def _looks_like_config(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Dict):
        return True
    if isinstance(expr, cst.Call):
        return (code_of(expr.func).split(".")[-1]) in ("dict", "Config")
    text = code_of(expr).lower()
    return "config" in text or "cfg" in text or text.endswith('.py"') or text.endswith(".py'")


class KeepRule(ColossalRule):
    @property
    def active(self) -> bool:
        return self.strategy() == "keep"


@register
class Launch(KeepRule):
    """NPU501: ``launch_from_torch()`` and friends on HCCL with the NPU accelerator selected explicitly."""

    codes = ("NPU501",)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._selected = False  # a set_accelerator() call was seen earlier in the file
        self._statements: set[cst.CSTNode] = set()

    def visit_Call(self, node: cst.Call) -> None:
        if not self.active:
            return
        name = self.symbol(node.func)
        if name == "set_accelerator":
            self._selected = True
        if name not in LAUNCH_PARAMS:
            return
        api = accelerator_api(self.options)
        if api:
            return  # the pinned releases pick the NPU accelerator and take its backend (hccl) themselves
        self._backend(node, name)
        if api is None:
            self._accelerator(node, name)
        else:
            self.report(
                "NPU501",
                node,
                f"`{name}()`: the pin `colossalai{pinned(self.options.project.pins, 'colossalai')}` predates ColossalAI "
                f"{ACCELERATOR_API}, the first release with an NPU accelerator (older ones know only cuda and cpu "
                f"devices); raise the pin to colossalai>={ACCELERATOR_API}",
                tier=Tier.MANUAL,
            )

    def _backend(self, node: cst.Call, name: str) -> None:
        if has_star(node) or _keyword(node, "backend") is not None:
            return  # a literal "nccl" is NPU201's; anything else is the user's choice
        params = LAUNCH_PARAMS[name]
        backend_index = params.index("backend")
        count = positional_count(node)
        if count > backend_index + 1:
            return  # passed by position under both signatures
        if count == backend_index + 1 and accelerator_api(self.options) is None:  # (before 0.3.5: `config`)
            positional = [a.value for a in node.args if a.keyword is None]
            if literal(positional[-1]) is not NOT_LITERAL and isinstance(literal(positional[-1]), str):
                return  # `launch_from_torch("nccl")`: the backend, by position (new signature)
            if _keyword(node, "config") is None and not _looks_like_config(positional[0]):
                return  # cannot tell `config` (ColossalAI < 0.3.8) from `backend` by position
        self.report(
            "NPU501",
            node,
            f'`{name}()` defaults to backend="nccl": pass backend="hccl" (ColossalAI before the accelerator API uses it; '
            "later releases take the backend from the accelerator, so it is harmless there)",
            lambda call: with_args(call, [*call.args, keyword_arg("backend", string("hccl"))]),
            needs_torch_npu=False,
        )

    def _accelerator(self, node: cst.Call, name: str) -> None:
        statement = self.ctx.statement
        if self._selected or statement is None or statement in self._statements:
            return
        self._statements.add(statement)
        colossalai = self.imports().bound_to(["colossalai"])
        if colossalai is not None:
            func = cst.Attribute(
                cst.Attribute(cst.Name(colossalai), cst.Name("accelerator")), cst.Name("set_accelerator")
            )
        else:
            func = self.imports().from_name(
                "colossalai.accelerator",
                "set_accelerator",
                code="NPU501",
                tier=Tier.EXACT,
                also=("colossalai.accelerator.api.set_accelerator",),
            )
            if func is None:
                return
        select = cst.SimpleStatementLine(body=[cst.Expr(cst.Call(func, args=[cst.Arg(string("npu"))]))])

        def fix(stmt: cst.CSTNode, select=select):
            return cst.FlattenSentinel(
                [select.with_changes(leading_lines=stmt.leading_lines), stmt.with_changes(leading_lines=[])]
            )

        self.report(
            "NPU501",
            statement,
            f"`{name}()` picks the accelerator by probing CUDA first: select the NPU accelerator explicitly "
            '(`colossalai.accelerator.set_accelerator("npu")`, ColossalAI ≥ 0.3.5), which also makes launch use HCCL',
            fix,
            needs_torch_npu=False,
        )


@register
class PluginPrecision(KeepRule):
    """NPU504: plugin ``precision="fp16"`` → ``"bf16"`` under the BF16 policy; ``Booster(mixed_precision=...)``."""

    codes = ("NPU504",)

    def visit_Call(self, node: cst.Call) -> None:
        if not self.active:
            return
        name = self.symbol(node.func)
        if name == "Booster":
            self._booster(node)
        elif name in PRECISION_POSITION and self.options.precision == "bf16":
            self._plugin(node, name)

    def _plugin(self, node: cst.Call, name: str) -> None:
        arg = _keyword(node, "precision")
        if arg is None:
            if has_star(node) or positional_count(node) > PRECISION_POSITION[name]:
                return
            self.report(
                "NPU504",
                node,
                f'`{name}` defaults to precision="fp16" (fp16 params with dynamic loss scaling); the BF16 policy sets '
                'precision="bf16" (no loss scaling, fp32 master weights kept)',
                lambda call: with_args(call, [*call.args, keyword_arg("precision", string("bf16"))]),
                needs_torch_npu=False,
            )
            return
        value = literal(arg.value)
        if value == "fp16" and isinstance(arg.value, cst.SimpleString):
            self.report(
                "NPU504",
                arg.value,
                f'`{name}(precision="fp16")` → "bf16" under the BF16 policy (bf16 needs no loss scaling on Ascend)',
                lambda s: s.with_changes(value=s.value.replace("fp16", "bf16", 1)),
                needs_torch_npu=False,
            )
        elif value is NOT_LITERAL:
            self.report(
                "NPU504",
                arg.value,
                f'`{name}(precision={code_of(arg.value)})`: the BF16 policy expects "bf16" on Ascend; make sure the '
                "value passed there is bf16",
                tier=Tier.REVIEW,
            )

    MIXED_PRECISION = (
        "`Booster(mixed_precision=...)` is ignored by plugins that control precision (LowLevelZero, Gemini, "
        'HybridParallel, TorchFSDP). With TorchDDPPlugin or no plugin, "fp16" wraps the optimizer in '
        'torch.cuda.amp.GradScaler, which disables itself without CUDA (fp16 without loss scaling), and "bf16" '
        'is an unimplemented stub: set the precision on the plugin or use torch.autocast("npu", dtype=torch.bfloat16)'
    )

    def _booster(self, node: cst.Call) -> None:
        arg = _keyword(node, "mixed_precision")
        if arg is None or literal(arg.value) is None:
            return
        self.report("NPU504", arg, self.MIXED_PRECISION, tier=Tier.REVIEW)

    def _mixed_precision_key(self, key: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        """``booster_kwargs["mixed_precision"] = "fp16"`` / ``{"mixed_precision": "fp16"}`` fed to ``Booster(**kw)``."""
        if not self.active or literal(key) != "mixed_precision" or value is None or literal(value) is None:
            return
        self.report("NPU504", value, self.MIXED_PRECISION, tier=Tier.REVIEW)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            subscript = target.target
            if (
                isinstance(subscript, cst.Subscript)
                and len(subscript.slice) == 1
                and isinstance(subscript.slice[0].slice, cst.Index)
            ):
                self._mixed_precision_key(subscript.slice[0].slice.value, node.value)

    def visit_DictElement(self, node: cst.DictElement) -> None:
        self._mixed_precision_key(node.key, node.value)


@register
class Gemini(KeepRule):
    """NPU505: GeminiPlugin kept; NPU accepts only ``placement_policy="static"``."""

    codes = ("NPU505",)

    def visit_Call(self, node: cst.Call) -> None:
        if not self.active or self.symbol(node.func) != "GeminiPlugin":
            return
        policy = _keyword(node, "placement_policy")
        value = literal(policy.value) if policy is not None else "static"
        if value == "auto" and isinstance(policy.value, cst.SimpleString):
            self.report(
                "NPU505",
                policy.value,
                'GeminiPlugin asserts placement_policy == "static" on NPU: "auto" → "static"; the auto-only '
                "knobs (warmup_non_model_data_ratio, steady_cuda_cap_ratio, gpu_margin_mem_ratio) no longer apply: "
                "tune offload_optim_frac / offload_param_frac / shard_param_frac for memory instead",
                lambda s: s.with_changes(value=s.value.replace("auto", "static", 1)),
                needs_torch_npu=False,
            )
        elif value is NOT_LITERAL:
            self.report(
                "NPU505",
                policy.value,
                f'GeminiPlugin(placement_policy={code_of(policy.value)}): NPU accepts only "static" (asserted)',
                tier=Tier.REVIEW,
            )
        else:
            self.report(
                "NPU505",
                node,
                'GeminiPlugin kept: on NPU it supports only placement_policy="static" and the optimizer must be '
                "HybridAdam/CPUAdam (CPU offload runs the CPU Adam extension, which must build on the host); "
                "validate memory and speed on a short run",
                tier=Tier.REVIEW,
            )


@register
class ShardformerKernels(KeepRule):
    """NPU506: ``enable_fused_normalization`` / ``enable_jit_fused`` / ``enable_all_optimization`` off on NPU."""

    codes = ("NPU506",)

    REASONS = {
        "enable_fused_normalization": "fused normalization uses NVIDIA apex FusedLayerNorm/FusedRMSNorm CUDA kernels",
        "enable_jit_fused": "JIT fusion scripts ops with torch.jit.script for nvfuser; TorchScript is not supported "
        "by the Ascend migration path (transfer_to_npu turns torch.jit.script into a no-op)",
    }

    def visit_Call(self, node: cst.Call) -> None:
        if not self.active:
            return
        name = self.symbol(node.func)
        if name not in SHARDFORMER_PLUGINS:
            return
        for flag, reason in self.REASONS.items():
            arg = _keyword(node, flag)
            if arg is None:
                continue
            value = literal(arg.value)
            if value is True:
                self.report(
                    "NPU506",
                    arg.value,
                    f"`{name}({flag}=True)`: {reason}; turned off (plain PyTorch ops are used instead)",
                    lambda _: cst.Name("False"),
                    needs_torch_npu=False,
                )
            elif value is NOT_LITERAL:
                self.report(
                    "NPU506", arg.value, f"`{name}({flag}={code_of(arg.value)})`: {reason}; it must be False on NPU"
                )
        everything = _keyword(node, "enable_all_optimization")
        if everything is not None and literal(everything.value) is True:
            keep_flash = _keyword(node, "enable_flash_attention") is None

            def fix(call: cst.Call, keep_flash=keep_flash):
                args = [
                    a for a in call.args if not (a.keyword is not None and a.keyword.value == "enable_all_optimization")
                ]
                if keep_flash:
                    args.append(keyword_arg("enable_flash_attention", cst.Name("True")))
                return with_args(call, args)

            self.report(
                "NPU506",
                node,
                f"`{name}(enable_all_optimization=True)` also turns on fused normalization (apex CUDA kernels) and "
                "JIT fusion (TorchScript): replaced by enable_flash_attention=True, which ColossalAI dispatches to "
                "torch_npu.npu_fusion_attention on NPU",
                fix,
                needs_torch_npu=False,
            )
        elif everything is not None and literal(everything.value) is NOT_LITERAL:
            self.report(
                "NPU506",
                everything.value,
                f"`{name}(enable_all_optimization=...)` turns on CUDA-only kernels; "
                "it must be False on NPU (enable_flash_attention=True is fine)",
            )


@register
class ModelParallelism(KeepRule):
    """NPU507: tensor/pipeline/sequence/expert parallelism kept, listed with what to check."""

    codes = ("NPU507",)

    def visit_Call(self, node: cst.Call) -> None:
        if not self.active:
            return
        name = self.symbol(node.func)
        if name not in SHARDFORMER_PLUGINS:
            return
        self._ring_attention(node, name)
        sizes = {}
        positions = {
            "HybridParallelPlugin": ("tp_size", "pp_size"),
            "MoeHybridParallelPlugin": ("tp_size", "pp_size", "ep_size"),
        }
        positional = [a.value for a in node.args if a.keyword is None and not a.star]
        for index, key in enumerate(positions.get(name, ())):
            if index < len(positional):
                sizes[key] = positional[index]
        for key in ("tp_size", "pp_size", "sp_size", "ep_size"):
            arg = _keyword(node, key)
            if arg is not None:
                sizes[key] = arg.value
        parallel = {k: v for k, v in sizes.items() if literal(v) not in (1, None)}
        # a hybrid plugin's `*args`/`**kwargs` may carry its sizes: quoted as written
        stars = [f"{a.star}{code_of(a.value)}" for a in node.args if a.star and name in positions]
        if not parallel and not stars:
            return
        listed = ", ".join([*(f"{k}={code_of(v)}" for k, v in parallel.items()), *stars])
        notes = [
            f"`{name}({listed})`: ShardFormer parallelism is kept; it communicates over HCCL through ColossalAI's "
            "accelerator API, but its per-model policies replace layers with ColossalAI implementations that "
            "cuda2npu cannot check: compare the loss against a data-parallel run before scaling up"
        ]
        if "ep_size" in parallel or name == "MoeHybridParallelPlugin":
            notes.append("ColossalAI's MoE kernel loader has a CUDA extension only")
        flash = _keyword(node, "enable_flash_attention")
        if flash is not None and literal(flash.value) is True:
            notes.append("enable_flash_attention works on NPU in fp16/bf16 only (fp32 attention has no NPU kernel)")
        self.report("NPU507", node, "; ".join(notes), tier=Tier.REVIEW)

    def _ring_attention(self, node: cst.Call, name: str) -> None:
        mode = _keyword(node, "sequence_parallelism_mode")
        if mode is not None and literal(mode.value) == "ring_attn":
            self.report(
                "NPU507",
                mode.value,
                f'`{name}(sequence_parallelism_mode="ring_attn")`: ring attention calls the flash_attn CUDA kernels '
                'directly; use "all_to_all" or "split_gather" on NPU',
                tier=Tier.MANUAL,
            )


@register
class CudaOnlyPlugins(KeepRule):
    """NPU508: TorchFSDPPlugin and a plugin-less Booster only run on CUDA."""

    codes = ("NPU508",)

    def visit_Call(self, node: cst.Call) -> None:
        if not self.active:
            return
        name = self.symbol(node.func)
        if name == "TorchFSDPPlugin":
            # under native, this file fell back to keep (NPU513): plain FSDP is written by hand there
            native = (
                "plain FSDP by hand" if self.options.colossalai == "native" else "--colossalai native for plain FSDP"
            )
            self.report(
                "NPU508",
                node,
                "TorchFSDPPlugin supports only CUDA (supported_devices() == ['cuda'], FSDP built with "
                f"device_id=torch.cuda.current_device()): use LowLevelZeroPlugin/GeminiPlugin, or {native}",
            )
        elif name == "Booster" and not has_star(node):
            plugin = _keyword(node, "plugin")
            if plugin is None and positional_count(node) < 3:
                self.report(
                    "NPU508",
                    node,
                    "Booster without a plugin moves the model with its own Accelerator, which accepts only "
                    "device='cpu' or 'cuda': pass plugin=TorchDDPPlugin() (it places the model on npu)",
                )
