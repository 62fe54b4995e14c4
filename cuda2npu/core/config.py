"""Project configuration: ``[tool.cuda2npu]`` in ``pyproject.toml`` or a standalone ``cuda2npu.toml``.

Like ruff, the nearest configuration file wins: the search starts at the deepest directory that
contains every given path (the path itself when it is a directory) and walks up to the file-system
root. In one directory ``.cuda2npu.toml`` beats ``cuda2npu.toml`` beats ``pyproject.toml``; a
``pyproject.toml`` without a ``[tool.cuda2npu]`` table is not a configuration file. Standalone
files hold the keys at top level (no ``[tool.cuda2npu]`` header).

Globs in ``exclude``, ``extend-exclude`` and ``per-file-ignores`` are relative to the directory of
the configuration file; a glob without ``/`` also matches any single path component (``legacy``,
``*_pb2.py``). Command-line options override the file.

Every key is checked: an unknown key or a bad value is a configuration error (exit 2) that names
the file, the key and the allowed values.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from cuda2npu.core.catalogue import all_rules, no_match
from cuda2npu.core.options import STRATEGY_CHOICES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_NAMES = (".cuda2npu.toml", "cuda2npu.toml", "pyproject.toml")
TIERS = ("exact", "numeric", "review")
VERSION = re.compile(r"^\d+(\.\d+){1,3}(\.post\d+)?$")
VALIDATE_KEYS = {  # read by the validation harness
    "entries": "a list of 'module:function' strings",
    "run": "a command line: a script relative to the project root, then its arguments",
}
TARGET_KEYS = {"torch_npu": "a torch_npu release such as '2.7.1' or '2.1.0.post17'"}
ENTRY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")

KEYS = {
    "select": 'a list of rule codes or prefixes (e.g. ["NPU1", "NPU201"], "ALL")',
    "ignore": "a list of rule codes or prefixes",
    "extend-select": "a list of rule codes or prefixes (opt-in rules need their full code)",
    "exclude": "a list of glob patterns",
    "extend-exclude": "a list of glob patterns",
    "per-file-ignores": "a table of glob = [rule codes or prefixes]",
    "precision": "one of " + ", ".join(STRATEGY_CHOICES["precision"]),
    "apex": "one of " + ", ".join(STRATEGY_CHOICES["apex"]),
    "colossalai": "one of " + ", ".join(STRATEGY_CHOICES["colossalai"]),
    "fuse-sdpa": "true or false",
    "portable": "true or false",
    "target-torch": "a torch release such as '2.6' or '2.7.1' (--portable)",
    "target": "a table with key torch_npu",
    "validate": "a table with keys entries, run",
    "max-tier": "one of " + ", ".join(TIERS),
    "markers": "true or false",
    "review-markers": "true or false",
}


class ConfigError(Exception):
    """A configuration problem; the command line reports it as a usage error (exit 2)."""


@dataclass(frozen=True)
class Config:
    """The validated contents of one configuration file (``path`` None: no file, all defaults)."""

    path: Path | None = None
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    precision: str | None = None
    apex: str | None = None
    colossalai: str | None = None
    fuse_sdpa: bool | None = None
    portable: bool | None = None
    target_torch: str | None = None
    target_torch_npu: str | None = None
    validate_entries: tuple[str, ...] = ()
    validate_run: str | None = None
    max_tier: str | None = None
    markers: bool | None = None
    review_markers: bool | None = None
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def root(self) -> Path | None:
        """The directory globs are relative to."""
        return self.path.parent if self.path is not None else None

    @property
    def exclude_patterns(self) -> tuple[str, ...]:
        return self.exclude + self.extend_exclude

    def anchored_per_file_ignores(self) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
        """per-file-ignores as ``(configuration directory, glob, codes)`` (for Options)."""
        return tuple((_root(self.root), pattern, codes) for pattern, codes in self.per_file_ignores)


def _root(root: Path | None) -> str:
    return root.resolve().as_posix() if root is not None else ""


# --- finding and reading the file ------------------------------------------------------------


def _read_toml(path: Path) -> dict:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _section(path: Path) -> dict | None:
    """The cuda2npu table of a candidate file, or None when the file is not a cuda2npu config."""
    data = _read_toml(path)
    if path.name == "pyproject.toml":
        tool = data.get("tool", {})
        if not isinstance(tool, dict) or "cuda2npu" not in tool:
            return None
        section = tool["cuda2npu"]
        if not isinstance(section, dict):
            raise ConfigError(f"{path}: [tool.cuda2npu] must be a table")
        return section
    return data


def find_config_file(paths: list[Path]) -> Path | None:
    """The nearest configuration file above the common directory of ``paths`` (or the cwd)."""
    start = _common_directory(paths)
    for directory in (start, *start.parents):
        for name in CONFIG_NAMES:
            candidate = directory / name
            if candidate.is_file() and _section(candidate) is not None:
                return candidate
    return None


def _common_directory(paths: list[Path]) -> Path:
    if not paths:
        return Path.cwd().resolve()
    directories = [p.resolve() if p.is_dir() else p.resolve().parent for p in paths]
    try:
        return Path(os.path.commonpath([str(d) for d in directories]))
    except ValueError:  # different drives
        return directories[0]


def load_config(paths: list[Path], config_file: Path | None = None, isolated: bool = False) -> Config:
    """The configuration that applies to ``paths`` (``config_file`` forces one; ``isolated`` none)."""
    if isolated:
        return Config()
    path = config_file if config_file is not None else find_config_file(paths)
    if path is None:
        return Config()
    section = _section(path)
    if section is None:  # an explicit pyproject.toml without the table
        raise ConfigError(f"{path}: no [tool.cuda2npu] table")
    return parse_config(section, path)


# --- validation ------------------------------------------------------------------------------


def _where(path: Path, key: str) -> str:
    prefix = "[tool.cuda2npu] " if path.name == "pyproject.toml" else ""
    return f"{path}: {prefix}key {key!r}"


def _strings(value, path: Path, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{_where(path, key)} = {value!r} is invalid; expected {KEYS.get(key, 'a list of strings')}")
    return tuple(value)


def _codes(value, path: Path, key: str) -> tuple[str, ...]:
    known = all_rules()
    codes = []
    for code in _strings(value, path, key):
        code = code.strip().upper()
        if code == "ALL":
            codes.append("NPU")
            continue
        if not code or not any(k.startswith(code) for k in known):
            raise ConfigError(f"{_where(path, key)}: {no_match(code)}")
        codes.append(code)
    return tuple(codes)


def _choice(value, path: Path, key: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"{_where(path, key)} = {value!r} is invalid; allowed values: {', '.join(choices)}")
    return value


def _bool(value, path: Path, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{_where(path, key)} = {value!r} is invalid; allowed values: true, false")
    return value


def _table(value, path: Path, key: str, allowed: dict[str, str]) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{_where(path, key)} must be a table with keys: {', '.join(allowed)}")
    for sub in value:
        if sub not in allowed:
            raise ConfigError(f"{_where(path, key + '.' + sub)} is unknown; allowed keys: {', '.join(allowed)}")
    return value


def parse_config(section: dict, path: Path) -> Config:
    """Validate a cuda2npu table read from ``path``."""
    for key in section:
        if key not in KEYS:
            hint = ""
            if key.replace("_", "-") in KEYS:
                hint = f" (did you mean {key.replace('_', '-')!r}?)"
            raise ConfigError(f"{_where(path, key)} is unknown{hint}; allowed keys: {', '.join(sorted(KEYS))}")
    values: dict = {"path": path, "raw": dict(section)}
    if "select" in section:
        values["select"] = _codes(section["select"], path, "select")
    for key in ("ignore", "extend-select"):
        if key in section:
            values[key.replace("-", "_")] = _codes(section[key], path, key)
    for key in ("exclude", "extend-exclude"):
        if key in section:
            values[key.replace("-", "_")] = _strings(section[key], path, key)
    if "per-file-ignores" in section:
        table = section["per-file-ignores"]
        if not isinstance(table, dict):
            raise ConfigError(f"{_where(path, 'per-file-ignores')} is invalid; expected {KEYS['per-file-ignores']}")
        values["per_file_ignores"] = tuple(
            (pattern, _codes(codes, path, f"per-file-ignores.{pattern}")) for pattern, codes in table.items()
        )
    for key in ("precision", "apex", "colossalai"):
        if key in section:
            values[key] = _choice(section[key], path, key, STRATEGY_CHOICES[key])
    if "fuse-sdpa" in section:
        values["fuse_sdpa"] = _bool(section["fuse-sdpa"], path, "fuse-sdpa")
    for key in ("markers", "review-markers", "portable"):
        if key in section:
            values[key.replace("-", "_")] = _bool(section[key], path, key)
    if "target-torch" in section:
        version = section["target-torch"]
        if not isinstance(version, str) or not VERSION.match(version):
            raise ConfigError(
                f"{_where(path, 'target-torch')} = {version!r} is invalid; expected {KEYS['target-torch']}"
            )
        values["target_torch"] = version
    if "max-tier" in section:
        values["max_tier"] = _choice(section["max-tier"], path, "max-tier", TIERS)
    if "target" in section:
        target = _table(section["target"], path, "target", TARGET_KEYS)
        if "torch_npu" in target:
            version = target["torch_npu"]
            if not isinstance(version, str) or not VERSION.match(version):
                raise ConfigError(
                    f"{_where(path, 'target.torch_npu')} = {version!r} is invalid; expected {TARGET_KEYS['torch_npu']}"
                )
            values["target_torch_npu"] = version
    if "validate" in section:
        validate = _table(section["validate"], path, "validate", VALIDATE_KEYS)
        if "entries" in validate:
            entries = _strings(validate["entries"], path, "validate.entries")
            for entry in entries:
                if not ENTRY.match(entry):
                    raise ConfigError(
                        f"{_where(path, 'validate.entries')}: {entry!r} is invalid; expected {VALIDATE_KEYS['entries']}"
                    )
            values["validate_entries"] = entries
        if "run" in validate:
            if not isinstance(validate["run"], str) or not validate["run"].strip():
                raise ConfigError(
                    f"{_where(path, 'validate.run')} = {validate['run']!r} is invalid; expected {VALIDATE_KEYS['run']}"
                )
            values["validate_run"] = validate["run"]
    return Config(**values)


# --- file selection --------------------------------------------------------------------------
