"""What NPU103 must know about a torch.cuda call before renaming it: whether torch_npu's callable
takes its arguments (``rules/tables/torch_npu_signatures.toml``), whether its value switches on a
CUDA-only feature (``[feature_switches]`` of ``rules/tables/torch_cuda_api.toml``), another
library's CUDA path or a CUDA value no rule rewrites, and which compute-capability tests ask for
bfloat16 (``torch.npu.is_bf16_supported()`` answers them, docs/reference/torch_npu.md §4.2, §4.4)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import libcst as cst

from cuda2npu.analysis.cuda_gates import cuda_branch
from cuda2npu.core.catalogue import table
from cuda2npu.core.feature_words import name_tokens
from cuda2npu.core.literals import NOT_LITERAL, literal, string_value
from cuda2npu.core.names import dotted_name, module_qualified
from cuda2npu.core.nodes import code_of
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes
from cuda2npu.families.device.device_expressions import (
    AMBIGUOUS_KEYWORDS,
    DEVICE_KEYWORDS,
    DEVICE_NAME,
    device_getter,
    device_variables,
    looks_like_device,
)

GPU_WORDS = {"gpu", "gpus", "cuda"}  # a keyword so named switches a library's CUDA path (`use_gpu_initialization=`)
NAMESPACES = {"argparse.Namespace", "types.SimpleNamespace"}  # keywords held for the call they are passed to
# libraries that choose the NPU themselves: a GPU keyword of theirs follows the rewritten test
NPU_AWARE_LIBRARIES = {"torch", "torch_npu", "transformers", "accelerate", "deepspeed", "diffusers", "peft", "trl"}
CHOICE_VALUES = {"cuda", "gpu"}
CAPABILITY = "torch.cuda.get_device_capability"


@dataclass
class CallCheck:
    """How a torch.cuda call's arguments fit torch_npu's callable."""

    renames: dict[str, str] = field(default_factory=dict)  # keyword → torch_npu's name for it
    drops: list[str] = field(default_factory=list)  # keywords passed with torch.cuda's default
    blockers: list[str] = field(default_factory=list)  # why the call cannot be rewritten


def signature(npu_name: str) -> dict | None:
    """The torch_npu signature entry of ``torch.npu.<npu_name>``, if the table has one
    (``memory.memory_allocated`` is ``memory_allocated``: torch_npu/npu re-exports memory.py, random.py
    and streams.py)."""
    entries = table("torch_npu_signatures")
    module, _, name = npu_name.rpartition(".")
    return entries.get(npu_name) or (entries.get(name) if module in ("memory", "random", "streams") else None)


def check_call(call: cst.Call, npu_name: str) -> CallCheck:
    """Compare the arguments of a torch.cuda call with the torch_npu callable it becomes."""
    result = CallCheck()
    entry = signature(npu_name)
    if entry is None:
        return result
    params = entry["params"]
    renamed = entry.get("renamed_keywords", {})
    cuda_only = entry.get("cuda_only", {})
    where = f"torch.npu.{npu_name} ({entry['source']}) takes other arguments"
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    limit = entry.get("max_positional", len(params))
    if len(positional) > limit and not entry.get("var_positional"):
        result.blockers.append(f"{len(positional)} positional arguments, it takes {limit} in the same meaning")
    passed = dict(zip(params, positional))  # torch_npu parameter → value
    missing = []
    for arg in call.args:
        if arg.star:
            if _star_may_differ(arg.star, entry):
                result.blockers.append(f"`{arg.star}` arguments hide what it would receive")
            continue
        if arg.keyword is None:
            continue
        name = arg.keyword.value
        if "cuda_params" in entry and name not in entry["cuda_params"]:
            result.blockers.append(f"`{name}=` is no parameter of the torch.cuda callable (it formats the message)")
        elif name in renamed:
            result.renames[name] = renamed[name]
            passed[renamed[name]] = arg.value
        elif name in cuda_only:
            value = literal(arg.value)
            if value is not NOT_LITERAL and value == ast.literal_eval(cuda_only[name]):
                result.drops.append(name)
            else:
                missing.append(name)
        elif name in params or entry.get("var_keyword"):
            passed[name] = arg.value
        else:
            missing.append(name)
    if missing:
        result.blockers.append(f"no {', '.join(f'`{m}=`' for m in missing)}")
    for name, allowed in entry.get("values", {}).items():
        if name in passed and literal(passed[name]) not in [ast.literal_eval(v) for v in allowed]:
            result.blockers.append(f"`{name}` accepts only {', '.join(allowed)}")
    if result.blockers:
        result.blockers = [f"{where}: {'; '.join(result.blockers + ([entry['note']] if 'note' in entry else []))}"]
    return result


def _star_may_differ(star: str, entry: dict) -> bool:
    """Whether ``*args``/``**kwargs`` may carry what torch_npu's callable takes differently: keywords
    it lacks or spells differently, or positions that mean another parameter."""
    if star == "**":
        return bool(entry.get("cuda_only") or entry.get("renamed_keywords") or entry.get("cuda_params"))
    return "max_positional" in entry or bool(entry.get("cuda_only"))


def adapt_keywords(call: cst.Call, check: CallCheck) -> cst.Call:
    """``call`` with renamed keywords and dropped default-valued keywords (the last comma fixed)."""
    args = []
    for arg in call.args:
        name = arg.keyword.value if arg.keyword is not None else None
        if name in check.drops:
            continue
        if name in check.renames:
            arg = arg.with_changes(keyword=cst.Name(check.renames[name]))
        args.append(arg)
    if args and len(args) < len(call.args):
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)


def library_gpu_switch(ctx, call: cst.Call, keyword: str) -> str | None:
    """Where ``call`` hands a ``keyword`` naming gpu/cuda to another library, directly or through an
    ``argparse.Namespace(...)`` passed to one (SwissArmyTransformer's ``AutoModel.from_pretrained(args=
    Namespace(use_gpu_initialization=...))``, which then calls ``torch.cuda.current_device()``): a
    switch of that library's CUDA path. None for a library that picks the NPU itself
    (``NPU_AWARE_LIBRARIES``), the file's own functions and relative imports (their CUDA code is migrated)."""
    if not GPU_WORDS & set(name_tokens(keyword)):
        return None
    qualified = ctx.resolver.qualified_name(call.func)
    if qualified in NAMESPACES or dotted_name(call.func) == "dict":
        outer = TreeIndex.of(ctx).call_of(call)
        qualified = ctx.resolver.qualified_name(outer.func) if outer is not None else None
    if not qualified or qualified.split(".")[0] in NPU_AWARE_LIBRARIES | set(ctx.options.file.local_modules):
        return None
    return f"`{keyword}=` read by `{qualified}`"


def library_flag_use(ctx, scope: cst.CSTNode, name: str) -> str | None:
    """Where ``scope`` passes the flag ``name`` (``use_cuda``, ``args.use_cuda``) as a gpu/cuda keyword to another
    library (:func:`library_gpu_switch`: pytorch-grad-cam's ``GradCAM(..., use_cuda=args.use_cuda)``, which calls
    ``model.cuda()`` before 1.5: poolformer, mmpretrain, rounds 61 and 64), else None."""
    for call in iter_nodes(scope, cst.Call):
        for arg in call.args:
            value = arg.value
            named = (isinstance(value, cst.Name) and value.value == name) or (
                isinstance(value, cst.Attribute) and value.attr.value == name
            )
            if named and arg.keyword is not None and (where := library_gpu_switch(ctx, call, arg.keyword.value)):
                return where
    return None


def gpu_flag_choice(node: cst.If) -> str | None:
    """``if torch.cuda.is_available(): t5.load_model(..., use_gpu=True) else: t5.load_model(...,
    use_gpu=False)`` (simplet5): the same method call in both branches, with a gpu/cuda keyword True on
    the CUDA side and False on the other. The library runs its own CUDA check behind the flag (simplet5
    raises without CUDA), so the test stays CUDA's. Where it is found, else None."""
    if node.orelse is None or not isinstance(node.orelse, cst.Else):
        return None
    off = {
        (code_of(call.func), keyword)
        for call in iter_nodes(node.orelse.body, cst.Call)
        for keyword, value in _gpu_flags(call)
        if value is False
    }
    for call in iter_nodes(node.body, cst.Call):
        if not isinstance(call.func, cst.Attribute):
            continue  # a method of a library's object (the file's own functions take plain names)
        for keyword, value in _gpu_flags(call):
            if value is True and (code_of(call.func), keyword) in off:
                return f"`{keyword}=True` of `{code_of(call.func)}` in its branch, `False` in the other"
    return None


def _gpu_flags(call: cst.Call) -> list[tuple[str, object]]:
    """(keyword, literal value) of the gpu/cuda-worded keywords of ``call`` (``use_gpu=True``)."""
    return [
        (arg.keyword.value, literal(arg.value))
        for arg in call.args
        if arg.keyword is not None and GPU_WORDS & set(name_tokens(arg.keyword.value))
    ]


def kept_cuda_value(ctx, blocks: list[cst.CSTNode]) -> str | None:
    """The first ``"cuda"``/``"gpu"`` value ``blocks`` set or pass where no rule rewrites it (the
    positions device_strings leaves as NPU109, and any ``"gpu"``): assigned to a name that is no device
    (``accelerator = "cuda"``, Lightning's accelerator name), passed as a keyword that is none
    (``Trainer(accelerator="gpu")``), returned, or a ``"gpu"`` chosen by a conditional expression."""
    parents = TreeIndex.of(ctx).parents
    for block in blocks:
        for string in iter_nodes(block, cst.SimpleString):
            value = (string_value(string) or "").lower()
            if value not in CHOICE_VALUES:
                continue
            gpu, parent = value == "gpu", parents.get(string)
            if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is string:
                targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
                if gpu or not any(_device_target(ctx, t) for t in targets):
                    return f"`{code_of(targets[0])} = {code_of(string)}`"
            elif isinstance(parent, cst.Arg) and parent.keyword is not None:
                if gpu or not _device_keyword(ctx, parent.keyword.value):
                    return f"`{parent.keyword.value}={code_of(string)}`"
            elif (isinstance(parent, cst.Return) and (gpu or not device_getter(ctx, parent))) or (
                gpu and isinstance(parent, cst.IfExp) and parent.body is string
            ):
                return f"`{code_of(parent).strip()}`" if isinstance(parent, cst.Return) else f"`{code_of(string)}`"
    return None


def _device_target(ctx, target: cst.BaseExpression) -> bool:
    """``device``, ``self.dev``, or a name the file passes in a device position (device_strings rewrites
    a "cuda" assigned to it)."""
    return looks_like_device(target) or (isinstance(target, cst.Name) and target.value in device_variables(ctx))


def _device_keyword(ctx, keyword: str) -> bool:
    """A keyword whose "cuda" device_strings rewrites (``device=``, ``map_location=``, ``ema_device=``, a
    configuration key the project reads as a device), not one it leaves as NPU109 (``accelerator=``)."""
    if keyword in AMBIGUOUS_KEYWORDS:
        return False
    return (
        keyword in DEVICE_KEYWORDS
        or bool(DEVICE_NAME.search(keyword))
        or ("device", keyword) in ctx.options.project.config_keys
    )


def bf16_capability_test(ctx, node: cst.If | cst.IfExp | cst.Assign) -> dict[cst.Comparison, cst.Call]:
    """The comparisons in ``node``'s test that ask for CUDA compute capability 8 (Ampere, the first with
    bfloat16: ``torch.cuda.get_device_capability()[0] >= 8``, ``... >= (8, 0)``) to choose bfloat16 (its
    CUDA branch reads ``torch.bfloat16``, or an assignment names bf16: ``use_bf16 = ...``) → the
    capability call; torch.npu.is_bf16_supported() answers the same question on the NPU."""
    if isinstance(node, cst.Assign):
        chooses = any(w in code_of(t.target).lower() for t in node.targets for w in ("bf16", "bfloat16"))
        test = node.value
    else:
        chooses = any(_mentions_bf16(block) for block in cuda_branch(ctx, node))
        test = node.test
    if not chooses:
        return {}
    found = {}
    for comparison in iter_nodes(test, cst.Comparison):
        call = _asks_capability(ctx, comparison, 8)
        if call is not None:
            found[comparison] = call
    return found


def fp16_capability_test(ctx, node: cst.Assign) -> dict[cst.Comparison, cst.Call]:
    """The comparisons of a flag named for float16 (``SUPPORT_FP16 = SUPPORT_CUDA and
    torch.cuda.get_device_capability(0)[0] >= 7``: Qwen's modeling_qwen.py, copied into Qwen-VL, Qwen-Audio,
    Vary, ...; round 44) that ask for CUDA compute capability 7 (Volta, the first with float16 tensor cores)
    → the capability call; every Ascend NPU computes in float16."""
    if not any(w in code_of(t.target).lower() for t in node.targets for w in ("fp16", "float16", "half")):
        return {}
    found = {}
    for comparison in iter_nodes(node.value, cst.Comparison):
        call = _asks_capability(ctx, comparison, 7)
        if call is not None:
            found[comparison] = call
    return found


def _mentions_bf16(node: cst.CSTNode) -> bool:
    """``torch.bfloat16``, ``bfloat16`` or a ``"bf16"``/``"bfloat16"`` string in ``node``."""
    return any(
        (isinstance(n, cst.Name) and n.value == "bfloat16") or string_value(n) in ("bf16", "bfloat16")
        for n in iter_nodes(node, (cst.Name, cst.SimpleString))
    )


def _asks_capability(ctx, comparison: cst.Comparison, major: int) -> cst.Call | None:
    """The ``torch.cuda.get_device_capability(...)`` call of ``X()[0] >= 8``, ``X()[0] > 7`` or
    ``X() >= (8, 0)`` (``major`` 8; an attribute chain, which the rewrite can turn into ``torch.npu.<...>``)."""
    if len(comparison.comparisons) != 1:
        return None
    operator, right = comparison.comparisons[0].operator, comparison.comparisons[0].comparator
    left, bound = comparison.left, literal(right)
    if isinstance(left, cst.Subscript) and len(left.slice) == 1 and isinstance(left.slice[0].slice, cst.Index):
        first = literal(left.slice[0].slice.value) == 0
        asks = first and (
            (isinstance(operator, cst.GreaterThanEqual) and bound == major)
            or (isinstance(operator, cst.GreaterThan) and bound == major - 1)
        )
        call = left.value
    else:
        asks = isinstance(operator, cst.GreaterThanEqual) and bound in ((major,), (major, 0))
        call = left
    if not asks or not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
        return None
    return call if module_qualified(ctx.resolver.module_scope, call.func) == CAPABILITY else None
