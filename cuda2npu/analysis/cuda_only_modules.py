"""Which packages need CUDA (rules/tables/cuda_only_packages.toml): the knowledge NPU606, NPU701, the
feature-switch detector and the project facts share.

No libcst here: the project facts of every run (even one answered from the result cache) use it.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import os
import re
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

from cuda2npu.core.catalogue import table

APEX_ROOTS = ("apex", "amp_C")
APEX_EXTENSIONS = ("fused_layer_norm_cuda", "fused_adam_cuda", "syncbn")  # apex's CUDA extension modules
# the top-level packages whose uses cuda2npu migrates (their imports go once their uses are rewritten)
MIGRATED = (*APEX_ROOTS, *APEX_EXTENSIONS, "flash_attn", "flash_attn_interface", "transformer_engine", "xformers")
CUDA_LIBRARIES = {  # NPU604's: reported wherever they are imported
    "pycuda": "PyCUDA drives the CUDA driver API",
    "cupy": "CuPy arrays live on CUDA devices; use torch tensors on npu",
    "numba.cuda": "numba.cuda compiles CUDA kernels",
}
# of those, the ones whose import fails on an NPU host: PyCUDA builds only against the CUDA toolkit (CuPy
# and numba.cuda import there and fail at their first kernel; docs/reference/kernel_libraries.md)
UNINSTALLABLE_LIBRARIES = ("pycuda",)
EXTENSION_SUFFIX = r"_(?:cuda|CUDA)(?:_(?:bindings?|ext|kernels?|lib|ops))?"
EXTENSION_NAME = re.compile(r"[A-Za-z0-9]\w*" + EXTENSION_SUFFIX)
DECLARED_EXTENSION = re.compile(r"""\bCUDAExtension\(\s*(?:name\s*=\s*)?(['"])([\w.]+)\1""")
# a CMake project compiling CUDA, and the Python modules it builds (pybind11, nanobind, FindPython)
CMAKE_CUDA = re.compile(r"(?i)\bLANGUAGES\b[^)]*\bCUDA\b|\benable_language\s*\(\s*CUDA\b|\.cu\b")
CMAKE_MODULE = re.compile(r"(?i)\b(?:pybind11_add_module|nanobind_add_module|python_add_library)\s*\(\s*(\w+)")
# vLLM's CMake macro names where the module goes: `define_gpu_extension_target(_C DESTINATION vllm ...)`
CMAKE_DESTINED_MODULE = re.compile(r"(?i)\bdefine_gpu_extension_target\s*\(\s*(\w+)\s+DESTINATION\s+([\w.]+)")
EXTENSION_ALIAS = re.compile(r"^[ \t]*(\w+)[ \t]*=[ \t]*CUDAExtension[ \t]*$", re.M)  # `extension = CUDAExtension`


# flash-attn names ported at their import alone (NPU606 says how; the import stays until a person does it)
FLASH_HELPERS = {
    "flash_attn.bert_padding": "pure-PyTorch padding helpers",
    "flash_attn.layers.rotary.rotate_half": "a pure-PyTorch helper",
    "flash_attn.layers.rotary.apply_rotary_emb_torch": "flash-attn's pure-PyTorch rotary reference, x*cos + rotate_half(x)*sin",
}
# flash-attn APIs without an exact NPU counterpart: NPU403 reports their calls (the text says how to port
# them) and their imports stay, so a module importing one at module level fails at import (failing_modules)
FLASH_UNPORTED = {
    "flash_attn_with_kvcache": (
        "writes k/v into the cache in place, applies rotary and reads a paged cache in one kernel; "
        "on NPU update the cache by hand and call torch_npu.npu_incre_flash_attention / "
        "npu_fused_infer_attention_score (inference) or npu_fusion_attention"
    ),
    "flash_attn_unpadded_func": 'flash-attn 1.x API; port to flash-attn 2 `flash_attn_varlen_func` semantics, then to npu_fusion_attention with input_layout="TND"',
    "flash_attn_unpadded_qkvpacked_func": 'flash-attn 1.x API; port to npu_fusion_attention with input_layout="TND" by hand',
    "flash_attn_unpadded_kvpacked_func": 'flash-attn 1.x API; port to npu_fusion_attention with input_layout="TND" by hand',
}

FLASH_UNPORTED_PREFIXES = (
    (
        "flash_attn.modules.",
        "flash-attn's modules (MHA, MLP, Block, embeddings) call CUDA kernels; use PyTorch modules, with torch_npu.npu_fusion_attention for the attention core",
    ),
    (
        "flash_attn.layers.rotary.",
        "rotary embedding module or in-place q/k/v variant: compute cos/sin in PyTorch and apply them with torch_npu.npu_rotary_mul, which needs them at the rotated width (`torch.cat([cos, cos], -1)` for 'half', `cos.repeat_interleave(2, -1)` for 'interleave'; flash-attn keeps them at rotary_dim/2); `apply_rotary_emb` itself is rewritten (NPU407)",
    ),
    ("flash_attn.losses.", "fused cross-entropy kernel; use torch.nn.CrossEntropyLoss / F.cross_entropy"),
    (
        "flash_attn.ops.",
        "CUDA/Triton fused op without an exact torch_npu counterpart; use the plain PyTorch op (nn.Linear, F.layer_norm, F.gelu) or a torch_npu fused op",
    ),
    (
        "flash_attn_interface.",
        "FlashAttention-3 (Hopper) API: its return value differs between releases; rewrite to torch_npu.npu_fusion_attention by hand",
    ),
    ("flash_attn.", "flash-attn API without an NPU rewrite"),
)


FLASH_UNPORTED_ARGUMENTS = {
    "alibi_slopes": "ALiBi: npu_fusion_attention's `pse` is a bias tensor added before scaling "
    "([B,N,Sq,Skv] or the compressed [B,N,1024,Skv]), not slopes; build it by hand",
    "softcap": "logit soft-capping has no npu_fusion_attention counterpart",
    "return_attn_probs": "npu_fusion_attention returns (out, softmax_max, softmax_sum, ...), "
    "not flash-attn's (out, softmax_lse, S_dmask); rewrite the consumer by hand",
    "block_table": "paged KV cache (block_table) has no npu_fusion_attention counterpart; "
    "use npu_fused_infer_attention_score for paged inference",
}  # a flash-attn attention call passing one of these (other than None, False or 0) is left, NPU401/NPU402


def flash_unported(qualified: str) -> bool:
    """Whether ``flash_attn.<...>.name`` is a flash-attn API the migration leaves (:data:`FLASH_UNPORTED`,
    a specific :data:`FLASH_UNPORTED_PREFIXES` entry; not the catch-all for names it does not know)."""
    name = qualified.rpartition(".")[2]
    if qualified.startswith(("flash_attn.", "flash_attn_interface.")) and name in FLASH_UNPORTED:
        return True
    return any(qualified.startswith(prefix) for prefix, _ in FLASH_UNPORTED_PREFIXES if prefix != "flash_attn.")


EINOPS = ("rearrange", "repeat", "reduce")  # einops functions flash-attn's modules import and so re-export
REEXPORTED = "einops"


def import_port(qualified: str) -> str | None:
    """What a flash-attn name ported at its import alone is (a :data:`FLASH_HELPERS` description, or
    :data:`REEXPORTED` for einops' functions imported through a flash-attn module), None for any other."""
    module, _, name = qualified.rpartition(".")
    if module.startswith("flash_attn.") and name in EINOPS:
        return REEXPORTED
    return next((what for prefix, what in FLASH_HELPERS.items() if f"{qualified}.".startswith(f"{prefix}.")), None)


def declared_extensions(paths: Iterable[Path]) -> tuple[str, ...]:
    """The modules the ``CUDAExtension(...)`` calls of the ``setup.py`` files among ``paths`` build, also
    through a name bound to the class (InternImage's and GroundingDINO's ``extension = CUDAExtension``
    ... ``extension("DCNv3", sources, ...)``, whose setup raises or builds nothing without CUDA); not
    those of a name that falls back to ``CppExtension`` without CUDA (:func:`cpu_built_extensions`);
    and the Python modules CUDA projects of ``CMakeLists.txt`` files build (:func:`cmake_extensions`)."""
    paths = list(paths)
    return tuple(sorted({*_setup_extensions(paths)[0], *cmake_extensions(paths)}))


def cmake_extensions(paths: Iterable[Path]) -> tuple[str, ...]:
    """The Python modules a ``CMakeLists.txt`` among ``paths`` builds from CUDA (its ``project(...
    LANGUAGES CUDA ...)``, ``enable_language(CUDA)`` or ``.cu`` sources): Quest's ``quest/ops``
    builds ``_kernels`` with ``pybind11_add_module``, imported as ``quest._kernels``. Where CMake puts
    it is its configuration: the module is named bare and under each package above its directory;
    vLLM's ``define_gpu_extension_target(_moe_C DESTINATION vllm ...)`` says it (``vllm._moe_C``: a
    fork of vLLM builds its kernels so, vllm-ltr in round 31)."""
    found: set[str] = set()
    packages = {path.parent for path in paths if path.name == "__init__.py"}
    for path, text in _texts_named(paths, "CMakeLists.txt"):
        if cmake_cuda(text) is None:
            continue
        found.update(f"{package}.{name}" for name, package in CMAKE_DESTINED_MODULE.findall(text))
        for name in CMAKE_MODULE.findall(text):
            found.add(name)
            directory, prefix = path.parent, []
            while directory.parent != directory and (directory in packages or directory.parent in packages):
                if directory in packages:
                    prefix.insert(0, directory.name)
                    found.add(".".join([*prefix, name]))
                directory = directory.parent
    return tuple(sorted(found))


def cmake_cuda(text: str) -> re.Match | None:
    """The first place a CMake file's code (not a ``#`` comment) makes it compile CUDA."""
    return next(
        (m for m in CMAKE_CUDA.finditer(text) if "#" not in text[text.rfind("\n", 0, m.start()) + 1 : m.start()]), None
    )


def _texts_named(paths: Iterable[Path], name: str) -> Iterator[tuple[Path, str]]:
    """(path, text) of the readable files among ``paths`` called ``name``."""
    for path in paths:
        if path.name == name:
            try:
                yield path, path.read_text(errors="replace")
            except OSError:
                continue


def cpu_built_extensions(paths: Iterable[Path]) -> tuple[str, ...]:
    """The extensions a ``setup.py`` builds with ``CUDAExtension`` where CUDA is found and with
    ``CppExtension`` elsewhere (detectron2's ``extension = CppExtension`` ... ``if torch.cuda.is_available()
    ...: extension = CUDAExtension``, no ``else`` that raises or returns): on an NPU host they build
    and import, with CPU kernels only, so an NPU tensor must still not reach their operators."""
    return _setup_extensions(paths)[1]


def _setup_extensions(paths: Iterable[Path]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(CUDA-only extensions, CPU-built ones) of the ``setup.py`` files among ``paths``."""
    cuda: set[str] = set()
    cpu: set[str] = set()
    for _, text in _texts_named(paths, "setup.py"):
        cuda.update(match.group(2) for match in DECLARED_EXTENSION.finditer(text))
        aliases = set(EXTENSION_ALIAS.findall(text))
        fallbacks = _cpu_fallbacks(text, aliases) if aliases else set()
        for alias in aliases:
            call = re.compile(rf"""\b{re.escape(alias)}\(\s*(?:name\s*=\s*)?(['"])([\w.]+)\1""")
            (cpu if alias in fallbacks else cuda).update(match.group(2) for match in call.finditer(text))
    return tuple(sorted(cuda)), tuple(sorted(cpu - cuda))


def _cpu_fallbacks(text: str, aliases: set[str]) -> set[str]:
    """The ``aliases`` (``extension = CUDAExtension``) also bound to ``CppExtension``, where the ``if``
    that rebinds them to CUDAExtension has no ``else`` that raises or returns: CPU builds elsewhere."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return set()
    bound: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in aliases:
                    bound.setdefault(target.id, set()).add(node.value.id)
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        for statement in node.body:
            if (
                isinstance(statement, ast.Assign)
                and isinstance(statement.value, ast.Name)
                and statement.value.id == "CUDAExtension"
                and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)
                and "CppExtension" in bound.get(statement.targets[0].id, ())
                and not any(isinstance(n, (ast.Raise, ast.Return)) for s in node.orelse for n in ast.walk(s))
            ):
                found.add(statement.targets[0].id)
    return found


def shadowing_modules(
    paths: list[Path], declared: tuple[str, ...] = (), root: Path | None = None
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The project's own top-level packages and modules that NPU606 would take for CUDA-only ones
    (migrating flash-attn or lightning-thunder itself: ``flash_attn`` is the project, not a missing
    dependency), as (names shadowed in every file, ``(directory, name)`` of those shadowed in one
    directory only).

    A package (a directory with ``__init__.py`` whose parent is none, or a namespace package: a
    directory without one at an import root) is importable everywhere; a
    loose module ``d/x.py`` only from scripts run in ``d`` (Python puts a script's directory on
    ``sys.path``), unless ``d`` is the project root or its ``src/`` (then installed or on the path):
    ``scripts/xformers.py`` does not make ``import xformers`` in ``pkg/model.py`` the project's; and
    not at all where ``d`` lies in a package (a namespace portion, imported as ``pkg.d.x``:
    Megatron-DeepSpeed's ``megatron/core/transformer/custom_layers/transformer_engine.py``).
    A package below the roots shadows only a module whose import fails (the table's ``imports``):
    litgpt's ``extensions/thunder/`` is ``extensions.thunder``, not lightning-thunder.
    ``root``: the project root (default: the deepest directory holding every path)."""
    packages = {path.parent for path in paths if path.name == "__init__.py"}
    roots = _import_roots(paths) if root is None else {root, root / "src"}
    everywhere: dict[str, bool] = {}  # name -> at an import root
    for directory in sorted(packages):
        if directory.parent not in packages:
            everywhere[directory.name] = everywhere.get(directory.name, False) or directory.parent in roots
    loose: set[tuple[str, str]] = set()
    for path in paths:
        if path.suffix == ".py" and path.parent not in packages:
            if path.parent in roots:
                everywhere[path.stem] = True
            elif path.parent.parent not in packages:  # else a namespace portion of a package: `pkg.d.x`
                loose.add((str(path.parent), path.stem))
        top = _namespace_package(path, roots, packages)
        if top is not None:
            everywhere[top] = True
    return (
        tuple(sorted(name for name, top in everywhere.items() if _shadows(name, declared, top))),
        tuple(sorted(entry for entry in loose if _shadows(entry[1], declared, True))),
    )


def _namespace_package(path: Path, roots: set[Path], packages: set[Path]) -> str | None:
    """The name of the namespace package (PEP 420: a directory at an import root without
    ``__init__.py``) that the Python file ``path`` belongs to: llm-awq's own ``awq/`` and ``tinychat/``,
    which an NPU host imports, having no AutoAWQ or TinyChat installed to take precedence."""
    if path.suffix != ".py":
        return None
    for root in roots:
        if path.is_relative_to(root) and len(path.relative_to(root).parts) > 1:
            top = root / path.relative_to(root).parts[0]
            return top.name if top not in packages and top.name.isidentifier() else None
    return None


def _shadows(name: str, declared: tuple[str, ...], top: bool) -> bool:
    """The project's module ``name`` is one NPU606 would report: any of the table's where it is
    importable as ``name`` for sure (``top``), else only one whose import fails."""
    found = cuda_module(name, declared)
    return found is not None and (top or found[0] == "imports")


def _import_roots(paths: list[Path]) -> set[Path]:
    """The directories whose loose modules every file of the project may import: the project root
    (the deepest directory holding every file) and its ``src/``."""
    try:
        root = Path(os.path.commonpath([str(path.parent) for path in paths])) if paths else None
    except ValueError:  # absolute and relative paths mixed: no common root
        return set()
    return {root, root / "src"} if root is not None else set()


PACKAGES = "cuda_only_packages"
MODULE_KINDS = ("imports", "kernels", "review")
CALL_KINDS = ("calls", "review_calls")


class _Index(NamedTuple):
    """The table, indexed: module (or dotted prefix) -> (kind, note); distribution -> entry; globs;
    qualified name (or glob) of a CUDA-only call -> (kind, note); module -> its package's entry."""

    modules: dict[str, tuple[str, str]]
    exact: dict[str, dict]
    globs: list[tuple[str, dict]]
    calls: dict[str, tuple[str, str]]
    entries: dict[str, dict]


@functools.lru_cache(maxsize=None)
def _index() -> _Index:
    packages = table(PACKAGES)["package"].values()
    named = [(d, p) for p in packages for d in p.get("distributions", ())]
    exact = {d: p for d, p in named if not any(c in d for c in "*?[")}
    return _Index(
        {m: (kind, note) for p in packages for kind in MODULE_KINDS for m, note in p.get(kind, {}).items()},
        exact,
        [(d, p) for d, p in named if d not in exact],
        {c: (kind, note) for p in packages for kind in CALL_KINDS for c, note in p.get(kind, {}).items()},
        {m: p for p in packages for kind in MODULE_KINDS for m in p.get(kind, {})},
    )


def _entry(module: str) -> dict:
    """The table's entry of the package ``module`` belongs to (the longest listed prefix), else {}."""
    entries = _index().entries
    matches = [p for p in entries if module == p or module.startswith(p + ".")]
    return entries[max(matches, key=len)] if matches else {}


def unported_module(module: str) -> bool:
    """``module`` belongs to a package flagged ``unported``: nothing of it runs on an NPU and cuda2npu
    ports none of its uses (lightning-thunder), so a file importing it unguarded cannot run there."""
    return _entry(module).get("unported", False)


def npu_release(module: str) -> tuple[str, str] | None:
    """(distribution, its first release that runs on an NPU) for a module whose package names one
    (``npu_release``: a distribution of rules/tables/npu_first_releases.toml; liger-kernel 0.6.5), else None."""
    distribution = _entry(module).get("npu_release")
    return (distribution, table("npu_first_releases")["release"][distribution]["first"]) if distribution else None


def cuda_call(qualified: str) -> tuple[str, str] | None:
    """(``calls`` or ``review_calls``, why) for a call of a module that imports on an NPU host but
    whose callable needs CUDA there (``faiss.StandardGpuResources``), else None."""
    if qualified.split(".")[0] not in cuda_call_roots():
        return None
    calls = _index().calls
    return calls.get(qualified) or next(
        (found for pattern, found in calls.items() if fnmatch.fnmatchcase(qualified, pattern)), None
    )


def cuda_module(module: str, declared: tuple[str, ...] = (), local: tuple[str, ...] = ()) -> tuple[str, str] | None:
    """(how ``module`` fails on an NPU host, why) or None: ``imports`` (the import fails), ``kernels``
    (its kernels fail), ``review`` (some of its operations need CUDA).

    ``declared``: the project's CUDAExtension modules; ``local``: its own modules of such names.
    """
    if module.split(".")[0] in APEX_ROOTS + APEX_EXTENSIONS + local:
        return None  # apex is the apex rules' (NPU324/NPU330)
    notes = _index().modules
    matches = [p for p in notes if module == p or module.startswith(p + ".")]
    if matches:
        return notes[max(matches, key=len)]
    if is_cuda_extension(module, declared):
        return "imports", table(PACKAGES)["extension"]["note"]
    return None


def cuda_only_module(module: str, declared: tuple[str, ...] = (), local: tuple[str, ...] = ()) -> str | None:
    """Why importing ``module`` fails on an NPU host, else None (see :func:`cuda_module`)."""
    found = cuda_module(module, declared, local)
    return found[1] if found is not None and found[0] == "imports" else None


@functools.lru_cache(maxsize=None)
def kernel_modules() -> tuple[str, ...]:
    """The modules (or dotted prefixes) the table lists under ``kernels``: their imports work, their kernels fail."""
    return tuple(sorted(module for module, (kind, _) in _index().modules.items() if kind == "kernels"))


@functools.lru_cache(maxsize=None)
def cuda_call_roots() -> frozenset[str]:
    """The top-level modules of the table's CUDA-only calls (``faiss``, ``lmdeploy``)."""
    return frozenset(name.split(".")[0] for name in _index().calls)


def cuda_module_roots() -> tuple[str, ...]:
    """The top-level names of the modules and calls the table knows (``triton``, ``vllm`` for
    ``vllm._C``, ``faiss`` for its GPU classes)."""
    index = _index()
    return tuple(sorted({name.split(".")[0] for name in (*index.modules, *index.calls)}))


def is_cuda_extension(module: str, declared: tuple[str, ...] = ()) -> bool:
    """A compiled CUDA extension: one the project's setup.py declares, or a top-level ``<name>_cuda``."""
    return module in declared or ("." not in module and EXTENSION_NAME.fullmatch(module) is not None)


def normalize_distribution(name: str) -> str:
    """A distribution's normalized PyPI name (lower case, runs of ``-_.`` as ``-``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def not_cuda_distribution(name: str) -> bool:
    """A distribution the table's globs (or ``nvidia-*``) would match that is not CUDA software."""
    return normalize_distribution(name) in table(PACKAGES)["not_cuda"]["names"]


def cuda_only_distribution(name: str) -> tuple[tuple[str, ...], str] | None:
    """(modules it installs, advice) for a distribution rules/tables/cuda_only_packages.toml names as
    needing CUDA, else None."""
    name = normalize_distribution(name)
    if not_cuda_distribution(name):
        return None
    index = _index()
    entry = index.exact.get(name) or next((p for pattern, p in index.globs if fnmatch.fnmatchcase(name, pattern)), None)
    return (tuple(entry["modules"]), entry["advice"]) if entry else None


def unused_pin(name: str) -> dict | None:
    """The table's ``[unused_pins]`` entry (``modules``, ``note``) of a distribution that installs on an
    NPU host but is removed from dependency files where nothing imports it, else None."""
    return table(PACKAGES).get("unused_pins", {}).get(normalize_distribution(name))


def unknown_nvidia(name: str) -> bool:
    """An ``nvidia-*`` distribution the table neither names as CUDA-only nor as harmless."""
    name = normalize_distribution(name)
    known = cuda_only_distribution(name) is not None or not_cuda_distribution(name)
    return name.startswith("nvidia-") and not known


def cuda_only_distributions() -> tuple[str, ...]:
    """Every distribution name and glob of the table, in file order."""
    return tuple(d for p in table(PACKAGES)["package"].values() for d in p.get("distributions", ()))
