"""DeepSpeed config dicts written in Python (NPU913, and NPU911 for an optimizer without NPU build).

A dict literal is a DeepSpeed config when it is passed to ``deepspeed.initialize(config=...)`` /
``config_params=`` or accelerate's ``DeepSpeedPlugin(hf_ds_config=...)``, or as ``deepspeed=``
(directly or through a name of this file), or when its keys are DeepSpeed's own (``zero_optimization``,
``train_micro_batch_size_per_gpu``, ...). Its data goes through the plain-data functions of
cuda2npu/analysis/ds_config.py; entries that do not change keep their text.

A dict passed as ``deepspeed=`` to a call (``TrainingArguments``, TRL's configs) has its explicit
``"enabled"`` values matched by the HF Trainer against the call's ``fp16`` / ``bf16`` flags (a
mismatch raises ValueError): it is switched only where NPU906 switches that call's ``fp16=True`` to
``bf16=True`` in the same run, and reviewed otherwise.
"""

from __future__ import annotations

import functools
import json

import libcst as cst

from cuda2npu.analysis.ds_config import FP16, Bf16Result, fp16_to_bf16, optimizer_problem
from cuda2npu.analysis.float16_models import float16_dtype_set
from cuda2npu.analysis.hf_sources import ARGUMENT_CLASSES, keyword, sources
from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import NOT_LITERAL, literal, string_value
from cuda2npu.core.names import dotted_name
from cuda2npu.core.nodes import code_of, expression
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes

# callable → keywords taking a DeepSpeed config (deepspeed/__init__.py v0.19.5; accelerate v1.14.0
# src/accelerate/utils/dataclasses.py)
SINKS = {
    "deepspeed.initialize": ("config", "config_params"),
    **dict.fromkeys(
        (
            "accelerate.DeepSpeedPlugin",
            "accelerate.utils.DeepSpeedPlugin",
            "accelerate.utils.dataclasses.DeepSpeedPlugin",
        ),
        ("hf_ds_config",),
    ),
}
# top-level keys only DeepSpeed configs have (deepspeed/runtime/constants.py, zero/config.py)
DEEPSPEED_KEYS = {
    "train_batch_size",
    "train_micro_batch_size_per_gpu",
    "zero_optimization",
    "zero_allow_untested_optimizer",
    "steps_per_print",
    "wall_clock_breakdown",
}
LOSS_SCALING_KEYS = {"loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis", "min_loss_scale"}
BLOCK_READERS = ("get", "pop", "setdefault")
WHY_BF16 = "BF16 is the native mixed-precision type of Atlas A2 NPUs and needs no loss scaling"


def _read(node: cst.Dict) -> dict | None:
    """The data of a dict literal whose keys are all strings (values that are not literals stay
    nodes), else None."""
    data = {}
    for element in node.elements:
        key = string_value(element.key) if isinstance(element, cst.DictElement) else None
        if key is None:
            return None
        data[key] = _value(element.value)
    return data


def _value(expr: cst.BaseExpression) -> object:
    if isinstance(expr, cst.Dict):
        inner = _read(expr)
        return expr if inner is None else inner
    value = literal(expr)
    return expr if value is NOT_LITERAL or isinstance(value, tuple) else value


def _enabled(block: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """The ``"enabled"`` value of a config block written as a dict literal, else None."""
    if not isinstance(block, cst.Dict):
        return None
    return next(
        (e.value for e in block.elements if isinstance(e, cst.DictElement) and string_value(e.key) == "enabled"), None
    )


def _render(value: object, quote: str) -> cst.BaseExpression:
    """Python code for configuration data (nodes stay as they are)."""
    if isinstance(value, cst.BaseExpression):
        return value
    if isinstance(value, dict):
        return cst.Dict([cst.DictElement(_string(key, quote), _render(item, quote)) for key, item in value.items()])
    if isinstance(value, str):
        return _string(value, quote)
    return expression(repr(value))


def _string(value: str, quote: str) -> cst.SimpleString:
    return cst.SimpleString(json.dumps(value) if quote == '"' else repr(value))


def _rebuild(updated: cst.Dict, old: dict, new: dict, quote: str) -> cst.Dict:
    """``updated`` holding ``new``: an unchanged entry keeps its element, a changed dict its unchanged
    elements, a changed value is rendered, and a new key takes the place of a removed one."""
    elements = {string_value(e.key): e for e in updated.elements}
    removed = [elements[key] for key in old if key not in new]
    result = []
    for key, value in new.items():
        element = elements.get(key)
        if element is not None and value is old[key]:
            result.append(element)
        elif element is not None and isinstance(element.value, cst.Dict) and isinstance(value, dict):
            result.append(element.with_changes(value=_rebuild(element.value, old[key], value, quote)))
        elif element is not None:
            result.append(element.with_changes(value=_render(value, quote)))
        else:
            result.append(removed.pop(0).with_changes(key=_string(key, quote), value=_render(value, quote)))
    result[-1] = result[-1].with_changes(comma=updated.elements[-1].comma)
    return updated.with_changes(elements=result)


def _quote(node: cst.Dict) -> str:
    first = next((e.key for e in node.elements if isinstance(e.key, cst.SimpleString)), None)
    return first.value[-1] if first is not None else '"'


@register
class DeepSpeedConfigDict(Rule):
    """NPU913: an enabled ``"fp16"`` block → ``"bf16"`` under the BF16 policy; NPU911: an
    ``"optimizer"`` whose type DeepSpeed builds from an op without NPU build."""

    codes = ("NPU911", "NPU913")
    triggers = (r"""["']fp16["']""", r"""["'][Ll][Aa][Mm][Bb]["']""")

    def visit_Dict(self, node: cst.Dict) -> None:
        if not self._is_config(node) or is_cuda_alternative(self.ctx, node):
            return
        data = _read(node)
        if data is None:
            self._unreadable(node)
            return
        problem = optimizer_problem(data)
        if problem is not None:
            self.report("NPU911", node, f"DeepSpeed config: {problem}", tier=Tier.MANUAL, needs_torch_npu=False)
        if self.options.precision == "bf16":
            self._precision(node, data)

    def _precision(self, node: cst.Dict, data: dict) -> None:
        result = fp16_to_bf16(data)
        if result.problem is None and result.config is not None and self._reads_fp16_block:
            result = Bf16Result(problem='this file reads the "fp16" block elsewhere (`config["fp16"]`)')
        switched = self._fp16_switched_beside(node)
        if result.problem is None and result.config is not None and switched is not None:
            result = Bf16Result(
                problem=f"another DeepSpeed config of this file takes fp16 from `{switched}`, which the migration "
                "leaves as it is: one config in bf16 and the other in fp16 would train the same model in two "
                "precisions; switch them together"
            )
        if result.problem is None and result.config is not None and self._trainer_flags.get(node) is False:
            result = Bf16Result(
                problem="it is passed as `deepspeed=` to a call whose fp16/bf16 flags stay as they are (NPU906 "
                "switches only a plain `TrainingArguments(fp16=True)`), and the HF Trainer raises ValueError when "
                "the config's explicit fp16/bf16 `enabled` differ from them: change both together, or set both "
                'blocks\' "enabled" to "auto"'
            )
        if result.problem is None and result.config is not None and self._fp16_flag:
            result = Bf16Result(
                problem="this file also passes `--fp16` to the program it launches (Megatron-DeepSpeed's job "
                "arguments), which the migration leaves as it is: the config in bf16 and the program in fp16 would "
                "train in two precisions; switch the flag and the config together"
            )
        if result.problem is None and result.config is not None:
            result = self._float16_beside(node) or result
        if result.problem is not None:
            self._review(node, result.problem)
        elif result.config is not None:
            new = result.config
            self.report(
                "NPU913",
                node,
                f"DeepSpeed config: {'; '.join(result.changes)}: {WHY_BF16}",
                lambda updated: _rebuild(updated, data, new, _quote(updated)),
                tier=Tier.NUMERIC,
                needs_torch_npu=False,
            )

    @functools.cached_property
    def _fp16_flag(self) -> bool:
        """The file holds a `"--fp16"` argument string (a launch argument list, as Megatron-DeepSpeed's
        AzureML job script: its DeepSpeed config and Megatron's flag go together)."""
        return any(
            (string_value(node) or "").partition("=")[0] == "--fp16"
            for node in iter_nodes(self.ctx.module, cst.SimpleString)
        )

    def _float16_beside(self, node: cst.Dict) -> Bf16Result | None:
        """Why the config's precision is not the migration's alone: a test parameter (the test's other
        parameters and fixtures pick the dtype it must match), or a file that makes its model float16
        (DeepSpeed-MII's ``mii_config = {"dtype": "fp16"}`` beside a ZeRO config: MII asserts they agree);
        None when neither."""
        if self._parametrized(node):
            return Bf16Result(
                problem="it is a `pytest.mark.parametrize` value: the test's other parameters and fixtures (a dtype) "
                "decide the precision it must agree with"
            )
        dtype = float16_dtype_set(self.ctx)
        if dtype is None:
            return None
        return Bf16Result(
            problem=f"this file makes its model float16 (`{dtype}`), which a bf16 config would contradict "
            "(DeepSpeed casts the module to bf16; libraries such as MII assert the two agree): switch both together"
        )

    def _parametrized(self, node: cst.Dict) -> bool:
        """Whether ``node`` is an argument of a ``@pytest.mark.parametrize(...)`` decorator."""
        parents = TreeIndex.of(self.ctx).parents
        parent = parents.get(node)
        while parent is not None and not isinstance(parent, (cst.Decorator, cst.BaseCompoundStatement)):
            parent = parents.get(parent)
        if not isinstance(parent, cst.Decorator) or not isinstance(parent.decorator, cst.Call):
            return False
        return (dotted_name(parent.decorator.func) or "").endswith("mark.parametrize")

    def _fp16_switched_beside(self, node: cst.Dict) -> str | None:
        """The expression switching the ``"fp16"`` block of another DeepSpeed config of the function
        holding ``node``, whose bf16 stays off (``"fp16": {"enabled": args.use_fp16}, "bf16": {"enabled":
        False}``: HunyuanDiT's ZeRO-2 config beside a literal ZeRO-3 one), else None."""
        function = TreeIndex.of(self.ctx).enclosing_function(node)
        if function is None:
            return None
        for config in iter_nodes(function.body, cst.Dict):
            if config is node or not self._is_config(config):
                continue
            blocks = {string_value(e.key): e.value for e in config.elements if isinstance(e, cst.DictElement)}
            fp16, bf16 = _enabled(blocks.get(FP16)), _enabled(blocks.get("bf16"))
            if fp16 is not None and not isinstance(_value(fp16), bool) and (bf16 is None or _value(bf16) is False):
                return code_of(fp16)
        return None

    def _unreadable(self, node: cst.Dict) -> None:
        """A config with ``**`` entries or computed keys whose fp16 block is enabled: reviewed."""
        if self.options.precision != "bf16":
            return
        for element in node.elements:
            if isinstance(element, cst.DictElement) and string_value(element.key) == FP16:
                block = _value(element.value)
                if isinstance(block, dict) and block.get("enabled") is True:
                    self._review(node, "the dict is not all literal (`**` entries or computed keys)")

    def _review(self, node: cst.Dict, problem: str) -> None:
        self.report(
            "NPU913",
            node,
            f'DeepSpeed config with "fp16" enabled, not switched to "bf16" (--precision bf16): {problem}; {WHY_BF16}',
            tier=Tier.REVIEW,
            needs_torch_npu=False,
        )

    def _is_config(self, node: cst.Dict) -> bool:
        keys = {string_value(e.key) for e in node.elements if isinstance(e, cst.DictElement)}
        if node in self._passed or node in self._trainer_flags or keys & DEEPSPEED_KEYS:
            return True
        block = next(
            (e.value for e in node.elements if isinstance(e, cst.DictElement) and string_value(e.key) == FP16), None
        )
        return isinstance(block, cst.Dict) and bool(
            {string_value(e.key) for e in block.elements if isinstance(e, cst.DictElement)} & LOSS_SCALING_KEYS
        )

    @functools.cached_property
    def _passed(self) -> set[cst.Dict]:
        """Dict literals passed to a sink, directly or through a name assigned in this file."""
        values = []
        for call in iter_nodes(self.ctx.module, cst.Call):
            keywords = SINKS.get(self.resolver.qualified_name(call.func) or "", ())
            values += [a.value for a in call.args if a.keyword is not None and a.keyword.value in keywords]
        names = {name for value in values if (name := dotted_name(value))}
        found = {value for value in values if isinstance(value, cst.Dict)}
        for assign in iter_nodes(self.ctx.module, cst.Assign):
            if isinstance(assign.value, cst.Dict) and any(dotted_name(t.target) in names for t in assign.targets):
                found.add(assign.value)
        return found

    @functools.cached_property
    def _trainer_flags(self) -> dict[cst.Dict, bool]:
        """The dict literals passed as ``deepspeed=`` to a call (through a same-file name too), each
        with whether every such call gets NPU906's ``fp16=True`` → ``bf16=True``."""
        found: dict[cst.Dict, bool] = {}
        for call in iter_nodes(self.ctx.module, cst.Call):
            arg = keyword(call, "deepspeed")
            if arg is None:
                continue
            follows = self._npu906_switches(call)
            for source in sources(self.ctx, arg.value):
                if isinstance(source, cst.Dict):
                    found[source] = found.get(source, True) and follows
        return found

    def _npu906_switches(self, call: cst.Call) -> bool:
        """Whether NPU906 rewrites this call's flags to bf16: ``TrainingArguments(fp16=True)`` with no
        ``bf16=`` nor ``**kwargs`` (cuda2npu/families/transformers/training_args.py)."""
        name = self.resolver.qualified_name(call.func) or ""
        fp16 = keyword(call, "fp16")
        return (
            name.split(".")[0] == "transformers"
            and name.rpartition(".")[2] in ARGUMENT_CLASSES
            and fp16 is not None
            and literal(fp16.value) is True
            and keyword(call, "bf16") is None
            and not any(arg.star == "**" for arg in call.args)
            and self.options.code_enabled("NPU906")
        )

    @functools.cached_property
    def _reads_fp16_block(self) -> bool:
        """Whether the file reads a config's fp16 block: ``config["fp16"]``, ``config.get("fp16")``."""
        for node in iter_nodes(self.ctx.module, cst.Subscript):
            if any(isinstance(s.slice, cst.Index) and string_value(s.slice.value) == FP16 for s in node.slice):
                return True
        for call in iter_nodes(self.ctx.module, cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in BLOCK_READERS and call.args:
                if string_value(call.args[0].value) == FP16:
                    return True
        return False
