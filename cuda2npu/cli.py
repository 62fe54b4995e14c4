"""The command line: ``cuda2npu migrate``, ``check`` and ``rules``.

Exit codes (ruff's contract): 0 nothing found / nothing to change, 1 findings or changes,
2 usage or configuration error, 3 internal error (a log with version information is written),
130 interrupted.
"""

from __future__ import annotations

import functools
import json
import platform
import signal
import sys
import tempfile
import traceback
from pathlib import Path

import click

from cuda2npu import __version__
from cuda2npu.catalogue import all_rules
from cuda2npu.diagnostics import Tier
from cuda2npu.options import STRATEGY_CHOICES, Options

EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130


def _codes(values: tuple[str, ...]) -> tuple[str, ...]:
    """Comma-separated, repeatable code prefixes, each validated against the catalogue."""
    codes = tuple(c.strip().upper() for value in values for c in value.split(",") if c.strip())
    known = all_rules()
    for code in codes:
        if code != "ALL" and not any(k.startswith(code) for k in known):
            raise click.BadParameter(f"{code!r} matches no rule code (see `cuda2npu rules`)")
    return tuple("NPU" if c == "ALL" else c for c in codes)


def _options(select, ignore, strategies: dict, max_tier="review", markers=True, fix=True) -> Options:
    return Options(
        select=_codes(select) or ("NPU",),
        ignore=_codes(ignore),
        max_tier=Tier.parse(max_tier),
        markers=markers,
        fix=fix,
        **strategies,
    )


def internal_error(exc: BaseException) -> int:
    """Write a crash log with version information and say where it is."""
    import libcst

    log = Path(tempfile.gettempdir()) / f"cuda2npu-crash-{__version__}.log"
    log.write_text(
        f"cuda2npu {__version__}\npython {sys.version}\nlibcst {libcst.__version__ if hasattr(libcst, '__version__') else '?'}\n"
        f"platform {platform.platform()}\nargv {sys.argv}\n\n{''.join(traceback.format_exception(exc))}",
        encoding="utf-8",
    )
    click.echo(f"cuda2npu: internal error: {exc}. Details (with versions) in {log}; please report it.", err=True)
    return EXIT_INTERNAL


class _Group(click.Group):
    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort, SystemExit):
            raise
        except KeyboardInterrupt:
            click.echo("cuda2npu: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except Exception as exc:  # noqa: BLE001
            sys.exit(internal_error(exc))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cuda2npu")
def main() -> None:
    """Migrate PyTorch CUDA projects to Huawei Ascend NPUs."""
    signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum, frame) -> None:
    """SIGTERM is handled like Ctrl-C: atomic writes already done stay, the rest is not started."""
    raise KeyboardInterrupt


selection = [
    click.option("--select", multiple=True, help="Rule codes or prefixes to enable (e.g. NPU1,NPU201)."),
    click.option("--ignore", multiple=True, help="Rule codes or prefixes to disable."),
    click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Worker processes (default: CPU count)."),
    click.option("--precision", type=click.Choice(STRATEGY_CHOICES["precision"]), default="bf16", show_default=True, help="Mixed-precision policy for AMP rewrites."),
    click.option("--apex", "apex_strategy", type=click.Choice(STRATEGY_CHOICES["apex"]), default="native", show_default=True, help="native: apex to torch AMP/optimizers; ascend: keep apex for Ascend's apex fork."),
    click.option("--colossalai", "colossalai_strategy", type=click.Choice(STRATEGY_CHOICES["colossalai"]), default="keep", show_default=True, help="keep: ColossalAI on NPU; native: plain PyTorch distributed."),
    click.option("--fuse-sdpa", is_flag=True, help="Rewrite F.scaled_dot_product_attention to npu_fusion_attention (opt-in)."),
    click.option("--target-torch-npu", metavar="VERSION", default=None, help="Never emit torch_npu keywords newer than this release."),
]


def with_selection(func):
    """Add the options shared by migrate and check; they arrive as ``strategies`` plus select/ignore/jobs."""

    @functools.wraps(func)
    def wrapper(*args, precision, apex_strategy, colossalai_strategy, fuse_sdpa, target_torch_npu, **kwargs):
        strategies = {
            "precision": precision,
            "apex": apex_strategy,
            "colossalai": colossalai_strategy,
            "fuse_sdpa": fuse_sdpa,
            "target_torch_npu": target_torch_npu,
        }
        return func(*args, strategies=strategies, **kwargs)

    for option in reversed(selection):
        wrapper = option(wrapper)
    return wrapper


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--out", "out_dir", type=click.Path(path_type=Path), help="Write a migrated copy of the tree here.")
@click.option("--diff", is_flag=True, help="Print a unified diff; write nothing.")
@click.option("--check", "check_only", is_flag=True, help="Write nothing; exit 1 if anything would change.")
@click.option("--report", "report_file", type=click.Path(path_type=Path), help="Write the JSON migration report here.")
@click.option("--max-tier", type=click.Choice(["exact", "numeric", "review"]), default="review", show_default=True)
@click.option("--no-markers", is_flag=True, help="Do not add `# TODO(cuda2npu)` comments at manual sites.")
@click.option("--allow-dirty", is_flag=True, help="Rewrite files with uncommitted git changes.")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
@with_selection
def migrate(paths, out_dir, diff, check_only, report_file, max_tier, no_markers, allow_dirty, quiet, select, ignore, jobs, strategies):
    """Rewrite CUDA code under PATHS for Ascend NPU (in place unless --out/--diff/--check)."""
    from cuda2npu.migrate_command import MigrateRequest, run_migrate

    request = MigrateRequest(
        paths=list(paths),
        options=_options(select, ignore, strategies, max_tier, markers=not no_markers),
        out_dir=out_dir,
        diff=diff,
        check_only=check_only,
        report_file=report_file,
        allow_dirty=allow_dirty,
        quiet=quiet,
        jobs=jobs,
    )
    sys.exit(run_migrate(request))


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--format", "output_format", type=click.Choice(["text", "concise", "json", "github"]), default="text", show_default=True)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option("--output-file", "-o", type=click.Path(path_type=Path), help="Write the output here instead of stdout.")
@with_selection
def check(paths, output_format, exit_zero, output_file, select, ignore, jobs, strategies):
    """Report CUDA-only code under PATHS without changing anything."""
    from cuda2npu.check_command import run_check

    sys.exit(run_check(list(paths), _options(select, ignore, strategies, fix=False), output_format, exit_zero, output_file, jobs))


@main.command()
@click.argument("code", required=False)
@click.option("--format", "output_format", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
def rules(code, output_format):
    """List every rule, or print the documentation of one (e.g. `cuda2npu rules NPU101`)."""
    from cuda2npu import ruledocs

    catalogue = all_rules()
    if code is not None and code.upper() not in catalogue:
        raise click.BadParameter(f"unknown rule {code!r} (see `cuda2npu rules`)", param_hint="CODE")
    selected = [catalogue[code.upper()]] if code else list(catalogue.values())
    if output_format == "json":
        click.echo(json.dumps([ruledocs.as_dict(doc) for doc in selected], indent=2))
    elif output_format == "markdown":
        click.echo(ruledocs.markdown(selected))
    elif code:
        click.echo(ruledocs.text(selected[0]))
    else:
        click.echo(ruledocs.table(selected))
