"""Lightning on Ascend (NPU951): Lightning has no NPU accelerator (its port was proposed and closed
unmerged, Lightning-AI/pytorch-lightning#19308), so a ``Trainer``/``Fabric`` left to choose
(``accelerator="auto"``, the default) trains on the CPU of an NPU host, silently, and one asking for
``"gpu"`` raises ("No supported gpu backend found!": lightning/fabric/connector.py), as does Lightning
1.x's ``Trainer(gpus=1)`` (ControlNet's, DejaVu's COMET: rounds 33 and 35). One note per
file, at its first such constructor (``Trainer.from_argparse_args(args)`` too, whose
``--accelerator`` defaults to "auto"); the accelerator followed through the file (``args.accelerator``
from ``add_argument("--accelerator", default="gpu")``); none where it is an expression whose value
is not known (a custom ``Accelerator``, a configuration value) or names another device, nor in the branch of a
``torch.cuda.is_available()`` test (kept as written, NPU103: it never runs on an NPU host).
docs/reference/lightning.md.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.hf_sources import keyword, sources, statement_of
from cuda2npu.analysis.npu_aware import in_npu_branch
from cuda2npu.core.literals import string_value
from cuda2npu.core.names import dotted_name
from cuda2npu.core.pins import pin_predates
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes

CONSTRUCTORS = frozenset(
    {
        "lightning.Trainer",
        "lightning.pytorch.Trainer",
        "lightning.pytorch.trainer.Trainer",
        "lightning.pytorch.trainer.trainer.Trainer",
        "pytorch_lightning.Trainer",
        "pytorch_lightning.trainer.Trainer",
        "pytorch_lightning.trainer.trainer.Trainer",
        "lightning.Fabric",
        "lightning.fabric.Fabric",
        "lightning.fabric.fabric.Fabric",
        "lightning_fabric.Fabric",
        "lightning_fabric.fabric.Fabric",
    }
)
CHOOSING = {None: "auto", "auto": "auto", "gpu": "gpu"}  # what the constructor is asked for ("cuda": NPU109's)
EFFECT = {
    "auto": "picks the CPU on an NPU host (it chooses among TPU, MPS, CUDA and CPU): the run trains on the CPU, silently",
    "gpu": 'raises on an NPU host ("No supported gpu backend found!": its GPUs are CUDA and MPS)',
    "spread": 'takes its accelerator from the `**` arguments: "auto" picks the CPU on an NPU host and "gpu" raises',
    "arguments": 'takes its accelerator from the command line (`--accelerator`): "auto", Lightning\'s default, picks the CPU on an NPU host and "gpu" raises',
    "gpus": 'asks for CUDA GPUs and raises on an NPU host (Lightning 1.x: "You requested GPUs: [0] But your machine only has: []"; Lightning 2 has no `gpus=`: TypeError)',
    "gpus_cuda_test": (
        "asks for CUDA GPUs only where `torch.cuda.is_available()`, which is False on an NPU host: there the Trainer "
        "gets no GPU and trains on the CPU, silently"
    ),
    # before 1.5 `--accelerator` names the distributed backend (dp, ddp, ...); the devices come from `--gpus`
    "gpus_arguments": (
        "takes its devices from the command line (`--gpus`; under `pytorch-lightning{spec}` `--accelerator` is "
        'the distributed backend): asking for GPUs raises on an NPU host ("You requested GPUs: [0] But your '
        'machine only has: []"), and without `--gpus` the run trains on the CPU'
    ),
}
DEVICE_ACCELERATOR = "1.5.0"  # Lightning's `accelerator="gpu"`/"auto" device names (before: the distributed backend)
NO_GPUS = ("0", "None", "[]", '""', "''")  # `gpus=` values asking for no GPU


OTHER_LIBRARIES = frozenset({"transformers", "trl", "accelerate", "deepspeed", "ray", "torch", "composer"})
CUDA_TESTS = frozenset({"torch.cuda.is_available", "torch.cuda.device_count"})


@register
class LightningAccelerator(Rule):
    codes = ("NPU951",)
    triggers = (r"\bTrainer\b", r"\bFabric\b")
    requires = (r"lightning",)

    @classmethod
    def triggers_for(cls, options) -> tuple[str, ...]:
        """Also the project's subclasses of Fabric/LightningLite, built in files that need not name Lightning."""
        return cls.triggers + tuple(rf"\b{name}\b" for name in options.project.lightning_classes)

    @classmethod
    def requires_for(cls, options) -> tuple[str, ...]:
        classes = options.project.lightning_classes
        return (rf"lightning|\b(?:{'|'.join(classes)})\b",) if classes else cls.requires

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.noted = False

    def _gpus_where_cuda(self, value: cst.BaseExpression) -> bool:
        """``gpus=-1 if torch.cuda.is_available() else None`` (Fengshenbang, round 50): no GPU where CUDA is not."""
        return (
            isinstance(value, cst.IfExp)
            and self.ctx.module.code_for_node(value.orelse) in NO_GPUS
            and self._calls(value.test, {"torch.cuda.is_available"})
        )

    def _calls(self, test: cst.BaseExpression, names) -> bool:
        """``test`` calls one of ``names`` (qualified)."""
        return any(self.resolver.qualified_name(call.func) in names for call in iter_nodes(test, cst.Call))

    def visit_Call(self, node: cst.Call) -> None:
        # a class of this file (co-tracker's `class Lite(LightningLite)` built below it, round 46) has no import
        qualified = self.resolver.qualified_name(node.func) or dotted_name(node.func) or ""
        from_args = qualified.endswith(".from_argparse_args") and qualified.rpartition(".")[0] in CONSTRUCTORS
        own = (  # the project's Fabric/LightningLite (not a library's class of the same name: transformers' Trainer)
            qualified.rpartition(".")[2] in self.options.project.lightning_classes
            and qualified.split(".")[0] not in OTHER_LIBRARIES
        )
        if self.noted or not (qualified in CONSTRUCTORS or from_args or own):
            return
        arg = keyword(node, "accelerator")
        value = self._accelerator_value(arg.value) if arg is not None else None
        if arg is not None and value is None:
            return  # a custom Accelerator or a value chosen elsewhere
        # `Trainer(**opts)` and `Trainer.from_argparse_args(args)`: named there (`--accelerator`, default "auto")
        spread = arg is None and any(a.star == "**" for a in node.args)
        gpus = keyword(node, "gpus")
        asks_gpus = arg is None and gpus is not None and self.ctx.module.code_for_node(gpus.value) not in NO_GPUS
        old = pin_predates(self.options.project.pins, "pytorch-lightning", DEVICE_ACCELERATOR)
        chosen = (
            ("gpus_cuda_test" if self._gpus_where_cuda(gpus.value) else "gpus")
            if asks_gpus
            else "gpus_arguments"
            if from_args and arg is None and old
            else "arguments"
            if from_args and arg is None
            else "spread"
            if spread
            else CHOOSING.get(value)
        )
        if chosen is None or in_npu_branch(self.ctx, node) or self._under_cuda_test(node):
            return
        self.noted = True
        constructor = qualified.rpartition(".")[0] if from_args else qualified
        name = constructor.rpartition(".")[2]
        asked = (
            f"`gpus={self.ctx.module.code_for_node(gpus.value)}`"
            if asks_gpus
            else "`from_argparse_args`"
            if from_args
            else "`**` arguments"
            if spread
            else "left to choose"
            if arg is None
            else f'`accelerator="{value}"`'
        )
        self.report(
            "NPU951",
            node,
            f"Lightning's `{name}` ({asked}) {EFFECT[chosen].format(spec=old)}: Lightning has no Ascend NPU "
            "accelerator; pass "
            "an `Accelerator` of your own that runs on torch.npu (Lightning's Accelerator API), or run this loop "
            "with plain torch or accelerate",
            needs_torch_npu=False,
        )

    def _accelerator_value(self, value: cst.BaseExpression) -> str | None:
        """The accelerator name ``value`` is (a literal) or takes from this file: every value it can
        take (``args.accelerator`` with ``parser.add_argument("--accelerator", default="gpu")``) one
        name; None where that is not known."""
        names = {string_value(source) for source in sources(self.ctx, value)}
        return names.pop() if len(names) == 1 else None

    def _under_cuda_test(self, node: cst.Call) -> bool:
        """The constructor runs in the branch of ``if torch.cuda.is_available():``: a test choosing an
        accelerator name the migration keeps as written (NPU103), so the branch never runs on an NPU."""
        statement = statement_of(self.ctx, node)
        index = TreeIndex.of(self.ctx)
        for owner, role in index.enclosing(statement) if statement is not None else ():
            if isinstance(owner, cst.If) and role == "body" and not isinstance(owner.test, cst.UnaryOperation):
                if self._calls(owner.test, CUDA_TESTS):
                    return True
        return False
