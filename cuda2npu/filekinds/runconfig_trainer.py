"""``TrainingArguments`` written as a JSON or YAML run configuration (read by ``HfArgumentParser``'s
``parse_json_file`` / ``parse_yaml_file`` or TRL's ``TrlParser``): which files are such configs, and
the decisions on their ``optim``, ``fp16`` and ``tf32`` keys, the same as the Python and shell sides
make (one code per decision whatever the file kind). The facts and their sources are in
docs/reference/transformers.md §3, §4 and §8.

A file is a ``TrainingArguments`` config where the project reads them from files (the
``("trainer", "files")`` fact, runconfig_code.py) and either a parser is given its path (a literal,
matched as the end of the file's path), or its top-level keys are unmistakably TrainingArguments':
``output_dir`` and at least two of ``TRAINING_KEYS``. A YAML mapping below the top named for them
(``training_args:``) with at least two of ``TRAINING_KEYS`` is read as one too, in a project depending
on transformers (:func:`nested_training_arguments`). Nothing else is read as one.

- NPU727 ``optim``: ``paged_adamw_32bit`` (bitsandbytes' paged AdamW, 32-bit states) and
  ``adamw_apex_fused`` (apex's FusedAdam) become ``adamw_torch``: the same AdamW update, from
  ``torch.optim.AdamW``, with the same arguments from the Trainer. The other bitsandbytes optimizers
  (8-bit states, Lion, RMSprop, AdEMAMix) are manual items: no torch optimizer computes them (the
  table, shared with the Python rule and the launch flags: cuda2npu/families/transformers/optimizer_names.py).
- NPU906 ``fp16: true`` → ``bf16: true`` under the bf16 policy, as ``TrainingArguments(fp16=True)``:
  a review item under a transformers pin older than 4.34.0, where the file also sets ``bf16``, or
  where its ``deepspeed`` config shows no bf16 block that follows the flags (the Trainer fills the
  config's ``"auto"`` blocks from them; an explicit ``"enabled"`` must match them).
- NPU904 ``tf32: true`` → ``false`` (``TrainingArguments`` raises on an NPU host otherwise).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from cuda2npu.analysis.ds_config import AUTO, BF16_NAMES, FP16
from cuda2npu.core.pins import pinned
from cuda2npu.families.transformers.releases import fp16_under_pin
from cuda2npu.filekinds.launch_flags import json_config
from cuda2npu.filekinds.runconfig_code import TRAINER_FILE, TRAINER_FILES
from cuda2npu.filekinds.runconfig_entries import Entry, mapping_at

TRAINING_KEYS = {
    "per_device_train_batch_size",
    "per_device_eval_batch_size",
    "gradient_accumulation_steps",
    "learning_rate",
    "num_train_epochs",
    "max_steps",
    "logging_steps",
    "logging_dir",
    "save_steps",
    "save_strategy",
    "save_total_limit",
    "eval_steps",
    "eval_strategy",
    "evaluation_strategy",
    "lr_scheduler_type",
    "warmup_steps",
    "warmup_ratio",
    "weight_decay",
    "max_grad_norm",
    "gradient_checkpointing",
    "dataloader_num_workers",
    "remove_unused_columns",
    "report_to",
}
# a mapping that holds TrainingArguments below the top of a config (`training_args:`, `trainer_arguments:`)
ARGUMENTS_MAPPING = re.compile(r"(?:training|train|trainer)_?arg(?:ument)?s")
TRUE_WORDS = {"true", "yes", "on"}  # YAML 1.1 (yaml.safe_load) and JSON's true
FALSE_OF = {"true": "false", "True": "False", "TRUE": "FALSE", "yes": "no", "Yes": "No", "on": "off", "On": "Off"}


def is_training_arguments(path: Path, top: dict[str, Entry | None], options) -> bool:
    """Whether a config with these top-level entries is read as ``TrainingArguments``."""
    if TRAINER_FILES not in options.project.config_keys:
        return False
    named = [key for role, key in options.project.config_keys if role == TRAINER_FILE]
    if any(_names(path, literal) for literal in named):
        return True
    return "output_dir" in top and len(TRAINING_KEYS.intersection(top)) >= 2


def nested_training_arguments(entries: list[Entry], options) -> dict[str, Entry | None] | None:
    """The keys of a mapping below the top named for ``TrainingArguments`` (llmtune's ``training:
    training_args:``, which its code passes on as ``TrainingArguments(**training_args.model_dump())``,
    round 53) holding at least two of ``TRAINING_KEYS``, in a project depending on transformers: their
    scalar entries, None for a mapping or list; None where the file has no such mapping."""
    if pinned(options.project.pins, "transformers") is None:
        return None
    prefixes = {
        entry.path[: depth + 1]
        for entry in entries
        for depth in range(1, len(entry.path) - 1)
        if ARGUMENTS_MAPPING.fullmatch(entry.path[depth])
    }
    for prefix in sorted(prefixes):
        keys = mapping_at(entries, prefix)
        if len(TRAINING_KEYS.intersection(keys)) >= 2:
            return keys
    return None


def _names(path: Path, literal: str) -> bool:
    """Whether the path literal a parser is given (relative to a working directory unknown here) names ``path``."""
    parts = [part for part in PurePosixPath(literal.replace("\\", "/")).parts if part not in (".", "..", "/")]
    return bool(parts) and list(path.resolve().parts[-len(parts) :]) == parts


def is_true(entry: Entry) -> bool:
    """A JSON ``true`` or an unquoted YAML true (a scalar the YAML reader owns)."""
    return entry.value is True or (entry.editable and entry.quote == "" and str(entry.value).lower() in TRUE_WORDS)


def false_text(entry: Entry) -> str:
    """The false literal in the spelling of the true one."""
    return "false" if entry.value is True else FALSE_OF.get(str(entry.value), "false")


def fp16_problem(path: Path, top: dict[str, Entry | None], parsed: object, options) -> str | None:
    """Why ``fp16: true`` cannot become ``bf16: true`` in this config (``parsed``: the JSON document,
    None for YAML; ``top``: the top-level entries, a YAML mapping's key with a None entry); None: it can;
    "": it stays, and runs as it is (:func:`fp16_under_pin`)."""
    kept = fp16_under_pin(options)
    if kept is not None:
        return kept
    if any(name in top for name in BF16_NAMES):
        return "this config also sets bf16 (TrainingArguments raises when both are true): choose one"
    value = _deepspeed_value(top, parsed)
    if value is None:
        return None
    config = json_config(path, value) if isinstance(value, str) else value
    if not _follows_bf16_flag(config):
        shown = f"`{value}`" if isinstance(value, str) else "the inline `deepspeed` object"
        return (
            f'its DeepSpeed config ({shown}) needs a `"bf16": {{"enabled": "auto"}}` block, and an fp16 block '
            'that is "auto" or off, to follow `bf16: true`: the Trainer fills the "auto" blocks from these flags and '
            "raises ValueError on an explicit one that differs; with no bf16 block DeepSpeed trains in fp32"
        )
    return None


def _deepspeed_value(top: dict[str, Entry | None], parsed: object) -> object:
    """The ``deepspeed`` value: a path, an object (a YAML mapping is not read: an empty dict), or None."""
    if isinstance(parsed, dict):
        return parsed.get("deepspeed") or None
    if "deepspeed" not in top:
        return None
    entry = top["deepspeed"]
    if entry is None:
        return {}
    return None if str(entry.value).lower() in ("", "null", "~", "none", "false") else entry.value


def _follows_bf16_flag(config: object) -> bool:
    """A DeepSpeed config whose precision blocks the HF Trainer fills or accepts with ``bf16=True, fp16=False``."""
    if not isinstance(config, dict):
        return False
    bf16 = next((config[name] for name in BF16_NAMES if name in config), None)
    fp16 = config.get(FP16, {})
    return (
        isinstance(bf16, dict)
        and bf16.get("enabled") in (AUTO, True)
        and isinstance(fp16, dict)
        and fp16.get("enabled", False) in (AUTO, False)
    )
