"""Which configuration, options and project facts each file of a run gets.

ruff's hierarchical model (cuda2npu/core/config.py): every file uses the nearest configuration
file found walking up from its directory, not one file for the whole run, so a file gets the same
settings whichever paths the run is given (``check sub/m.py``, ``check sub/m.py m.py``,
``check .``). The command line overrides every configuration; ``--config FILE`` uses that file
for every file, ``--isolated`` none. The excludes of a file's configuration decide whether a
directory walk reads it.

The project facts (cuda2npu/project/facts.py) come from each file's project root, never from the
paths given: the project root of its configuration (that file's directory, or the one of a
configuration it extends in a directory above), else the nearest directory above the file holding
a ``setup.py`` (but one that only builds the project's extension modules), ``setup.cfg`` or
``pyproject.toml`` inside its git work tree (a project git
ignores, such as a vendored or downloaded tree, is a project of its own), else the top of that
work tree, else the common directory of the paths given (``migrate --out``: the directory given,
which is copied as a project on its own, or the sub-project inside it holding the file: InternVL's
``internvl_chat`` and ``internvl_chat_llava`` pin different transformers releases). Every file the run's discovery finds under the root,
excludes applied, counts; only their names and a cheap scan of their text are used.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

from cuda2npu.core.config import Config, ConfigFinder, common_directory
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.globs import matches_any
from cuda2npu.core.options import Options, ProjectFacts
from cuda2npu.core.strategy_settings import SETTINGS
from cuda2npu.core.torch_npu_target import parse_target
from cuda2npu.project.cache import Cache
from cuda2npu.project.discovery import Discovery, discover
from cuda2npu.project.facts import project_facts
from cuda2npu.project.pins import with_pinned_target

PROJECT_MARKERS = ("setup.py", "setup.cfg", "pyproject.toml")


def _extension_build(directory: Path) -> bool:
    """Whether ``directory``'s only project marker is a ``setup.py`` that builds extension modules and
    requires nothing (Deformable DETR's ``ops/setup.py``, vendored by LivePortrait's XPose, whose modules
    the project imports as ``src.utils.dependencies.XPose...ops...``, round 56): the build of the project's
    own kernels, not a project of its own."""
    if any(os.path.lexists(directory / name) for name in PROJECT_MARKERS[1:]):
        return False
    try:
        text = (directory / "setup.py").read_bytes()
    except OSError:
        return False
    return b"ext_modules" in text and b"install_requires" not in text


NO_CONFIG = Config()


@dataclass(frozen=True)
class CommandLine:
    """What the command line says: it overrides every configuration file."""

    select: tuple[str, ...] = ()  # replaces the configured selection
    ignore: tuple[str, ...] = ()  # added to the configured ones
    extend_select: tuple[str, ...] = ()  # added to the configured ones
    values: tuple[tuple[str, object, bool], ...] = ()  # (Options field, value, given on the command line)
    config_file: Path | None = None
    isolated: bool = False
    force_exclude: bool = False
    ignore_noqa: bool = False  # `# noqa` directives hide nothing
    exclude: tuple[str, ...] | None = None  # --exclude: replaces every configured exclude (globs from the cwd)
    extend_exclude: tuple[str, ...] = ()  # --extend-exclude: added to them
    fix: bool = True  # migrate: True, check: False
    default_select: tuple[str, ...] = ("NPU",)  # when neither selects (check's leaves the NPU8 advisories out)
    project_root: Path | None = None  # migrate --out: the directory given is the project, copied on its own
    cache: bool = True  # the project facts may be cached (not by migrate --out: no cache in the source)


def options_from(config: Config, cli: CommandLine) -> Options:
    """The options of the files using ``config``: the command line's over the configuration's over
    the defaults (a value given on the command line wins; else the configured one; else the
    command line's default)."""
    values = {}
    for name, value, given in cli.values:
        configured = getattr(config, name)
        values[name] = value if given or configured is None else configured
    precision_given = any(name == "precision" and given for name, _, given in cli.values)
    if "precision" in values and not precision_given and config.precision is None and values.get("portable"):
        values["precision"] = "keep"  # portable output keeps the program's dtypes unless a policy is asked for
    if "max_tier" in values:
        values["max_tier"] = Tier.parse(values["max_tier"])
    if "target_torch_npu" in values:
        values["target"] = parse_target(values.pop("target_torch_npu"))
    chosen = cli.select or config.select or cli.default_select
    return Options(
        select=tuple(dict.fromkeys(chosen + config.extend_select + cli.extend_select)),
        ignore=config.ignore + cli.ignore,
        fix=cli.fix,
        ignore_noqa=cli.ignore_noqa,
        per_file_ignores=config.anchored_per_file_ignores(),
        **values,
    )


class RunSettings:
    """The configuration, options and project facts of every file of one run (each configuration
    file read once, each directory looked up once)."""

    def __init__(self, paths: list[Path], cli: CommandLine) -> None:
        self.paths = list(paths)
        self.cli = cli
        self.finder = ConfigFinder()
        self.common = common_directory(self.paths)
        self.explicit = None
        if cli.config_file is not None and not cli.isolated:
            self.explicit = self.finder.load(cli.config_file)
        self._directories: dict[str, Path] = {}  # a file's directory as written -> real directory
        self._configs: dict[Path, Config] = {}
        self._roots: dict[Path, Path] = {}
        self._above: dict[tuple[str, Path], Path | None] = {}
        self._options: dict[Path, Options] = {}
        self._base: dict[Path | None, Options] = {}
        self._excludes: dict[Path | None, tuple[tuple[str, str], ...]] = {}
        self._facts: dict[Path, ProjectFacts] = {}
        self.config_in(self.common)  # a broken configuration is an error even where no file uses it

    # --- per directory ---------------------------------------------------------------------

    def directory(self, path: Path) -> Path:
        """The real directory of a file."""
        key = os.path.dirname(path) or "."
        found = self._directories.get(key)
        if found is None:
            found = self._directories[key] = Path(os.path.realpath(key))
        return found

    def config_in(self, directory: Path) -> Config:
        """The configuration of the files of a (real) directory."""
        config = self._configs.get(directory)
        if config is None:
            if self.cli.isolated:
                config = NO_CONFIG
            elif self.explicit is not None:
                config = self.explicit
            else:
                found = self.finder.nearest(directory)
                config = self.finder.load(found) if found is not None else NO_CONFIG
            self._configs[directory] = config
        return config

    def root_of(self, directory: Path) -> Path:
        """The project root of the files of a (real) directory: where their project facts come from."""
        root = self._roots.get(directory)
        if root is not None:
            return root
        given = self.cli.project_root.resolve() if self.cli.project_root is not None else None
        if given is not None and directory.is_relative_to(given):
            marker = self._project_marker(directory, given)  # a sub-project of the tree has its own facts
            root = marker if marker is not None and marker.is_relative_to(given) else given
        else:
            root = self.config_in(directory).project_root
            if root is None or not directory.is_relative_to(root):
                work_tree = self._nearest(directory, (".git",))
                marker = self._project_marker(directory, work_tree)
                inside = marker is not None and (work_tree is None or marker.is_relative_to(work_tree))
                root = marker if inside else work_tree or self.common
        self._roots[directory] = root
        return root

    def _project_marker(self, directory: Path, top: Path | None) -> Path | None:
        """The nearest directory at or above ``directory`` holding a project marker, passing over one whose
        ``setup.py`` only builds extensions (:func:`_extension_build`) below ``top`` (the work tree) or below
        another marker: a build of the project's kernels, whose files keep the project's facts. None where
        only ``top`` is above it."""
        marker = self._nearest(directory, PROJECT_MARKERS)
        while marker is not None and _extension_build(marker):
            outer = self._nearest(marker.parent, PROJECT_MARKERS) if marker.parent != marker else None
            if outer is None and (top is None or top == marker or not marker.is_relative_to(top)):
                break  # the project's own top: its facts are its own
            marker = outer
        return marker

    def _nearest(self, directory: Path, names: tuple[str, ...]) -> Path | None:
        """The nearest directory at or above ``directory`` holding one of ``names``."""
        key = (names[0], directory)
        if key not in self._above:
            if any(os.path.lexists(directory / name) for name in names):
                self._above[key] = directory
            else:
                self._above[key] = None if directory.parent == directory else self._nearest(directory.parent, names)
        return self._above[key]

    def options_in(self, directory: Path) -> Options:
        """The options of the files of a (real) directory, with their project's facts."""
        options = self._options.get(directory)
        if options is None:
            config = self.config_in(directory)
            base = self._base.get(config.path)
            if base is None:
                base = self._base[config.path] = options_from(config, self.cli)
            options = replace(base, project=self.facts(self.root_of(directory)))
            self._options[directory] = options = with_pinned_target(options)
        return options

    # --- per file ----------------------------------------------------------------------------

    def config_for(self, path: Path) -> Config:
        return self.config_in(self.directory(path))

    def options_for(self, path: Path) -> Options:
        """The options of ``path`` (Options.for_path then adds what depends on the file itself)."""
        return self.options_in(self.directory(path))

    def project_root(self, path: Path) -> Path:
        return self.root_of(self.directory(path))

    def excluded(self, path: Path) -> bool:
        """Whether the excludes of the file's configuration match it."""
        config = self.config_for(path)
        anchored = self._excludes.get(config.path)
        if anchored is None:
            here = Path.cwd().resolve().as_posix()  # the command line's globs are relative to where it runs
            replacing = None if self.cli.exclude is None else tuple((here, glob) for glob in self.cli.exclude)
            added = tuple((here, glob) for glob in self.cli.extend_exclude)
            anchored = self._excludes[config.path] = config.anchored_excludes(replacing) + added
        if matches_any(anchored, path):
            return True
        if config is self.explicit:  # --config FILE outside the tree: its component globs apply below the project root
            root = self.project_root(path).as_posix()
            return matches_any(tuple((root, glob) for _, glob in anchored if "/" not in glob.rstrip("/")), path)
        return False

    def primary_options(self) -> Options:
        """The options of the common directory of the paths (the migration report's ``options``)."""
        return self.options_in(self.common)

    # --- files -------------------------------------------------------------------------------

    def discover(self, paths: list[Path] | None = None) -> Discovery:
        """The files a run reads: those found in the directories given, less their configurations'
        excludes, and the files named (unless ``force_exclude`` and excluded)."""
        paths = self.paths if paths is None else paths
        if self.cli.force_exclude:
            paths = [p for p in paths if p.is_dir() or not self.excluded(p)]
        return discover(paths, excluded=self.excluded)

    def facts(self, root: Path) -> ProjectFacts:
        """The project facts of a project root, from every file the run's discovery finds there."""
        facts = self._facts.get(root)
        if facts is None:
            files = discover([root], excluded=self.excluded).files
            cache = Cache.for_paths([root]) if self.cli.cache else None
            compute = functools.partial(project_facts, files, root)
            facts = self._facts[root] = cache.facts(root, files, compute) if cache is not None else compute()
        return facts

    # --- --show-settings ---------------------------------------------------------------------

    def describe(self, path: Path) -> str:
        """The settings used for ``path`` and where they come from (``--show-settings``)."""
        config = self.config_for(path)
        options = self.options_for(path)
        here = options.for_path(path)
        if self.cli.isolated:
            source = "none (--isolated)"
        elif config.path is None:
            source = "none (no configuration file above the file: defaults)"
        else:
            source = str(config.path.resolve()) + (" (--config)" if config is self.explicit else "")
        lines = [f"Resolved settings for: {path}", f"Settings path: {source}"]
        lines += [f"Extends: {base.resolve()}" for base in config.chain[1:]]
        lines += [
            f"Project root: {self.project_root(path)} (where the project facts come from)",
            f"Excluded: {'yes' if self.excluded(path) else 'no'} (by the configured excludes)",
            "",
        ]
        anchored_pfi = {_glob(base, glob): list(codes) for base, glob, codes in options.per_file_ignores}
        settings = {
            "select": list(here.select),
            "ignore": list(here.ignore),
            "per-file-ignores": anchored_pfi,
            "exclude": [_glob(base, glob) for base, glob in config.anchored_excludes()],
            **{setting.key: _shown(getattr(here, setting.field)) for setting in SETTINGS},
            "target.torch_npu": here.target.chosen,
            "target.from-pin": here.target.pin or None,
            "validate.entries": list(config.validate_entries),
            "validate.run": config.validate_run,
            "cuda-extensions": list(here.project.cuda_extensions),
            "local-modules": list(here.file.local_modules),
            "npu-backend-classes": list(here.project.npu_backend_classes),
            "pins": {name: spec for name, spec in here.project.pins},
            "pin-files": list(here.project.pin_files),
        }
        lines += [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
        return "\n".join(lines)


def _shown(value):
    """A setting's value as its configuration writes it (a tier by its name)."""
    return value if value is None or isinstance(value, (bool, str)) else str(value)


def _glob(base: str, glob: str) -> str:
    """A configured glob as ruff shows it: anchored at its directory when it holds a ``/``."""
    return f"{base}/{glob.removeprefix('./')}" if base and "/" in glob.rstrip("/") else glob
