"""ColossalAI rules that apply under both strategies (``--colossalai keep|native``).

* NPU502 ``colossalai.utils.get_current_device()`` → ``get_accelerator().get_current_device()``
  (keep, where the pin allows a ColossalAI before the accelerator API) or
  ``torch.device("npu", torch.npu.current_device())`` (native);
* NPU503 ColossalAI's CUDA/CPU-kernel optimizers → ``torch.optim`` classes with the same update (under keep,
  not HybridAdam where the pin guarantees its NPU path);
* NPU509 imports of ColossalAI's CUDA kernels (``colossalai.kernel``, shardformer fused norms);
* NPU510 ColossalAI imports a rewrite left unused (names counted here, edits reported by
  :class:`~cuda2npu.families.colossalai.support.ImportEditor`).
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.value_uses import ValueUses
from cuda2npu.core.arguments import try_bind
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import NOT_LITERAL, literal, string_value
from cuda2npu.core.names import dotted_name
from cuda2npu.core.nodes import as_keyword, as_positional, code_of, keyword_arg, with_args
from cuda2npu.core.pins import pinned
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.families.colossalai.plan import replaces_every_booster
from cuda2npu.families.colossalai.support import (
    ACCELERATOR_API,
    REMOVABLE_KEEP,
    REMOVABLE_NATIVE,
    TRIGGERS,
    ImportEditor,
    accelerator_api,
    symbol_of,
)

# Signatures (ColossalAI ≥ 0.3.x; positional order matters: FusedAdam puts adamw_mode before weight_decay).
ADAM_PARAMS = {
    "HybridAdam": (
        "model_params",
        "lr",
        "bias_correction",
        "betas",
        "eps",
        "weight_decay",
        "adamw_mode",
        "nvme_offload_fraction",
        "nvme_offload_dir",
    ),
    "CPUAdam": (
        "model_params",
        "lr",
        "bias_correction",
        "betas",
        "eps",
        "weight_decay",
        "adamw_mode",
        "nvme_offload_fraction",
        "nvme_offload_dir",
    ),
    "FusedAdam": (
        "params",
        "lr",
        "bias_correction",
        "betas",
        "eps",
        "adamw_mode",
        "weight_decay",
        "amsgrad",
        "set_grad_none",
    ),
}
GEMINI = ("GeminiPlugin", "GeminiOptimizer", "GeminiDDP", "zero_optim_wrapper")
SGD_PARAMS = ("params", "lr", "momentum", "dampening", "weight_decay", "nesterov", "wd_after_momentum")


def removal_set(strategy: str) -> frozenset[str]:
    return REMOVABLE_NATIVE if strategy == "native" else REMOVABLE_KEEP


class ColossalRule(Rule):
    """Base of the ColossalAI rules: symbol lookup and the shared import editor."""

    triggers = TRIGGERS

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._fstring_quotes: list[str] = []
        ImportEditor.of(ctx).rules_left += 1

    _visitor_names: dict[type, tuple[str, ...]] = {}

    def get_visitors(self):
        """libcst's version runs ``inspect.getmembers`` over ~1600 attributes per rule and round (≈20 ms,
        most of a small file's migration time); the names of the overridden methods are cached per class."""
        cls = type(self)
        names = ColossalRule._visitor_names.get(cls)
        if names is None:
            names = tuple(
                name
                for name in dir(cls)
                if name.startswith(("visit_", "leave_")) and not getattr(getattr(cls, name), "_is_no_op", False)
            )
            ColossalRule._visitor_names[cls] = names
        return {name: getattr(self, name) for name in names}

    # Methods, not properties: libcst's get_visitors() evaluates every attribute of a visitor.
    def imports(self) -> ImportEditor:
        return ImportEditor.of(self.ctx)

    def symbol(self, expr: cst.BaseExpression) -> str | None:
        return symbol_of(self.resolver.qualified_name(expr))

    def strategy(self) -> str:
        """``keep`` or ``native`` for this file: ``--colossalai``, except that under native a file whose
        boosters cannot all be replaced by plain PyTorch is migrated as under keep (never half native:
        NPU513 at the booster says why)."""
        if self.options.colossalai != "native":
            return self.options.colossalai
        return "native" if replaces_every_booster(self.ctx) else "keep"

    # f-strings being traversed: a string literal emitted inside one must use the other quote
    # (``f"{torch.device("npu", 0)}"`` only parses on Python >= 3.12).
    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self._fstring_quotes.append(node.end)

    def leave_FormattedString(self, original_node: cst.FormattedString) -> None:
        self._fstring_quotes.pop()

    def quote(self) -> str:
        """The quote character for a new string literal at the current position."""
        return "'" if any('"' in q for q in self._fstring_quotes) else '"'

    def npu_device(self, torch: cst.Name) -> cst.BaseExpression:
        """``torch.device("npu", torch.npu.current_device())`` with a quote that fits the context."""
        q = self.quote()
        return cst.parse_expression(f"{torch.value}.device({q}npu{q}, {torch.value}.npu.current_device())")

    def leave_Module(self, original_node: cst.Module) -> None:
        self.imports().emit(self, removal_set(self.strategy()), "NPU510")


@register
class CurrentDevice(ColossalRule):
    """NPU502: ``get_current_device()`` through the accelerator API (keep) or torch.npu (native)."""

    codes = ("NPU502",)

    def visit_Call(self, node: cst.Call) -> None:
        if self.symbol(node.func) != "get_current_device" or node.args:
            return
        if self.strategy() == "native":
            torch = self.imports().module_name("torch", code="NPU502", tier=Tier.EXACT)
            if torch is None:
                self.report(
                    "NPU502",
                    node,
                    "`get_current_device()`: the name `torch` is taken; use torch.npu.current_device() by hand",
                )
                return
            self.report(
                "NPU502",
                node,
                '`get_current_device()` → `torch.device("npu", torch.npu.current_device())` (no ColossalAI at run time)',
                lambda _, d=self.npu_device(torch): d,
                needs_torch_npu=True,
            )
            return
        api = accelerator_api(self.options)
        if api:
            return  # a wrapper of get_accelerator().get_current_device() in every pinned release
        if api is False:
            self.report(
                "NPU502",
                node,
                f"`get_current_device()` of `colossalai{pinned(self.options.project.pins, 'colossalai')}` returns cuda:N, "
                f"or cpu where CUDA is missing (on an NPU host), and these releases have no accelerator API: "
                f"raise the pin to colossalai>={ACCELERATOR_API} (where it returns npu:N)",
                tier=Tier.MANUAL,
            )
            return
        accelerator = self.imports().from_name(
            "colossalai.accelerator",
            "get_accelerator",
            code="NPU502",
            tier=Tier.EXACT,
            also=("colossalai.accelerator.api.get_accelerator",),
        )
        if accelerator is None:
            self.report(
                "NPU502",
                node,
                "`get_current_device()`: the name `get_accelerator` is taken; call the accelerator API by hand",
            )
            return
        self.report(
            "NPU502",
            node,
            "`get_current_device()` → `get_accelerator().get_current_device()`, the call it wraps from ColossalAI "
            f"{ACCELERATOR_API} on (npu:N on Ascend); older releases return cpu on an NPU host and lack this API "
            f"(a pin colossalai>={ACCELERATOR_API} keeps the call as it is)",
            lambda _: cst.Call(cst.Attribute(cst.Call(accelerator), cst.Name("get_current_device"))),
            needs_torch_npu=False,
        )


@register
class FusedOptimizers(ValueUses, ColossalRule):
    """NPU503: HybridAdam/CPUAdam/FusedAdam → torch.optim.AdamW/Adam, FusedSGD → torch.optim.SGD; other uses
    of a class whose calls are rewritten (a class test, an alias) are reported where they are."""

    codes = ("NPU503",)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._gemini = None
        self.value_refs: list[tuple[cst.BaseExpression, str, bool, cst.CSTNode | None]] = []
        self.kept: set[str] = set()  # optimizers with a call left as it is (manual)

    def gemini(self) -> bool:
        """Whether the file imports GeminiPlugin, GeminiOptimizer/GeminiDDP or ``zero_optim_wrapper`` (which
        builds a GeminiOptimizer for ZeRO-3), or defines GeminiOptimizer: it only accepts FusedAdam/CPUAdam/HybridAdam."""
        if self._gemini is None:
            scope = self.resolver.module_scope
            self._gemini = any(
                symbol_of(q) in GEMINI for targets in scope.imports.values() for q in targets
            ) or self.resolver.is_bound("GeminiOptimizer")  # ColossalAI's own gemini code
        return self._gemini

    def supported(self, name: str | None) -> bool:
        """HybridAdam kept under keep where the pin guarantees its NPU path (ColossalAI >= 0.3.5: the CUDA
        kernel loaded only with CUDA, npu parameters updated in plain PyTorch)."""
        return name == "HybridAdam" and self.strategy() == "keep" and accelerator_api(self.options) is True

    def visit_Call(self, node: cst.Call) -> None:
        self.call_value_uses(node)
        name = self.symbol(node.func)
        if self.supported(name):
            return
        if name == "FusedLAMB":
            self.report(
                "NPU503",
                node,
                "`FusedLAMB` needs CUDA kernels and torch.optim has no LAMB; torch_npu.optim.NpuFusedLamb is a "
                "different LAMB (no bias correction, no grad averaging, no max_grad_norm): choose a replacement by hand",
                tier=Tier.MANUAL,
            )
        elif name in ADAM_PARAMS:
            self._adam(node, name)
        elif name == "FusedSGD":
            self._sgd(node)

    def value_use(self, expr: cst.BaseExpression, class_test: bool = False) -> None:
        name = self.symbol(expr)
        if (name in ADAM_PARAMS or name == "FusedSGD") and not self.supported(name):
            self.value_refs.append((expr, name, class_test, self.ctx.statement))

    def leave_Module(self, original_node: cst.Module) -> None:
        """Other uses (a class test, an alias) of an optimizer whose calls are all rewritten, reported there."""
        for expr, name, class_test, statement in self.value_refs:
            if name in self.kept or (self.gemini() and name in ADAM_PARAMS):
                continue  # its calls stay, or stay ColossalAI optimizers Gemini accepts: consistent
            target = "torch.optim.SGD" if name == "FusedSGD" else "torch.optim.AdamW/Adam"
            what = (
                "a class test that no longer matches the new optimizers"
                if class_test
                else f"an alias that still builds `{name}`"
                + (" (CUDA kernels)" if name in ("FusedAdam", "FusedSGD") else "")
            )
            self.report_in(
                statement,
                "NPU503",
                expr,
                f"`{code_of(expr)}` used other than by calling it: `{name}(...)` "
                f"calls become `{target}` (NPU503), this use stays: {what}; adapt it by hand",
                tier=Tier.MANUAL,
            )
        super().leave_Module(original_node)

    # ------------------------------------------------------------------ Adam family
    def _adam(self, node: cst.Call, name: str) -> None:
        if name != "FusedAdam" and self.gemini():
            self._keep_for_gemini(node, name, {})
            return
        args = try_bind(node, ADAM_PARAMS[name], open_keywords=True)
        if args is None or any(k not in ADAM_PARAMS[name] for k in args):
            self.report(
                "NPU503",
                node,
                f"`{name}` with `*args`/`**kwargs` or unknown arguments: replace it by hand "
                "with torch.optim.AdamW (adamw_mode=True, the default) or torch.optim.Adam",
                tier=Tier.MANUAL,
            )
            self.kept.add(name)
            return
        if self.gemini():
            self._keep_for_gemini(node, name, args)
            return
        problem = self._adam_problem(name, args)
        if problem:
            self.report("NPU503", node, problem, tier=Tier.MANUAL)
            self.kept.add(name)
            return
        adamw = literal(args["adamw_mode"].value) if "adamw_mode" in args else True
        target = "AdamW" if adamw else "Adam"
        torch = self.imports().module_name("torch", code="NPU503", tier=Tier.REVIEW)
        if torch is None:
            self.report(
                "NPU503", node, f"`{name}` → torch.optim.{target}: the name `torch` is taken here", tier=Tier.MANUAL
            )
            self.kept.add(name)
            return
        params = args.get("model_params") or args.get("params")
        new_args = [as_positional(params)] if params is not None else []
        for key in ("lr", "betas", "eps"):
            if key in args:
                new_args.append(as_keyword(args[key], key))
        if "weight_decay" in args:
            new_args.append(as_keyword(args["weight_decay"], "weight_decay"))
        else:
            new_args.append(keyword_arg("weight_decay", cst.Float("0.0")))
        decay = (
            "decoupled weight decay, as adamw_mode=True"
            if adamw
            else "L2 penalty added to the gradient, as adamw_mode=False"
        )
        kernel = {
            "FusedAdam": "CUDA multi-tensor kernels",
            "CPUAdam": "a CPU SIMD extension built for the host",
            "HybridAdam": "CUDA kernels (GPU params) and a CPU SIMD extension (CPU params)",
        }[name]
        message = (
            f"`{name}` needs {kernel}; `torch.optim.{target}` performs the same update ({decay}, bias correction on). "
            "`weight_decay` is passed explicitly because torch.optim.AdamW defaults to 1e-2 and ColossalAI to 0"
        )
        func = cst.Attribute(cst.Attribute(torch, cst.Name("optim")), cst.Name(target))
        self.report(
            "NPU503",
            node,
            message,
            lambda call, f=func, a=new_args: with_args(call.with_changes(func=f), a),
            needs_torch_npu=False,
        )

    @staticmethod
    def _adam_problem(name: str, args: dict) -> str:
        bias = literal(args["bias_correction"].value) if "bias_correction" in args else True
        if bias is not True:
            return (
                f"`{name}(bias_correction=...)`: torch.optim.Adam/AdamW always apply bias correction; replace by hand"
            )
        if "adamw_mode" in args and literal(args["adamw_mode"].value) not in (True, False):
            return f"`{name}(adamw_mode=...)` is not a literal: it decides between torch.optim.AdamW (True) and Adam (False)"
        fraction = literal(args["nvme_offload_fraction"].value) if "nvme_offload_fraction" in args else 0
        if fraction is NOT_LITERAL or fraction not in (0, 0.0):
            return (
                f"`{name}(nvme_offload_fraction=...)` offloads optimizer states to NVMe; torch.optim has no "
                "equivalent: keep HybridAdam (its NPU path is pure PyTorch) or drop the offload by hand"
            )
        if "amsgrad" in args and literal(args["amsgrad"].value) is not False:
            return f"`{name}(amsgrad=...)`: FusedAdam rejects AMSGrad; check the intent by hand"
        return ""

    def _keep_for_gemini(self, node: cst.Call, name: str, args: dict) -> None:
        """GeminiOptimizer asserts ``type(optim) in {FusedAdam, CPUAdam, HybridAdam}``."""
        if name != "FusedAdam":
            self.report(
                "NPU503",
                node,
                f"`{name}` kept: Gemini (GeminiPlugin, zero_optim_wrapper for ZeRO-3) accepts only "
                "FusedAdam/CPUAdam/HybridAdam (GeminiOptimizer asserts the type); HybridAdam updates npu parameters "
                "with its pure-PyTorch path, CPU-offloaded ones with the CPU Adam extension, which must build on the "
                "host (x86 or Arm)",
                tier=Tier.REVIEW,
            )
            return
        hybrid = self.imports().from_name("colossalai.nn.optimizer", "HybridAdam", code="NPU503", tier=Tier.REVIEW)
        if hybrid is None:
            self.report(
                "NPU503", node, "`FusedAdam` needs CUDA kernels; use HybridAdam with GeminiPlugin", tier=Tier.MANUAL
            )
            self.kept.add(name)
            return
        order = ("params", "lr", "bias_correction", "betas", "eps", "weight_decay", "adamw_mode")
        new_args = []
        for key in order:
            if key in args:
                new_args.append(as_positional(args[key]) if key == "params" else as_keyword(args[key], key))
        self.report(
            "NPU503",
            node,
            "`FusedAdam` needs CUDA multi-tensor kernels; with GeminiPlugin use `HybridAdam` (same arguments and "
            "update, and Gemini accepts it), which runs a pure-PyTorch update on npu parameters",
            lambda call, f=hybrid, a=new_args: with_args(call.with_changes(func=f), a),
            needs_torch_npu=False,
        )

    # ------------------------------------------------------------------ SGD
    def _sgd(self, node: cst.Call) -> None:
        name = "FusedSGD"
        args = try_bind(node, SGD_PARAMS, open_keywords=True)
        if args is None or any(k not in SGD_PARAMS for k in args):
            self.report(
                "NPU503",
                node,
                "`FusedSGD` with `*args`/`**kwargs`: replace it by hand with torch.optim.SGD",
                tier=Tier.MANUAL,
            )
            self.kept.add(name)
            return
        if "wd_after_momentum" in args and literal(args["wd_after_momentum"].value) is not False:
            self.report(
                "NPU503",
                node,
                "`FusedSGD(wd_after_momentum=True)` applies weight decay after momentum; "
                "torch.optim.SGD has no such mode: replace by hand",
                tier=Tier.MANUAL,
            )
            self.kept.add(name)
            return
        torch = self.imports().module_name("torch", code="NPU503", tier=Tier.REVIEW)
        if torch is None:
            self.report(
                "NPU503", node, "`FusedSGD` → torch.optim.SGD: the name `torch` is taken here", tier=Tier.MANUAL
            )
            self.kept.add(name)
            return
        new_args = [as_positional(args["params"])] if "params" in args else []
        new_args += [as_keyword(args[k], k) for k in SGD_PARAMS[1:6] if k in args]
        func = cst.Attribute(cst.Attribute(torch, cst.Name("optim")), cst.Name("SGD"))
        self.report(
            "NPU503",
            node,
            "`FusedSGD` needs CUDA multi-tensor kernels; `torch.optim.SGD` has the same update (same momentum, "
            "dampening, nesterov and L2 weight decay, momentum buffer initialised with the first gradient)",
            lambda call, f=func, a=new_args: with_args(call.with_changes(func=f), a),
            needs_torch_npu=False,
        )


KERNEL_LOADERS = "colossalai.kernel.kernel_loader"
# Loaders whose registry has an extension that works on an NPU host (colossalai/kernel/kernel_loader.py):
# the flash-attention loaders list FlashAttentionNpuExtension; CPUAdamLoader builds a CPU extension.
NPU_CAPABLE_LOADERS = {"KernelLoader", "FlashAttentionLoader", "FlashAttentionWithCustomMaskLoader", "CPUAdamLoader"}
LOADERS_NOTE = (
    "FlashAttentionLoader and FlashAttentionWithCustomMaskLoader have an NPU extension "
    "(torch_npu.npu_fusion_attention) and CPUAdamLoader builds a CPU extension; the fused-optimizer, layernorm, "
    "softmax, MoE, inference and other flash-attention loaders have CUDA extensions only"
)


@register
class CudaKernelImports(ColossalRule):
    """NPU509: ColossalAI CUDA/Triton kernels and apex-backed fused norms imported by user code."""

    codes = ("NPU509",)

    def _module(self, node: cst.CSTNode, module: str, names: list[str]) -> None:
        if module == KERNEL_LOADERS:
            cuda_only = sorted(set(names) - NPU_CAPABLE_LOADERS)
            if names and not cuda_only:
                return  # every loader imported here works on NPU
            if cuda_only:
                self.report(
                    "NPU509",
                    node,
                    f"`{', '.join(cuda_only)}` (`{module}`): CUDA extensions only, fails "
                    "on an NPU host; use plain PyTorch ops or torch_npu fused ops",
                    tier=Tier.MANUAL,
                )
            else:
                self.report("NPU509", node, f"`{module}`: {LOADERS_NOTE}", tier=Tier.REVIEW)
        elif module == "colossalai.kernel" or module.startswith("colossalai.kernel."):
            self.report(
                "NPU509",
                node,
                f"`{module}`: ColossalAI's CUDA/Triton kernels have no Ascend build; use plain PyTorch ops or "
                "torch_npu fused ops instead",
                tier=Tier.MANUAL,
            )
        elif module.startswith("colossalai.shardformer.layer") and {"FusedLayerNorm", "FusedRMSNorm"} & set(names):
            self.report(
                "NPU509",
                node,
                "shardformer `FusedLayerNorm`/`FusedRMSNorm` wrap NVIDIA apex CUDA kernels; use the shardformer "
                "`LayerNorm`/`RMSNorm` wrappers (plain PyTorch) on NPU",
                tier=Tier.MANUAL,
            )

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            self._module(node, dotted_name(alias.name) or "", [])

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None:
            return
        module = dotted_name(node.module) or ""
        names = [] if isinstance(node.names, cst.ImportStar) else [dotted_name(a.name) or "" for a in node.names]
        if module == "colossalai" and "kernel" in names:
            module = "colossalai.kernel"
        self._module(node, module, names)


@register
class UnusedImports(ColossalRule):
    """NPU510: counts the names read in the file, so that the import editor can drop the ColossalAI
    imports the rewrites left unused (the edits themselves are reported by :class:`ImportEditor`)."""

    codes = ("NPU510",)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.reads: dict[str, int] = {}
        self._not_reads: set[cst.CSTNode] = set()
        self._in_import = 0

    def visit_Import(self, node: cst.Import) -> None:
        self._in_import += 1

    def leave_Import(self, original_node: cst.Import) -> None:
        self._in_import -= 1

    visit_ImportFrom = visit_Import
    leave_ImportFrom = leave_Import

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._not_reads.add(node.attr)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._not_reads.add(node.keyword)

    def visit_Name(self, node: cst.Name) -> None:
        if not self._in_import and node not in self._not_reads:
            self.reads[node.value] = self.reads.get(node.value, 0) + 1

    def visit_SimpleString(self, node: cst.SimpleString) -> None:  # names listed in __all__ count as used
        value = string_value(node)
        if value is not None and value.isidentifier():
            self.reads[value] = self.reads.get(value, 0) + 1

    def leave_Module(self, original_node: cst.Module) -> None:
        self.imports().reads = self.reads
        super().leave_Module(original_node)
