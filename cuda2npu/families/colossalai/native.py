"""ColossalAI replaced by plain PyTorch distributed (``--colossalai native``).

* NPU511 ``colossalai.launch_from_torch(seed=S)`` → ``init_process_group(backend="hccl")`` +
  ``torch.npu.set_device(LOCAL_RANK)`` + the seeding ColossalAI's ``set_seed`` did;
* NPU512 the edits of the file's booster plan (:mod:`~cuda2npu.families.colossalai.plan`): a ``Booster``
  with ``TorchDDPPlugin`` or ``LowLevelZeroPlugin``, also one chosen at run time among them, →
  ``DistributedDataParallel`` (+ ``ZeroRedundancyOptimizer``);
* NPU513 what cannot be replaced with confidence (the reason a booster is not replaced, the whole file
  then being migrated as under ``--colossalai keep``), and ColossalAI APIs the script keeps using.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.arguments import try_bind
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import NOT_LITERAL, literal
from cuda2npu.core.names import dotted_name
from cuda2npu.core.nodes import attribute_chain, code_of
from cuda2npu.core.rulebase import register
from cuda2npu.core.statements import is_expression_statement
from cuda2npu.families.colossalai.common import ColossalRule
from cuda2npu.families.colossalai.plan import OTHER_PLUGINS, Planner, planner_of
from cuda2npu.families.colossalai.support import LAUNCHERS, PLUGINS, symbol_of

ACCELERATOR_METHODS = (
    "synchronize",
    "empty_cache",
    "device_count",
    "current_device",
    "set_device",
    "is_available",
    "max_memory_allocated",
    "memory_allocated",
    "max_memory_reserved",
    "memory_reserved",
    "reset_peak_memory_stats",
    "manual_seed",
    "manual_seed_all",
)
HANDLED_NATIVE = {
    "colossalai",
    *LAUNCHERS,
    "Booster",
    *PLUGINS,
    "get_current_device",
    "get_accelerator",
    "HybridAdam",
    "CPUAdam",
    "FusedAdam",
    "FusedLAMB",
    "FusedSGD",
}


KEPT_FILE = (
    "; so the file is migrated as with `--colossalai keep` (ColossalAI kept, on its NPU accelerator), never half native"
)


class NativeRule(ColossalRule):
    @property
    def active(self) -> bool:
        return self.strategy() == "native"


@register
class NativeLaunch(NativeRule):
    """NPU511: ``launch_from_torch`` → ``init_process_group(backend="hccl")`` + device + seeds."""

    codes = ("NPU511",)

    def visit_Call(self, node: cst.Call) -> None:
        if not self.active:
            return
        name = self.symbol(node.func)
        if name == "launch_from_torch":
            self._launch_from_torch(node)
        elif name in LAUNCHERS:
            self.report(
                "NPU511",
                node,
                f'`{name}()` → by hand: torch.distributed.init_process_group(backend="hccl", '
                'init_method=f"tcp://{host}:{port}", rank=rank, world_size=world_size), '
                "torch.npu.set_device(local_rank), then seed random/numpy/torch as ColossalAI's set_seed does",
                tier=Tier.MANUAL,
            )

    def _launch_from_torch(self, node: cst.Call) -> None:
        statement = self.ctx.statement
        sole = is_expression_statement(statement, node)
        problem = ""
        args = try_bind(node, ("backend", "seed", "verbose"), open_keywords=True)
        config = None
        if (
            args is not None
            and "backend" in args
            and args["backend"].keyword is None
            and not isinstance(literal(args["backend"].value), str)
        ):
            # ColossalAI < 0.3.8: launch_from_torch(config, backend, seed, verbose)
            args = try_bind(node, ("config", "backend", "seed", "verbose"), open_keywords=True)
        if args is not None and "config" in args:
            config = args["config"].value
        if not sole:
            problem = "`launch_from_torch()` is not a statement of its own"
        elif args is None:
            problem = "`launch_from_torch(*args/**kwargs)` cannot be analysed"
        elif config is not None and code_of(config).replace(" ", "") not in ("{}", "dict()"):
            problem = "`launch_from_torch(config=...)` loads a legacy ColossalAI config (parallel settings)"
        seed = args["seed"].value if args is not None and "seed" in args else cst.Integer("1024")
        if not problem and not (literal(seed) is not NOT_LITERAL or isinstance(seed, (cst.Name, cst.Attribute))):
            problem = "the seed is an expression; assign it to a name first"
        if problem:
            self.report(
                "NPU511",
                node,
                f'{problem}: replace it by hand with init_process_group(backend="hccl"), '
                "torch.npu.set_device(LOCAL_RANK) and seeding",
                tier=Tier.MANUAL,
            )
            return
        imports = self.imports()
        saved = imports.snapshot()
        torch = imports.module_name("torch", code="NPU511", tier=Tier.REVIEW)
        os_name = imports.module_name("os", code="NPU511", tier=Tier.REVIEW)
        random = imports.module_name("random", code="NPU511", tier=Tier.REVIEW)
        numpy = imports.module_name("numpy", "np", code="NPU511", tier=Tier.REVIEW) or imports.module_name(
            "numpy", code="NPU511", tier=Tier.REVIEW
        )
        dist = imports.bound_to(["torch.distributed"])
        if None in (torch, os_name, random, numpy):
            imports.restore(saved)
            self.report(
                "NPU511",
                node,
                "`launch_from_torch()`: a module name needed by the rewrite is taken here",
                tier=Tier.MANUAL,
            )
            return
        t, seed_text = torch.value, code_of(seed)
        init = f"{dist}.init_process_group" if dist else f"{t}.distributed.init_process_group"
        texts = [
            f'{init}(backend="hccl")',
            f'{t}.npu.set_device(int({os_name.value}.environ["LOCAL_RANK"]))',
            f"{random.value}.seed({seed_text})",
            f"{numpy.value}.random.seed({seed_text})",
            f"{t}.manual_seed({seed_text})",
        ]
        lines = [cst.parse_statement(text + "\n") for text in texts]

        def fix(stmt, lines=lines):
            return cst.FlattenSentinel([lines[0].with_changes(leading_lines=stmt.leading_lines), *lines[1:]])

        self.report(
            "NPU511",
            statement,
            '`launch_from_torch()` → `init_process_group(backend="hccl")` (rank, world size and master address '
            "from the torchrun environment, as ColossalAI reads them), `torch.npu.set_device(LOCAL_RANK)` and the "
            f"seeding ColossalAI's set_seed({seed_text}) does (random, numpy, torch)",
            fix,
            needs_torch_npu=True,
        )


@register
class NativeBooster(NativeRule):
    """NPU512/NPU513: the booster pipeline in plain PyTorch, or the reason it cannot be."""

    codes = ("NPU512", "NPU513")

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._plan: Planner | None = None

    def _edits(self, node: cst.CSTNode) -> None:
        for edit in self._plan.edits.get(node, ()):
            self.report(edit.code, node, edit.message, edit.fix, tier=edit.tier, needs_torch_npu=edit.needs_torch_npu)

    def visit_Module(self, node: cst.Module) -> None:
        self._plan = planner_of(self.ctx) if self.options.colossalai == "native" else None

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if self._plan is not None:
            self._edits(node)

    def visit_Parameters(self, node: cst.Parameters) -> None:
        if self._plan is not None:
            self._edits(node)

    def visit_Call(self, node: cst.Call) -> None:
        if self._plan is not None and node in self._plan.problems:
            self.report("NPU513", node, self._plan.problems[node] + KEPT_FILE, tier=Tier.MANUAL)
            return
        if not self.active:
            return
        if self._plan is not None:
            self._edits(node)
            if self._plan.migrated_any and node not in self._plan.edits and isinstance(node.func, cst.Attribute):
                method = node.func.attr.value
                if method in ("clip_grad_by_norm", "clip_grad_by_value") or (method == "unwrap" and not node.args):
                    self.report(
                        "NPU513",
                        node,
                        f"`.{method}()` is a ColossalAI wrapper method; after the native rewrite the model is a "
                        "DistributedDataParallel (use `.module`) and the optimizer a torch optimizer (use "
                        "torch.nn.utils.clip_grad_norm_/clip_grad_value_ on model.parameters())",
                        tier=Tier.MANUAL,
                    )
        name = self.symbol(node.func)
        if name in OTHER_PLUGINS:
            self.report("NPU513", node, f"`{name}`: {OTHER_PLUGINS[name]}", tier=Tier.MANUAL)
        self._accelerator_call(node)

    def _accelerator_call(self, node: cst.Call) -> None:
        """``get_accelerator().synchronize()`` → ``torch.npu.synchronize()`` (the NpuAccelerator does exactly that)."""
        func = node.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call) and not func.value.args):
            return
        if self.symbol(func.value.func) != "get_accelerator":
            return
        method = func.attr.value
        if method == "get_current_device" and not node.args:
            torch = self.imports().module_name("torch", code="NPU502", tier=Tier.EXACT)
            if torch is not None:
                self.report(
                    "NPU502",
                    node,
                    '`get_accelerator().get_current_device()` → `torch.device("npu", torch.npu.current_device())`',
                    lambda _, d=self.npu_device(torch): d,
                )
        elif method in ACCELERATOR_METHODS:
            torch = self.imports().module_name("torch", code="NPU502", tier=Tier.EXACT)
            if torch is not None:
                self.report(
                    "NPU502",
                    node,
                    f"`get_accelerator().{method}(...)` → `torch.npu.{method}(...)` "
                    "(what ColossalAI's NpuAccelerator calls)",
                    lambda c, f=attribute_chain(f"{torch.value}.npu.{method}"): c.with_changes(func=f),
                )

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if not self.active or node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = dotted_name(node.module) or ""
        if not (module == "colossalai" or module.startswith("colossalai.")) or module.startswith("colossalai.kernel"):
            return
        left = [
            dotted_name(a.name)
            for a in node.names
            if symbol_of(f"{module}.{dotted_name(a.name)}") not in HANDLED_NATIVE
        ]
        if left:
            self.report(
                "NPU513",
                node,
                f"stays on ColossalAI: {', '.join(f'`{n}`' for n in left)} from `{module}` (no plain-PyTorch rewrite); "
                "keep colossalai installed or replace by hand",
                tier=Tier.REVIEW,
            )
