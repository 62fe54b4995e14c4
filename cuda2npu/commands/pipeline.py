"""The run both ``check`` and ``migrate`` make: discover the files, run the rules over the Python
files (in parallel, with the result cache and a progress bar), then over the project's other files
(dependency files, run configs, launch scripts). What the commands do with the results is theirs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from cuda2npu.core.diagnostics import FileResult, Summary
from cuda2npu.filekinds.depfiles import is_project_file
from cuda2npu.output import style
from cuda2npu.project.project_files import finish_run
from cuda2npu.project.runner import default_jobs, run
from cuda2npu.project.settings import RunSettings
from cuda2npu.project.workset import collect_results, display_name


@dataclass
class ProjectRun:
    results: list[FileResult]
    summary: Summary
    by_name: dict[str, Path]  # display name -> path, of every discovered file
    skipped: list[tuple[Path, str]]  # discovered but not read (why)


def run_rules(
    settings: RunSettings,
    paths: list[Path],
    jobs: int | None,
    name_of: Callable[[Path], str] = display_name,
    cache: str | None = "auto",
) -> ProjectRun:
    """Every result of the files under ``paths``, each named by ``name_of`` and checked with its
    own configuration's options and its project's facts (``settings.options_for``)."""
    found = settings.discover(paths)
    style.warn_if_empty(found.files)
    names = {path: name_of(path) for path in found.files}
    sources = [(path, name) for path, name in names.items() if not is_project_file(path)]
    summary = Summary()
    results = collect_results(
        lambda done: run(sources, settings.options_for, jobs or default_jobs(), cache=cache, on_done=done),
        summary,
        len(sources),
    )
    results = finish_run(results, names, settings.options_for, summary)
    return ProjectRun(results, summary, {name: path for path, name in names.items()}, found.skipped)
