"""Run options shared by ``migrate`` and ``check``, and which rule codes they enable."""

from __future__ import annotations

import functools
import os
import re
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import NamedTuple

from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.torch_npu_target import NEWEST, Target

OPT_IN_FLAGS = {"fuse_sdpa": "NPU406"}


@functools.lru_cache(maxsize=1)
def default_select() -> tuple[str, ...]:
    """``check``'s selection when neither ``--select`` nor ``select`` gives one, like ruff's default
    rule set: the prefix of every family whose rules are all selected by default (NPU0 ... NPU7),
    not the advisories (NPU8, ``selected_by_default = false`` in rules/advisories.toml), which
    ``--select NPU8``, ``--extend-select NPU8`` or ``ALL`` enable. ``Options()`` itself selects
    ``NPU`` (everything but the opt-in rules): ``migrate``'s default, whose summary counts advisories."""
    from cuda2npu.core.catalogue import all_rules

    families: dict[str, list] = {}
    for code, doc in all_rules().items():
        families.setdefault(code[:4], []).append(doc)
    select: list[str] = []
    for prefix, docs in families.items():
        if all(doc.selected_by_default for doc in docs):
            select.append(prefix)
        else:  # a prefix shared by two families: the default ones' codes (an opt-in rule needs its code: not listed)
            select += [doc.code for doc in docs if doc.selected_by_default and not doc.opt_in]
    return tuple(select)


_IMPORTS: list = [None, {}, set()]  # Options.project_imports last indexed (one object per worker chunk), its index


def _imports_of(project_imports: tuple[tuple[str, tuple[str, ...]], ...], path) -> tuple[str, ...]:
    """The names ``project_imports`` lists for the file ``path`` (by its real path, resolved only for
    the file names it lists)."""
    if _IMPORTS[0] is not project_imports:
        _IMPORTS[:] = [project_imports, dict(project_imports), {os.path.basename(p) for p, _ in project_imports}]
    if os.path.basename(path) not in _IMPORTS[2]:
        return ()
    return _IMPORTS[1].get(os.path.realpath(path), ())


def _same_file(real: str, path) -> bool:
    """Whether ``path`` is the file of the real path ``real`` (resolved only where the names match)."""
    return os.path.basename(real) == os.path.basename(path) and os.path.realpath(path) == real


def _backend_names(backend_constants: tuple[tuple[str, tuple[str, ...]], ...], path) -> tuple[str, ...]:
    """The names ``backend_constants`` lists for the file ``path``."""
    return next((names for where, names in backend_constants if _same_file(where, path)), ())


PACKAGE_API = "**"  # FileContext.exports of a package's `__init__.py`: every module-level name is its API
NPU_NAMED = re.compile(r"[\w.-]+[_-]npu", re.IGNORECASE)  # test_attn_npu.py, run-npu.sh (not npu_aware.py)


def npu_version(path) -> str:
    """The name of the file holding the project's NPU version of ``path``: ``path`` itself when its
    name says NPU (``test_attn_npu.py``, ``run_npu.sh``), its twin next to it when there is one
    (``test_attn.py`` beside ``test_attn_npu.py``: the CUDA original the project has ported); else ""."""
    path = Path(path)
    if NPU_NAMED.fullmatch(path.stem):
        return path.name
    for twin in (f"{path.stem}_npu{path.suffix}", f"{path.stem}-npu{path.suffix}"):
        if (path.parent / twin).is_file():
            return twin
    return ""


def _within(real: str, directory: str) -> bool:
    """Whether the real path ``real`` is inside the real directory ``directory``."""
    return real.startswith(directory + os.sep)


def _scoped_pins(pins, scopes, real: str):
    """The pins of the file at real path ``real``: per distribution, its nearest sub-project's
    (``scopes``: (real directory, pins)), else the project's merged ``pins``."""
    chosen = dict(pins)
    for _, own in sorted((scope for scope in scopes if _within(real, scope[0])), key=lambda scope: len(scope[0])):
        chosen.update(own)
    return tuple(sorted(chosen.items())) if scopes else pins


class OptionalModule(NamedTuple):
    """A module the project imports only under a fallback for its failing import (``optional_modules``)."""

    written: str  # its failing import, as written
    what_fails: str  # what fails through it ("" where the import itself fails)
    importers: str  # the imports of it under a fallback, listed


class FailingImport(NamedTuple):
    """A module that cannot be imported on an NPU host through a project module (``failing_imports``)."""

    written: str  # the failing import, as written
    what_fails: str  # what fails through it
    left_as_written: bool  # what fails is no quick port: the file stays as written but for NPU606
    also: str = ""  # the other CUDA-only imports it reaches, listed (where the file is migrated)


@dataclass(frozen=True)
class ProjectFacts:
    """What rules must know of the whole project, computed once per project root from its files
    (cuda2npu/project/facts.py): never set by the user."""

    cuda_extensions: tuple[str, ...] = ()  # modules the project's setup.py builds with CUDAExtension
    local_modules: tuple[str, ...] = ()  # the project's own modules named like CUDA-only ones (flash_attn)
    loose_modules: tuple[tuple[str, str], ...] = ()  # (directory, name): such modules outside a package (for_path)
    pins: tuple[tuple[str, str], ...] = ()  # (distribution, specifier) from the dependency files: core/pins.py
    pin_files: tuple[str, ...] = ()  # the files the pins were read from (relative to the project root)
    # (real directory, pins) of its sub-projects with dependency files of their own (project/pins.py; for_path)
    pin_scopes: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    npu_backend_classes: tuple[str, ...] = ()  # the project's classes implementing an NPU backend (NpuAccelerator)
    tensordict_holders: tuple[str, ...] = ()  # the project's classes with a TensorDict field (analysis/receivers.py)
    config_keys: tuple[tuple[str, str], ...] = ()  # (role, key) the code passes to a device/backend (runconfig_code.py)
    # (name, index) of its functions taking the attention implementation positionally (attention_choices.py)
    attention_parameters: tuple[tuple[str, int], ...] = ()
    # (real path, "file:line", "word,word") of its files on the way to its own "flash_attention_2" switch (same)
    attention_switches: tuple[tuple[str, str, str], ...] = ()
    # ("file: name", real sub-project directory) of the project's patches of transformers' FA2 internals (for_path)
    flash_attention_hooks: tuple[tuple[str, str], ...] = ()
    megatron_fork: bool = False  # the project carries its own `megatron` package without `megatron/core`
    # (real path, "file: call") of its files that make float16 the default dtype of the models they build and of
    # the files importing one (float16_models.py; for_path)
    float16_defaults: tuple[tuple[str, str], ...] = ()
    flash2_flag_setters: tuple[str, ...] = ()  # "file: text" setting `_flash_attn_2_enabled` True (flash_probes.py)
    flash_attn_patches: tuple[str, ...] = ()  # "file: flash_attn.<name>" the project replaces (flash_probes.py)
    device_parameters: tuple[tuple[str, int, str], ...] = ()  # (callable, position, name) of a device parameter
    device_keywords: tuple[str, ...] = ()  # `rand_device`: names of its parameters with a device default
    cuda_method_classes: tuple[str, ...] = ()  # the project's classes defining their own `cuda()` (receivers.py)
    lightning_classes: tuple[
        str, ...
    ] = ()  # its subclasses of Lightning's Fabric / LightningLite (lightning_classes.py)
    # (real path, names): what other project files import from a module (analysis/project_imports.py; for_path)
    project_imports: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # (real path, names): its module constants other project files pass to torch.distributed as the
    # backend (analysis/backend_constants.py; for_path)
    backend_constants: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # real paths of its Triton-kernel modules imported only behind a kept `.is_cuda` test (gated_kernels.py; for_path)
    kernels_behind_cuda_gates: tuple[str, ...] = ()
    # "module.function" of its Triton kernels and the functions launching one (gated_kernels.py)
    triton_functions: tuple[str, ...] = ()
    # (module, what fails) of its modules that fail at import on an NPU host, also through others (failing_modules.py)
    failing_modules: tuple[tuple[str, str], ...] = ()
    # (real path, failing import as written, what fails or "", "importer:line, ...") of those the project
    # imports only where it falls back when the import fails (failing_modules.py; for_path)
    optional_modules: tuple[tuple[str, str, str, str], ...] = ()
    # (real path, failing import as written, what fails, left as written, the other CUDA-only imports it
    # reaches) of the others importing a failing project module: NPU606 there; left as written but for it
    # where the failure comes from a compiled CUDA extension, an unported package or a CUDA build at import
    # (failing_modules.py; for_path)
    failing_imports: tuple[tuple[str, str, str, bool, str], ...] = ()
    # "module.function" (and "module.Class.method") of its functions calling its compiled extension's
    # operators or capturing CUDA graphs, and of those calling them (gated_kernels.py)
    extension_functions: tuple[str, ...] = ()
    # (real path, name) of those functions each file defines at module level (gated_kernels.py; for_path)
    extension_definitions: tuple[tuple[str, str], ...] = ()
    # "module.function" of its functions answering whether torch is a CUDA or ROCm build (build_probes.py)
    build_probes: tuple[str, ...] = ()
    # "module.NAME=value" of its module constants set to a value on a CUDA or ROCm build alone (build_probes.py)
    build_constants: tuple[str, ...] = ()
    # "module.function" of its functions reading GPUtil or NVML, which find no GPU on an NPU host (gpu_monitors.py)
    gpu_monitors: tuple[str, ...] = ()
    # `load_in_8bit`-like names its Python may set on (quantization_flags.py); None: not read (a lone file)
    quantization_flags_on: tuple[str, ...] | None = None
    # its model classes declaring FlashAttention-2 but not SDPA, which transformers refuses sdpa for (sdpa_support.py)
    fa2_only_classes: tuple[str, ...] = ()
    # its model classes supporting FlashAttention-2 in files importing flash-attn themselves (sdpa_support.py)
    own_flash_classes: tuple[str, ...] = ()
    # it calls `.parallelize()` (transformers' naive model parallelism) or sets `model_parallel` on; None: not read
    parallelizes: bool | None = None
    # its Python declares its own `--fp16` option and names no TrainingArguments (or HfArgumentParser): a
    # launch script's `--fp16` for a program it does not show is the project's (NPU906); None: not read
    own_fp16_flag: bool | None = None
    own_vllm: str = ""  # the release of its own top-level `vllm` package, a fork of vLLM ("unknown"; "": none)
    # (real directory, vLLM version): its adapters for a vLLM vllm-ascend does not support (vllm_adapters.py; for_path)
    legacy_vllm_adapters: tuple[tuple[str, str], ...] = ()
    # (real path, name) of its scripts' functions nothing calls (uncalled_functions.py; for_path)
    uncalled_functions: tuple[tuple[str, str], ...] = ()
    # the top-level names of its modules (`llama_recipes`) and of its directories without `__init__.py` that
    # scripts import modules through (`train_utils.rtn_utils`), for dotted paths
    top_packages: tuple[str, ...] = ()
    # (real path, as shown) of its directories of code for another accelerator (platform_dirs.py; for_path)
    other_platform_dirs: tuple[tuple[str, str], ...] = ()
    # real paths of its unimported copies of transformers' modular model sources (modular_sources.py; for_path)
    modular_sources: tuple[str, ...] = ()
    # (real path, installer) of its monkey patches nothing applies (unapplied_patches.py; for_path)
    unapplied_patches: tuple[tuple[str, str], ...] = ()
    # real paths of the predictors of its Cog builds on CUDA images (project/cog_predictors.py; for_path)
    cog_predictors: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileContext:
    """What the rules know of the file itself (``Options.for_path``)."""

    # this file's names other files import ("*": a star import of it; PACKAGE_API: all, a package's __init__.py)
    exports: tuple[str, ...] = ()
    in_package: bool = False  # a .py file next to an __init__.py: generated files are imported relatively
    local_modules: tuple[str, ...] = ()  # the project's modules named like CUDA-only ones, and its directory's
    flash_attention_hooks: tuple[str, ...] = ()  # the project's FA2 patches ("file: name") in the file's sub-project
    backend_names: tuple[str, ...] = ()  # its module constants another file passes to torch.distributed as the backend
    cuda_gated_kernels: bool = False  # its Triton kernels run only behind a kept `.is_cuda` test (NPU603)
    # where the project imports it only under a fallback: a module that never loads on an NPU host, left as
    # written but for NPU606 (optional_modules)
    optional_module: OptionalModule | None = None
    failing_import: FailingImport | None = None  # it cannot be imported on an NPU host (failing_imports)
    legacy_vllm_adapter: str = ""  # the vLLM version of the legacy adapter it belongs to (skipped: runner.py)
    other_platform: str = ""  # the directory for another accelerator it lies in (skipped: runner.py)
    modular_source: bool = False  # a transformers modular source nothing imports (skipped: runner.py)
    unapplied_patch: str = ""  # the installer of the monkey patch it is, which nothing calls (skipped: runner.py)
    cog_predictor: bool = False  # a Cog predictor, run only in Cog's CUDA image (skipped: runner.py)
    npu_version: str = ""  # the file holding the project's NPU version of it: itself or a twin (skipped: runner.py)
    uncalled_functions: tuple[str, ...] = ()  # its module-level functions nothing calls (never_run.py)
    # its module-level functions reaching the project's compiled operators (extension_definitions; cuda_gates.py)
    own_extension_functions: tuple[str, ...] = ()
    # "file: call" of the project's file making float16 the default dtype that it reaches (float16_models.py)
    float16_default: str = ""


@dataclass(frozen=True)
class Options:
    """What changes what the rules report or rewrite (part of the cache key): the user's settings
    (from the command line and the configuration), the project's facts and the file's context."""

    select: tuple[str, ...] = ("NPU",)
    ignore: tuple[str, ...] = ()
    max_tier: Tier = Tier.REVIEW
    markers: bool = True  # `# TODO(cuda2npu)` markers at the findings a human must handle
    review_markers: bool = True  # also at review items (False: at manual findings only)
    fix: bool = True
    ignore_noqa: bool = False  # `# noqa` directives hide nothing (--ignore-noqa)
    precision: str = "bf16"
    apex: str = "native"
    colossalai: str = "keep"
    fuse_sdpa: bool = False
    target: Target = NEWEST  # the torch_npu release targeted (--target-torch-npu, else the pins: project/pins.py)
    portable: bool = False  # device-agnostic output for CUDA and Ascend (cuda2npu/analysis/portable.py)
    target_torch: str | None = None  # --portable: the oldest torch to run on (None: see cuda2npu/analysis/portable.py)
    per_file_ignores: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (directory, glob, codes): config.py
    project: ProjectFacts = ProjectFacts()
    file: FileContext = FileContext()

    def for_path(self, path) -> "Options":
        """The options for one file: matching per-file-ignores folded into ``ignore``; its context
        (``exports``: the names other project files import from it, all for a package's
        ``__init__.py``; ``in_package``; the loose modules of its own directory added to
        ``local_modules``: a script imports them; the FA2 patches of its own sub-project; its module
        constants other files initialise torch.distributed with). The project-wide indexes it was read from are
        dropped (the cache key holds the file's share only)."""
        project = self.project
        exports = (PACKAGE_API,) if Path(path).name == "__init__.py" else _imports_of(project.project_imports, path)
        local = project.local_modules
        if project.loose_modules:  # (real directory, name): the facts come from the project root's discovery
            directory = os.path.realpath(Path(path).parent)
            # not the file's own name: `from minference.modules import ...` in `pyramidkv/minference.py` is the library's
            beside = (name for where, name in project.loose_modules if where == directory and name != Path(path).stem)
            local = tuple(sorted({*local, *beside}))
        # only a rewrite reads it (the import of a generated file): no stat per file for `check`; not notebooks
        in_package = self.fix and Path(path).suffix == ".py" and (Path(path).parent / "__init__.py").is_file()
        backends = _backend_names(project.backend_constants, path)
        gated = any(_same_file(where, path) for where in project.kernels_behind_cuda_gates)
        optional = next(
            (OptionalModule(*entry[1:]) for entry in project.optional_modules if _same_file(entry[0], path)), None
        )
        failing = next(
            (FailingImport(*entry[1:]) for entry in project.failing_imports if _same_file(entry[0], path)), None
        )
        uncalled = tuple(name for where, name in project.uncalled_functions if _same_file(where, path))
        operators = tuple(name for where, name in project.extension_definitions if _same_file(where, path))
        float16 = next((source for where, source in project.float16_defaults if _same_file(where, path)), "")
        # the FA2 patches of its sub-project, the legacy vLLM adapter holding it: by real path, resolved once
        real = (
            os.path.realpath(path)
            if project.flash_attention_hooks
            or project.legacy_vllm_adapters
            or project.pin_scopes
            or project.other_platform_dirs
            else ""
        )
        hooks = tuple(hook for hook, scope in project.flash_attention_hooks if _within(real, scope))
        adapter = next((version for where, version in project.legacy_vllm_adapters if _within(real, where)), "")
        platform = next((shown for where, shown in project.other_platform_dirs if _within(real, where)), "")
        options = replace(
            self,
            project=replace(
                project,
                pins=_scoped_pins(project.pins, project.pin_scopes, real),
                pin_scopes=(),
                project_imports=(),
                loose_modules=(),
                flash_attention_hooks=(),
                backend_constants=(),
                kernels_behind_cuda_gates=(),
                optional_modules=(),
                failing_imports=(),
                legacy_vllm_adapters=(),
                uncalled_functions=(),
                extension_definitions=(),
                float16_defaults=(),
                other_platform_dirs=(),
                modular_sources=(),
                unapplied_patches=(),
                cog_predictors=(),
            ),
            file=FileContext(
                exports=exports,
                in_package=in_package,
                local_modules=local,
                flash_attention_hooks=hooks,
                backend_names=backends,
                cuda_gated_kernels=gated,
                optional_module=optional,
                failing_import=failing,
                legacy_vllm_adapter=adapter,
                other_platform=platform,
                modular_source=any(_same_file(where, path) for where in project.modular_sources),
                unapplied_patch=next(
                    (name for where, name in project.unapplied_patches if _same_file(where, path)), ""
                ),
                cog_predictor=any(_same_file(where, path) for where in project.cog_predictors),
                npu_version=npu_version(path),
                uncalled_functions=uncalled,
                own_extension_functions=operators,
                float16_default=float16,
            ),
        )
        if not self.per_file_ignores:
            return options
        from cuda2npu.core.globs import matching_ignores

        extra = matching_ignores(self.per_file_ignores, path)
        return replace(options, ignore=self.ignore + extra, per_file_ignores=()) if extra else options

    def report(self) -> dict:
        """The options as the migration report writes them: one flat table of the user's settings
        and the project's facts (not the per-file context, nor the project's import index: real
        paths of this machine)."""
        report = {}
        for field in fields(self):
            if field.name == "target":
                report.update(target_torch_npu=self.target.chosen, target_from=self.target.pin)
            elif field.name not in ("project", "file"):
                report[field.name] = getattr(self, field.name)
        report["max_tier"] = str(self.max_tier)
        facts = asdict(self.project)
        facts["flash_attention_hooks"] = tuple(hook for hook, _ in self.project.flash_attention_hooks)  # no real paths
        facts["legacy_vllm_adapters"] = tuple(
            f"{os.path.basename(where)} (vLLM {version})" for where, version in self.project.legacy_vllm_adapters
        )
        facts["other_platform_dirs"] = tuple(shown for _, shown in self.project.other_platform_dirs)
        facts["modular_sources"] = tuple(os.path.basename(path) for path in self.project.modular_sources)
        facts["cog_predictors"] = tuple(os.path.basename(path) for path in self.project.cog_predictors)
        facts["unapplied_patches"] = tuple(
            f"{os.path.basename(path)}: {name}" for path, name in self.project.unapplied_patches
        )
        facts["kernels_behind_cuda_gates"] = tuple(os.path.basename(p) for p in self.project.kernels_behind_cuda_gates)
        facts["uncalled_functions"] = tuple(
            f"{os.path.basename(path)}: {name}" for path, name in self.project.uncalled_functions
        )
        facts["extension_definitions"] = tuple(
            f"{os.path.basename(path)}: {name}" for path, name in self.project.extension_definitions
        )
        facts["optional_modules"] = tuple(
            (os.path.basename(path), *entry) for path, *entry in self.project.optional_modules
        )
        facts["failing_imports"] = tuple(
            (os.path.basename(path), *entry) for path, *entry in self.project.failing_imports
        )
        facts["pin_scopes"] = tuple((os.path.basename(where), pins) for where, pins in self.project.pin_scopes)
        facts["float16_defaults"] = tuple(sorted({source for _, source in self.project.float16_defaults}))
        facts["attention_switches"] = tuple(
            (os.path.basename(reacher), switch, words) for reacher, switch, words in self.project.attention_switches
        )
        facts["backend_constants"] = tuple(
            f"{os.path.basename(path)}: {name}" for path, names in self.project.backend_constants for name in names
        )
        return report | {k: v for k, v in facts.items() if k != "project_imports"}

    def opted_in(self) -> set[str]:
        """Opt-in rule codes switched on by a flag (``--fuse-sdpa`` → NPU406)."""
        return {code for flag, code in OPT_IN_FLAGS.items() if getattr(self, flag)}

    def code_enabled(self, code: str, opt_in: bool = False) -> bool:
        """ruff-style selection: the longest matching prefix wins; opt-in rules need their full
        code in ``select`` or their flag."""
        best_select = max((len(p) for p in self.select if code.startswith(p)), default=-1)
        best_ignore = max((len(p) for p in self.ignore if code.startswith(p)), default=-1)
        if best_select < 0 or best_ignore >= best_select:
            return False
        return not opt_in or code in self.select or code in self.opted_in()
