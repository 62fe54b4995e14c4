"""The dependency files and shell scripts of a run, checked after its Python files (whose
migrated imports decide which requirements stay)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Callable

from cuda2npu.core.diagnostics import FileResult, Finding, Summary
from cuda2npu.core.fileio import io_error
from cuda2npu.filekinds.cmake_files import check_cmake_file, is_cmake_file
from cuda2npu.filekinds.cog_files import check_cog_file, is_cog_file
from cuda2npu.filekinds.compose_files import check_compose_file, is_compose_file, reads_as_compose_file
from cuda2npu.filekinds.depfiles import (
    TOP_LEVEL_TORCH_NPU,
    ProjectImports,
    check_text,
    decoded_text,
    encoded_like,
    imported_modules,
    is_project_file,
)
from cuda2npu.filekinds.dockerfiles import check_dockerfile, is_dockerfile
from cuda2npu.filekinds.platform_variants import for_another_platform
from cuda2npu.filekinds.runconfig_files import is_run_config
from cuda2npu.filekinds.runconfigs import check_run_configs
from cuda2npu.filekinds.shellscripts import check_shell_file, is_shell_script
from cuda2npu.project.discovery import discover
from cuda2npu.project.platform_dirs import OTHER_PLATFORM_REASON

FileImports = tuple[set[str], bool]  # (modules a file imports, whether it imports torch_npu unguarded)


# libraries that pick the NPU themselves when torch_npu can be imported (transformers'
# is_torch_npu_available, accelerate's is_npu_available, DeepSpeed's accelerator detection):
# a project on them needs torch_npu installed even where no file of its own imports it
NPU_LOADERS = frozenset({"transformers", "accelerate", "deepspeed"})

# directories holding a project's install files rather than code of their own: their dependency files serve the
# directory above (imaginaire's scripts/requirements.txt, installed by scripts/install.sh for the repository: its
# pynvml is imported by imaginaire/utils/gpu_affinity.py, round 64)
INSTALL_DIRS = frozenset({"requirements", "scripts", "docker", "install", "env", "envs", "ci"})


def project_imports(
    directory: Path,
    results: list[FileResult],
    by_name: dict[str, Path],
    scans: dict[Path, FileImports],
    real: Callable[[Path], Path] = Path.resolve,
    reached: dict[str, str] | None = None,
) -> ProjectImports:
    """Imports of every Python file and notebook under ``directory`` (the dependency file's
    project), read after migration: files this run rewrote count with their new text. The whole
    project is scanned, not only the files of the run, so that a hook given a few staged files
    never removes a requirement that other files still import. ``scans`` keeps each file's
    imports for the other dependency files of the run (nested projects share files); the files of
    the run come with theirs (``FileResult.imports``). ``real``: ``Path.resolve``, memoised by the run.
    ``reached``: real path → the CUDA-only module a file reaches through the project's own imports
    (project fact ``failing_imports``): chameleon's viewer backend needs xformers through
    ``chameleon.inference.loader`` although none of its files imports it (round 40)."""
    migrated = {}
    names = {real(path): name for name, path in by_name.items()}
    fixable = False
    for result in results:
        path = by_name.get(result.path)
        if path is None:
            continue
        if result.imports is not None:  # the run scanned it: no need to read it again
            scans.setdefault(real(path), (set(result.imports), result.imports_torch_npu))
        if path.suffix in (".py", ".pyi", ".ipynb") and result.new_source is None:
            # check: migrate would add `import torch_npu` where it fixes code (a migrated text shows it)
            fixable |= any(f.fixable and not f.code.startswith("NPU0") for f in result.findings)
        if result.new_source is not None:
            migrated[real(path)] = (result.path, result.new_source)
    by_module: dict[str, list[str]] = {}
    required = fixable
    for path in discover([directory]).files:
        if path.suffix not in (".py", ".pyi", ".ipynb"):
            continue
        key = real(path)
        display, data = migrated.get(key, (None, None))
        display = display or names.get(key) or path.relative_to(directory).as_posix()
        scan = scans.get(key)
        if scan is None:
            try:
                data = data if data is not None else path.read_bytes()
            except OSError:
                continue
            source = data.decode("utf-8", "replace")
            top_level = TOP_LEVEL_TORCH_NPU[path.suffix == ".ipynb"].search(source) is not None
            scan = scans[key] = (imported_modules(source), top_level)
        modules, top_level = scan
        for module in modules:
            by_module.setdefault(module, []).append(display)
        if reached and str(key) in reached:
            by_module.setdefault(reached[str(key)].split(".")[0], []).append(f"{display} (through its imports)")
        required = required or top_level
    if required:
        return ProjectImports(by_module, "imported")
    loaders = sorted(NPU_LOADERS.intersection(by_module))
    need = f"needed by {', '.join(loaders)} (which use the NPU only where torch_npu is installed)" if loaders else ""
    return ProjectImports(by_module, need)


def finish_run(results: list[FileResult], names: dict[Path, str], options, summary) -> list[FileResult]:
    """Add the dependency files and shell scripts of a run to its results (after the Python files).

    ``names`` maps every discovered path to its display name; ``options``: the run's, or a function
    giving each file's. setup.py results are extended in place; other files produce a result only
    when they have findings. The summary is recomputed.
    """
    options_of = options if callable(options) else lambda path: options
    by_name = {name: path for path, name in names.items()}
    extra = [path for path in names if is_project_file(path)]
    setups = [r for r in results if by_name.get(r.path) is not None and by_name[r.path].name == "setup.py"]
    if not extra and not setups:
        return results
    cache: dict[Path, ProjectImports] = {}
    scans: dict[Path, FileImports] = {}
    real = functools.lru_cache(maxsize=None)(Path.resolve)  # each path resolved once per run

    def imports_for(path: Path) -> ProjectImports:
        directory = real(path.parent.parent if path.parent.name in INSTALL_DIRS else path.parent)
        if directory not in cache:
            reached = {where: what for where, _, what, *_ in options_of(path).project.failing_imports}
            cache[directory] = project_imports(directory, results, by_name, scans, real, reached)
        return cache[directory]

    composes = {
        path for path in extra if is_compose_file(path) or (is_run_config(path) and reads_as_compose_file(path))
    }
    cogs = {path for path in extra if is_cog_file(path.name)}
    own_kinds = composes | cogs  # YAML files read as their own kind, not as run configs
    for path in extra:
        if is_run_config(path) and path not in own_kinds:
            continue  # all together below: a review item is reported once per key and value in a run
        if (path in composes or is_dockerfile(path)) and for_another_platform(path):
            continue  # kept for another platform (filekinds/platform_variants.py)
        display = names[path]
        file_options = options_of(path).for_path(path)
        if file_options.file.other_platform:  # Spark-TTS's `runtime/triton_trtllm/` (round 58), as its Python files
            reason = OTHER_PLATFORM_REASON.format(directory=file_options.file.other_platform)
            results.append(FileResult(display, "skipped", reason))
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            results.append(io_error(display, exc))
            continue
        text = decoded_text(data)
        if text is None:
            continue
        if is_shell_script(path):
            findings, new_text = check_shell_file(text, path, display, file_options)
        elif is_dockerfile(path):
            findings, new_text = check_dockerfile(text, display, file_options)
        elif path in composes:
            findings, new_text = check_compose_file(text, display, file_options)
        elif path in cogs:
            findings, new_text = check_cog_file(text, display, file_options)
        elif is_cmake_file(path):
            findings, new_text = check_cmake_file(text, display, file_options)
        else:
            try:
                findings, new_text = check_text(path.name, text, display, file_options, imports_for(path))
            except ValueError:  # tomllib.TOMLDecodeError included
                continue  # a malformed pyproject.toml is not ours to report
        if new_text != text:
            results.append(FileResult(display, "changed", findings=findings, new_source=encoded_like(new_text, data)))
        elif findings:
            results.append(FileResult(display, "unchanged", findings=findings))
    results.extend(check_run_configs([p for p in extra if is_run_config(p) and p not in own_kinds], names, options_of))
    for result in setups:
        path = by_name[result.path]
        if result.status == "failed":
            continue
        try:
            data = result.new_source if result.new_source is not None else path.read_bytes()
        except OSError:
            continue
        text = decoded_text(data)
        if text is None:
            continue
        findings, new_text = check_text(
            "setup.py", text, result.path, options_of(path).for_path(path), imports_for(path)
        )
        if findings:
            result.findings = sorted([*result.findings, *findings], key=Finding.sort_key)
            if result.status == "skipped":
                result.status, result.reason = "unchanged", ""
        if new_text != text:
            result.status, result.new_source = "changed", encoded_like(new_text, data)
    fresh = Summary()
    for result in results:
        fresh.add(result)
    summary.__dict__.update(fresh.__dict__)
    return results
