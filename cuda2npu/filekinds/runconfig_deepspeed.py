"""DeepSpeed configuration JSON: the fp16 block under the BF16 policy (NPU723) and the ZeRO / amp
options that need CUDA-only code (NPU724). The facts and their DeepSpeed sources are in
docs/reference/run_configs.md.

The change on the parsed configuration is cuda2npu/analysis/ds_config.py's ``fp16_to_bf16`` (shared
with the Python-side DeepSpeed rule); ``fp16_block_edits`` makes it on the text, which
``json.loads`` then checks.

The HF Trainer matches a config's explicit ``fp16`` / ``bf16`` ``"enabled"`` against
``TrainingArguments``' flags and raises ValueError on a mismatch (``HfTrainerDeepSpeedConfig.fill_match``).
So a config the Trainer reads is switched only together with those flags: where every shell command
passing it as ``--deepspeed`` (a path, or a shell variable the script assigns one) gets its ``--fp16``
rewritten to ``--bf16`` (NPU906 in cuda2npu/filekinds/launch_flags.py); where the project's code
hands configs to ``TrainingArguments`` (the ``("trainer", "deepspeed")`` fact, runconfig_code.py)
and no such command is seen, it is reviewed.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Callable

from cuda2npu.analysis import ds_config
from cuda2npu.filekinds.launch_flags import check_launch_flags, deepspeed_config_name, project_file, script_variables
from cuda2npu.filekinds.runconfig_code import PROGRAM_FP16, TRAINER_DEEPSPEED
from cuda2npu.filekinds.runconfig_entries import Member
from cuda2npu.filekinds.shell_lines import shell_commands
from cuda2npu.filekinds.shellscripts import is_shell_script

DS_CONFIG_NAME = re.compile(r"ds_config\w*\.json|\w*deepspeed\w*\.json", re.I)
DS_TOP_LEVEL = ("zero_optimization", "train_micro_batch_size_per_gpu")
ZERO_QUANTIZATION = ("zero_quantized_weights", "zero_quantized_nontrainable_weights", "zero_quantized_gradients")


def is_deepspeed_config(path: Path, data: object) -> bool:
    """``ds_config*.json`` / ``*deepspeed*.json``, or a JSON object with DeepSpeed's top-level keys."""
    if not isinstance(data, dict):
        return False
    return DS_CONFIG_NAME.fullmatch(path.name) is not None or any(key in data for key in DS_TOP_LEVEL)


def _bf16_block(config: dict) -> str | None:
    return next((key for key in ds_config.BF16_NAMES if key in config), None)


def fp16_block_edits(text: str, members: list[Member], config: dict) -> list[tuple[int, int, str]]:
    """The text edits making ``ds_config.fp16_to_bf16``'s change (top-level members only)."""
    top = {m.entry.key: m for m in members if len(m.entry.path) == 1}
    enabled = {m.entry.path[0]: m for m in members if len(m.entry.path) == 2 and m.entry.key == "enabled"}
    bf16 = _bf16_block(config)
    if bf16 is not None and bf16 not in enabled:
        return []  # a bf16 block without "enabled": the read-back check then keeps the file as it is
    if bf16 is not None:
        return [
            (enabled["fp16"].entry.start, enabled["fp16"].entry.end, "false"),
            (enabled[bf16].entry.start, enabled[bf16].entry.end, "true"),
        ]
    block = top["fp16"]
    return [
        (block.key_start, block.key_end, '"bf16"'),
        (block.entry.start, block.entry.end, _enabled_object(text, block, enabled["fp16"])),
    ]


def _enabled_object(text: str, block: Member, first: Member) -> str:
    """``{"enabled": true}`` laid out as the fp16 object was: one line, or members on their own lines."""
    source = text[block.entry.start : block.entry.end]
    if "\n" not in source:
        return '{"enabled": true}'
    newline = "\r\n" if "\r\n" in source else "\n"
    member_indent = text[first.entry.line_start : first.key_start]
    closing_start = text.rfind("\n", 0, block.entry.end - 1) + 1
    closing_indent = text[closing_start : block.entry.end - 1]
    if member_indent.strip() or closing_indent.strip():
        return '{"enabled": true}'
    return f'{{{newline}{member_indent}"enabled": true{newline}{closing_indent}}}'


def cuda_only_options(config: dict, members: list[Member]) -> list[tuple[Member, str]]:
    """(member, why) of the options that load CUDA-only code on an NPU host."""
    found = []
    optimizer = ds_config.optimizer_problem(config)
    if optimizer is not None:
        found += [(m, optimizer) for m in members if m.entry.path == ("optimizer", "type")]
    for member in members:
        path, value = member.entry.path, member.entry.value
        if path[:1] == ("zero_optimization",) and len(path) == 2 and path[1] in ZERO_QUANTIZATION and value is True:
            why = (
                f"`{path[1]}` (ZeRO++) loads DeepSpeed's QuantizerBuilder, a CUDA op: on an NPU host DeepSpeed gives "
                "its NotImplementedBuilder, whose load() raises; turn it off"
            )
            found.append((member, why))
        elif path == ("amp", "enabled") and value is True:
            why = "DeepSpeed's `amp` mode runs NVIDIA apex amp (CUDA-only): use `bf16` (or `fp16`) instead"
            found.append((member, why))
    return found


def coupled_configs(names: dict[Path, str], options_of: Callable) -> dict[Path, str | None]:
    """The configs (resolved paths) that other files of the run hand to a program with its own
    precision setting, each with why its fp16 switch must wait (None: every such command gets its
    ``--fp16`` rewritten to ``--bf16`` too, a fixable NPU906): shell commands passing it as
    ``--deepspeed X.json`` / ``--deepspeed_config X.json``, accelerate configs naming it as
    ``deepspeed_config_file`` with ``mixed_precision: fp16`` (kept: NPU726). A command passing no
    ``--fp16``/``--bf16`` has no flag to agree with and takes the config as it becomes."""
    found: dict[Path, str | None] = {}
    for path in names:
        if is_shell_script(path):
            _launched_by(path, names[path], options_of, found)
        elif path.suffix in (".yaml", ".yml"):
            _named_by_accelerate(path, names[path], found)
    return found


def _launched_by(script: Path, display: str, options_of: Callable, found: dict[Path, str | None]) -> None:
    try:
        text = script.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    if "--deepspeed" not in text:
        return
    options = replace(options_of(script).for_path(script), fix=False)
    flags, _ = check_launch_flags(text, script, display, options)
    switched = {f.line for f in flags if f.code == "NPU906" and f.fixable}
    variables = script_variables(text)  # `--deepspeed ${ds_config}` with `ds_config=ds.json` above
    for command in shell_commands(text, options.ignore_noqa):
        if not any(PRECISION_FLAG.search(line.code) for line in command):
            continue  # no precision flag to agree with: the program takes the config's (BELLE's inference backend)
        for line in command:
            named = deepspeed_config_name(line.code, variables)
            config = project_file(script, named[0]) if named is not None else None
            if config is None or (config in found and found[config] is not None):
                continue
            if any(other.number in switched for other in command):
                found[config] = None
            else:
                found[config] = f"{display}:{line.number} passes it to a program whose fp16 flags stay as they are"


PRECISION_FLAG = re.compile(r"(?<![\w-])--(?:fp16|bf16)(?![\w-])")
ACCELERATE_DS_FILE = re.compile(r"^[ \t]*deepspeed_config_file:[ \t]*[\"']?([^\s\"'#]+\.json)", re.M)
ACCELERATE_FP16 = re.compile(r"^mixed_precision:[ \t]*[\"']?fp16\b", re.M)


def _named_by_accelerate(path: Path, display: str, found: dict[Path, str | None]) -> None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    if "deepspeed_config_file" not in text or not ACCELERATE_FP16.search(text):
        return
    for match in ACCELERATE_DS_FILE.finditer(text):
        config = project_file(path, match.group(1))
        if config is not None:
            found[config] = f"the accelerate config {display} names it with `mixed_precision: fp16` (kept, NPU726)"


def trainer_coupling(path: Path, options, coupled: dict[Path, str | None]) -> str | None:
    """Why the config's fp16 switch must wait for the program's own precision setting (None: it may be made)."""
    resolved = path.resolve()
    if resolved in coupled:
        where = coupled[resolved]
        if where is None:
            return None
    elif TRAINER_DEEPSPEED in options.project.config_keys:
        where = "the project's code hands DeepSpeed configs to transformers' TrainingArguments, whose fp16/bf16 flags are not rewritten with it"
    elif PROGRAM_FP16 in options.project.config_keys:
        where = (
            "the project's own `--fp16` option sets the program's precision (Megatron builds fp16 parameters from it, "
            "which a bf16 DeepSpeed engine does not match)"
        )
    else:
        return None
    return (
        f"{where}: the config's explicit fp16/bf16 `enabled` must agree with it (the HF Trainer and accelerate raise "
        "ValueError when they differ), so change both together (`--bf16` / `bf16=True` with "
        '`"bf16": {"enabled": true}` and fp16 off), or, for the HF Trainer, set both blocks\' "enabled" to "auto"; '
        "fp16 also runs on Ascend"
    )
