"""NPU907 and NPU908: quantized loading asked of transformers whose kernels are CUDA ones.

- NPU907: bitsandbytes (``load_in_8bit=True``, ``load_in_4bit=True``, ``BitsAndBytesConfig(...)``).
  No bitsandbytes release has Ascend kernels (docs/reference/kernel_libraries.md, bitsandbytes):
  older transformers releases refuse to quantize without CUDA, later ones run bitsandbytes'
  device-agnostic pure-torch kernels (4-bit from bitsandbytes 0.47.0, 8-bit from 0.46.0), untested
  on Ascend; the Ascend backend of bitsandbytes' multi-backend-refactor branch quantizes NF4 only.
  A review item at the flag: a transformers call's keyword, or, in a file importing transformers, a
  ``{"load_in_8bit": ...}`` / ``dict(load_in_8bit=...)`` / ``kw.update(load_in_8bit=...)`` entry or
  a ``kw["load_in_8bit"] = ...`` assignment (the dicts such code passes as ``**kw``). A flag whose
  every source in the file is ``False`` or ``None`` quantizes nothing and is left, and so is a
  parameter every call in the file passes off, a flag False in its branch (``q is not None`` in the
  ``else`` of ``if q:``) and a flag given to a config, tokenizer or processor load, which builds no
  model (docs/reference/transformers.md §7); one finding per block and flag, none under ``if q:``
  where ``q`` is a parameter every call in the file passes off. A
  ``BitsAndBytesConfig(...)`` without a flag that may be on is a review item too unless the
  transformers pin predates 4.38.0: from that release every ``BitsAndBytesConfig`` selects a
  bitsandbytes quantizer, the 4-bit one unless ``load_in_8bit`` (docs/reference/transformers.md §9).
- NPU908: ``GPTQConfig(...)`` / ``AwqConfig(...)``: GPTQ and AWQ run CUDA kernels (auto-gptq,
  autoawq); only GPTQModel has Ascend kernels, for inference (§9). A review item at the config.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.hf_sources import (
    imports_hf,
    is_hf_call,
    is_plain_dict_call,
    keyword,
    loads_no_model,
    loads_through_hf,
    sources,
    subscript_key,
)
from cuda2npu.analysis.npu_aware import in_npu_branch
from cuda2npu.core.arguments import arg_value, try_bind
from cuda2npu.core.bindings import assigned_values
from cuda2npu.core.literals import NOT_LITERAL, literal, string_value
from cuda2npu.core.nodes import code_of, named_params
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes
from cuda2npu.families.transformers.releases import predates

FLAGS = ("load_in_4bit", "load_in_8bit")
CONFIG = "BitsAndBytesConfig"
# what a from_pretrained of these classes loads quantizes nothing (a config, tokenizer, processor)
ANY_CONFIG_QUANTIZES = "4.38.0"  # every BitsAndBytesConfig selects a bitsandbytes quantizer (§9)
ADVICE = {
    "load_in_4bit": (
        "no bitsandbytes release has Ascend kernels (older transformers releases refuse to quantize without CUDA; "
        "bitsandbytes >= 0.47 falls back to pure-torch kernels, untested on Ascend): load the model in bf16 without "
        "quantization, or build bitsandbytes' Ascend branch (multi-backend-refactor: NF4 only, no double "
        "quantization)"
    ),
    "load_in_8bit": (
        "no bitsandbytes build has Ascend int8 kernels (older transformers releases refuse to quantize without "
        "CUDA; bitsandbytes >= 0.46 falls back to pure-torch kernels, untested on Ascend): load the model in bf16 without quantization"
    ),
}
CONFIG_WITHOUT_FLAG = (
    "with neither `load_in_4bit` nor `load_in_8bit` on, transformers >= 4.38 still hands the model to "
    "bitsandbytes' 4-bit quantizer (older releases quantize nothing); "
) + ADVICE["load_in_4bit"]
GPTQ_AWQ = {
    "GPTQConfig": (
        "GPTQ runs through optimum with CUDA kernels: transformers raises without CUDA before 4.35, and from "
        "4.35 unless auto-gptq > 0.4.2 (slow pure-torch dequantize-and-matmul off CUDA, untested on Ascend) or "
        "gptqmodel is installed; only GPTQModel >= 7.0.0 has Ascend NPU kernels (inference, not training): "
        "load the unquantized model in bf16, or run inference with transformers >= 4.49 and GPTQModel >= 7.0.0"
    ),
    "AwqConfig": (
        "AWQ runs autoawq's CUDA kernels: transformers raises without CUDA unless the IPEX version (Intel CPU) is "
        "asked, which 4.57 also picks by itself, on the CPU, not the NPU; transformers 5 runs AWQ through gptqmodel, "
        "whose Ascend kernel is a GPTQ one: load the unquantized model in bf16, or serve the AWQ weights with "
        "lmdeploy or vllm-ascend"
    ),
}


@register
class QuantizedLoading(Rule):
    codes = ("NPU907", "NPU908")
    triggers = (r"load_in_[48]bit", CONFIG, *GPTQ_AWQ)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._reported: set[cst.CSTNode] = set()  # statements with a finding: one per statement
        self._kinds: set[tuple] = set()  # (block, kind) reported: one per block and kind (_report)

    def visit_Call(self, node: cst.Call) -> None:
        """One finding per statement: ``from_pretrained(p, load_in_4bit=True,
        quantization_config=BitsAndBytesConfig(load_in_4bit=True))`` asks one thing twice."""
        if self.ctx.statement in self._reported:
            return
        if not is_hf_call(self.resolver, node):
            if (is_plain_dict_call(self.resolver, node) or _is_update(node)) and imports_hf(self.ctx):
                self._keywords(node)
            elif loads_through_hf(self.ctx, node):
                self._keywords(node)
            return
        qualified = self.resolver.qualified_name(node.func) or ""
        if loads_no_model(qualified):
            return  # `AutoConfig.from_pretrained(p, load_in_8bit=q)`: the model load is the quantizing one
        name = qualified.rpartition(".")[2]
        if name in GPTQ_AWQ:
            if not in_npu_branch(self.ctx, node):
                self._report("NPU908", node, f"`{_shown(code_of(node), name + '(...)')}`: {GPTQ_AWQ[name]}", name)
            return
        if name != CONFIG and self._config_built_here(node):
            return  # the BitsAndBytesConfig's own finding says it: `load_in_4bit=q` beside it asks nothing more
        flag = self._keywords(node, config=name == CONFIG)
        without_flag = flag is None and name == CONFIG and not _stars(node)
        if without_flag and not predates(self.options, ANY_CONFIG_QUANTIZES) and not in_npu_branch(self.ctx, node):
            self._report("NPU907", node, f"`{_shown(code_of(node), CONFIG + '(...)')}`: {CONFIG_WITHOUT_FLAG}", CONFIG)

    def _config_built_here(self, call: cst.Call) -> bool:
        """``quantization_config=`` of ``call`` is a ``BitsAndBytesConfig(...)`` the file builds."""
        arg = keyword(call, "quantization_config")
        return arg is not None and any(
            isinstance(value, cst.Call) and (self.resolver.qualified_name(value.func) or "").endswith(f".{CONFIG}")
            for value in sources(self.ctx, arg.value)
        )

    def visit_Dict(self, node: cst.Dict) -> None:
        """``{"load_in_8bit": True}``, a dict such code passes as ``**kwargs``."""
        if self.ctx.statement in self._reported or not imports_hf(self.ctx):
            return
        for entry in node.elements:
            flag = string_value(entry.key) if isinstance(entry, cst.DictElement) else None
            if flag in FLAGS and self._flag(flag, entry.value, entry, f'"{flag}": {code_of(entry.value)}'):
                return

    def visit_Assign(self, node: cst.Assign) -> None:
        """``kwargs["load_in_8bit"] = load_8bit``."""
        if self.ctx.statement in self._reported or not imports_hf(self.ctx):
            return
        for target in node.targets:
            flag = subscript_key(target.target)
            if flag in FLAGS and self._flag(flag, node.value, node.value, code_of(node).strip()):
                return

    def _keywords(self, call: cst.Call, config: bool = False) -> cst.Arg | None:
        """NPU907 for the first ``load_in_*bit`` keyword of ``call`` that may be on (at the call when
        it builds a ``BitsAndBytesConfig``); that keyword, else None."""
        for arg in (keyword(call, flag) for flag in FLAGS):
            if arg is not None and self._flag(arg.keyword.value, arg.value, call if config else arg, config=config):
                return arg
        return None

    def _flag(self, flag: str, value: cst.BaseExpression, node: cst.CSTNode, shown: str = "", config=False) -> bool:
        """NPU907 at ``node`` for ``flag`` set to ``value``, unless every value it takes is off or
        the NPU branch holds it; whether it reported."""
        if in_npu_branch(self.ctx, node) or not self._may_be_on(value):
            return False
        shown = _shown(shown or f"{flag}={code_of(value)}", flag)
        shown = f"{CONFIG}({shown})" if config else shown
        self._report("NPU907", node, f"`{shown}` quantizes with bitsandbytes: {ADVICE[flag]}", flag)
        return True

    def _report(self, code: str, node: cst.CSTNode, message: str, kind: str) -> None:
        """One finding per statement and per block and ``kind`` (the flag, config or GPTQ/AWQ class
        named): ``kw["load_in_8bit"] = True`` above ``kw["quantization_config"] =
        BitsAndBytesConfig(load_in_8bit=True)`` asks one thing; none in a branch no call takes."""
        self._reported.add(self.ctx.statement)
        block = TreeIndex.of(self.ctx).placement.get(self.ctx.statement)
        key = (block.block if block is not None else None, kind)
        if key in self._kinds or self._in_branch_callers_skip():
            return
        self._kinds.add(key)
        self.report(code, node, message)

    def _in_branch_callers_skip(self) -> bool:
        """The statement is in the body of ``if q:`` where ``q`` is a parameter of the enclosing
        function that every call in the file passes off (``load_model(p, load_in_4bit=False)``)."""
        index = TreeIndex.of(self.ctx)
        function = index.function.get(self.ctx.statement)
        params = {p.name.value: p for p in named_params(function)} if function is not None else {}
        return any(
            isinstance(owner, cst.If)
            and role == "body"
            and isinstance(owner.test, cst.Name)
            and owner.test.value in params
            and assigned_values(function.body, owner.test.value) == []
            and self._callers_pass_off(function, params[owner.test.value])
            for owner, role in index.enclosing(self.ctx.statement)
        )

    def _may_be_on(self, value: cst.BaseExpression) -> bool:
        """Not every value the flag takes in this file is ``False`` / ``None``, nor is it False in the
        branch it sits in; a parameter of the enclosing function takes what its callers pass
        (``load_8bit: bool = False``), not only its default."""
        if self._false_in_branch(value):
            return False
        if isinstance(value, cst.Name):
            function = TreeIndex.of(self.ctx).function.get(self.ctx.statement)
            param = next((p for p in named_params(function) if p.name.value == value.value), None) if function else None
            if param is not None:
                return not self._callers_pass_off(function, param) and not self._never_set_on(param)
        if (tested := self._string_test(value)) is not None:
            return tested
        found = sources(self.ctx, value)
        return not found or any(literal(source) not in (False, None) for source in found)

    def _never_set_on(self, param: cst.Param) -> bool:
        """``param`` defaults to off (``load_in_8bit=False``) and no Python file of the project sets a flag
        of its name on (``ProjectFacts.quantization_flags_on``, read from the project's files: not known
        for a lone file): VLMEvalKit's wrappers, built through ``partial(InternVLChat, model_path=...)``
        (round 31)."""
        known = self.options.project.quantization_flags_on
        off = param.default is not None and literal(param.default) in (False, None)
        return off and known is not None and param.name.value not in known

    def _string_test(self, value: cst.BaseExpression) -> bool | None:
        """Whether ``path.endswith("4bit")`` / ``.startswith(...)`` can be true, its receiver taking only
        string literals in this file (Chinese-Llama-2-7b's ``model_path = "LinkSoul/Chinese-Llama-2-7b"``
        two lines above); None when that is not known."""
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and len(value.args) == 1):
            return None
        method, suffix = value.func.attr.value, string_value(value.args[0].value)
        if method not in ("endswith", "startswith") or suffix is None or value.args[0].keyword is not None:
            return None
        texts = [string_value(source) for source in sources(self.ctx, value.func.value)]
        if not texts or None in texts:
            return None
        return any(getattr(text, method)(suffix) for text in texts)

    def _false_in_branch(self, value: cst.BaseExpression) -> bool:
        """``q``, ``bool(q)`` or ``q is not None`` in the ``else`` of ``if q:`` (or under ``if not q:``)
        that does not assign ``q``, where ``q`` is falsy; ``q is not None`` only where no value ``q``
        takes in this file is a falsy one other than None (``0``, ``""``)."""
        tested, none_test = _truth_of(value)
        if tested is None or not any(
            isinstance(owner, cst.If) and _falsy_in(owner, role, tested)
            for owner, role in TreeIndex.of(self.ctx).enclosing(self.ctx.statement)
        ):
            return False
        if not none_test:
            return True
        found = sources(self.ctx, tested)
        return bool(found) and all(_none_or_truthy(literal(source)) for source in found)

    def _callers_pass_off(self, function: cst.FunctionDef, param: cst.Param) -> bool:
        """Every call of the plain function ``function`` in this file (one at least) passes ``param``
        ``False`` / ``None`` or leaves it to such a default (``load_model(p, load_8bit=False)``)."""
        index = TreeIndex.of(self.ctx)
        method = isinstance(index.parents.get(index.parents.get(function)), cst.ClassDef)
        if method or isinstance(function.params.star_arg, cst.Param):
            return False  # called through an object, or `*args` taking positions
        calls = index.calls_to(function.name.value)
        names = [p.name.value for p in named_params(function)]
        for call in calls:
            bound = try_bind(call, names)
            value = None if bound is None else arg_value(bound, param.name.value) or param.default
            if value is None or literal(value) not in (False, None):
                return False
        return bool(calls)


def _shown(text: str, instead: str) -> str:
    """``text`` for a message when short and on one line, else ``instead``."""
    return text if len(text) <= 60 and "\n" not in text else instead


def _truth_of(value: cst.BaseExpression) -> tuple[cst.BaseExpression | None, bool]:
    """What decides ``value``'s truth: ``q`` for ``q`` and ``bool(q)``, ``(q, True)`` for
    ``q is not None``; ``(None, False)`` for anything else."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "bool":
        return (value.args[0].value, False) if len(value.args) == 1 and not value.args[0].star else (None, False)
    if isinstance(value, cst.Comparison) and len(value.comparisons) == 1:
        target = value.comparisons[0]
        if isinstance(target.operator, cst.IsNot) and literal(target.comparator) is None:
            return value.left, True
        return None, False
    return (value, False) if isinstance(value, (cst.Name, cst.Attribute)) else (None, False)


def _falsy_in(branch: cst.If, role: str, expr: cst.BaseExpression) -> bool:
    """``expr`` is falsy throughout the ``role`` block of ``branch``: the ``else`` of ``if expr:`` or
    the body of ``if not expr:``, neither assigning ``expr``."""
    test = branch.test
    if role == "body" and isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        test, block = test.expression, branch.body
    elif role == "orelse":
        block = branch.orelse
    else:
        return False
    if code_of(test) != code_of(expr):
        return False
    if isinstance(expr, cst.Name):
        return assigned_values(block, expr.value) == []
    return not any(code_of(t.target) == code_of(expr) for node in iter_nodes(block, cst.Assign) for t in node.targets)


def _none_or_truthy(value) -> bool:
    """A literal that is None or truthy (not ``0``, ``""``, ``False``, not a non-literal)."""
    return value is None or (value is not NOT_LITERAL and bool(value))


def _stars(call: cst.Call) -> bool:
    return any(arg.star == "**" for arg in call.args)


def _is_update(call: cst.Call) -> bool:
    """``kwargs.update(load_in_8bit=...)``."""
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "update"
