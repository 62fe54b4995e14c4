"""What NPU103 must know about a torch.cuda call before renaming it: whether torch_npu's callable
takes its arguments (``rules/tables/torch_npu_signatures.toml``), whether its value switches on a
CUDA-only feature (``[feature_switches]`` of ``rules/tables/torch_cuda_api.toml``)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import libcst as cst

from cuda2npu.core.catalogue import table
from cuda2npu.core.literals import NOT_LITERAL, literal


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
