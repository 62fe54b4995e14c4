"""Run configurations outside Python: the YAML, JSON and TOML files a project's code reads.

- NPU721 ``config-cuda-device``: ``device: cuda`` / ``cuda:0`` at a key the code passes to
  ``torch.device`` / ``.to()`` / ``device=`` (a project fact: cuda2npu/filekinds/runconfig_code.py)
  becomes ``npu`` / ``npu:0``. A key named like a device (``device``, ``*_device``) that no code is
  seen to read is a review item.
- NPU722 ``config-nccl-backend``: ``backend: nccl`` likewise, read by ``init_process_group`` /
  ``backend=`` → ``hccl``; ``backend``, ``dist_backend``, ... unread: review.
- NPU723 ``deepspeed-fp16-config``, NPU724 ``deepspeed-cuda-only-option``: DeepSpeed JSON
  (cuda2npu/filekinds/runconfig_deepspeed.py).
- NPU725 ``accelerate-multi-gpu``, NPU726 ``accelerate-fp16``: accelerate's config YAML
  (``compute_environment:`` and ``distributed_type:``): ``MULTI_GPU`` → ``MULTI_NPU``,
  ``mixed_precision: fp16`` → ``bf16`` under the BF16 policy.
- NPU901 (rules/transformers.toml, the run-config side of the Python rule): ``flash_attention_2`` at
  a key the code passes to ``attn_implementation=`` (``model_args.attn_implementation`` of an
  ``HfArgumentParser`` YAML) becomes ``sdpa`` unless the transformers pin guarantees the NPU
  flash-attention path (4.51.0); with ``padding_free: true`` in the same file it is a manual NPU903
  item (SDPA before 4.51 ignores the packed ``position_ids``). A key ``attn_implementation`` no code
  is seen reading is a review item.
- NPU728 ``config-cuda-attention-kernel``, and NPU727, NPU907, NPU904 in axolotl's configs: the
  settings training frameworks read (cuda2npu/filekinds/runconfig_frameworks.py): axolotl's
  ``flash_attention`` / ``sdp_attention`` / ``s2_attention`` / ``xformers_attention: true``,
  ``optimizer``, ``load_in_8bit`` / ``load_in_4bit`` and ``tf32``, a model config's
  ``attn_impl: flash`` / ``triton`` (llm-foundry, MPT), and ``attention_backend: flex_attention`` or
  SGLang's CUDA-only attention backends anywhere.
- NPU727, NPU906, NPU904: ``TrainingArguments`` written as JSON or YAML (read by ``HfArgumentParser``'s
  file parsers; cuda2npu/filekinds/runconfig_trainer.py): ``optim: paged_adamw_32bit`` /
  ``adamw_apex_fused`` → ``adamw_torch`` (other bitsandbytes optimizers: manual), ``fp16: true`` →
  ``bf16: true`` under the bf16 policy (the key renamed, as ``fp16=True`` → ``bf16=True`` in Python),
  ``tf32: true`` → ``false``.

A review item stands for every file of the run with the same key and value (a project with 423
configs saying ``device: "cuda"`` gets one finding, at the first file, which names the others):
one marker, not 423. Edits change the scalar only (or a key: ``fp16`` → ``bf16``; the rest of the
file stays byte for byte) and are read back before they are kept: JSON and TOML with ``json`` /
``tomllib`` (exactly the edited values and keys changed), YAML with the line reader. A review or manual item gets a
``# TODO(cuda2npu): CODE`` line above its key in YAML and TOML; JSON has no comments (reported
only). A file over 1 MiB is not read (a data file, not a configuration). ``# noqa: NPU721`` on
the key's line suppresses a finding.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from cuda2npu.analysis import ds_config
from cuda2npu.core.catalogue import rule as rule_doc
from cuda2npu.core.diagnostics import FileResult, Finding, Tier
from cuda2npu.core.markers import MARKER_PREFIX, marker_text
from cuda2npu.core.noqa import line_directives
from cuda2npu.core.pins import pinned
from cuda2npu.core.text_edits import apply_edits
from cuda2npu.families.transformers.optimizer_names import optim_decision
from cuda2npu.families.transformers.quantization import ADVICE as QUANTIZATION_ADVICE
from cuda2npu.families.transformers.releases import (
    FA2_ON_NPU,
    fa2_replacement,
    guaranteed,
    names_softcapped_model,
    pin_text,
)
from cuda2npu.filekinds import runconfig_deepspeed as deepspeed
from cuda2npu.filekinds import runconfig_frameworks as frameworks
from cuda2npu.filekinds import runconfig_trainer as trainer
from cuda2npu.filekinds.depfiles import decoded_text, encoded_like
from cuda2npu.filekinds.runconfig_entries import (
    YAML_KEY,
    Entry,
    Member,
    json_members,
    mapping_at,
    physical_lines,
    toml_entries,
    yaml_entries,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MAX_BYTES = 1 << 20
PREFILTER = re.compile(
    r"cuda|nccl|MULTI_GPU|fp16|zero_quantized|\"amp\"|flash_attention_2|optim|tf32|load_in_[48]bit|"
    + frameworks.PREFILTER_WORDS
)
DEVICE_VALUE = re.compile(r"cuda(?::\d+)?")
BACKEND_KEYS = {"backend", "dist_backend", "distributed_backend", "ddp_backend", "process_group_backend"}
DEVICE, BACKEND, DS_FP16, DS_CUDA_ONLY, ACC_MULTI_GPU, ACC_FP16, OPTIM = (f"NPU72{i}" for i in range(1, 8))
TF32, FP16_TRAINING, FP16_KEY, BF16_KEY = "NPU904", "NPU906", "fp16", "bf16"
FA2, ATTENTION_KEY, PADDING_FREE = "flash_attention_2", "attn_implementation", "padding_free"
TRUE = {"true", "yes", "on"}


@dataclass
class Item:
    """A finding to be: its fix (``edits``, the scalar ``change`` (old, new) they make), or none."""

    code: str
    entry: Entry
    message: str
    tier: Tier
    edits: list[tuple[int, int, str]] | None = None
    change: tuple[str, str] | None = None
    shared: tuple | None = None  # review items: one finding per (code, key, value) in a run
    rename: str | None = None  # the entry's new key (its value stays)


@dataclass
class Plan:
    """One configuration file and what it would get."""

    display: str
    kind: str  # "yaml" | "json" | "toml"
    text: str
    data: bytes
    options: object
    items: list[Item] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    parsed: object = None  # JSON/TOML: the parsed text
    block: dict | None = None  # DeepSpeed: the configuration the fp16 block edit must give


def check_run_configs(paths: list[Path], names: dict[Path, str], options_of: Callable) -> list[FileResult]:
    """The results of the run configurations among ``paths`` (only those with findings)."""
    plans = []
    coupled = deepspeed.coupled_configs(names, options_of) if any(p.suffix == ".json" for p in paths) else {}
    for path in sorted(paths, key=lambda p: names[p]):
        plan = _plan(path, names[path], options_of(path).for_path(path), coupled)
        if plan is not None and plan.items:
            plans.append(plan)
    _share(plans)
    return [result for result in map(_result, plans) if result is not None]


def _plan(path: Path, display: str, options, coupled: dict[Path, str | None]) -> Plan | None:
    if options.file.other_platform:
        return None  # a directory of code for another accelerator or runtime (project/platform_dirs.py)
    try:
        if path.stat().st_size > MAX_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    text = decoded_text(data)
    if text is None or not PREFILTER.search(text):
        return None
    kind = {".json": "json", ".toml": "toml"}.get(path.suffix, "yaml")
    plan = Plan(display, kind, text, data, options)
    members: list[Member] = []
    if kind == "json":
        members = json_members(text)
        if members is None:
            return None
        plan.entries, plan.parsed = [m.entry for m in members], json.loads(text)
    elif kind == "toml":
        try:
            plan.parsed = tomllib.loads(text)
        except ValueError:
            return None
        plan.entries = toml_entries(text)
    else:
        plan.entries = yaml_entries(text)
    top = _top_level(plan.entries)
    if kind != "toml" and trainer.is_training_arguments(path, top, options):
        plan.items += _trainer_items(plan, path, top, members)
    elif kind == "json" and deepspeed.is_deepspeed_config(path, plan.parsed):
        plan.items += _deepspeed_items(plan, members, deepspeed.trainer_coupling(path, options, coupled))
    elif kind == "yaml":
        nested = trainer.nested_training_arguments(plan.entries, options)
        if nested is not None:  # llmtune's `training: training_args:`
            plan.items += _trainer_items(plan, path, nested, members)
        plan.items += _accelerate_items(plan.entries, options)
    plan.items += _device_items(plan.entries, options)
    plan.items += _attention_items(plan.entries, options, names_softcapped_model([text]))
    plan.items += _quantization_items(plan.entries, options)
    _add_framework_items(plan, top, path)
    noqa = line_directives(text, options.ignore_noqa) if kind != "json" else {}
    plan.items = [
        item
        for item in plan.items
        if options.code_enabled(item.code, rule_doc(item.code).opt_in)
        and not (item.entry.line in noqa and noqa[item.entry.line].matches(item.code))
    ]
    return plan


def _add_framework_items(plan: Plan, top: dict[str, Entry | None], path: Path) -> None:
    """The settings training frameworks read (cuda2npu/filekinds/runconfig_frameworks.py): axolotl's
    config keys and a model's ``attn_impl``. Their finding on an entry replaces the generic one
    (axolotl's ``load_in_4bit`` and ``tf32`` fail for sure there, whatever the project's code)."""
    flags = frameworks.kernel_choice_flags(plan.entries) + frameworks.attention_backend_flags(plan.entries)
    if plan.kind == "yaml" and _on_lightning(plan.options):
        flags += frameworks.lightning_trainer_flags(plan.entries, path.parent.name == "trainer")
    if plan.kind == "yaml" and frameworks.is_axolotl_config(top, plan.entries):
        flags += frameworks.axolotl_flags(top)
    flags = [flag for flag in flags if plan.options.code_enabled(flag.code, rule_doc(flag.code).opt_in)]
    claimed = {flag.entry.start for flag in flags}
    plan.items = [item for item in plan.items if item.entry.start not in claimed]
    for flag in flags:
        entry, shared = flag.entry, (flag.code, flag.entry.key, flag.entry.value) if flag.shared else None
        if flag.new is None:
            plan.items.append(Item(flag.code, entry, flag.message, flag.tier, shared=shared))
        else:
            change = (entry.value, flag.new)
            plan.items.append(Item(flag.code, entry, flag.message, flag.tier, [entry.replaced(flag.new)], change))


def _device_items(entries: list[Entry], options) -> list[Item]:
    items = []
    for entry in entries:
        if not entry.editable or not isinstance(entry.value, str):
            continue
        if DEVICE_VALUE.fullmatch(entry.value):
            role, code, new, named = "device", DEVICE, "npu" + entry.value[4:], _device_named(entry.key)
            consumer = "torch.device / .to() / device="
        elif entry.value == "nccl":
            role, code, new, named = "backend", BACKEND, "hccl", _snake(entry.key) in BACKEND_KEYS
            consumer = "init_process_group / backend="
        else:
            continue
        if (role, entry.key) in options.project.config_keys:
            message = f"the code passes `{entry.key}` to {consumer}: `{entry.value}` becomes `{new}`"
            items.append(Item(code, entry, message, Tier.EXACT, [entry.replaced(new)], (entry.value, new)))
        elif named:
            message = (
                f"`{entry.key}: {entry.value}` names a CUDA {'device' if role == 'device' else 'backend'}, and no code "
                f"was seen passing `{entry.key}` to {consumer}: set `{new}` if it reaches one"
            )
            items.append(Item(code, entry, message, Tier.REVIEW, shared=(code, entry.key, entry.value)))
    return items


def _attention_items(entries: list[Entry], options, softcapped: bool) -> list[Item]:
    """``flash_attention_2`` where the pinned transformers has no NPU path for it (NPU901, NPU903)."""
    if guaranteed(options, FA2_ON_NPU):
        return []
    packs = any(e.key == PADDING_FREE and (e.value is True or str(e.value).lower() in TRUE) for e in entries)
    items = []
    for entry in entries:
        if not entry.editable or entry.value != FA2:
            continue
        raises = f"`{entry.key}: {FA2}` raises on an NPU host before transformers {FA2_ON_NPU} ({pin_text(options)})"
        if ("attention", entry.key) in options.project.config_keys and packs:
            message = (
                f"{raises}, and with `{PADDING_FREE}: true` SDPA there ignores the packed position_ids (packed "
                f"sequences would attend to each other): require transformers >= {FA2_ON_NPU} or pad the batches"
            )
            items.append(Item("NPU903", entry, message, Tier.MANUAL))
        elif ("attention", entry.key) in options.project.config_keys:
            value, why = fa2_replacement(options, softcapped=softcapped)
            message = (
                f"{raises}, and the code passes `{entry.key}` to `attn_implementation=`: `{value}` ({why}); "
                f"transformers >= {FA2_ON_NPU} keeps {FA2} on NPU"
            )
            items.append(Item("NPU901", entry, message, Tier.NUMERIC, [entry.replaced(value)], (FA2, value)))
        elif entry.key == ATTENTION_KEY:
            message = (
                f"{raises}, and no code was seen passing `{entry.key}` to transformers: set `{fa2_replacement(options, softcapped=softcapped)[0]}` "
                "if it reaches one"
            )
            items.append(Item("NPU901", entry, message, Tier.REVIEW, shared=("NPU901", entry.key, entry.value)))
    return items


def _quantization_items(entries: list[Entry], options) -> list[Item]:
    """``load_in_4bit: true`` / ``load_in_8bit: true`` (NPU907, as the keyword in Python): bitsandbytes
    quantization, which has no Ascend kernels; a review item where the code passes the key to
    ``load_in_*bit=``, or the key is named so."""
    items = []
    for entry in entries:
        flag = entry.key.rpartition(".")[2]
        if flag not in QUANTIZATION_ADVICE or not (entry.value is True or str(entry.value).lower() in TRUE):
            continue
        passed = ("quantization", entry.key) in options.project.config_keys
        reaches = "the code passes it to `from_pretrained`" if passed else "if it reaches `from_pretrained`"
        message = f"`{entry.key}: {entry.value}` quantizes with bitsandbytes ({reaches}): {QUANTIZATION_ADVICE[flag]}"
        items.append(
            Item("NPU907", entry, message, Tier.REVIEW, shared=None if passed else ("NPU907", entry.key, True))
        )
    return items


def _on_lightning(options) -> bool:
    """The project's dependency files name Lightning (``lightning`` or ``pytorch-lightning``)."""
    return any(pinned(options.project.pins, name) is not None for name in ("lightning", "pytorch-lightning"))


def _top_level(entries: list[Entry]) -> dict[str, Entry | None]:
    """The top-level keys: their scalar entry, or None for a YAML mapping or list (known by its children)."""
    return mapping_at(entries)


def _trainer_items(plan: Plan, path: Path, top: dict[str, Entry | None], members: list[Member]) -> list[Item]:
    """``TrainingArguments``' ``optim``, ``fp16`` and ``tf32`` (cuda2npu/filekinds/runconfig_trainer.py)."""
    items, options = [], plan.options
    optim, fp16, tf32 = (top.get(key) for key in ("optim", "fp16", "tf32"))
    if optim is not None and optim.editable and isinstance(optim.value, str):
        decision = optim_decision(optim.value, f"`optim: {optim.value}`")
        if decision is not None and decision[0] is not None:
            new, message = decision
            items.append(Item(OPTIM, optim, message, Tier.NUMERIC, [optim.replaced(new)], (optim.value, new)))
        elif decision is not None:
            items.append(Item(OPTIM, optim, decision[1], Tier.MANUAL))
    if fp16 is not None and trainer.is_true(fp16) and options.precision == "bf16":
        problem = trainer.fp16_problem(path, top, plan.parsed, options)
        if problem is None:
            message = (
                "`fp16: true` → `bf16: true` in a TrainingArguments config (bf16 policy: BF16 is the NPU's native "
                "mixed-precision type, no loss scaling; `--precision fp16` keeps fp16)"
            )
            start, end = _key_span(plan, fp16, members)
            edit = (start, end, plan.text[start:end].replace(FP16_KEY, BF16_KEY))
            items.append(Item(FP16_TRAINING, fp16, message, Tier.NUMERIC, [edit], rename=BF16_KEY))
        elif problem:
            message = f"`fp16: true` kept in a TrainingArguments config under the bf16 policy: {problem}"
            items.append(Item(FP16_TRAINING, fp16, message, Tier.REVIEW, shared=(FP16_TRAINING, FP16_KEY, message)))
    if tf32 is not None and trainer.is_true(tf32):
        message = (
            "`tf32: true` makes TrainingArguments raise on an NPU host (TF32 needs an Ampere GPU, every transformers "
            "release): false; the NPU's analogue, HF32 (torch.npu.matmul.allow_hf32), is a different format: "
            "enable it yourself if you want it"
        )
        new = trainer.false_text(tf32)
        items.append(Item(TF32, tf32, message, Tier.NUMERIC, [tf32.replaced(new)], (tf32.value, _read_as(tf32, new))))
    return items


def _read_as(entry: Entry, text: str) -> object:
    """How the config's reader gives the literal ``text`` written at ``entry``: JSON parses it, the YAML line reader keeps the text."""
    return json.loads(text) if entry.value is True else text


def _key_span(plan: Plan, entry: Entry, members: list[Member]) -> tuple[int, int]:
    """Where the entry's key is in the text (JSON: its quoted string; YAML: the key of its line)."""
    if plan.kind == "json":
        member = next(m for m in members if m.entry is entry)
        return member.key_start, member.key_end
    line = next(line for offset, line in physical_lines(plan.text) if offset == entry.line_start)
    match = YAML_KEY.match(line)
    return entry.line_start + match.start("key"), entry.line_start + match.end("key")


def _device_named(key: str) -> bool:
    """``device``, ``eval_device``, and ``device_map`` (alpaca_eval's model configs pass it to
    ``from_pretrained`` through ``model_kwargs``), also at the end of a dotted key."""
    last = _snake(key).rpartition(".")[2]
    return last in ("device", "device_map") or last.endswith("_device")


def _snake(key: str) -> str:
    """``distributed-backend`` → ``distributed_backend``: GPT-NeoX's configs spell keys with hyphens,
    which its argument parser reads as underscores."""
    return key.replace("-", "_")


def _accelerate_items(entries: list[Entry], options) -> list[Item]:
    top = {entry.key: entry for entry in entries if len(entry.path) == 1}
    if "compute_environment" not in top or "distributed_type" not in top:
        return []
    items = []
    kind, environment = top["distributed_type"], top["compute_environment"]
    if kind.editable and kind.value == "MULTI_GPU" and environment.value != "AMAZON_SAGEMAKER":
        message = "accelerate's `distributed_type: MULTI_GPU`: on Ascend it is `MULTI_NPU` (accelerate >= 0.21.0)"
        items.append(
            Item(ACC_MULTI_GPU, kind, message, Tier.EXACT, [kind.replaced("MULTI_NPU")], ("MULTI_GPU", "MULTI_NPU"))
        )
    precision = top.get("mixed_precision")
    if precision is not None and precision.editable and precision.value == "fp16" and options.precision == "bf16":
        ds_file = next((e.value for e in entries if e.key == "deepspeed_config_file" and e.value), None)
        if ds_file is not None:  # accelerate raises when the two disagree: the JSON gets no marker, so both stay
            message = (
                f"accelerate's `mixed_precision: fp16` kept: `deepspeed_config_file: {ds_file}` sets the precision "
                "too, and accelerate raises ValueError when they differ; for BF16 (native on Atlas A2) change both "
                'together, or make the DeepSpeed file\'s fp16/bf16 `enabled` "auto" (fp16 runs on Ascend too)'
            )
            items.append(Item(ACC_FP16, precision, message, Tier.REVIEW))
            return items
        message = (
            "accelerate's `mixed_precision: fp16` → `bf16` under the BF16 policy (native on Atlas A2, no loss scaling; "
            "a numeric change: fp16 runs on Ascend too, and `--precision fp16` keeps it)"
        )
        items.append(Item(ACC_FP16, precision, message, Tier.NUMERIC, [precision.replaced("bf16")], ("fp16", "bf16")))
    return items


def _deepspeed_items(plan: Plan, members, coupling: str | None) -> list[Item]:
    """``coupling``: why an fp16 switch must wait for the HF Trainer's flags (runconfig_deepspeed.py)."""
    items, config = [], plan.parsed
    by_path = {m.entry.path: m for m in members}
    if plan.options.precision == "bf16" and ("fp16",) in by_path:
        entry, result = by_path[("fp16",)].entry, ds_config.fp16_to_bf16(config)
        if result.config is not None and coupling is not None:
            result = ds_config.Bf16Result(problem=coupling)
        if result.config is not None:
            plan.block = result.config
            message = f"DeepSpeed fp16 under the BF16 policy: {'; '.join(result.changes)}; --precision fp16 keeps fp16"
            edits = deepspeed.fp16_block_edits(plan.text, members, config)
            items.append(Item(DS_FP16, entry, message, Tier.NUMERIC, edits))
        elif result.problem is not None:
            message = f"DeepSpeed fp16 under the BF16 policy, not rewritten: {result.problem}"
            items.append(Item(DS_FP16, entry, message, Tier.REVIEW))
    for member, why in deepspeed.cuda_only_options(config, members):
        items.append(Item(DS_CUDA_ONLY, member.entry, why, Tier.MANUAL))
    return items


def _share(plans: list[Plan]) -> None:
    """Keep one review item per (code, key, value) of the run, at its first file, naming the others."""
    first: dict[tuple, tuple[Plan, Item]] = {}
    others: dict[tuple, list[str]] = {}
    for plan in plans:
        kept = []
        for item in plan.items:
            if item.shared is None or item.shared not in first:
                kept.append(item)
                if item.shared is not None:
                    first[item.shared] = (plan, item)
            elif plan.display not in others.setdefault(item.shared, []):
                others[item.shared].append(plan.display)
        plan.items = kept
    for key, files in others.items():
        item = first[key][1]
        shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
        item.message += f" (the same in {len(files)} other config file{'s' if len(files) > 1 else ''}: {shown})"


def _result(plan: Plan) -> FileResult | None:
    """The file's findings and, when something is applied or marked, its new text. The fixes are
    read back first (under ``check`` too, so that it never calls fixable what ``migrate`` drops)."""
    options = plan.options
    fixes = [i for i in plan.items if i.edits is not None and i.tier <= options.max_tier]
    if fixes and not _reads_back(plan, apply_edits(plan.text, [e for i in fixes for e in i.edits]), fixes):
        plan.items, fixes = [replace(item, edits=None) for item in plan.items], []
    findings, edits = [], []
    for item in plan.items:
        fixable = any(item is fix for fix in fixes)
        applied = fixable and options.fix
        if applied:
            edits += item.edits
        elif plan.kind != "json" and _marks(options, item.tier):
            reason = item.message if item.tier is Tier.MANUAL else f"review: {item.message}"
            edits += _marker(plan.text, item.entry.line_start, item.code, reason)
        entry, name = item.entry, rule_doc(item.code).name
        findings.append(
            Finding(plan.display, entry.line, entry.column, item.code, name, item.message, item.tier, fixable, applied)
        )
    findings.sort(key=Finding.sort_key)
    new_text = apply_edits(plan.text, edits) if edits else plan.text
    if new_text != plan.text:
        return FileResult(plan.display, "changed", findings=findings, new_source=encoded_like(new_text, plan.data))
    return FileResult(plan.display, "unchanged", findings=findings) if findings else None


def _marks(options, tier: Tier) -> bool:
    return options.fix and options.markers and (tier is Tier.MANUAL or options.review_markers)


def _marker(text: str, at: int, code: str, reason: str) -> list[tuple[int, int, str]]:
    """A marker line above the line starting at ``at``, indented like it, unless the comment lines
    just above carry one for ``code``."""
    line = text[at : text.find("\n", at) + 1 if "\n" in text[at:] else len(text)]
    above = text[:at].splitlines()
    while above and above[-1].strip().startswith("#"):
        if above[-1].strip().startswith(f"{MARKER_PREFIX}{code}"):
            return []
        above.pop()
    indent = re.match(r"[ \t]*", line).group(0)
    newline = "\r\n" if line.endswith("\r\n") else "\n"
    return [(at, at, f"{indent}{marker_text(code, reason)}{newline}")]


def _reads_back(plan: Plan, new_text: str, applied: list[Item]) -> bool:
    """The new text says what the old one did, but for the applied changes (and nothing else)."""
    changes = {item.entry.start: item.change for item in applied if item.change is not None}
    renames = {item.entry.path: item.rename for item in applied if item.rename is not None}
    if plan.kind == "yaml":
        expected = [
            (_renamed(e.path, renames), changes[e.start][1] if e.start in changes else e.value) for e in plan.entries
        ]
        return [(e.path, e.value) for e in yaml_entries(new_text)] == expected
    try:
        parsed = json.loads(new_text) if plan.kind == "json" else tomllib.loads(new_text)
    except ValueError:
        return False
    block = any(item.code == DS_FP16 for item in applied)
    found = _leaf_changes(_with_renames(plan.block if block else plan.parsed, renames), parsed)
    return found is not None and sorted(map(repr, found)) == sorted(map(repr, changes.values()))


def _renamed(path: tuple[str, ...], renames: dict[tuple[str, ...], str]) -> tuple[str, ...]:
    return path[:-1] + (renames[path],) if path in renames else path


def _with_renames(document: object, renames: dict[tuple[str, ...], str]) -> object:
    """The parsed document with the renamed top-level keys in their places."""
    if not renames or not isinstance(document, dict):
        return document
    return {_renamed((key,), renames)[0]: value for key, value in document.items()}


def _leaf_changes(old: object, new: object) -> list[tuple] | None:
    """(old, new) of every scalar that differs between two parsed documents of the same shape (None:
    the shape differs)."""
    if isinstance(old, dict) and isinstance(new, dict):
        if list(old) != list(new):
            return None
        pairs = [(old[key], new[key]) for key in old]
    elif isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return None
        pairs = list(zip(old, new))
    else:
        return [] if type(old) is type(new) and old == new else [(old, new)]
    found: list[tuple] = []
    for a, b in pairs:
        inner = _leaf_changes(a, b)
        if inner is None:
            return None
        found += inner
    return found
