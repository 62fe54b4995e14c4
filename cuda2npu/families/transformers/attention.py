"""NPU901–NPU903: ``flash_attention_2`` asked of transformers where the pinned release cannot run it on the NPU.

transformers runs ``attn_implementation="flash_attention_2"`` on Ascend (torch_npu's
``npu_fusion_attention``) from 4.51.0; before, loading raises there, flash-attn being CUDA-only
(docs/reference/transformers.md §1). A pin guaranteeing 4.51.0 keeps the value; otherwise:

- NPU901: the ``"flash_attention_2"`` literal that reaches ``attn_implementation`` (a transformers
  call's keyword, ``dict(attn_implementation=...)``, a ``{"attn_implementation": ...}`` dict,
  ``config._attn_implementation = ...``, through a same-file variable, parameter default, argparse
  default or dataclass field; a positional argument filling the ``attn_implementation`` parameter of
  the project's own function: ``train("flash_attention_2")``) becomes ``"sdpa"`` (transformers ≥
  4.36), ``"eager"`` where the torch pin predates 2.1.1 (transformers' sdpa raises there) or where
  the file answers ``== "sdpa"`` with ``"flash_attention_2"`` (a part of its model has no SDPA:
  Aria's vision tower).
- NPU902: ``use_flash_attention_2=True`` becomes ``attn_implementation="sdpa"`` (or ``"eager"``,
  as above) where the pin guarantees 4.36.0, else a manual item. The project's own flag, in a file on
  transformers, is a manual item, kept (its code may read it before ``from_pretrained``: VL-RLHF turns
  it off for InstructBlip): the keyword of a call of the project's function or class
  (``load_model(path, use_flash_attention_2=True)``), a class field defaulting to ``True`` (a
  ``TrainingArguments`` subclass's), and, in shell scripts, ``--use_flash_attention_2 True``
  (cuda2npu/filekinds/launch_flags.py).
- NPU903: either of them in a file packing sequences without padding (``DataCollatorWithFlattening``,
  a model called with ``position_ids`` and ``attention_mask=None``, or names saying so:
  ``packing_samples``, ``packed_seq_lens``, ``sample_packing``, verl's ``use_remove_padding`` /
  ``*_rmpad``, flash-attn's ``unpad_input``; OpenRLHF-style trainers pack samples into one row
  with sample ids in ``attention_mask``): SDPA before transformers 4.51
  ignores ``position_ids`` and masks only zeros, so packed sequences would attend to each other;
  a manual item, the value kept.
"""

from __future__ import annotations

import functools
import re

import libcst as cst

from cuda2npu.analysis.flash_probes import (
    file_probe_flags,
    in_flash_import_try,
    in_probed_branch,
    in_probed_choice,
)
from cuda2npu.analysis.hf_sources import (
    imports_hf,
    is_hf_call,
    is_plain_dict_call,
    keyword,
    sources,
    statement_of,
    string_sources,
    subscript_key,
)
from cuda2npu.analysis.npu_aware import in_npu_branch
from cuda2npu.core.bindings import assigned_values
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.imports import import_root
from cuda2npu.core.literals import field_default, literal, string_value
from cuda2npu.core.names import dotted_name, module_qualified
from cuda2npu.core.nodes import code_of, keyword_arg
from cuda2npu.core.pins import pinned
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes
from cuda2npu.families.transformers.releases import (
    ATTN_IMPLEMENTATION,
    FA2_ON_NPU,
    fa2_replacement,
    flash_flag_off_advice,
    guaranteed,
    names_softcapped_model,
    pin_text,
)

FA2 = "flash_attention_2"
FA3 = "flash_attention_3"
HUB_FLASH = re.compile(r"kernels-community/(?:vllm-)?flash-?attn\w*")  # `kernels` Hub builds of FlashAttention
FLEX = "flex_attention"
# the keyword, and the config attributes it sets: `_attn_implementation="flash_attention_2"` given to
# `from_pretrained` reaches the config through its kwargs (VLMEvalKit's idefics and Phi-3-vision, round 31)
ATTENTION_KEYS = ("attn_implementation", "_attn_implementation", "_attn_implementation_internal")
PACKING = ("transformers.DataCollatorWithFlattening", "transformers.data.data_collator.DataCollatorWithFlattening")
# names of code that packs several samples into one row (OpenRLHF's `packing_samples`, axolotl's
# `sample_packing`, verl's remove-padding path: `use_remove_padding`, `input_ids_rmpad`, flash-attn's `unpad_input`)
PACKING_NAMES = re.compile(
    rb"\b\w*(?:packing_samples|sample_packing|packed_seq|packed_sequence|remove_padding|rmpad|unpad_input)\w*\b"
)


@register
class FlashAttention2(Rule):
    codes = ("NPU901", "NPU902", "NPU903")
    triggers = (r"flash_attention_[23]", r"flex_attention", r"kernels-community/(?:vllm-)?flash")
    FLAG = "use_flash_attention_2"

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._done: set[cst.CSTNode] = set()
        self._packing: bool | None = None
        self._no_sdpa: bool | None = None  # the file sends `sdpa` to flash_attention_2 (_refuses_sdpa)
        self._softcapped: bool | None = None  # the file names a Gemma-2 model (names_softcapped_model)

    def _active(self) -> bool:
        return not guaranteed(self.options, FA2_ON_NPU)

    def visit_Call(self, node: cst.Call) -> None:
        self._flex_attention(node)
        if not self._active():
            return
        hf = is_hf_call(self.resolver, node)
        arg = keyword(node, "attn_implementation") or keyword(node, "_attn_implementation")
        arg = arg or self._positional_attn(node)
        # transformers' keyword also where a project's own PreTrainedModel subclass or wrapper takes it,
        # and in a project on transformers, where its own function hands it on (`train(attn_implementation=...)`,
        # or `train("flash_attention_2")` to its `def train(attn_implementation=None)`)
        if arg is not None and (
            hf or is_plain_dict_call(self.resolver, node) or imports_hf(self.ctx) or depends_on_hf(self.options)
        ):
            self._attn_value(node, arg.value)
        elif (default := _attn_option_default(node)) is not None and (
            imports_hf(self.ctx) or depends_on_hf(self.options)
        ):
            self._attn_value(node, default)  # a command-line option handed on to another program (LongRoPE)
        flag = keyword(node, self.FLAG)
        if flag is None:
            return
        if hf:
            if literal(flag.value) is True and not in_npu_branch(self.ctx, node):
                self._use_flash_attention_2(node, flag)
            else:
                self._flag_entry(flag, flag.value)
        elif is_plain_dict_call(self.resolver, node) and imports_hf(self.ctx):
            self._flag_entry(flag, flag.value)  # `dict(use_flash_attention_2=flag)`, as the `{...}` dict
        elif imports_hf(self.ctx):
            self._wrapper_flag(node, flag)

    def visit_Dict(self, node: cst.Dict) -> None:
        if not self._active() or not imports_hf(self.ctx):
            return
        for element in node.elements:
            key = string_value(element.key) if isinstance(element, cst.DictElement) else None
            if key in ATTENTION_KEYS:
                self._attn_value(node, element.value)
            elif key == self.FLAG:
                self._flag_entry(element, element.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        if not self._active():
            return
        for target in node.targets:
            if isinstance(target.target, cst.Attribute) and target.target.attr.value in ATTENTION_KEYS[1:]:
                if (replacement := self._attn_value(node, node.value)) is not None:
                    self._compared_reads(target.target, replacement)
            elif subscript_key(target.target) == self.FLAG and imports_hf(self.ctx):
                self._flag_entry(node, node.value)
            elif subscript_key(target.target) == "attn_implementation" and (
                imports_hf(self.ctx) or depends_on_hf(self.options)
            ):  # `kwargs["attn_implementation"] = "flash_attention_2"` then `from_pretrained(**kwargs)` (LLaVA)
                self._attn_value(node, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        """``attn_implementation: str = field(default="flash_attention_2")``: the default of an
        ``HfArgumentParser`` dataclass or config class the code passes on (LLaVA's ModelArguments);
        ``use_flash_attention_2: bool = True``, a class field's default (:meth:`_field_flag`)."""
        if not self._active() or not imports_hf(self.ctx):
            return
        if _named_attn(node.target):
            default = field_default(node.value)
            if default is not None:
                self._attn_value(node, default)
        elif self._is_flag_field(node):
            self._field_flag(node)

    def visit_Param(self, node: cst.Param) -> None:
        """``def load_model(..., attn_implementation="flash_attention_2")``: a loader's default."""
        if self._active() and node.default is not None and _named_attn(node.name) and imports_hf(self.ctx):
            self._attn_value(node, node.default)

    def _positional_attn(self, call: cst.Call) -> cst.Arg | None:
        """The positional argument of ``call`` bound to an ``attn_implementation`` parameter of the
        project's own function or class: ``train("flash_attention_2")`` where this file defines
        ``def train(attn_implementation=None)`` (VideoLLaMA2), or imports ``train`` from a project file
        defining it so (``ProjectFacts.attention_parameters``, analysis/attention_choices.py)."""
        if not isinstance(call.func, cst.Name):
            return None
        imported = self.resolver.lookup(call.func.value)
        if imported:
            names = {name.rpartition(".")[2] for name in imported}
            position = self._imported_attn_positions.get(names.pop()) if len(names) == 1 else None
        else:
            position = self._own_attn_positions.get(call.func.value)
        positional = [arg for arg in call.args if arg.keyword is None]
        if position is None or len(positional) <= position or any(arg.star for arg in positional[: position + 1]):
            return None  # not passed positionally, or after a `*args` (the parameter it fills is not known)
        return positional[position]

    @functools.cached_property
    def _own_attn_positions(self) -> dict[str, int]:
        """The file's module-level functions (classes, by their ``__init__``) defined once with a
        positional parameter named like ``attn_implementation``: name → its index in a call."""
        defined: dict[str, list[int | None]] = {}
        for statement in self.ctx.module.body:
            if isinstance(statement, cst.FunctionDef):
                defined.setdefault(statement.name.value, []).append(_attn_index(statement, 0))
            elif isinstance(statement, cst.ClassDef):
                init = next(
                    (m for m in statement.body.body if isinstance(m, cst.FunctionDef) and m.name.value == "__init__"),
                    None,
                )
                defined.setdefault(statement.name.value, []).append(_attn_index(init, 1) if init else None)
        return {name: at[0] for name, at in defined.items() if len(at) == 1 and at[0] is not None}

    @functools.cached_property
    def _imported_attn_positions(self) -> dict[str, int]:
        """The project's functions and classes taking the attention implementation positionally,
        as the project facts name them: name → its index in a call."""
        return dict(self.options.project.attention_parameters)

    def _flash_only(self, node: cst.CSTNode) -> bool:
        """``node`` runs only where flash-attn is installed (``try: import flash_attn`` then
        ``impl = "flash_attention_2"``; ``if is_flash_attn_2_available():``): never on an NPU host."""
        statement, flags = statement_of(self.ctx, node), file_probe_flags(self.ctx)
        return (
            in_flash_import_try(self.ctx, statement, _imports_flash)
            or in_probed_branch(self.ctx, statement, flags)
            or in_probed_choice(self.ctx, node, flags)
        )

    def _flag_entry(self, node: cst.CSTNode, value: cst.BaseExpression) -> None:
        """``use_flash_attention_2=flag`` / ``kwargs["use_flash_attention_2"] = flag`` /
        ``{"use_flash_attention_2": flag}`` (a dict passed as ``**kwargs``) set to something other than
        ``True``: a manual item unless every value it takes in this file is off."""
        found = sources(self.ctx, value)
        if found and all(literal(source) in (False, None) for source in found) or in_npu_branch(self.ctx, node):
            return
        message = (
            f'`"{self.FLAG}"` passed to transformers raises on an NPU host before transformers {FA2_ON_NPU} '
            f'({pin_text(self.options)}): pass `attn_implementation="{self._replacement()[0]}"` instead '
            f"(transformers >= {ATTN_IMPLEMENTATION}), or require transformers >= {FA2_ON_NPU}"
        )
        self.report("NPU902", node, message, tier=Tier.MANUAL)

    def _wrapper_flag(self, call: cst.Call, flag: cst.Arg) -> None:
        """``load_model(path, use_flash_attention_2=True)``: the project's own function or class (in a
        file on transformers) that may hand the keyword to ``from_pretrained`` in its ``**kwargs``, or
        read it itself (VL-RLHF turns it off for a model without FlashAttention-2): a manual item where
        a value it takes in this file is ``True``, nothing rewritten. A class field's default is
        reported where the field is declared (:meth:`_field_flag`), not again where it is passed on."""
        if in_npu_branch(self.ctx, call):
            return
        own = self._own_flash_models(call)
        if own and not self._packs():
            self._own_flash_flag(call, flag, own)
        elif self._switched_on(flag.value):
            self._kept_flag(flag, f"`{self.FLAG}=True` passed to `{code_of(call.func)}` (the project's own code)")

    def _own_flash_models(self, call: cst.Call) -> list[str]:
        """The project's model classes ``X.from_pretrained`` may load (``X`` or what the file assigns to
        it) that have FlashAttention-2 code of their own (project fact ``own_flash_classes``), sorted."""
        if not isinstance(call.func, cst.Attribute) or call.func.attr.value != "from_pretrained":
            return []
        return sorted(set(self._class_names(call.func.value)) & set(self.options.project.own_flash_classes))

    def _own_flash_flag(self, call: cst.Call, flag: cst.Arg, own: list[str]) -> None:
        """NPU902 (manual) for ``use_flash_attention_2`` loading the project's own FlashAttention-2 classes
        (yarn's copied Llama and Mistral): their flash code imports flash-attn itself, so no transformers
        release runs it on an NPU host, and SDPA only where the class supports it. Not where every value
        the flag takes in this file is off."""
        found = sources(self.ctx, flag.value)
        if found and all(literal(source) in (False, None) for source in found):
            return
        fa2_only = sorted(set(own) & set(self.options.project.fa2_only_classes))
        not_sdpa = f" (not {', '.join(fa2_only)}: no SDPA support)" if fa2_only else ""
        message = (
            f"`{self.FLAG}` passed to `{code_of(call.func)}`, which may load the project's model classes "
            f"{', '.join(own)}: their FlashAttention-2 code imports flash-attn itself, so it cannot run on an NPU "
            f"host whatever the transformers release; set it False for them (their eager attention), or pass "
            f'`attn_implementation="sdpa"` for the classes that support SDPA{not_sdpa}'
        )
        self.report("NPU902", flag, message, tier=Tier.MANUAL)

    def _switched_on(self, value: cst.BaseExpression) -> bool:
        """Whether ``value`` takes ``True`` in this file, other than as a ``use_flash_attention_2``
        class field's default (reported where it is declared)."""
        return any(
            literal(source) is True and not self._is_flag_field(statement_of(self.ctx, source))
            for source in sources(self.ctx, value)
        )

    def _is_flag_field(self, node: cst.CSTNode | None) -> bool:
        """``node`` (an annotated assignment or its statement) declares a class field named
        ``use_flash_attention_2`` with a default: ``use_flash_attention_2: bool = True``."""
        if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1:
            node = node.body[0]
        if not isinstance(node, cst.AnnAssign) or node.value is None:
            return False
        if not isinstance(node.target, cst.Name) or node.target.value != self.FLAG:
            return False
        ancestors = TreeIndex.of(self.ctx).ancestors(statement_of(self.ctx, node))
        return bool(ancestors) and isinstance(ancestors[0], cst.ClassDef)

    def _field_flag(self, node: cst.AnnAssign) -> None:
        """``use_flash_attention_2: bool = True`` (``field(default=True)``), a field of a class in a file
        on transformers: VL-RLHF's ``TrainingArguments`` subclass, which its code passes on as
        ``from_pretrained(use_flash_attention_2=args.use_flash_attention_2)`` (a command-line flag where
        ``HfArgumentParser`` parses the class). A manual item, the default kept: the project's code may
        read the flag itself; a default ``False`` is not reported."""
        if literal(field_default(node.value)) is not True or in_npu_branch(self.ctx, node):
            return
        self._kept_flag(node, f"`{self.FLAG}` defaults to True")

    def _kept_flag(self, node: cst.CSTNode, what: str) -> None:
        """NPU902 (manual) for a ``use_flash_attention_2`` left as written (``what`` it is), or NPU903
        where the file packs sequences."""
        if self._packs():
            self.report("NPU903", node, self._packing_message())
            return
        advice = flash_flag_off_advice(
            self.options, "set it False where it reaches transformers", 'pass `attn_implementation="{value}"` there'
        )
        message = (
            f"{what}: where it reaches transformers' `from_pretrained`, it raises ImportError on an NPU host "
            f"before transformers {FA2_ON_NPU} ({pin_text(self.options)}), flash-attn being CUDA-only; the "
            f"project's code may read the flag itself, so it is not rewritten: {advice}"
        )
        self.report("NPU902", node, message, tier=Tier.MANUAL)

    def _attn_value(self, sink: cst.CSTNode, value: cst.BaseExpression) -> str | None:
        """Report the ``"flash_attention_2"`` literals ``value`` can take (each once); the value any of
        them is rewritten to, None where none is."""
        if in_npu_branch(self.ctx, sink):
            return None
        replaced = None
        for source in string_sources(self.ctx, value, FA2):
            if source in self._done or in_npu_branch(self.ctx, source) or self._flash_only(source):
                continue
            self._done.add(source)
            statement = statement_of(self.ctx, source)
            if (hook := self._replaced_forward()) is not None:
                message = self._forward_message(hook, f'`attn_implementation="{FA2}"`')
                self.report_in(statement, "NPU901", source, message, tier=Tier.MANUAL)
                continue
            if self._packs():
                self.report_in(statement, "NPU903", source, self._packing_message())
                continue
            loaders = [sink, *self._config_loaders(sink)]
            value, why = self._replacement(any(_remote_code(c) or self._own_model_class(c) for c in loaders))
            if (model := self._fa2_only_model(sink)) is not None:
                value, why = (
                    "eager",
                    (
                        f"not sdpa: the project's model class `{model}` supports FlashAttention-2 but declares no SDPA "
                        "support, and transformers raises for sdpa there"
                    ),
                )
            if self._refuses_sdpa():
                value, why = "eager", "this file sends `sdpa` to flash_attention_2: a part of its model has no SDPA"
            message = (
                f'`attn_implementation="{FA2}"` raises on an NPU host before transformers {FA2_ON_NPU} '
                f'({pin_text(self.options)}): "{value}" ({why}); transformers >= {FA2_ON_NPU} keeps "{FA2}" on '
                "NPU (npu_fusion_attention)"
            )
            self.report_in(
                statement, "NPU901", source, message, fix=lambda node: _replaced(node, value), needs_torch_npu=False
            )
            replaced = value
        return self._other_flash(value) or replaced

    def _other_flash(self, value: cst.BaseExpression) -> str | None:
        """``"flash_attention_3"`` (FlashAttention-3, Hopper GPUs: transformers needs ``flash_attn_interface``)
        and a Hub kernel of FlashAttention (``"kernels-community/flash-attn3"``, trl's async GRPO trainer, round
        53; CUDA builds): no transformers release runs them on an NPU host; the value FA2 gets here instead
        (review for a Hub kernel: what the ``kernels`` library loads there is not seen). The value, or None."""
        replaced = None
        for source in sources(self.ctx, value):
            text = string_value(source) if isinstance(source, cst.SimpleString) else None
            if text is None or (text != FA3 and not HUB_FLASH.match(text)) or source in self._done:
                continue
            if in_npu_branch(self.ctx, source):
                continue
            self._done.add(source)
            new, why = self._replacement()
            what = (
                "FlashAttention-3 (Hopper GPUs; transformers imports `flash_attn_interface`)"
                if text == FA3
                else ("a Hub kernel of FlashAttention built for CUDA GPUs (the `kernels` library)")
            )
            message = f'`attn_implementation="{text}"` asks for {what}, which no NPU host has: "{new}" ({why})'
            tier = Tier.REVIEW if text != FA3 else None
            self.report_in(
                statement_of(self.ctx, source),
                "NPU901",
                source,
                message,
                fix=lambda node, new=new: node.with_changes(value=f"{node.value[0]}{new}{node.value[-1]}"),
                tier=tier,
                needs_torch_npu=False,
            )
            replaced = new
        return replaced

    def _flex_attention(self, call: cst.Call) -> None:
        """NPU901 (review) at ``attn_implementation="flex_attention"`` given to transformers: FlexAttention
        raises for an NPU tensor in every release (torch's ``_validate_device``; transformers'
        ``is_torch_flex_attn_available`` is False with torch_npu: docs/reference/run_configs.md §7), so
        the load fails there; "sdpa" is the portable choice, with its own masking (a review item)."""
        arg = keyword(call, "attn_implementation")
        if arg is None or string_value(arg.value) != FLEX or not is_hf_call(self.resolver, call):
            return
        if in_npu_branch(self.ctx, call):
            return
        self.report(
            "NPU901",
            arg.value,
            f'`attn_implementation="{FLEX}"` fails on an NPU host: FlexAttention runs on CUDA, CPU, XPU, HPU and MPS '
            'tensors only, and transformers does not offer it with torch_npu; "sdpa" runs there (check the masks '
            "the model builds for FlexAttention: block masks for packed or document-masked batches)",
            tier=Tier.REVIEW,
            needs_torch_npu=False,
        )

    def _compared_reads(self, target: cst.Attribute, value: str) -> None:
        """NPU901 (review) where the file compares the attribute it sets with ``"flash_attention_2"``
        (LLMBox's ``if config._attn_implementation == "flash_attention_2" or args.bf16:`` choosing
        bfloat16 loading, round 38): the rewritten value no longer passes that test."""
        written = code_of(target)
        for comparison in iter_nodes(self.ctx.module, cst.Comparison):
            operands = [comparison.left, *(c.comparator for c in comparison.comparisons)]
            if comparison in self._done or not any(code_of(o) == written for o in operands):
                continue
            if any(string_value(o) == FA2 for o in operands):
                self._done.add(comparison)
                self.report_in(
                    statement_of(self.ctx, comparison),
                    "NPU901",
                    comparison,
                    f'`{written}` is compared with "{FA2}" here, but cuda2npu sets it to "{value}" where it assigns '
                    f'"{FA2}": this test no longer holds there; decide what it means on the NPU (compare with '
                    f'"{value}" too, or test the flag that chose the attention)',
                    tier=Tier.REVIEW,
                )

    def _use_flash_attention_2(self, call: cst.Call, flag: cst.Arg) -> None:
        if (hook := self._replaced_forward()) is not None:
            self.report("NPU902", flag, self._forward_message(hook, "`use_flash_attention_2=True`"), tier=Tier.MANUAL)
            return
        if self._packs():
            self.report("NPU903", flag, self._packing_message())
            return
        value, why = self._replacement()
        if guaranteed(self.options, ATTN_IMPLEMENTATION) and keyword(call, "attn_implementation") is None:
            message = (
                f"`use_flash_attention_2=True` raises on an NPU host before transformers {FA2_ON_NPU}: "
                f'`attn_implementation="{value}"` ({why}); transformers >= {FA2_ON_NPU} keeps flash attention on NPU'
            )
            self.report(
                "NPU902", flag, message, fix=lambda arg: _implementation_keyword(arg, value), needs_torch_npu=False
            )
            return
        message = (
            f"`use_flash_attention_2=True` raises on an NPU host before transformers {FA2_ON_NPU} "
            f'({pin_text(self.options)}): pass `attn_implementation="{value}"` (transformers >= '
            f"{ATTN_IMPLEMENTATION}) or remove it, or require transformers >= {FA2_ON_NPU}"
        )
        self.report("NPU902", flag, message, tier=Tier.MANUAL)

    def _replacement(self, remote_code: bool = False) -> tuple[str, str]:
        """``fa2_replacement`` for this file: eager where it names a Gemma-2 model."""
        if self._softcapped is None:
            strings = (string_value(s) or "" for s in iter_nodes(self.ctx.module, cst.SimpleString))
            self._softcapped = names_softcapped_model(strings)
        return fa2_replacement(self.options, remote_code, self._softcapped)

    def _own_model_class(self, sink: cst.CSTNode) -> bool:
        """``X.from_pretrained(...)`` of a class the project defines, not transformers' (OmniCorpus'
        ``LlavaInternLM2Config``, whose model looks the value up in its own table of eager and
        flash_attention_2 classes): like a model shipped with its checkpoint, it need not support SDPA."""
        return (
            isinstance(sink, cst.Call)
            and isinstance(sink.func, cst.Attribute)
            and sink.func.attr.value == "from_pretrained"
            and not is_hf_call(self.resolver, sink)
            and self.resolver.qualified_name(sink.func) is not None
        )

    def _config_loaders(self, sink: cst.CSTNode) -> list[cst.Call]:
        """For ``config.llm_config._attn_implementation = ...``: the ``from_pretrained`` calls of the same
        function given that config (``config=config``: Mini-Monkey's ``InternVLChatModel.from_pretrained(...,
        config=config)``, ``model_type.from_pretrained(..., config=llm_config, trust_remote_code=True)``,
        round 52), which decide whether the model's own code must support SDPA."""
        if not isinstance(sink, cst.Assign) or not isinstance(sink.targets[0].target, cst.Attribute):
            return []
        root = (dotted_name(sink.targets[0].target.value) or "").partition(".")[0]
        scope = TreeIndex.of(self.ctx).function.get(statement_of(self.ctx, sink)) or self.ctx.module
        return [
            call
            for call in iter_nodes(scope, cst.Call)
            if isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "from_pretrained"
            and (config := keyword(call, "config")) is not None
            and root
            and (dotted_name(config.value) or "").partition(".")[0] == root
        ]

    def _fa2_only_model(self, sink: cst.CSTNode) -> str | None:
        """The project's model class (project fact ``fa2_only_classes``) the value is loaded with: the
        sink's own ``X.from_pretrained(...)``, else (a default, a field) the one class every
        ``from_pretrained`` call of the file passing ``attn_implementation=`` loads (Mantis'
        ``train_fuyu.py``: ``MFuyuForCausalLM.from_pretrained(..., attn_implementation=model_args.attn_implementation)``)."""
        fa2_only = self.options.project.fa2_only_classes
        if not fa2_only:
            return None
        calls = [sink] if isinstance(sink, cst.Call) else iter_nodes(self.ctx.module, cst.Call)
        loaded = {
            name
            for call in calls
            if isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "from_pretrained"
            and (call is sink or keyword(call, "attn_implementation") or any(a.star == "**" for a in call.args))
            for name in self._class_names(call.func.value)
        }
        return sorted(loaded)[0] if loaded and loaded <= set(fa2_only) else None

    def _class_names(self, receiver: cst.BaseExpression) -> list[str]:
        """The last names of the classes ``receiver`` may be: itself, or what the file assigns to it
        (Mantis' ``MODEL_CLASS = Idefics2ForConditionalGeneration``); [""] where that cannot be told."""
        if isinstance(receiver, cst.Attribute):
            return [receiver.attr.value]
        if not isinstance(receiver, cst.Name):
            return [""]
        values = assigned_values(self.ctx.module, receiver.value)
        if not values:
            return [receiver.value]
        return [value.value if isinstance(value, cst.Name) else "" for value in values]

    def _refuses_sdpa(self) -> bool:
        """The file answers ``== "sdpa"`` with ``"flash_attention_2"`` (Aria's config: "SDPA is not
        supported for vit, using flash_attention_2 instead"): SDPA would fail there, eager runs."""
        if self._no_sdpa is None:
            self._no_sdpa = any(
                any(string_value(c.comparator) == "sdpa" for c in node.test.comparisons)
                and any(string_value(s) == FA2 for s in iter_nodes(node.body, cst.SimpleString))
                for node in iter_nodes(self.ctx.module, cst.If)
                if isinstance(node.test, cst.Comparison)
            )
        return self._no_sdpa

    def _packs(self) -> bool:
        """The file packs sequences without padding: ``DataCollatorWithFlattening``, or a model called
        with packed ``position_ids`` and ``attention_mask=None`` (verl's remove-padding path); or the
        project patches transformers' flash-attention internals (``_get_unpad_data``: VILA's packing); or
        its names say it packs samples (``packing_samples``: :data:`PACKING_NAMES`)."""
        if self._packing is None:
            text = self.ctx.source
            self._packing = bool(self._packing_hooks() or PACKING_NAMES.search(text)) or any(
                module_qualified(self.resolver.module_scope, node.func) in PACKING or _packed_call(node)
                for node in iter_nodes(self.ctx.module, cst.Call)
            )
        return self._packing

    def _packing_hooks(self) -> list[str]:
        """The project's patches of transformers' flash-attention internals that tell packed sequences
        apart (``_get_unpad_data``, ...): its hooks but the replaced FlashAttention2 forwards."""
        return [hook for hook in self.options.file.flash_attention_hooks if not REPLACED_FORWARD.search(hook)]

    def _replaced_forward(self) -> str | None:
        """The project's replacement of a FlashAttention2 class's forward (``file: target``), if any."""
        return next((h for h in self.options.file.flash_attention_hooks if REPLACED_FORWARD.search(h)), None)

    def _forward_message(self, hook: str, what: str) -> str:
        return (
            f"{what} where the project replaces a FlashAttention2 class's forward (`{hook}`): its attention runs "
            f"only under flash_attention_2, so another implementation would skip it, and transformers "
            f"{FA2_ON_NPU}, which runs flash_attention_2 on an NPU, has no such class; kept: port the replacement "
            "(its flash-attn calls, `_flash_attention_forward`) to torch_npu.npu_fusion_attention, with the "
            "transformers release it was written for"
        )

    def _packing_message(self) -> str:
        hooks = self._packing_hooks()
        if hooks:
            moved = (
                f"; transformers {FA2_ON_NPU} calls `_get_unpad_data` from `transformers.modeling_flash_attention_utils`, "
                "not from the model modules the project patches: move the patch there with the pin, or it stops "
                "applying without a word"
                if "_get_unpad_data" in hooks[0] and "modeling_flash_attention_utils" not in hooks[0]
                else ""
            )
            return (
                f'"{FA2}" where the project patches transformers\' flash-attention internals (`{hooks[0]}`) to '
                f"tell packed sequences apart raises on an NPU host before transformers {FA2_ON_NPU} "
                f"({pin_text(self.options)}), and SDPA never calls those patches (packed sequences would attend "
                f"to each other): require transformers >= {FA2_ON_NPU}{moved}, or train without packing (and "
                f'without "{FA2}")'
            )
        return (
            f'"{FA2}" with padding-free packing (DataCollatorWithFlattening, position_ids with '
            f"attention_mask=None, or samples packed into one row) raises on an NPU host before "
            f"transformers {FA2_ON_NPU} ({pin_text(self.options)}), and SDPA there ignores the packed "
            f"position_ids and masks only zeros (packed sequences would attend to each other): require "
            f"transformers >= {FA2_ON_NPU} or pad the batches instead"
        )


# a project fact flash_attention_hooks entry of this kind: a FlashAttention2 class's forward, or its
# `_flash_attention_forward` method (LongVA's sequence-parallel ring/Ulysses attention, round 39), not
# transformers' module-level helper of that name that packing patches replace
REPLACED_FORWARD = re.compile(r"FlashAttention2\.(?:forward|_flash_attention_forward)$")


ATTN_OPTIONS = {"--attn-implementation", "--attn_implementation"}


def depends_on_hf(options) -> bool:
    """The project's dependency files name transformers (its pins: ``ProjectFacts.pins``)."""
    return pinned(options.project.pins, "transformers") is not None


def _attn_option_default(call: cst.Call) -> cst.BaseExpression | None:
    """The default of ``parser.add_argument("--attn-implementation", default=...)`` (or
    ``--attn_implementation``): an option named for transformers' attention implementation, also where
    the file only hands it on to another program (LongRoPE's ``evolution/search.py`` runs
    ``evaluate.py --attn-implementation ...``, round 34)."""
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_argument"):
        return None
    names = {string_value(arg.value) for arg in call.args if arg.keyword is None}
    default = keyword(call, "default")
    return default.value if default is not None and names & ATTN_OPTIONS else None


def _named_attn(target: cst.BaseExpression) -> bool:
    return isinstance(target, cst.Name) and target.value in ("attn_implementation", "attention_implementation")


def _remote_code(call: cst.CSTNode) -> bool:
    """A call loading the model's own code with it: ``from_pretrained(..., trust_remote_code=True)``."""
    flag = keyword(call, "trust_remote_code") if isinstance(call, cst.Call) else None
    return flag is not None and literal(flag.value) is True


def _attn_index(function: cst.FunctionDef, skip: int) -> int | None:
    """The index, among a call's positional arguments, of ``function``'s positional parameter named
    like ``attn_implementation`` (``skip``: the leading ``self``), None where it has none."""
    positional = [*function.params.posonly_params, *function.params.params][skip:]
    return next((index for index, param in enumerate(positional) if _named_attn(param.name)), None)


def _imports_flash(node: cst.Import | cst.ImportFrom) -> bool:
    return import_root(node) in ("flash_attn", "flash_attn_interface")


def _packed_call(call: cst.Call) -> bool:
    """``model(input_ids=..., position_ids=pos, attention_mask=None)``."""
    mask = keyword(call, "attention_mask")
    packed = mask is not None and isinstance(mask.value, cst.Name) and mask.value.value == "None"
    return packed and keyword(call, "position_ids") is not None


def _replaced(literal_node: cst.SimpleString, value: str) -> cst.SimpleString:
    return literal_node.with_changes(value=literal_node.value.replace(FA2, value))


def _implementation_keyword(arg: cst.Arg, value: str) -> cst.Arg:
    replacement = keyword_arg("attn_implementation", f'"{value}"')
    return arg.with_changes(keyword=replacement.keyword, value=replacement.value)
