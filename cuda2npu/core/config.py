"""Project configuration: ``[tool.cuda2npu]`` in ``pyproject.toml`` or a standalone ``cuda2npu.toml``.

As in ruff, every file uses the nearest configuration file found walking up from its directory
(hierarchical configuration: a run over a tree with several configuration files applies each to
the files below it). In one directory ``.cuda2npu.toml`` beats ``cuda2npu.toml`` beats
``pyproject.toml``; a ``pyproject.toml`` without a ``[tool.cuda2npu]`` table is not a
configuration file. Standalone files hold the keys at top level (no ``[tool.cuda2npu]`` header).
Configuration files are not merged with the ones above them unless one says
``extend = "../pyproject.toml"``: it then inherits every setting of that file and overrides the
keys it sets itself (``ignore``, ``extend-select`` and ``extend-exclude`` add to the inherited
ones; a ``select`` of its own starts the rule selection afresh, as in ruff).

Globs in ``exclude``, ``extend-exclude`` and ``per-file-ignores`` are relative to the directory of
the configuration file that sets them; a glob without ``/`` also matches any single path
component (``legacy``, ``*_pb2.py``). Command-line options override every file.

Every key is checked: an unknown key or a bad value is a configuration error (exit 2) that names
the file, the key and the allowed values.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from cuda2npu.core.catalogue import all_rules, no_match
from cuda2npu.core.strategy_settings import SETTINGS, VERSION, parse_value

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_NAMES = (".cuda2npu.toml", "cuda2npu.toml", "pyproject.toml")
VALIDATE_KEYS = {  # read by the validation harness
    "entries": "a list of 'module:function' strings",
    "run": "a command line: a script relative to the project root, then its arguments",
}
TARGET_KEYS = {"torch_npu": "a torch_npu release such as '2.7.1' or '2.1.0.post17'"}
ENTRY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")

KEYS = {
    "extend": "the path of a configuration file whose settings this one inherits (relative to this file)",
    "select": 'a list of rule codes or prefixes (e.g. ["NPU1", "NPU201"], "ALL")',
    "ignore": "a list of rule codes or prefixes",
    "extend-select": "a list of rule codes or prefixes (opt-in rules need their full code)",
    "exclude": "a list of glob patterns",
    "extend-exclude": "a list of glob patterns",
    "per-file-ignores": "a table of glob = [rule codes or prefixes]",
    **{setting.key: setting.expected for setting in SETTINGS},
    "target": "a table with key torch_npu",
    "validate": "a table with keys entries, run",
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
    base: Config | None = field(default=None, compare=False, repr=False)  # the configuration it extends

    @property
    def root(self) -> Path | None:
        """The directory globs are relative to."""
        return self.path.parent if self.path is not None else None

    @property
    def exclude_patterns(self) -> tuple[str, ...]:
        """This file's own ``exclude`` and ``extend-exclude`` globs (see anchored_excludes)."""
        return self.exclude + self.extend_exclude

    @property
    def chain(self) -> tuple[Path, ...]:
        """This file and the files it extends, nearest first."""
        if self.path is None:
            return ()
        return (self.path, *(self.base.chain if self.base is not None else ()))

    @property
    def project_root(self) -> Path | None:
        """The directory of the project the configuration belongs to (where the project facts come
        from): its own, or when it extends a configuration in a directory at or above its own, that
        one's project root."""
        if self.path is None:
            return None
        own = self.path.parent.resolve()
        if self.base is not None and self.base.path is not None and own.is_relative_to(self.base.path.parent.resolve()):
            return self.base.project_root
        return own

    def anchored_excludes(self, exclude: tuple[tuple[str, str], ...] | None = None) -> tuple[tuple[str, str], ...]:
        """``(directory, glob)`` of every exclude and extend-exclude that applies, each glob anchored
        at the directory of the file that sets it (an ``exclude`` of its own replaces the inherited
        one; ``extend-exclude`` adds to it). ``exclude``: anchored globs replacing every configured
        ``exclude`` (the command line's ``--exclude``)."""
        return (self._exclude() if exclude is None else exclude) + self._extend_exclude()

    def _exclude(self) -> tuple[tuple[str, str], ...]:
        if self.base is not None and "exclude" not in self.raw:
            return self.base._exclude()
        return tuple((_root(self.root), pattern) for pattern in self.exclude)

    def _extend_exclude(self) -> tuple[tuple[str, str], ...]:
        inherited = self.base._extend_exclude() if self.base is not None else ()
        return inherited + tuple((_root(self.root), pattern) for pattern in self.extend_exclude)

    def anchored_per_file_ignores(self) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
        """per-file-ignores as ``(configuration directory, glob, codes)`` (for Options); a table of
        its own replaces the inherited one."""
        if self.base is not None and "per-file-ignores" not in self.raw:
            return self.base.anchored_per_file_ignores()
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
    return ConfigFinder().nearest(common_directory(paths))


def common_directory(paths: list[Path]) -> Path:
    """The deepest directory holding every path (a directory path itself), resolved; the cwd for none."""
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
    finder = ConfigFinder()
    path = config_file if config_file is not None else finder.nearest(common_directory(paths))
    return finder.load(path) if path is not None else Config()


class ConfigFinder:
    """Finds and reads configuration files, each once: the nearest file of every directory asked
    about, and the validated configuration of every file (one finder per run)."""

    def __init__(self) -> None:
        self._sections: dict[Path, dict | None] = {}
        self._nearest: dict[Path, Path | None] = {}
        self._configs: dict[Path, Config] = {}

    def section(self, path: Path) -> dict | None:
        if path not in self._sections:
            self._sections[path] = _section(path)
        return self._sections[path]

    def nearest(self, directory: Path) -> Path | None:
        """The nearest configuration file at or above ``directory`` (a resolved absolute path)."""
        below: list[Path] = []
        found = None
        current = directory
        while True:
            if current in self._nearest:
                found = self._nearest[current]
                break
            below.append(current)
            found = next(
                (
                    current / name
                    for name in CONFIG_NAMES
                    if (current / name).is_file() and self.section(current / name) is not None
                ),
                None,
            )
            if found is not None or current.parent == current:
                break
            current = current.parent
        for directory in below:
            self._nearest[directory] = found
        return found

    def load(self, path: Path, extended_by: tuple[Path, ...] = ()) -> Config:
        """The validated configuration of ``path``, with the files it extends merged in."""
        key = path.resolve()
        if key in self._configs:
            return self._configs[key]
        section = self.section(path)
        if section is None:  # an explicit or extended pyproject.toml without the table
            by = f" (extended by {extended_by[-1]})" if extended_by else ""
            raise ConfigError(f"{path}: no [tool.cuda2npu] table{by}")
        config = parse_config(section, path, self, (*extended_by, key))
        self._configs[key] = config
        return config


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


def _table(value, path: Path, key: str, allowed: dict[str, str]) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{_where(path, key)} must be a table with keys: {', '.join(allowed)}")
    for sub in value:
        if sub not in allowed:
            raise ConfigError(f"{_where(path, key + '.' + sub)} is unknown; allowed keys: {', '.join(allowed)}")
    return value


def parse_config(section: dict, path: Path, finder: ConfigFinder | None = None, chain: tuple[Path, ...] = ()) -> Config:
    """Validate a cuda2npu table read from ``path`` (and the files it extends, read with ``finder``;
    ``chain``: the files that extend it, ending with ``path`` itself)."""
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
    for setting in SETTINGS:
        if setting.key in section:
            try:
                values[setting.field] = parse_value(setting, section[setting.key])
            except ValueError as exc:
                raise ConfigError(f"{_where(path, setting.key)} = {section[setting.key]!r} is invalid; {exc}") from None
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
    config = Config(**values)
    if "extend" not in section:
        return config
    base = _extended(section["extend"], path, finder or ConfigFinder(), chain or (path.resolve(),))
    return _merged(base, config, section)


def _extended(value, path: Path, finder: ConfigFinder, chain: tuple[Path, ...]) -> Config:
    """The configuration ``extend = value`` of ``path`` names (a path relative to ``path``'s directory)."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{_where(path, 'extend')} = {value!r} is invalid; expected {KEYS['extend']}")
    target = (path.parent / os.path.expanduser(value)).resolve()
    if target in chain:
        cycle = " -> ".join(str(p) for p in (*chain, target))
        raise ConfigError(f"{_where(path, 'extend')} = {value!r}: the configuration files extend each other ({cycle})")
    if not target.is_file():
        raise ConfigError(f"{_where(path, 'extend')} = {value!r}: {target} does not exist")
    return finder.load(target, extended_by=chain)


MERGED_RULES = ("select", "ignore", "extend-select")


def _merged(base: Config, own: Config, section: dict) -> Config:
    """``own`` over the configuration it extends: the keys it sets win, the others are inherited;
    ignore and extend-select add to the inherited ones unless it sets select (a fresh selection);
    excludes and per-file-ignores stay anchored where they were set (Config.anchored_excludes)."""
    values = {
        f.name: getattr(own, f.name) if getattr(own, f.name) is not None else getattr(base, f.name)
        for f in fields(Config)
        if f.name not in ("path", "raw", "base", "exclude", "extend_exclude", "per_file_ignores")
        and f.name.replace("_", "-") not in MERGED_RULES
    }
    if "select" not in section:
        values["select"] = base.select
        values["ignore"] = base.ignore + own.ignore
        values["extend_select"] = base.extend_select + own.extend_select
    validate = section.get("validate", {})
    values["validate_entries"] = own.validate_entries if "entries" in validate else base.validate_entries
    return replace(own, **values, base=base)


# --- file selection --------------------------------------------------------------------------
