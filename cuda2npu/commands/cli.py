"""The command line: ``cuda2npu migrate``, ``check`` and ``rules``.

Exit codes (ruff's contract): 0 nothing found / nothing to change, 1 findings or changes,
2 usage or configuration error, 3 internal error (a log with version information is written),
130 interrupted. A closed output pipe (``cuda2npu migrate . --diff | head``) is not an error: the
rest of the output is dropped and the exit code is the one the command would have had.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import signal
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import click
from click.core import ParameterSource

from cuda2npu import __version__
from cuda2npu.commands.crash import internal_error
from cuda2npu.core.catalogue import all_rules, matching, no_match
from cuda2npu.core.config import ConfigError
from cuda2npu.core.options import default_select
from cuda2npu.core.strategy_settings import OUTPUT_SETTINGS, STRATEGY_SETTINGS, StrategySetting
from cuda2npu.output import style

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _codes(values: tuple[str, ...], option: str) -> tuple[str, ...]:
    """Comma-separated, repeatable code prefixes of ``option``, each validated against the catalogue."""
    codes = tuple(c.strip().upper() for value in values for c in value.split(",") if c.strip())
    for code in codes:
        if code != "ALL" and not matching(code):
            raise click.BadParameter(no_match(code), param_hint=f"'{option}'")
    return tuple("NPU" if c == "ALL" else c for c in codes)


def _globs(values: tuple[str, ...]) -> tuple[str, ...]:
    """Comma-separated, repeatable globs (``--exclude 'build,*.pyi' --exclude tests/data``)."""
    return tuple(glob.strip() for value in values for glob in value.split(",") if glob.strip())


def _run_settings(
    paths, select, ignore, strategies: dict, settings, fix: bool, default_select=("NPU",), project_root=None, **values
):
    """Each file's configuration and options (cuda2npu/project/settings.py): the command line
    (``strategies`` and ``values``, the command's own: field -> (value, given on the command line);
    ``settings``, see with_selection) over the nearest configuration file of each file;
    ``default_select``: the selection when neither gives one (check's leaves the NPU8 advisories out);
    ``project_root``: where the project facts come from, when the command says (migrate --out)."""
    from cuda2npu.project.settings import CommandLine, RunSettings

    command_line = CommandLine(
        select=_codes(select, "--select"),
        ignore=_codes(ignore, "--ignore"),
        extend_select=_codes(settings.extend_select, "--extend-select"),
        values=tuple((name, value, given) for name, (value, given) in {**strategies, **values}.items()),
        config_file=settings.config_file,
        isolated=settings.isolated,
        force_exclude=settings.force_exclude,
        ignore_noqa=settings.ignore_noqa,
        exclude=_globs(settings.exclude) if settings.exclude else None,
        extend_exclude=_globs(settings.extend_exclude),
        fix=fix,
        default_select=default_select,
        project_root=project_root,
        cache=project_root is None,  # migrate --out writes no cache into the source tree
    )
    return RunSettings(paths, command_line)


def _show(settings, run_settings) -> None:
    """``--show-settings`` / ``--show-files``: print them and exit 0, as ruff does."""
    if not (settings.show_settings or settings.show_files):
        return
    if settings.show_settings and settings.show_files:
        raise click.UsageError("--show-settings and --show-files cannot be combined")
    if settings.show_files:
        from cuda2npu.project.workset import display_name

        for path in run_settings.discover().files:
            style.echo(display_name(path))
        sys.exit(0)
    first = next((path for path in run_settings.paths if not path.is_dir()), None)
    if first is None:  # directories only: the first file check would read there
        first = next(iter(run_settings.discover().files), None)
    if first is None:
        raise click.UsageError("--show-settings: no file under the given paths")
    style.echo(run_settings.describe(first))
    sys.exit(0)


def _given(name: str) -> bool:
    """Whether a parameter of the current command was set on the command line (not a default)."""
    source = click.get_current_context().get_parameter_source(name)
    return source is not None and source not in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)


class _Group(click.Group):
    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort, SystemExit):
            raise
        except ConfigError as exc:
            click.echo(f"cuda2npu: error: {exc}", err=True)
            sys.exit(EXIT_USAGE)
        except KeyboardInterrupt as exc:  # its message, when there is one, says where the run stopped
            style.echo(f"cuda2npu: interrupted {exc}".rstrip(), err=True)
            sys.exit(EXIT_INTERRUPTED)
        except BrokenPipeError as exc:
            if not style.output_closed():  # a pipe of our own (a child process), not the reader of our output
                sys.exit(internal_error(exc))
            style.discard_output()
            sys.exit(0)
        except Exception as exc:  # noqa: BLE001
            sys.exit(internal_error(exc))


def _set_color(ctx, param, value) -> None:
    if value is not None:
        style.set_choice(value)


color_option = click.option(
    "--color",
    type=click.Choice(style.CHOICES),
    default=None,
    expose_value=False,
    is_eager=True,
    callback=_set_color,
    help="Colour the output: auto (on a terminal, unless NO_COLOR is set; FORCE_COLOR forces it), always, never.",
)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="cuda2npu")
@color_option
def main() -> None:
    """Migrate PyTorch CUDA projects to Huawei Ascend NPUs."""
    signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum, frame) -> None:
    """SIGTERM is handled like Ctrl-C: atomic writes already done stay, the rest is not started."""
    raise KeyboardInterrupt


def _strategy_option(setting: StrategySetting):
    """The click option of a setting (core/strategy_settings.py)."""
    kind = {"choice": click.Choice(setting.choices), "bool": None, "version": None}[setting.kind]
    names = [setting.flag] + ([setting.param] if setting.param else [])
    return click.option(
        *names,
        type=kind,
        default=setting.default,
        show_default=setting.kind == "choice",
        metavar=setting.metavar,
        help=setting.help,
    )


selection = [
    click.option(
        "--select",
        multiple=True,
        help="Rule codes or prefixes to enable (e.g. NPU1,NPU201; ALL). `check` leaves the NPU8 advisories out unless selected.",
    ),
    click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable."),
    click.option(
        "--jobs", "-j", type=click.IntRange(min=1), default=None, help="Worker processes (default: CPU count)."
    ),
    *(_strategy_option(setting) for setting in STRATEGY_SETTINGS),
    click.option(
        "--target-torch-npu",
        metavar="VERSION",
        default=None,
        help="Never emit torch_npu APIs or keywords newer than this release "
        "(default: the newest the project's torch pin allows, else the newest documented).",
    ),
    click.option(
        "--extend-select",
        multiple=True,
        help="Rule codes or prefixes to enable on top of the selection (NPU8: the advisories; opt-in rules such as NPU005 need their full code).",
    ),
    click.option(
        "--config",
        "config_file",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="Use this configuration file instead of the nearest pyproject.toml / cuda2npu.toml.",
    ),
    click.option("--isolated", is_flag=True, help="Ignore every configuration file."),
    click.option(
        "--ignore-noqa", is_flag=True, help="Ignore every `# noqa` directive (report and fix what they hide)."
    ),
    click.option(
        "--show-settings",
        is_flag=True,
        help="Print the settings used for the first file of PATHS (its configuration file, options and project facts) and exit.",
    ),
    click.option("--show-files", is_flag=True, help="Print the files that would be read, one per line, and exit."),
    click.option(
        "--exclude",
        multiple=True,
        metavar="GLOBS",
        help="Globs of files and directories to leave out, replacing every configured `exclude` "
        "(comma-separated, repeatable; relative to the current directory).",
    ),
    click.option(
        "--extend-exclude",
        multiple=True,
        metavar="GLOBS",
        help="Globs to leave out on top of the configured excludes.",
    ),
    click.option(
        "--force-exclude",
        is_flag=True,
        help="Apply the configured excludes to files named on the command line too (pre-commit).",
    ),
    click.option(
        "--no-cache",
        is_flag=True,
        expose_value=False,
        callback=lambda ctx, param, value: _disable_cache(value),
        help="Neither read nor write the result cache (.cuda2npu_cache/; also CUDA2NPU_NO_CACHE=1).",
    ),
    color_option,
]


def _disable_cache(value: bool) -> None:
    """--no-cache: through the environment, so that pool workers see it too (cuda2npu/project/cache.py)."""
    if value:
        from cuda2npu.project.cache import ENV_DISABLE

        os.environ[ENV_DISABLE] = "1"


@dataclass(frozen=True)
class Settings:
    """What with_selection hands to a command besides the strategies: how each file's configuration
    is found and the options combined with it (_run_settings). Its fields are the click
    parameters of the same names."""

    extend_select: tuple[str, ...]
    config_file: Path | None
    isolated: bool
    force_exclude: bool
    show_settings: bool
    show_files: bool
    ignore_noqa: bool
    exclude: tuple[str, ...]
    extend_exclude: tuple[str, ...]


def with_output_settings(func):
    """Add migrate's output settings (``--max-tier``, ``--markers/--no-markers``, ...); they arrive as
    ``outputs``: field -> (value, given on the command line)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        outputs = {s.field: (kwargs.pop(s.param or s.field), _given(s.param or s.field)) for s in OUTPUT_SETTINGS}
        return func(*args, outputs=outputs, **kwargs)

    for setting in reversed(OUTPUT_SETTINGS):
        wrapper = _strategy_option(setting)(wrapper)
    return wrapper


# click parameter -> Options field of the strategies (each file's configuration fills in the rest)
STRATEGIES = {
    **{setting.param or setting.field: setting.field for setting in STRATEGY_SETTINGS},
    "target_torch_npu": "target_torch_npu",
}


def with_selection(func):
    """Add the options shared by migrate and check; they arrive as ``strategies`` (field -> (value,
    given on the command line)) and ``settings`` (:class:`Settings`) plus select/ignore/jobs."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        strategies = {field: (kwargs.pop(param), _given(param)) for param, field in STRATEGIES.items()}
        settings = Settings(**{name: kwargs.pop(name) for name in Settings.__dataclass_fields__})
        return func(*args, strategies=strategies, settings=settings, **kwargs)

    for option in reversed(selection):
        wrapper = option(wrapper)
    return wrapper


def _stdin_source(paths: tuple[Path, ...], stdin_filename: Path | None) -> tuple[list[Path], bytes | None]:
    """``PATH -`` reads the text of ``--stdin-filename`` (default ``stdin.py``) from stdin, as ruff
    does: (the paths to use, the text or None)."""
    if Path("-") not in paths:
        if stdin_filename is not None:
            raise click.UsageError("--stdin-filename names the text read from stdin: pass `-` as the PATH")
        return list(paths), None
    if len(paths) > 1:
        raise click.UsageError("`-` (read stdin) cannot be combined with other paths")
    path = stdin_filename or Path("stdin.py")
    if path.suffix not in (".py", ".pyi", ".ipynb"):
        raise click.UsageError(
            f"--stdin-filename {path}: stdin is read as a Python file or notebook (.py, .pyi, .ipynb)"
        )
    return [path], click.get_binary_stream("stdin").read()


stdin_filename_option = click.option(
    "--stdin-filename",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With `-` as the PATH: the file the text read from stdin stands for (its configuration and "
    "per-file ignores apply; findings name it).",
)


def _writable(ctx, param, value: Path | None) -> Path | None:
    """An output file's path, refused (usage error, exit 2) before anything runs when it cannot be written."""
    if value is None:
        return None
    directory = value.parent
    if value.is_dir():
        raise click.BadParameter(f"cannot write {value}: it is a directory")
    if not directory.is_dir():
        raise click.BadParameter(f"cannot write {value}: the directory {directory} does not exist")
    if not os.access(directory, os.W_OK) or (value.exists() and not os.access(value, os.W_OK)):
        raise click.BadParameter(f"cannot write {value}: permission denied")
    return value


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, allow_dash=True, path_type=Path))
@stdin_filename_option
@click.option("--out", "out_dir", type=click.Path(path_type=Path), help="Write a migrated copy of the tree here.")
@click.option("--diff", is_flag=True, help="Print a unified diff; write nothing.")
@click.option("--check", "check_only", is_flag=True, help="Write nothing; exit 1 if anything would change.")
@click.option(
    "--report",
    "report_file",
    type=click.Path(path_type=Path),
    callback=_writable,
    help="Write the JSON migration report here.",
)
@with_output_settings
@click.option("--allow-dirty", is_flag=True, help="Rewrite files with uncommitted git changes.")
@click.option(
    "--show-fixes", is_flag=True, help="List the fixes applied (or, with --diff/--check, to apply) per file and rule."
)
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
@click.option(
    "--exit-non-zero-on-fix",
    is_flag=True,
    help="Exit 1 when files were changed (the pre-commit hook: the commit is stopped for review).",
)
@click.option(
    "--exit-non-zero-on-open",
    is_flag=True,
    help="Exit 1 while findings that need a human (manual and review items, not advisories) are left in "
    "the files, on every run, not only the one that adds their markers (the pre-commit hook).",
)
@with_selection
def migrate(
    paths,
    stdin_filename,
    out_dir,
    diff,
    check_only,
    report_file,
    outputs,
    allow_dirty,
    show_fixes,
    quiet,
    exit_non_zero_on_fix,
    exit_non_zero_on_open,
    select,
    ignore,
    jobs,
    strategies,
    settings,
):
    """Rewrite CUDA code under PATHS (default: the current directory) for Ascend NPU (in place
    unless --out/--diff/--check)."""
    from cuda2npu.commands.migrate import MigrateRequest, migrate_stdin, run_migrate

    paths, stdin = _stdin_source(paths, stdin_filename)
    if stdin is not None and (out_dir is not None or report_file is not None):
        raise click.UsageError("`-` (read stdin) writes the migrated text to stdout: --out and --report need files")
    paths = paths or [Path(".")]
    run_settings = _run_settings(
        list(paths),
        select,
        ignore,
        strategies,
        settings,
        fix=True,
        project_root=paths[0] if out_dir is not None else None,
        **outputs,
    )
    _show(settings, run_settings)
    request = MigrateRequest(
        paths=list(paths),
        options=run_settings.primary_options(),
        settings=run_settings,
        exit_non_zero_on_fix=exit_non_zero_on_fix,
        exit_non_zero_on_open=exit_non_zero_on_open,
        out_dir=out_dir,
        diff=diff,
        check_only=check_only,
        report_file=report_file,
        allow_dirty=allow_dirty,
        show_fixes=show_fixes,
        quiet=quiet,
        jobs=jobs,
        stdin=stdin,
    )
    sys.exit(migrate_stdin(request) if stdin is not None else run_migrate(request))


def _no_fix(ctx, param, value) -> None:
    if value:
        raise click.UsageError(
            "`check` never changes a file: `cuda2npu migrate PATHS` applies the fixes "
            "(`--diff` shows them first, `--check` only says whether anything would change)"
        )


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, allow_dash=True, path_type=Path))
@stdin_filename_option
@click.option(
    "--output-format",
    "--format",
    "output_format",
    type=click.Choice(["text", "concise", "json", "github", "sarif", "gitlab", "junit"]),
    default="text",
    show_default=True,
    help="How findings are printed (`--format` is the older spelling, as in ruff).",
)
@click.option("--statistics", is_flag=True, help="Count the findings per rule instead of listing them (text or json).")
@click.option("--quiet", "-q", is_flag=True, help="Print the findings only, without the closing summary line.")
@click.option(
    "--show-fixes",
    is_flag=True,
    help="After the findings (text formats), list the fixes `migrate` would apply per file and rule.",
)
@click.option("--fix", is_flag=True, hidden=True, expose_value=False, callback=_no_fix)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option(
    "--output-file",
    "-o",
    type=click.Path(path_type=Path),
    callback=_writable,
    help="Write the output here instead of stdout.",
)
@click.option(
    "--add-noqa", is_flag=True, help="Add `# noqa: CODE` comments on the lines of the current findings; report nothing."
)
@click.option(
    "--baseline",
    "baseline_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Report only findings not recorded in this baseline file.",
)
@click.option("--write-baseline", is_flag=True, help="Record the current findings in the --baseline file and exit 0.")
@with_selection
def check(
    paths,
    stdin_filename,
    output_format,
    statistics,
    quiet,
    show_fixes,
    exit_zero,
    output_file,
    add_noqa,
    baseline_file,
    write_baseline,
    select,
    ignore,
    jobs,
    strategies,
    settings,
):
    """Report CUDA-only code under PATHS (default: the current directory) without changing anything."""
    from cuda2npu.commands.check import CheckRequest, run_check

    if statistics and output_format not in ("text", "json"):
        raise click.UsageError("--statistics prints text or json (--output-format text|json)")
    if write_baseline and baseline_file is None:
        raise click.UsageError("--write-baseline needs --baseline FILE")
    if add_noqa and (baseline_file is not None or output_file is not None):
        raise click.UsageError("--add-noqa cannot be combined with --baseline or --output-file")
    paths, stdin = _stdin_source(paths, stdin_filename)
    if stdin is not None and add_noqa:
        raise click.UsageError("--add-noqa writes files: it cannot be combined with `-` (read stdin)")
    run_settings = _run_settings(
        paths or [Path(".")],
        select,
        ignore,
        strategies,
        settings,
        fix=False,
        default_select=default_select(),
        max_tier=("review", False),
    )
    _show(settings, run_settings)
    request = CheckRequest(
        paths=run_settings.paths,
        options=run_settings.primary_options(),
        settings=run_settings,
        output_format=output_format,
        exit_zero=exit_zero,
        output_file=output_file,
        jobs=jobs,
        add_noqa=add_noqa,
        baseline=baseline_file,
        write_baseline=write_baseline,
        statistics=statistics,
        quiet=quiet,
        show_fixes=show_fixes,
        stdin=stdin,
    )
    sys.exit(run_check(request))


@main.command()
@click.argument("code", required=False)
@click.option(
    "--output-format",
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
    help="`--format` is the older spelling.",
)
def rules(code, output_format):
    """List every rule, the rules of a prefix (`cuda2npu rules NPU3`), or the documentation of one
    (`cuda2npu rules NPU101`)."""
    from cuda2npu.output import ruledocs

    catalogue = all_rules()
    code = code.strip().upper() if code else None
    codes = [code] if code in catalogue else matching(code) if code and code != "ALL" else list(catalogue)
    if not codes:
        raise click.BadParameter(no_match(code), param_hint="CODE")
    selected = [catalogue[c] for c in codes]
    if output_format == "json":
        style.echo(json.dumps([ruledocs.as_dict(doc) for doc in selected], indent=2))
    elif output_format == "markdown":
        style.echo(ruledocs.markdown(selected))
    elif code in catalogue:
        style.echo(ruledocs.text(selected[0]))
    else:
        style.echo(ruledocs.table(selected))


class _OriginalTree(click.ParamType):
    """A directory, or ``git:REV``: the migrated tree at a git revision (an in-place migration)."""

    name = "original"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.startswith("git:"):
            return value
        return click.Path(exists=True, file_okay=False, path_type=Path).convert(value, param, ctx)


@main.command()
@click.argument("original", type=_OriginalTree())
@click.argument("migrated", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--entry",
    "entries",
    multiple=True,
    metavar="MODULE:FUNCTION",
    help="Function returning (model, inputs[, optimizer_factory]); repeatable (default: validate.entries of the original's configuration).",
)
@click.option(
    "--precision",
    type=click.Choice(["fp32", "bf16", "fp16"]),
    default=None,
    help="Tolerance class (default: from the migrated outputs' dtype).",
)
@click.option(
    "--dropout-check", is_flag=True, help="Also compare train-mode output variance (catches un-inverted keep_prob)."
)
@click.option(
    "--json",
    "json_file",
    type=click.Path(path_type=Path),
    callback=_writable,
    help="Write the comparison as JSON here.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--run",
    "command",
    metavar="COMMAND",
    help='Run this script command in both trees and compare them step by step, e.g. "train.py --steps 2" (default: validate.run of the configuration when no --entry is given).',
)
@click.option(
    "--steps", type=click.IntRange(min=1), default=2, show_default=True, help="Optimizer steps recorded with --run."
)
@click.option(
    "--npu-autoload/--no-npu-autoload",
    default=False,
    show_default=True,
    help="Emulate torch auto-loading torch_npu at `import torch` (TorchNPU >= 2.5.1); without it the npu "
    "device exists only once the migrated code imports torch_npu, the strictest host.",
)
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="Print every compared tensor (every divergence with --run) and whole tracebacks, not only the mismatches.",
)
@color_option
def validate(
    original, migrated, entries, precision, dropout_check, json_file, seed, command, steps, npu_autoload, verbose
):
    """Run ENTRY (or a script with --run) in the ORIGINAL and MIGRATED trees and compare outputs,
    gradients and optimizer steps. ORIGINAL is a directory, or git:REV for the MIGRATED tree at a
    git revision (after an in-place migration: git:HEAD before committing it)."""
    _require_torch()
    from cuda2npu.validation.revision import RevisionError, original_tree

    try:
        with original_tree(original, migrated) as tree:
            _validate(
                tree,
                migrated,
                entries,
                precision,
                dropout_check,
                json_file,
                seed,
                command,
                steps,
                npu_autoload,
                verbose,
            )
    except RevisionError as exc:
        raise click.UsageError(str(exc)) from None


def _validate(
    original, migrated, entries, precision, dropout_check, json_file, seed, command, steps, npu_autoload, verbose
):
    if command is None and not entries:
        from cuda2npu.core.config import load_config

        command = load_config([original]).validate_run
    if command is not None:
        from cuda2npu.validation.render import render_script
        from cuda2npu.validation.script import validate_script

        result = validate_script(original, migrated, command, steps, precision, seed, npu_autoload)
        render_script(result, _console(), verbose=verbose)
        if json_file is not None:
            json_file.write_text(json.dumps({"version": 1, "results": [result.to_json()]}, indent=2) + "\n")
        sys.exit(result.exit_code)

    from cuda2npu.validation.harness import validate as run_validation
    from cuda2npu.validation.render import render, render_summary

    if not entries:
        from cuda2npu.validation.generate import configured_entries

        entries = configured_entries(original)
    if not entries:
        raise click.UsageError(
            "no --entry or --run given and no [tool.cuda2npu.validate] entries or run in the original's configuration"
        )
    from cuda2npu.validation.entries import entry_problem

    problems = [problem for entry in entries if (problem := entry_problem(original, entry)) is not None]
    if problems:
        raise click.UsageError("\n".join(problems))
    console = _console()
    results = []
    for entry in entries:  # each printed as soon as it is known
        results.append(
            run_validation(original, migrated, entry, precision, seed, 20 if dropout_check else 0, npu_autoload)
        )
        render(results[-1], console, verbose)
    render_summary(results, console)
    if json_file is not None:
        json_file.write_text(json.dumps({"version": 1, "results": [r.to_json() for r in results]}, indent=2) + "\n")
    sys.exit(max(r.exit_code for r in results))


NUMPY_WARNING = "Failed to initialize NumPy"  # torch's UserWarning on import when NumPy is not installed


def _require_torch() -> None:
    """validate runs the models: torch is its optional dependency (exit 2 naming the extra when missing)."""
    try:
        found = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise click.UsageError(
            "`cuda2npu validate` runs the models and needs torch, which is not installed here: "
            "pip install 'cuda2npu[validate]' (or pip install torch)"
        )
    # torch warns on every import when NumPy is absent; the comparison does not use NumPy
    warnings.filterwarnings("ignore", message=NUMPY_WARNING, category=UserWarning)
    children = os.environ.get("PYTHONWARNINGS", "")
    if NUMPY_WARNING not in children:  # the two sides run in child processes
        os.environ["PYTHONWARNINGS"] = ",".join(filter(None, (children, f"ignore:{NUMPY_WARNING}:UserWarning")))


def _console():
    """A rich console that never cuts a line at 80 columns when the output is not a terminal."""
    from rich.console import Console

    return Console(
        soft_wrap=True, force_terminal=True if style.enabled() else None, no_color=not style.enabled(), highlight=False
    )


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
def clean(paths):
    """Remove the result cache (.cuda2npu_cache/) of the project holding PATHS (default: the current directory)."""
    from cuda2npu.project.cache import clean as clean_cache

    removed = clean_cache(list(paths) or [Path.cwd()])
    for directory in removed:
        click.echo(f"Removed {directory}", err=True)
    if not removed:
        click.echo("No cache to remove.", err=True)
