"""Which configuration keys the project's Python code passes to a device or backend consumer.

A cheap, conservative regex scan (a project fact, cuda2npu/project/facts.py): a read of a key,
``cfg["device"]``, ``cfg.get("device", ...)``, or an attribute of a config-like name
(``cfg.device``, ``self.config.train.device``, ``args.dist_backend``), found as the argument of
``torch.device(...)``, ``.to(...)``, a ``device=`` keyword (role ``device``) or of
``init_process_group(...)``, a ``backend=`` / ``dist_backend=`` keyword (role ``backend``), either
directly or through one name assigned such a read in the same file (``device = cfg["device"]`` ...
``model.to(device)``). Only projects whose code loads a configuration file (yaml, json, toml,
OmegaConf, hydra, ...) have such keys.
"""

from __future__ import annotations

import re
from pathlib import Path

LOADS_CONFIG = re.compile(
    rb"\b(?:yaml\.(?:safe_|full_|unsafe_)?load|json\.load|tomllib\.load|toml\.load|tomli\.load|OmegaConf|hydra|"
    rb"DictConfig|EasyDict|ruamel|Config\.fromfile|mmengine)"
)
KEY_TEXT = r"""["']([A-Za-z_][\w.-]*)["']"""  # a key literal, the key captured
KEY_LITERAL = r"""["'][A-Za-z_][\w.-]*["']"""
EXPRESSION = rf"(?:self\.)?[A-Za-z_]\w*(?:\[\s*{KEY_LITERAL}\s*\]|\.get\(\s*{KEY_LITERAL}[^()\n]*\)|\.[A-Za-z_]\w*)*"
ARGUMENT = rf"(?P<arg>{EXPRESSION})(?=\s*(?:[,)]|\bif\b))"
CONSUMERS = {
    "device": re.compile(rf"(?:\btorch\.device\(\s*|\.to\(\s*|[(,]\s*device\s*=\s*){ARGUMENT}"),
    "backend": re.compile(
        rf"(?:\binit_process_group\(\s*|[(,]\s*(?:backend|dist_backend)\s*=\s*|\binit_distributed\(\s*){ARGUMENT}"
    ),
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
    names: dict[str, str] = {}
    for match in ASSIGNMENT.finditer(text):
        key = read_key(match.group("value"))
        if key is not None:
            names[match.group("name")] = key
    found = set()
    for role, pattern in CONSUMERS.items():
        for match in pattern.finditer(text):
            argument = match.group("arg")
            key = read_key(argument) or names.get(argument)
            if key is not None:
                found.add((role, key))
    return found


def config_keys(texts: dict[Path, bytes]) -> tuple[tuple[str, str], ...]:
    """The (role, key) pairs of the project: empty unless some Python file loads a configuration."""
    if not any(LOADS_CONFIG.search(text) for text in texts.values()):
        return ()
    found: set[tuple[str, str]] = set()
    for text in texts.values():
        if b"device" in text or b"backend" in text or b".to(" in text:
            found |= consumed_keys(text.decode("utf-8", "replace"))
    return tuple(sorted(found))
