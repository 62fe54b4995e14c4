"""Running the engine over many files: reading, prefilter, skip markers, a process pool.

Every file yields a :class:`FileResult`; no exception leaves a worker. Rule classes are imported
in each worker and instantiated per file.
"""

from __future__ import annotations

import functools
import os
import signal
import traceback
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Callable, Iterator

from cuda2npu.analysis.vllm_adapters import first_ascend_vllm
from cuda2npu.core import noqa, prefilter
from cuda2npu.core.decoding import decode
from cuda2npu.core.diagnostics import PREFILTER_REASON, FileResult
from cuda2npu.core.fileio import io_error
from cuda2npu.core.options import Options
from cuda2npu.filekinds.depfiles import scan_imports
from cuda2npu.filekinds.unparsed import skipped
from cuda2npu.project.cache import Cache
from cuda2npu.project.platform_dirs import OTHER_PLATFORM_REASON

PARALLEL_THRESHOLD = 16  # below this many files a pool costs more than it saves


@functools.lru_cache(maxsize=8)
def _pattern(options: Options):
    from cuda2npu.families import enabled_rules  # the rules load on the first cache miss only

    return prefilter.build(enabled_rules(options), options)


def process_file(path: Path, display: str, options: Options, cache: Cache | None = None) -> FileResult:
    """Read one file and check or migrate it (or take its result from ``cache``); never raises."""
    options = options.for_path(path)  # per-file-ignores from the configuration
    try:
        data = path.read_bytes()
    except OSError as exc:
        return io_error(display, exc)
    try:
        if cache is None:
            return _annotated(path, data, display, options)
        # the cache comes first: hashing (~1 GB/s) is cheaper than the prefilter regex
        key = cache.key(data, display, options)
        result = cache.get(key)
        if result is None:
            result = _annotated(path, data, display, options)
            cache.put(key, result)
        return result
    except Exception as exc:  # noqa: BLE001 - a rule bug must not end the run
        return _crashed(display, exc)


def process_stdin(data: bytes, path: Path, display: str, options: Options) -> FileResult:
    """Check or migrate text read from stdin as the file ``path`` would be (``check -
    --stdin-filename PATH``): its per-file options apply; never raises, as process_file."""
    try:
        return _annotated(path, data, display, options.for_path(path))
    except Exception as exc:  # noqa: BLE001 - a rule bug must not end the run
        return _crashed(display, exc)


def _crashed(display: str, exc: Exception) -> FileResult:
    return FileResult(
        display, "failed", f"internal error: {type(exc).__name__}: {exc}", internal_error=traceback.format_exc()
    )


def _annotated(path: Path, data: bytes, display: str, options: Options) -> FileResult:
    """The file's result with the imports of its final text (Python files and notebooks), which the
    dependency files' pass reads instead of the file, and the warnings about its malformed ``# noqa``
    directives (Python files; cached with the result)."""
    result = _process_bytes(path, data, display, options)
    if path.suffix in (".py", ".pyi", ".ipynb"):
        final = result.new_source if result.new_source is not None else data
        result.imports, result.imports_torch_npu = scan_imports(final, path.suffix == ".ipynb")
    if path.suffix in (".py", ".pyi") and not options.ignore_noqa and noqa.QUICK.search(data):
        result.warnings += [
            f"Invalid `# noqa` directive on {display}:{line}: {why}" for line, why in noqa.malformed(decode(data))
        ]
    return result


LEGACY_VLLM_REASON = (
    "a vendored adapter for vLLM {version}, which vllm-ascend does not support (its first release is for vLLM "
    "{first}): it never runs on an NPU host"
)


COG_PREDICTOR_REASON = (
    "a Cog predictor: it runs only in the image Cog builds for its `cog.yaml` (`gpu: true`, an NVIDIA CUDA base "
    "image; NPU717), which no NPU host runs"
)
UNAPPLIED_PATCH_REASON = (
    "a monkey patch nothing applies: its installer `{installer}()` is called nowhere in the project, so its "
    "functions never run (a failing import of it is reported where it is imported)"
)
MODULAR_SOURCE_REASON = (
    "a copy of transformers' modular source of `{modeling}`, which is generated from it: nothing imports it"
)


def _npu_version_reason(path: Path, version: str) -> str:
    if version == path.name:
        return "named for the NPU: the project's own NPU code, left as written"
    return f"the project's NPU version of it is {version} next to it: the CUDA original is left as written"


def _process_bytes(path: Path, data: bytes, display: str, options: Options) -> FileResult:
    reason = prefilter.skip_reason(data)
    if reason is not None:
        return FileResult(display, "skipped", reason)
    if options.file.legacy_vllm_adapter:  # analysis/vllm_adapters.py
        return FileResult(
            display,
            "skipped",
            LEGACY_VLLM_REASON.format(version=options.file.legacy_vllm_adapter, first=first_ascend_vllm()),
        )
    if options.file.npu_version:  # Options.for_path
        return FileResult(display, "skipped", _npu_version_reason(path, options.file.npu_version))
    if options.file.other_platform:  # project/platform_dirs.py
        return FileResult(display, "skipped", OTHER_PLATFORM_REASON.format(directory=options.file.other_platform))
    if options.file.cog_predictor:  # project/cog_predictors.py
        return FileResult(display, "skipped", COG_PREDICTOR_REASON)
    if options.file.unapplied_patch:  # analysis/unapplied_patches.py
        return FileResult(display, "skipped", UNAPPLIED_PATCH_REASON.format(installer=options.file.unapplied_patch))
    if options.file.modular_source:  # analysis/modular_sources.py
        return FileResult(
            display, "skipped", MODULAR_SOURCE_REASON.format(modeling=path.name.replace("modular_", "modeling_", 1))
        )
    if path.suffix == ".ipynb":  # code cells only: cuda2npu/filekinds/notebooks.py
        from cuda2npu.filekinds.notebooks import process_notebook

        return process_notebook(data, path, display, options, _pattern(options))
    if not _pattern(options).search(data):
        return (
            skipped(data, display, PREFILTER_REASON)
            if path.suffix in (".py", ".pyi")
            else FileResult(display, "skipped", PREFILTER_REASON)
        )
    from cuda2npu.filekinds.python import migrate_source  # libcst and the rules: on a cache miss only

    return migrate_source(data, display, options)


def _process(args: tuple[Path, str, Options, "Cache | None"]) -> FileResult:
    return process_file(*args)


def default_jobs() -> int:
    return os.cpu_count() or 1


def _process_chunk(tasks: list) -> list[FileResult]:
    return [_process(task) for task in tasks]


def _count(future, on_done: Callable[[int], None]) -> None:
    """A chunk's done-callback (in the pool's thread): report its files to ``on_done``."""
    if not future.cancelled() and future.exception() is None:
        on_done(len(future.result()))


def run(
    files: list[tuple[Path, str]],
    options: Options | Callable[[Path], Options],
    jobs: int,
    cache: "Cache | None | str" = "auto",
    on_done: Callable[[int], None] | None = None,
) -> Iterator[FileResult]:
    """Results in the order of ``files``; ``cache="auto"``: the project's result cache unless disabled.
    ``options``: the same for every file, or each file's (its configuration's: cuda2npu/project/settings.py).

    ``on_done(n)`` is called as soon as ``n`` more files are done, in whatever order the workers
    finish them (a progress bar that moves although the results are yielded in order).
    """
    if cache == "auto":
        cache = Cache.for_paths([path for path, _ in files]) if files else None
    options_of = options if callable(options) else lambda path: options
    tasks = [(path, display, options_of(path), cache) for path, display in files]
    if jobs <= 1 or len(tasks) < PARALLEL_THRESHOLD:
        for task in tasks:
            yield _process(task)
            if on_done is not None:
                on_done(1)
        return
    # small chunks: a file costs from nothing (no trigger) to a third of a second, and a chunk of 32
    # left one worker idle at the end (megatron-core --jobs 2: 7.2-7.7 s, chunks of 8: 6.6-6.7 s)
    chunk = max(1, min(8, len(tasks) // (jobs * 8)))
    pool = ProcessPoolExecutor(max_workers=jobs, initializer=_worker_signals)
    try:
        futures = [pool.submit(_process_chunk, tasks[i : i + chunk]) for i in range(0, len(tasks), chunk)]
        for future in futures if on_done is not None else ():
            future.add_done_callback(lambda done: _count(done, on_done))
        for future in futures:
            yield from future.result()
    except BaseException:  # Ctrl-C / SIGTERM / the caller stopped: do not wait for queued files
        workers = list(getattr(pool, "_processes", {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for worker in workers:  # workers only compute; nothing they do needs finishing
            worker.terminate()
        for worker in workers:
            worker.join(timeout=5)
        # the pool's manager thread closes its wake-up pipe once it sees the workers gone; exiting before
        # it has could race the interpreter's exit hook writing to that pipe (a Traceback after Ctrl-C)
        manager = getattr(pool, "_executor_manager_thread", None)
        if manager is not None:
            manager.join(timeout=5)
        raise
    pool.shutdown()


def _worker_signals() -> None:
    """Workers leave Ctrl-C (sent to the whole process group) and SIGTERM to the parent's handling."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
