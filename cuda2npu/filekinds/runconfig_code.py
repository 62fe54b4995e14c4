"""Which configuration keys the project's Python code passes to a device, backend or attention consumer.

A cheap, conservative regex scan (a project fact, cuda2npu/project/facts.py): a read of a key,
``cfg["device"]``, ``cfg.get("device", ...)``, or an attribute of a config-like name
(``cfg.device``, ``self.config.train.device``, ``model_args.attn_implementation``), found as the
argument of ``torch.device(...)``, ``.to(...)``, a ``device=`` keyword (role ``device``), of
``init_process_group(...)``, a ``backend=`` / ``dist_backend=`` keyword (role ``backend``), of an
``attn_implementation=`` keyword (role ``attention``) or of a ``load_in_4bit=`` / ``load_in_8bit=``
keyword (role ``quantization``), either directly or through one name assigned
such a read in the same file (``device = cfg["device"]`` ... ``model.to(device)``). Only projects
whose code loads a configuration file (yaml, json, toml, OmegaConf, hydra, ``HfArgumentParser``'s
YAML/JSON files, ...) have such keys.

One more pair, ``("trainer", "deepspeed")``: the project's code hands DeepSpeed configurations to
transformers' ``TrainingArguments`` (a ``deepspeed=`` keyword in a file building them, or a
``TrainingArguments`` parser, which takes ``--deepspeed``). The HF Trainer then matches a config's
explicit ``fp16`` / ``bf16`` ``"enabled"`` against the arguments' flags (runconfig_deepspeed.py).

And the ``TrainingArguments`` read from files (runconfig_trainer.py): ``("trainer", "files")`` where
the project parses them from JSON/YAML (``HfArgumentParser``'s ``parse_json_file`` /
``parse_yaml_file`` / ``json_file=`` / ``yaml_file=``, ``TrlParser``'s ``--config``) and names a
``TrainingArguments`` class; with it, ``("trainer_file", PATH)`` for each path literal such a parser
is given (directly or through one name assigned it in the same file).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

LOADS_CONFIG = re.compile(
    rb"\b(?:yaml\.(?:safe_|full_|unsafe_)?load|json\.load|tomllib\.load|toml\.load|tomli\.load|OmegaConf|hydra|"
    rb"DictConfig|EasyDict|ruamel|Config\.fromfile|mmengine|parse_yaml_file|parse_json_file|HfArgumentParser|TrlParser)"
)
# transformers' TrainingArguments (and TRL's subclasses) built in code, or parsed from the command line
BUILDS_TRAINING_ARGUMENTS = re.compile(rb"\b(?:\w*TrainingArguments|(?:SFT|DPO|GRPO|KTO|ORPO|CPO|Reward)Config)\(")
PARSES_TRAINING_ARGUMENTS = re.compile(rb"\b(?:HfArgumentParser|TrlParser)\b")
TRAINER_DEEPSPEED = ("trainer", "deepspeed")
PROGRAM_FP16 = ("program", "fp16")  # the project's own argparse `--fp16` (Megatron's), in a project using DeepSpeed
OWN_FP16_OPTION = re.compile(rb"""\.add_argument\(\s*["']--fp16["']""")
TRAINER_FILES = ("trainer", "files")
TRAINER_FILE = "trainer_file"  # the role of a path literal given to a file parser
FILE_PARSE = re.compile(
    rb"\b(?:parse_json_file|parse_yaml_file|parse_args_and_config|TrlParser)\b|\b(?:json|yaml)_file\s*="
)
TRAINING_CLASS = re.compile(rb"\b(?:\w*TrainingArguments|(?:SFT|DPO|GRPO|KTO|ORPO|CPO|Reward|PPO|RLOO)Config)\b")
PATH_LITERAL = r"""["']([^"'\n]+\.(?:json|ya?ml))["']"""
NAME_ARGUMENT = r"([A-Za-z_]\w*)\s*[,)]"
PARSED_FILE = re.compile(
    rf"(?:\b(?:parse_json_file|parse_yaml_file)\(\s*|\b(?:json|yaml)_file\s*=\s*)(?:{PATH_LITERAL}|{NAME_ARGUMENT})"
)
PATH_ASSIGNMENT = re.compile(rf"^[ \t]*([A-Za-z_]\w*)[ \t]*(?::[^=\n]+)?=[ \t]*{PATH_LITERAL}[ \t]*(?:#.*)?$", re.M)
KEY_TEXT = r"""["']([A-Za-z_][\w.-]*)["']"""  # a key literal, the key captured
KEY_LITERAL = r"""["'][A-Za-z_][\w.-]*["']"""
EXPRESSION = rf"(?:self\.)?[A-Za-z_]\w*(?:\[\s*{KEY_LITERAL}\s*\]|\.get\(\s*{KEY_LITERAL}[^()\n]*\)|\.[A-Za-z_]\w*)*"
ARGUMENT = rf"(?P<arg>{EXPRESSION})(?=\s*(?:[,)]|\bif\b))"
CONSUMERS = {
    "device": re.compile(rf"(?:\btorch\.device\(\s*|\.to\(\s*|[(,]\s*device\s*=\s*){ARGUMENT}"),
    "backend": re.compile(
        rf"(?:\binit_process_group\(\s*|[(,]\s*(?:backend|dist_backend)\s*=\s*|\binit_distributed\(\s*){ARGUMENT}"
    ),
    "attention": re.compile(rf"[(,]\s*attn_implementation\s*=\s*{ARGUMENT}"),
    "quantization": re.compile(rf"[(,]\s*load_in_[48]bit\s*=\s*{ARGUMENT}"),
}
CONSUMER_WORDS = {  # what a text holds where the consumer's pattern can match
    "device": ("device", ".to("),
    "backend": ("backend", "init_process_group", "init_distributed"),
    "attention": ("attn_implementation",),
    "quantization": ("load_in_",),
}
SUBSCRIPT_READ = re.compile(rf".*\[\s*{KEY_TEXT}\s*\]$")
GET_READ = re.compile(rf".*\.get\(\s*{KEY_TEXT}[^()\n]*\)$")
CONFIG_NAME = r"(?i:[A-Za-z_]*_)?(?i:cfg|config|conf|configs|args|opt|opts|options|hparams|hps|params|settings|flags)"
ATTRIBUTE_READ = re.compile(rf"(?:self\.)?{CONFIG_NAME}(?:\.[A-Za-z_]\w*)*\.([A-Za-z_]\w*)$")
ASSIGNMENT = re.compile(
    rf"^[ \t]*(?P<name>(?:self\.)?[A-Za-z_]\w*)[ \t]*(?::[^=\n]+)?=[ \t]*(?P<value>{EXPRESSION})[ \t]*(?:#.*)?$", re.M
)


def read_key(expression: str) -> str | None:
    """The configuration key ``expression`` reads (its last one), or None."""
    for pattern in (SUBSCRIPT_READ, GET_READ, ATTRIBUTE_READ):
        match = pattern.fullmatch(expression)
        if match is not None:
            return match.group(1)
    return None


def consumed_keys(text: str) -> set[tuple[str, str]]:
    """(role, key) of the configuration reads one Python text passes to a device/backend consumer."""
    names: dict[str, str] | None = None  # the names assigned a configuration read, found where first needed
    found = set()
    for role, pattern in CONSUMERS.items():
        if not any(word in text for word in CONSUMER_WORDS[role]):
            continue  # a cheap test first: the patterns try every bracket and comma of the text
        for match in pattern.finditer(text):
            argument = match.group("arg")
            key = read_key(argument)
            if key is None:
                names = _assigned_keys(text) if names is None else names
                key = names.get(argument)
            if key is not None:
                found.add((role, key))
    return found


def _assigned_keys(text: str) -> dict[str, str]:
    """name -> the configuration key assigned to it (``device = cfg["device"]``), for each such assignment."""
    names = {}
    for match in ASSIGNMENT.finditer(text):
        key = read_key(match.group("value"))
        if key is not None:
            names[match.group("name")] = key
    return names


def config_keys(texts: Mapping[Path, bytes]) -> tuple[tuple[str, str], ...]:
    """The (role, key) pairs of the project (none but the trainer's unless some Python file loads a
    configuration)."""
    found: set[tuple[str, str]] = set()
    if any(hands_deepspeed_to_trainer(text) for text in texts.values()):
        found.add(TRAINER_DEEPSPEED)
    if any(OWN_FP16_OPTION.search(t) for t in texts.values()) and any(b"deepspeed" in t for t in texts.values()):
        found.add(PROGRAM_FP16)
    found |= trainer_files(texts)
    if not any(LOADS_CONFIG.search(text) for text in texts.values()):
        return tuple(sorted(found))
    for text in texts.values():
        if any(word in text for word in (b"device", b"backend", b".to(", b"attn_implementation", b"load_in_")):
            found |= consumed_keys(text.decode("utf-8", "replace"))
    return tuple(sorted(found))


def hands_deepspeed_to_trainer(text: bytes) -> bool:
    """A file parsing ``TrainingArguments`` (``--deepspeed``), or building them where it names ``deepspeed``."""
    if PARSES_TRAINING_ARGUMENTS.search(text):
        return True
    return b"deepspeed" in text and BUILDS_TRAINING_ARGUMENTS.search(text) is not None


def trainer_files(texts: Mapping[Path, bytes]) -> set[tuple[str, str]]:
    """``TRAINER_FILES`` and the ``(TRAINER_FILE, path)`` literals, where the project reads
    ``TrainingArguments`` from files (an argument parser with a file parser, and a TrainingArguments
    class named somewhere in the project)."""
    parsing = [t for t in texts.values() if PARSES_TRAINING_ARGUMENTS.search(t) and FILE_PARSE.search(t)]
    if not parsing or not any(TRAINING_CLASS.search(text) for text in texts.values()):
        return set()
    found = {TRAINER_FILES}
    for text in parsing:
        source = text.decode("utf-8", "replace")
        literals = {m.group(1): m.group(2) for m in PATH_ASSIGNMENT.finditer(source)}
        for match in PARSED_FILE.finditer(source):
            path = match.group(1) or literals.get(match.group(2))
            if path is not None:
                found.add((TRAINER_FILE, path))
    return found
