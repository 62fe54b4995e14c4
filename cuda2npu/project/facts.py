"""What rules must know of the whole project before they look at one file.

The facts come from the project's files, not from the paths a run is given: cuda2npu/project/settings.py
finds each file's project root (its configuration's directory, else the git root, ...) and hands
the files discovered there to :func:`project_facts`, so that ``check pkg/use.py`` (pre-commit) and
``check .`` (CI) agree. Only cheap scans: setup.py's text, file names, a regex over the text of
the Python files that mention an accelerator, platform or backend, and one over the import lines of
every Python file (analysis/project_imports.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from cuda2npu.analysis.attention_choices import attention_parameters, attention_switches
from cuda2npu.analysis.backend_constants import backend_constants
from cuda2npu.analysis.build_probes import build_constants, build_probes
from cuda2npu.analysis.cuda_only_modules import cpu_built_extensions, declared_extensions, shadowing_modules
from cuda2npu.analysis.device_parameters import device_keywords, device_parameters
from cuda2npu.analysis.failing_modules import failing_and_optional_modules
from cuda2npu.analysis.flash_probes import flash2_flag_setters, flash_attn_patches
from cuda2npu.analysis.float16_models import float16_defaults
from cuda2npu.analysis.gated_kernels import (
    extension_definitions,
    extension_functions,
    kernels_behind_cuda_gates,
    triton_functions,
)
from cuda2npu.analysis.gpu_monitors import gpu_monitors
from cuda2npu.analysis.lightning_classes import lightning_classes
from cuda2npu.analysis.modular_sources import modular_sources
from cuda2npu.analysis.naive_model_parallel import parallelizes
from cuda2npu.analysis.project_imports import imported_names
from cuda2npu.analysis.python_files import PythonFiles
from cuda2npu.analysis.quantization_flags import quantization_flags_on
from cuda2npu.analysis.receivers import cuda_method_classes, tensordict_holders
from cuda2npu.analysis.sdpa_support import fa2_only_classes, own_flash_classes
from cuda2npu.analysis.unapplied_patches import unapplied_patches
from cuda2npu.analysis.uncalled_functions import SearchedTexts, uncalled_functions
from cuda2npu.analysis.vllm_adapters import legacy_vllm_adapters, own_vllm_release
from cuda2npu.core.options import ProjectFacts
from cuda2npu.filekinds.runconfig_code import config_keys
from cuda2npu.project.cog_predictors import cog_predictors
from cuda2npu.project.pins import project_pins
from cuda2npu.project.platform_dirs import other_platform_dirs

# transformers' Trainer arguments, which a launch script's `--fp16` may be (NPU906), and an option of the project's
TRAINING_ARGUMENTS = re.compile(rb"\b(?:\w*TrainingArguments|HfArgumentParser)\b")
# an argparse/click `--fp16`, or a dataclass field fairseq turns into one (`fp16: bool = field(...)`: OFA, round 65)
FP16_OPTION = re.compile(
    rb"""\b(?:add_argument|option)\(\s*["']--fp16["']|^[ \t]+fp16[ \t]*:[ \t]*bool[ \t]*=[ \t]*field\(""", re.M
)
NPU_BACKEND_CLASS = re.compile(  # class NpuAccelerator(...), class NPU_Accelerator:, class NPUPlatform(...)
    rb"^class[ \t]+(\w*(?:npu|Npu|NPU)_?(?:accelerator|Accelerator|platform|Platform|backend|Backend)\w*)[ \t]*[(:]",
    re.MULTILINE,
)


# an assignment replacing a flash-attention internal of transformers (VILA's packing patches
# `transformers.modeling_flash_attention_utils._get_unpad_data`): the packing relies on flash_attention_2;
# or a FlashAttention2 class's forward (SnapKV's `LlamaFlashAttention2.forward = ...`): it runs only there
FLASH_HOOK = re.compile(
    rb"^[ \t]*([\w.]*\w\.(?:_get_unpad_data|_flash_attention_forward|_upad_input|\w*FlashAttention2\.forward))"
    rb"[ \t]*=(?!=)",
    re.M,
)

SDPA_FORWARD = re.compile(rb"^[ \t]*[\w.]*?(\w*SdpaAttention)\.forward[ \t]*=(?!=)", re.M)


def project_facts(files: list[Path], root: Path | None = None) -> ProjectFacts:
    """What rules must know of the whole project: the CUDA extensions its
    setup.py builds and its own modules named like CUDA-only ones (NPU606; a loose module only for
    the files of its directory: ``Options.for_path``), its classes implementing an NPU backend
    (their CUDA counterparts in other files are left as written: npu_aware), its classes with a
    TensorDict field (a ``.cuda()`` in a file importing one moves with ``.to``: analysis/receivers.py), the names its modules
    import from each other (an import another file reads is not unused: analysis/project_imports.py),
    its version pins (project/pins.py), the run configurations' keys its code passes to a device
    or backend, its functions taking the attention implementation positionally and the files on
    the way to its own ``"flash_attention_2"`` switches (analysis/attention_choices.py), and its
    patches of transformers' flash-attention internals (:func:`flash_attention_hooks`), whether it
    carries an old Megatron-LM of its own (:func:`megatron_fork`), and where it sets transformers' ``_flash_attn_2_enabled`` True or
    replaces a flash-attn function with its own (analysis/flash_probes.py), and its callables with
    a parameter named like a device and the names of such parameters with a device default
    (analysis/device_parameters.py), its classes with a
    ``cuda()`` method of their own (analysis/receivers.py), its subclasses of Lightning's Fabric and
    LightningLite (analysis/lightning_classes.py), its module constants that other
    files pass to torch.distributed as the backend (analysis/backend_constants.py), its modules of
    Triton kernels imported only behind a kept ``.is_cuda`` test and its Triton kernels and their
    launchers and its functions calling its compiled extensions' operators, by qualified name and, for
    the files defining them, by name (analysis/gated_kernels.py), its modules that fail at import on an NPU host, also through other
    modules, and those of them it imports only where it falls back (analysis/failing_modules.py), its functions answering whether torch is
    a CUDA or ROCm build and its module constants set on such a build alone (analysis/build_probes.py),
    its functions reading GPUtil or NVML (analysis/gpu_monitors.py), its vendored adapters for vLLM releases vllm-ascend does not support (analysis/vllm_adapters.py),
    its scripts' functions nothing calls (analysis/uncalled_functions.py), its unimported copies of
    transformers' modular model sources (analysis/modular_sources.py), its monkey patches nothing applies
    (analysis/unapplied_patches.py), the predictors of its Cog builds on CUDA images (project/cog_predictors.py), its model classes supporting
    FlashAttention-2 but not SDPA and those whose FlashAttention-2 code is its own (analysis/sdpa_support.py), the top-level names of
    its modules, and its directories of code for another accelerator (project/platform_dirs.py).
    ``files``: the project's files, ``root``: its root (import roots: the root and its ``src/``)."""
    extensions = declared_extensions(files)
    local, loose = shadowing_modules(files, extensions, root)
    texts = PythonFiles.read(files, root)
    others = [path for path in files if path.suffix != ".py"]
    searched = SearchedTexts(texts, others)  # the other files read once, where a fact first asks
    pins, pin_files, pin_scopes = project_pins(files, root)
    failing, optional, failing_imports = failing_and_optional_modules(texts, extensions, root, pins)
    operators = extension_functions(texts, extensions + cpu_built_extensions(files))
    return ProjectFacts(
        pins=pins,
        pin_files=pin_files,
        pin_scopes=pin_scopes,
        cuda_extensions=extensions,
        local_modules=local,
        loose_modules=loose,
        npu_backend_classes=npu_backend_classes(texts),
        tensordict_holders=tensordict_holders(texts),
        project_imports=imported_names(texts),
        backend_constants=backend_constants(texts),
        config_keys=config_keys(texts),
        attention_parameters=attention_parameters(texts),
        attention_switches=attention_switches(texts, root),
        flash_attention_hooks=flash_attention_hooks(texts, root, files),
        megatron_fork=megatron_fork(files),
        float16_defaults=float16_defaults(texts, root),
        flash2_flag_setters=flash2_flag_setters(texts, root),
        flash_attn_patches=flash_attn_patches(texts, root),
        device_parameters=device_parameters(texts),
        device_keywords=device_keywords(texts),
        cuda_method_classes=cuda_method_classes(texts),
        lightning_classes=lightning_classes(texts),
        kernels_behind_cuda_gates=kernels_behind_cuda_gates(texts),
        triton_functions=triton_functions(texts),
        extension_functions=operators,
        extension_definitions=extension_definitions(texts, operators),
        failing_modules=failing,
        optional_modules=optional,
        failing_imports=failing_imports,
        build_probes=build_probes(texts),
        build_constants=build_constants(texts),
        gpu_monitors=gpu_monitors(texts),
        legacy_vllm_adapters=legacy_vllm_adapters(files),
        own_vllm=own_vllm_release(texts),
        parallelizes=parallelizes(texts),
        fa2_only_classes=fa2_only_classes(texts),
        own_flash_classes=own_flash_classes(texts),
        own_fp16_flag=own_fp16_flag(texts),
        quantization_flags_on=quantization_flags_on(texts),
        uncalled_functions=uncalled_functions(texts, searched),
        unapplied_patches=unapplied_patches(texts, searched),
        cog_predictors=cog_predictors(others),
        top_packages=tuple(
            sorted({name.partition(".")[0] for name in (*texts.modules.values(), *texts.namespace_names.values())})
        ),
        other_platform_dirs=other_platform_dirs(files, root),
        modular_sources=modular_sources(texts),
    )


def own_fp16_flag(texts: Mapping[Path, bytes]) -> bool:
    """Whether the project's Python declares a ``--fp16`` option of its own (an argparse or click option, or a
    dataclass field fairseq makes one of: OFA's bundled fairseq, round 65) and never names transformers'
    Trainer arguments (DejaVu's programs, round 33): a launch script's ``--fp16`` is then the project's."""
    texts = list(texts.values())
    return any(FP16_OPTION.search(t) for t in texts) and not any(TRAINING_ARGUMENTS.search(t) for t in texts)


def npu_backend_classes(texts: Mapping[Path, bytes]) -> tuple[str, ...]:
    """The names of the module-level classes implementing an NPU backend in the project's Python files
    (ColossalAI's ``NpuAccelerator``, DeepSpeed's ``NPU_Accelerator``), from a regex over their text."""
    names: set[str] = set()
    for text in texts.values():
        if b"ccelerator" in text or b"latform" in text or b"ackend" in text:
            names.update(match.group(1).decode() for match in NPU_BACKEND_CLASS.finditer(text))
    return tuple(sorted(names))


def flash_attention_hooks(
    texts: Mapping[Path, bytes], root: Path | None, files: list[Path]
) -> tuple[tuple[str, str], ...]:
    """``("llava/model/utils/packing.py: transformers.modeling_flash_attention_utils._get_unpad_data", scope)``
    for each assignment replacing a flash-attention internal of transformers (packed sequences told
    apart through it; the target as written, ``model_module._get_unpad_data`` too), or a FlashAttention2
    class's forward (SnapKV's compression; not where the project replaces the SDPA class's forward too, as
    PyramidKV does): such a project's attention relies on flash_attention_2, which SDPA would not honour
    (NPU903, NPU901/NPU902). ``scope``:
    the real path of the sub-project holding the patch (the nearest directory above it with a
    ``pyproject.toml``, ``setup.py`` or ``setup.cfg``, else the root): its files are the ones the
    patch concerns (``Options.for_path``)."""
    projects = {path.parent for path in files if path.name in ("pyproject.toml", "setup.py", "setup.cfg")}
    found = set()
    for path, text in texts.items():
        if any(
            word in text
            for word in (b"_get_unpad_data", b"_flash_attention_forward", b"_upad_input", b"FlashAttention2")
        ):
            shown = path.relative_to(root).as_posix() if root is not None and path.is_relative_to(root) else path.name
            scope = next((d for d in path.parents if d in projects), root or path.parent)
            found.update(
                (f"{shown}: {match.group(1).decode()}", os.path.realpath(scope)) for match in FLASH_HOOK.finditer(text)
            )
    if not found:
        return ()
    # a FlashAttention2 forward replaced along with the SDPA class's (PyramidKV): SDPA runs the project's code too
    sdpa = {
        match.group(1) for text in texts.values() if b"SdpaAttention" in text for match in SDPA_FORWARD.finditer(text)
    }
    return tuple(sorted(hook for hook in found if _sdpa_twin(hook[0]) not in sdpa))


def _sdpa_twin(hook: str) -> bytes | None:
    """``LlamaSdpaAttention``, the SDPA class of the hook ``"file: ...LlamaFlashAttention2.forward"``; None for another hook."""
    target = hook.rpartition(": ")[2].rpartition(".")[0]  # without `.forward`
    name = target.rpartition(".")[2]
    return f"{name.removesuffix('FlashAttention2')}SdpaAttention".encode() if name.endswith("FlashAttention2") else None


def megatron_fork(files: list[Path]) -> bool:
    """The project carries a ``megatron`` package without ``megatron/core`` (a fork of the Megatron-LM
    of 2021-22: Megatron-DeepSpeed, gpt-neox): MindSpeed patches ``megatron.core`` and does not apply
    (NPU941), and the fork's own code is migrated as the project's."""
    packages = {path.parent for path in files if path.name == "__init__.py" and path.parent.name == "megatron"}
    with_core = {path.parent.parent for path in files if path.name == "__init__.py" and path.parent.name == "core"}
    return any(package not in with_core for package in packages)
