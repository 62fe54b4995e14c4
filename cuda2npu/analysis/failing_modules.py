"""The project's modules that fail at import on an NPU host, also through other modules: a project fact.

VideoMamba's vendored ``mamba_ssm/ops/selective_scan_interface.py`` imports its compiled CUDA
extension ``selective_scan_cuda`` at module level; ``mamba_ssm/__init__.py`` imports that module,
and five model files import ``mamba_ssm``: all of them fail at import on an NPU host, while NPU606
marks only the first import. :func:`failing_modules` finds, with :mod:`ast`, the modules whose
module-level imports (not inside ``try``, ``if`` or a function) name a module that cannot be
imported there and that the migration does not port away (a compiled extension of the project's
setup.py or named ``*_cuda``, a package of rules/tables/cuda_only_packages.toml whose import fails
and whose uses cuda2npu does not migrate, mamba-ssm as well as the ``unported`` ones; a flash-attn
name the migrated file still imports: one ported at its import alone,
``flash_attn.bert_padding``, whose import stays, or one it does not port at all, flash-attn 1.x's
``flash_attn_unpadded_qkvpacked_func``; an xFormers name NPU409 does not rewrite away, chameleon's
``RMSNorm``; a module compiling CUDA at import, analysis/jit_extensions.py), then the modules importing
those (or a package whose ``__init__.py`` does), to a fixed point. Otherwise flash-attn, xFormers, apex
and TransformerEngine do not count: their imports go once their calls are migrated.

Of those, :func:`failing_and_optional_modules` also finds the *optional* ones: modules the project
imports, and only in the body of a ``try`` whose handler catches the failure and falls back
(Otter's ``modeling_fuyu.py``: ``try: from .modeling_persimmon import ...`` / ``except ImportError:
from transformers import ...``). Such a module never loads on an NPU host, where the project runs
its fallback: NPU606 marks its failing import and nothing else in it is migrated. The same holds for
the others that fail through what no one ports quickly (:func:`failing_imports`).
"""

from __future__ import annotations

import ast
import functools
import os
import re
from collections.abc import Callable, Iterator, Set
from dataclasses import dataclass, replace
from pathlib import Path

from cuda2npu.analysis.cuda_only_modules import (
    FLASH_UNPORTED_ARGUMENTS,
    MIGRATED,
    UNINSTALLABLE_LIBRARIES,
    cuda_module,
    cuda_module_roots,
    flash_unported,
    import_port,
    is_cuda_extension,
    npu_release,
    unported_module,
)
from cuda2npu.analysis.jit_extensions import jit_cuda_modules
from cuda2npu.analysis.project_imports import absolute_module
from cuda2npu.analysis.python_files import PythonFiles, parse
from cuda2npu.analysis.vllm_adapters import first_ascend_vllm, refusing_adapter_packages
from cuda2npu.core.imports import catches_import_error, reraises
from cuda2npu.core.pins import pin_predates

Pins = tuple[tuple[str, str], ...]  # the project's version pins (core/pins.py)
TRIES = (ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))  # `try`/`except*` (Python 3.11)
MAIN_GUARD = re.compile(rb"""^if\s+__name__\s*==\s*["']__main__["']""", re.M)  # a module that runs as a script


def failing_modules(files: PythonFiles, extensions: tuple[str, ...] = ()) -> tuple[tuple[str, str], ...]:
    """``(module, what fails)`` for each module of the project that fails at import on an NPU host
    (see the module docstring), sorted; ``what fails``: the import at the end of the chain that does."""
    return _failing_modules(files, extensions, ImportSites(files))


def failing_and_optional_modules(
    files: PythonFiles, extensions: tuple[str, ...] = (), root: Path | None = None, pins: Pins = ()
) -> tuple[
    tuple[tuple[str, str], ...], tuple[tuple[str, str, str, str], ...], tuple[tuple[str, str, str, bool, str], ...]
]:
    """:func:`failing_modules`, of them the optional ones (:func:`optional_modules`) and the failing
    imports of the others (:func:`failing_imports`), from one parse of each file read (``root``: the
    project root the importers are named from; ``pins``: its version pins, which decide whether a package
    running on an NPU from some release on fails, :func:`_cannot_import`)."""
    sites = ImportSites(files)
    failing = _failing_modules(files, extensions, sites, pins)
    optional = optional_modules(files, failing, sites, root)
    imports = failing_imports(files, failing, sites, {path for path, *_ in optional}, extensions, pins)
    return failing, optional, imports


def _failing_modules(
    files: PythonFiles, extensions: tuple[str, ...], sites: ImportSites, pins: Pins = ()
) -> tuple[tuple[str, str], ...]:
    """:func:`failing_modules`, reading the files' imports through ``sites``."""
    words = sorted(
        {re.escape(name.rsplit(".", 1)[-1]) for name in extensions}
        | {*_failing_roots(), "flash_attn", "xformers", *(("vllm",) if _old_vllm(pins) else ())}
    )
    names = "|".join(words) or "(?!)"
    candidate = re.compile(rf"^[ \t]*(?:import|from)[ \t][^\n]*(?:\w_cuda\b|\b(?:{names})\b)".encode(), re.M)
    modules = files.distinct_modules
    own_roots = {module.split(".")[0] for module in modules.values()}  # a vendored `mamba_ssm` is the project's
    failing: dict[str, str] = {}

    @functools.cache
    def kept_of(path: Path) -> frozenset[str]:  # read by both passes below
        text = files[path]
        if b"flash_attn" not in text and b"xformers" not in text:
            return frozenset()
        tree = files.tree(path)
        return frozenset(_kept_flash_names(tree) | _kept_xformers_names(tree))

    def cannot_import(path: Path, name: str) -> bool:
        return _cannot_import(name, extensions, kept_of(path), own_roots, pins)

    def imports_of(path: Path) -> list[tuple[str, str]]:
        return sites.module_level(path, lambda name: name in failing or cannot_import(path, name))

    for path in jit_cuda_modules(files):  # its own import compiles CUDA
        failing.update(dict.fromkeys(_names(files, path), files.distinct_modules[path]))
    failing.update(refusing_adapter_packages(files))  # verl's `third_party/vllm`: adapters for old vLLMs only
    for path, text in files.items():
        if path in modules and candidate.search(text):  # an import line naming what fails at import
            bad = next((name for name, _ in imports_of(path) if cannot_import(path, name)), None)
            if bad is not None:
                failing.update(dict.fromkeys(_names(files, path), bad))
    new = set(failing)
    while new:  # the modules importing a failing one, keyed to what fails at the end of the chain
        words = {module.rpartition(".")[2].encode() for module in new}
        more = {}
        for path, module in modules.items():
            if module in failing or not files.may_import(path, words):
                continue
            own = _names(files, path)
            source = next(
                (
                    found
                    for name, written in imports_of(path)
                    if (found := _failing_prefix(name, failing, own, by_name=not written.startswith(".")))
                ),
                None,
            )
            if source is not None:
                more.update(dict.fromkeys(_names(files, path), failing[source]))
        failing.update(more)
        new = set(more)
    return tuple(sorted(_first_causes(files, failing, imports_of, cannot_import).items()))


def _first_causes(
    files: PythonFiles,
    failing: dict[str, str],
    imports_of: Callable[[Path], list[tuple[str, str]]],
    cannot_import: Callable[[Path, str], bool],
) -> dict[str, str]:
    """``failing`` with each module's cause at the end of its *first* failing import in file order,
    which is the one that raises: the search above finds the shortest chain, and quip-sharp's
    ``lib/utils/__init__.py`` imports ``.data_utils`` (through ``lib.codebook`` to the compiled
    ``quiptools_cuda``) before ``.matmul_had`` (``fast_hadamard_transform``), so guarding the latter
    does not make its importers run (round 34). A module whose first failing import leads back to it
    keeps the cause found."""
    modules = files.distinct_modules
    first: dict[str, tuple[str, bool]] = {}  # module -> (the module its first failing import names, direct)
    for path, module in modules.items():
        if module not in failing:
            continue
        own = _names(files, path)
        for name, written in imports_of(path):
            if cannot_import(path, name):
                found = (name, True)
            elif (part := _failing_prefix(name, failing, own, by_name=not written.startswith("."))) is not None:
                found = (part, False)
            else:
                continue
            first.update(dict.fromkeys(own, found))
            break
    causes = {}
    for module in failing:
        seen, current = {module}, module
        while (step := first.get(current)) is not None and not step[1] and step[0] not in seen:
            seen.add(current := step[0])
        causes[module] = step[0] if step is not None and step[1] else failing[current]
    return causes


def _names(files: PythonFiles, path: Path) -> list[str]:
    """The names ``path`` is imported by: its module name, its package-qualified name when it lies in a
    directory without ``__init__.py`` below a package (``pkg.sub.mod`` beside ``mod``), and its path from
    the project root through such directories (hart's ``hart.modules.networks.basic_hart``, round 35)."""
    module, namespace, rooted = files.distinct_modules[path], files.distinct_namespace_names, files.rooted_names
    others = {namespace.get(path), rooted.get(path)} - {None, module}
    return [module, *sorted(others)]


@dataclass(frozen=True)
class ImportSite:
    """One import statement of a file, as :class:`ImportSites` reads it."""

    line: int
    top: bool  # a statement of the module's own body (not in a block, a class or a function)
    guarded: bool  # in the body of a `try` whose handler catches a failed import and falls back
    imported: tuple[tuple[str, str], ...]  # (absolute module, as written) of each module it may import
    # the absolute modules a relative import names when the file is imported by its package-qualified
    # name (`_names`: a module in a directory without `__init__.py`)
    qualified: tuple[str, ...] = ()
    # in a handler of a module-level `try` that falls back: the modules its body imports, one of which failing
    # runs the handler (stable-dreamfusion's `try: import _freqencoder` / `except ImportError: from .backend
    # import _backend`, round 57)
    fallback_of: tuple[str, ...] = ()


class ImportSites:
    """Each project file's import statements, from one :func:`parse` of the file when first asked
    (the tree is not kept: a fact reading many files keeps no tree)."""

    def __init__(self, files: PythonFiles) -> None:
        self._files = files
        self._sites: dict[Path, list[ImportSite]] = {}
        self._siblings: dict[Path, dict[str, str]] | None = None

    def of(self, path: Path) -> list[ImportSite]:
        """The import statements of the module ``path`` (one of ``files.distinct_modules``), in file order."""
        if path not in self._sites:
            self._sites[path] = _import_sites(self._files, path, self.siblings(path.parent))
        return self._sites[path]

    def siblings(self, directory: Path) -> dict[str, str]:
        """The module names of the files and packages in ``directory`` by the name a script beside them
        imports them by (``matmul`` → ``quant.matmul``, ``models`` → ``mambavision.models``), where the two
        differ."""
        if self._siblings is None:
            self._siblings = {}
            for path, module in self._files.distinct_modules.items():
                directory, name = (
                    (path.parent.parent, path.parent.name) if path.name == "__init__.py" else (path.parent, path.stem)
                )
                if module != name:  # a module or a package beside the importer (MambaVision's `models.mamba_vision`)
                    self._siblings.setdefault(directory, {})[name] = module
        return self._siblings.get(directory, {})

    def module_level(self, path: Path, fails: Callable[[str], bool] | None = None) -> list[tuple[str, str]]:
        """(absolute module, as written) of what the statements at the top of the module import, and the
        handlers of its module-level ``try`` statements whose body imports a module that ``fails``."""
        return [
            imported
            for site in self.of(path)
            if site.top or (fails is not None and any(map(fails, site.fallback_of)))
            for imported in site.imported
        ]


def _import_sites(files: PythonFiles, path: Path, siblings: dict[str, str]) -> list[ImportSite]:
    """The import statements of ``path``, resolved under its module name (a relative one also under its
    package-qualified name, :attr:`ImportSite.qualified`; a bare one naming a file beside it also as
    that file's module, ``siblings``: KIVI's ``quant/test.py`` runs ``from matmul import ...``, which
    a script run from ``quant/`` finds as ``quant/matmul.py``); a top-level module bundled more than once
    as its copy nearest the importer (:func:`_bundled_copy`)."""
    tree = parse(files[path])
    if tree is None:
        return []
    top = set(_top_statements(tree))
    module, *others = _names(files, path)
    is_package = path.name == "__init__.py"
    fallbacks = _fallback_imports(tree, module, is_package)
    sites = []
    for statement, guarded in _imports_under_guards(tree.body):
        imported = _imported(statement, module, is_package)
        relative = isinstance(statement, ast.ImportFrom) and statement.level
        if not relative:
            imported = tuple((_bundled_copy(files, path, absolute), written) for absolute, written in imported)
            imported += tuple(
                (siblings[head] + absolute[len(head) :], written)
                for absolute, written in imported
                # not where the importer is a module of the package of that name: chameleon's
                # `chameleon/inference/image_tokenizer.py` imports `chameleon.inference.vqgan`, not its
                # sibling `chameleon.py` (round 40)
                if (head := absolute.split(".")[0]) in siblings and not module.startswith(f"{head}.")
            )
        qualified = [name for other in others if relative for name, _ in _imported(statement, other, is_package)]
        site = ImportSite(statement.lineno, statement in top, guarded, imported, tuple(qualified))
        sites.append(replace(site, fallback_of=fallbacks.get(statement, ())))
    return sites


def _fallback_imports(tree: ast.Module, module: str, is_package: bool) -> dict[ast.stmt, tuple[str, ...]]:
    """Each import statement of the handlers of the module's ``try`` statements that fall back -> the
    modules the ``try`` body imports (:attr:`ImportSite.fallback_of`)."""
    found = {}
    for block in tree.body:
        if not isinstance(block, TRIES) or not _falls_back(block):
            continue
        tried = tuple(
            absolute
            for statement in block.body
            if isinstance(statement, (ast.Import, ast.ImportFrom))
            for absolute, _ in _imported(statement, module, is_package)
        )
        for handler in block.handlers:
            found.update((s, tried) for s in handler.body if isinstance(s, (ast.Import, ast.ImportFrom)) and tried)
    return found


def _top_statements(tree: ast.Module) -> list[ast.stmt]:
    """The module's own statements, and those of a module-level ``try`` that does not fall back
    (Mask2Former's ``try: import MultiScaleDeformableAttention`` / ``except ModuleNotFoundError: raise
    ...``, round 37; LLM-Finetuning-Toolkit's ``llama_patch.py`` importing flash-attn so, round 53)."""
    inner = [
        statement
        for block in tree.body
        if isinstance(block, TRIES) and not _falls_back(block)
        for statement in block.body
    ]
    return [*tree.body, *inner]


def _bundled_copy(files: PythonFiles, importer: Path, absolute: str) -> str:
    """``absolute`` as a module of :attr:`PythonFiles.distinct_modules`: a top-level module bundled
    more than once is the copy in the importer's nearest directory above it (``lib.utils`` in
    ``inference/generate.py`` → ``inference.lib.utils``; none there: as written, naming no file). A
    module of a directory without ``__init__.py`` that is no script is imported through that directory,
    from the one above (GuidedQuant's ``spin_quant/utils/eval_utils.py``: its ``from utils import
    model_utils`` finds ``spin_quant/utils/``, not ``spin_quant/utils/utils.py``)."""
    head, _, rest = absolute.partition(".")
    copies = files.bundled_copies.get(head)
    if copies is None:
        return absolute
    parents = importer.parents
    if importer in files.namespace_names and not MAIN_GUARD.search(files[importer]):
        parents = parents[1:]  # a module of a directory without `__init__.py`, imported through it from above
    where = next((copies[parent] for parent in parents if parent in copies), head)
    return f"{where}.{rest}" if rest else where


def _imported(statement: ast.Import | ast.ImportFrom, importer: str, is_package: bool) -> tuple[tuple[str, str], ...]:
    """(absolute module, as written) of each module ``statement`` of the module ``importer`` may
    import, in the order written (``from a import b``: ``a``, then ``a.b``, a module or a name of ``a``)."""
    if isinstance(statement, ast.Import):
        return tuple((alias.name, alias.name) for alias in statement.names)
    names = [alias.name for alias in statement.names if alias.name != "*"]
    base = absolute_module(importer, is_package, statement.level, statement.module or "")
    absolute = [base, *(f"{base}.{name}" for name in names)]
    return tuple(zip(absolute, written_imports(statement.level, statement.module or "", names)))


def written_imports(level: int, module: str, names: list[str]) -> list[str]:
    """The modules ``from <level dots><module> import <names>`` may import, as written: ``from ..a
    import b`` → ``..a``, ``..a.b``; ``from . import b`` → ``.``, ``.b`` (the rules' and this fact's
    common name of an import whose absolute module a rule cannot know)."""
    base = "." * level + module
    return [base, *(base + ("" if base.endswith(".") else ".") + name for name in names)]


def _imports_under_guards(
    statements: list[ast.stmt], guarded: bool = False
) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """``(import statement, guarded)`` for each import among ``statements`` and the blocks in them,
    in file order; ``guarded``: in the body of a ``try`` that falls back when the import fails."""
    for statement in statements:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            yield statement, guarded
        elif isinstance(statement, TRIES):
            yield from _imports_under_guards(statement.body, guarded or _falls_back(statement))
            for block in (*(handler.body for handler in statement.handlers), statement.orelse, statement.finalbody):
                yield from _imports_under_guards(block, guarded)
        elif hasattr(statement, "body") or hasattr(statement, "cases"):  # def, class, if, loop, with, match
            yield from _imports_under_guards(getattr(statement, "body", ()), guarded)
            yield from _imports_under_guards(getattr(statement, "orelse", ()), guarded)
            for case in getattr(statement, "cases", ()):
                yield from _imports_under_guards(case.body, guarded)


def _falls_back(statement: ast.Try) -> bool:
    """A handler of the ``try`` catches a failed import (ImportError, ModuleNotFoundError, Exception,
    BaseException or a bare ``except``) and does not end in ``raise``."""
    return any(catches_import_error(handler) and not reraises(handler) for handler in statement.handlers)


# the xFormers names NPU409 rewrites the uses of, and the modules they are reached through
XFORMERS_REWRITTEN = frozenset(
    {"memory_efficient_attention", "ops", "fmha", "LowerTriangularMask", "LowerTriangularFromBottomRightMask"}
)
SHOWN_IMPORTERS = 3  # the guarded imports an optional module's entry names; the others are counted


def optional_modules(
    files: PythonFiles, failing: tuple[tuple[str, str], ...], sites: ImportSites, root: Path | None = None
) -> tuple[tuple[str, str, str, str], ...]:
    """``(real path, failing import, what fails, importers)`` for each failing module (``failing``:
    :func:`failing_modules`) that project files import, every one in the body of a ``try`` that
    falls back (see the module docstring; a module nothing imports may be a script: not listed).
    ``failing import``: its first module-level import that fails, as written; ``what fails``: the
    import at the end of the chain, "" where that is the import itself; ``importers``: where the
    project imports it, ``path:line`` from ``root``. Only files whose import statements name one
    of the failing modules (or are relative) are read (:meth:`PythonFiles.may_import`)."""
    what_fails = dict(failing)
    owners = {name: path for path in files.distinct_modules for name in _names(files, path) if name in what_fails}
    words = {name.rpartition(".")[2].encode() for name in owners}
    importers: dict[Path, list[tuple[str, int, bool]]] = {}  # failing module -> (file, line, guarded) of its imports
    for path in files.distinct_modules if owners else ():
        if not files.may_import(path, words):
            continue
        for site in sites.of(path):
            for target in _imported_owners(site, owners) - {path}:
                importers.setdefault(target, []).append((_shown(path, root), site.line, site.guarded))
    found = []
    for target, imports in importers.items():
        failing_import = _failing_import(sites.of(target), _names(files, target), what_fails)
        if failing_import is not None and all(guarded for _, _, guarded in imports):
            places = [f"{shown}:{line}" for shown, line, _ in sorted(imports)]
            found.append((os.path.realpath(target), *failing_import, _listed(places)))
    return tuple(sorted(found))


def failing_imports(
    files: PythonFiles,
    failing: tuple[tuple[str, str], ...],
    sites: ImportSites,
    optional: set[str],
    extensions: tuple[str, ...] = (),
    pins: Pins = (),
) -> tuple[tuple[str, str, str, bool, str], ...]:
    """``(real path, failing import as written, what fails, left as written, also)`` for each failing module
    (``failing``) but the ``optional`` ones (real paths) whose failing import is a project module's (a
    direct import of what fails is marked where it is), relative imports included. ``left as
    written``: the failure comes from what no one ports quickly (a compiled CUDA extension, an unported
    package, a module compiling CUDA at import; not a flash-attn name ported at its import alone,
    whose importers run once a person copies it): the file cannot run on an NPU host until that is
    ported, so NPU606 marks its import and the rest stays as written (SpQR's scripts and tests,
    Quest's package); else NPU606 marks the import and the file is migrated, and ``also`` lists the
    other CUDA-only imports the file reaches (:class:`CudaOnlyReach`), which must be ported too."""
    what_fails = dict(failing)
    modules = set(files.distinct_modules.values())
    reached = CudaOnlyReach(files, sites, extensions, pins)
    through_package = functools.cache(lambda package: _imported_through(files, sites, package))
    imported_anywhere = functools.cache(lambda name: _named_in_imports(files, name))
    found = []
    for path in files.distinct_modules:
        own = _names(files, path)
        if os.path.realpath(path) in optional:
            continue
        if not any(name in what_fails for name in own) and path.name != "setup.py":  # a build script: run, not imported
            for package, name, cause in _package_causes(files, path, what_fails):
                left = not _ported_by_hand(cause, extensions, modules)
                # a module named by its own package (not a namespace's: a directory without `__init__.py` holds
                # scripts, LongVA's `low_mem_cross_ent_tests/`, round 39), failing through a compiled extension,
                # is taken as failing wherever it is imported from; otherwise where an import names it through
                # the package, or, a module of the package, where nothing imports it and the project imports
                # the package's modules through it
                through, member = through_package(package), path.parent / "__init__.py" in files
                if (
                    (left and member)
                    or name in through
                    or (
                        member
                        and through
                        and not imported_anywhere(path.stem if path.name != "__init__.py" else path.parent.name)
                    )
                ):
                    # through its own package's `__init__`: no import of its own to mark
                    found.append((os.path.realpath(path), "", cause, left, ""))
                    break
            continue
        failing_import = _failing_import(sites.of(path), own, what_fails)
        if failing_import is None:
            continue
        written, what = failing_import
        cause = next(what_fails[name] for name in own if name in what_fails)
        if not what and (cause in modules or written.startswith(".")):
            what = cause  # it imports the module compiling CUDA, or the extension relatively: no rule marks those
        if what:
            # importing a package named like one whose uses cuda2npu migrates (flash-attn's own tests import
            # the project's `flash_attn`): those uses are rewritten, so the file is migrated
            left = not _ported_by_hand(what, extensions, modules) and written.lstrip(".").split(".")[0] not in MIGRATED
            others = sorted({name.split(".")[0] for name in reached(path)} - {what.split(".")[0]})
            also = "" if left else _and_listed([f"`{name}`" for name in others])
            found.append((os.path.realpath(path), written, what, left, also))
    return tuple(sorted(found))


def _and_listed(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``; "" for none."""
    return " and ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else "".join(names)


class CudaOnlyReach:
    """The CUDA-only imports a project module reaches through its module-level imports and those of the
    project modules it imports (and their packages' ``__init__``): what fails at import, and the packages
    that import but whose kernels need CUDA (FlashInfer). UMbreLLa (round 34): `engine.py` reaches the
    compiled `awq_ext` through `umbrella.models`, and `flashinfer` first; porting `awq_ext` alone does not
    make it run, so its marker names both."""

    def __init__(self, files: PythonFiles, sites: ImportSites, extensions: tuple[str, ...], pins: Pins = ()) -> None:
        self._files, self._sites, self._extensions, self._pins = files, sites, extensions, pins
        self._owners = {name: path for path in files.distinct_modules for name in _names(files, path)}
        self._own_roots = {module.split(".")[0] for module in files.distinct_modules.values()}
        self._reached: dict[Path, frozenset[str]] = {}

    def __call__(self, path: Path) -> frozenset[str]:
        """The CUDA-only modules ``path`` reaches (a module seen again on the way adds nothing)."""
        if path in self._reached:
            return self._reached[path]
        self._reached[path] = frozenset()  # an import cycle ends here
        found: set[str] = set()
        own = _names(self._files, path)
        for site in (site for site in self._sites.of(path) if site.top and not site.guarded):
            for target in _imported_owners(site, self._owners) - {path}:
                if not _above_or_is(self._files.distinct_modules[target], own):
                    found |= self(target)
            for name, _ in site.imported:
                if _cannot_import(name, self._extensions, set(), self._own_roots, self._pins):
                    found.add(name)
                elif name.split(".")[0] not in self._own_roots and _kernels_need_cuda(name, self._extensions):
                    found.add(name)
        self._reached[path] = frozenset(found)
        return self._reached[path]


def _kernels_need_cuda(name: str, extensions: tuple[str, ...]) -> bool:
    """``name`` imports on an NPU host but its kernels need CUDA (the table's ``kernels`` kind, FlashInfer),
    in no release that runs on an NPU."""
    kind = cuda_module(name, extensions)
    return kind is not None and kind[0] == "kernels" and npu_release(name) is None


def _package_causes(files: PythonFiles, path: Path, what_fails: dict[str, str]) -> Iterator[tuple[str, str, str]]:
    """``(package, the module's name through it, what fails)`` for each name of a module of a package whose
    ``__init__`` fails (Block-Sparse-Attention's
    ``block_sparse_attn/utils/benchmark.py``: the package's ``__init__`` imports its interface, which
    imports the compiled ``block_sparse_attn_cuda``, round 31; nano-vllm's ``nanovllm/config.py``: its
    ``__init__`` reaches ``flash_attn``, round 38; Infinity's ``infinity/models/ema.py``, both
    ``models.ema`` and ``infinity.models.ema`` where ``infinity/`` has no ``__init__.py``, round 42):
    importing the module runs that ``__init__`` first. None for a module that runs as a script
    (``if __name__ == "__main__":``), which may be started from its directory, the package unloaded."""
    if MAIN_GUARD.search(files[path]):
        return
    for name in _names(files, path):  # nano-vllm's `nanovllm/engine/` has no `__init__.py`
        if (package := failing_part(name, what_fails)) is not None:  # a package above: the name is no failing one
            yield package, name, what_fails[package]


def _imported_through(files: PythonFiles, sites: ImportSites, package: str) -> frozenset[str]:
    """The project modules below ``package`` that some import names through it: by its absolute name
    (nano-vllm's ``from nanovllm.config import Config``), or relatively from a module imported through it
    (VLM2Vec's ``src/data/dataset/__init__.py``: ``from .beir_dataset import ...``), and the packages
    between (whose ``__init__`` runs first). A module imported only by a shorter name, by a script beside
    it (MambaVision's ``train.py`` in ``mambavision/`` importing ``scheduler.cosine_lr``), does not run
    the package's ``__init__``."""
    prefix, word = f"{package}.", package.split(".")[0].encode()
    found: set[str] = set()
    relative: dict[Path, set[str]] = {}  # importer -> what its relative imports name below the package
    for path in files.distinct_modules:
        if not files.may_import(path, {word}):
            continue
        for site in sites.of(path):
            for absolute, written in (*site.imported, *((name, ".") for name in site.qualified)):
                if written == absolute and (absolute == package or absolute.startswith(prefix)):
                    found |= {package, *_packages_down_to(absolute, package)}  # `from easy_context import ...`
                elif written.startswith(".") and absolute.startswith(prefix):
                    relative.setdefault(path, set()).add(absolute)
    while True:
        more = {
            name
            for path, targets in relative.items()
            if found.intersection(_names(files, path))
            for target in targets
            for name in _packages_down_to(target, package)
        } - found
        if not more:
            return frozenset(found)
        found |= more


def _named_in_imports(files: PythonFiles, name: str) -> bool:
    """Whether an import statement of the project names ``name`` (a module's last name), by text."""
    word = re.compile(rf"\b{re.escape(name)}\b".encode())
    return any(word.search(statement) for path in files for statement in files.import_statements(path))


def _packages_down_to(module: str, package: str) -> set[str]:
    """``module`` and the packages between it and ``package`` (``a.b.c.d`` below ``a``: ``a.b``, ``a.b.c``, ``a.b.c.d``)."""
    parts = module.split(".")
    return {".".join(parts[:n]) for n in range(package.count(".") + 2, len(parts) + 1)}


def _ported_by_hand(what_fails: str, extensions: tuple[str, ...], modules: set[str]) -> bool:
    """What fails is ported by hand, its importers running once that is done: a flash-attn name (a
    helper NPU606 says to copy, flash-attn 1.x's interface, a function used otherwise than by calling
    it, NPU403) or a package not marked ``unported`` (mamba-ssm: its pure-torch ``selective_scan_ref``);
    not a compiled CUDA extension, an unported package or a module compiling CUDA at import."""
    if what_fails in modules or is_cuda_extension(what_fails, extensions) or unported_module(what_fails):
        return False
    return True


def importers_of(files: PythonFiles, targets: Set[Path]) -> dict[Path, Path]:
    """Each project file that imports one of ``targets`` (at any level: in a function too), also through
    other project files, with the target it reaches first; the targets themselves included. Only what an
    import names counts, not the packages above it, whose ``__init__`` also runs: VGen's entrances reach
    every module through ``tools/__init__.py`` but build none of the models the others do (round 44)."""
    sites = ImportSites(files)
    owners = {name: path for path in files.distinct_modules for name in _names(files, path)}
    importers: dict[Path, set[Path]] = {}
    for path in files.distinct_modules:
        for site in sites.of(path):
            named = {owners[name] for name in (*(n for n, _ in site.imported), *site.qualified) if name in owners}
            for target in named - {path}:
                importers.setdefault(target, set()).add(path)
    reached = {target: target for target in targets}
    pending = list(targets)
    while pending:
        path = pending.pop()
        for importer in sorted(importers.get(path, ())):
            if importer not in reached:
                reached[importer] = reached[path]
                pending.append(importer)
    return reached


def _imported_owners(site: ImportSite, owners: dict[str, Path]) -> set[Path]:
    """The files of ``owners`` (module name -> file) that ``site`` imports: a module it names, or a
    package above one (whose ``__init__`` runs first)."""
    found = set()
    for absolute in (*(name for name, _ in site.imported), *site.qualified):
        parts = absolute.split(".")
        found.update(owners[part] for n in range(1, len(parts) + 1) if (part := ".".join(parts[:n])) in owners)
    return found


def _failing_import(sites: list[ImportSite], own: list[str], what_fails: dict[str, str]) -> tuple[str, str] | None:
    """``(as written, what fails)`` of the first module-level import of a failing module that fails, else
    of the first import in the handler of a module-level ``try`` that falls back (``own``: its names);
    ``what fails`` is "" where the import is itself what fails."""
    cause = next((what_fails[name] for name in own if name in what_fails), None)
    for site in [site for site in sites if site.top] + [site for site in sites if site.fallback_of]:
        for absolute, written in site.imported:
            if absolute == cause:
                return written, ""
            part = _failing_prefix(absolute, what_fails, own, by_name=not written.startswith("."))
            if part is not None:
                return written, what_fails[part]
    return None


def _failing_prefix(name: str, failing: dict[str, str], own: list[str], by_name: bool = False) -> str | None:
    """The failing module ``name`` is, or a package above it, that is neither the importer (``own``:
    its names) nor a package above the importer: that one runs first, and is marked where it fails
    (MambaVision's ``scheduler/__init__.py`` importing ``.cosine_lr`` is not failing through
    ``mambavision/__init__.py``). A package above the importer that the import names itself, by its
    absolute name (``by_name``), counts: the importer takes the package's own names, which a script
    run from the package's directory imports too (SpargeAttn's ``autotune.py``: ``from spas_sage_attn
    import spas_sage_attn_meansim_cuda``, round 31)."""
    parts = name.split(".")
    found = (".".join(parts[:n]) for n in range(1, len(parts) + 1))
    return next(
        (
            part
            for part in found
            if part in failing and (not _above_or_is(part, own) or (by_name and part == name and part not in own))
        ),
        None,
    )


def _above_or_is(name: str, own: list[str]) -> bool:
    """``name`` is one of the module names ``own`` or a package above one of them."""
    return any(module == name or module.startswith(f"{name}.") for module in own)


def _shown(path: Path, root: Path | None) -> str:
    """``path`` as the migration report names it: from ``root``, else its name alone."""
    return path.relative_to(root).as_posix() if root is not None and path.is_relative_to(root) else path.name


def _listed(places: list[str]) -> str:
    """The first :data:`SHOWN_IMPORTERS` of ``places``, the others counted."""
    others = len(places) - SHOWN_IMPORTERS
    return ", ".join(places[:SHOWN_IMPORTERS]) + (f" and {others} other{'s' * (others > 1)}" if others > 0 else "")


def _failing_roots() -> tuple[str, ...]:
    """The top-level modules of rules/tables/cuda_only_packages.toml whose imports may stay after the
    migration and fail (:func:`_cannot_import`): not those whose uses cuda2npu migrates, nor Triton."""
    roots = (*cuda_module_roots(), *UNINSTALLABLE_LIBRARIES)
    return tuple(re.escape(root) for root in roots if root not in (*MIGRATED, "triton"))


def _cannot_import(
    name: str, extensions: tuple[str, ...], kept: Set[str], own_roots: set[str], pins: Pins = ()
) -> bool:
    """A compiled CUDA extension, PyCUDA (not installable there), a module of an unported package whose
    import fails, or a flash-attn name ported at its import alone (``flash_attn.bert_padding``: NPU606 says what to copy, and the
    import stays until a person does) or not ported at all (flash-attn 1.x's
    ``flash_attn_unpadded_qkvpacked_func``: NPU403 at its calls, and the import stays); of flash-attn's,
    with ``kept`` (:func:`_kept_flash_names`), only a name the migrated file still imports; any other
    package of the table whose import fails and whose uses cuda2npu does not migrate (mamba-ssm), unless
    the project has a top-level package of its name (``own_roots``); of a package that runs on an NPU
    from some release on (xfuser 0.4.5), only where the project's ``pins`` allow none of those
    (Step-Video's ``xfuser==0.4.2rc2``, round 43; otherwise NPU606 marks the import for review); vLLM
    under a pin older than vllm-ascend's first release (DeepSeek-Prover's ``vllm==0.4.1``, round 44)."""
    if is_cuda_extension(name, extensions) or name.split(".")[0] in UNINSTALLABLE_LIBRARIES:
        return True
    if name.startswith(("flash_attn.", "flash_attn_interface.", "xformers.")):
        return name in kept
    if name.split(".")[0] in own_roots:
        return False  # the project's own package of that name (a vendored `mamba_ssm`), followed as such
    if name.split(".")[0] == "vllm" and _old_vllm(pins):
        return True  # no vllm-ascend is made for it: it imports its CUDA kernels (NPU931 at the import)
    found = cuda_module(name, extensions)
    release = npu_release(name) if found is not None else None
    if release is not None and pin_predates(pins, *release) is None:
        return False
    # a package cuda2npu migrates the uses of goes with them; Triton imports where Triton-Ascend is installed
    migrated = name.split(".")[0] in (*MIGRATED, "triton")
    return found is not None and found[0] == "imports" and (unported_module(name) or not migrated)


def _old_vllm(pins: Pins) -> bool:
    """The project pins a vLLM older than vllm-ascend's first release (NPU931's old-pin note)."""
    return pin_predates(pins, "vllm", first_ascend_vllm()) is not None


def _kept_flash_names(tree: ast.Module | None) -> set[str]:
    """The flash-attn names (``flash_attn.bert_padding.pad_input``, and the module a kept name comes
    from) the module-level imports of ``tree`` still bind after the migration: a helper ported at its
    import or an API the migration does not port, used in the file; a function whose calls are
    rewritten, used otherwise than by calling it (``module.full_attn_func = flash_attn_func``: NPU403).
    A name the file never uses goes where the migration rewrites the statement for another name's calls
    (DuoAttention's ``from flash_attn import flash_attn_func, flash_attn_with_kvcache``)."""
    if tree is None:
        return set()
    loads: dict[str, list[bool]] = {}  # name -> for each read, whether it is called
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call) and _rewritable(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            loads.setdefault(node.id, []).append(id(node) in called)
    kept = set()
    for statement in _top_statements(tree):
        if isinstance(statement, ast.Import):  # `import flash_attn.ops.fused_dense`: stays as it is
            kept |= {a.name for a in statement.names if import_port(a.name) is not None or flash_unported(a.name)}
        if not isinstance(statement, ast.ImportFrom) or not (statement.module or "").startswith("flash_attn"):
            continue
        names = [(f"{statement.module}.{a.name}", loads.get(a.asname or a.name, [])) for a in statement.names]
        by_hand = {name for name, _ in names if import_port(name) is not None or flash_unported(name)}
        # the migration rewrites the statement where it rewrites a call of one of its names: then the
        # names the file does not use go with it
        rewritten = any(name not in by_hand and any(reads) for name, reads in names)
        for name, reads in names:
            if (name in by_hand and (reads or not rewritten)) or (name not in by_hand and not all(reads)):
                kept |= {name, statement.module}
    return kept


def _rewritable(call: ast.Call) -> bool:
    """Whether the flash-attn rule may rewrite ``call``: not where ``*``/``**`` arguments hide what is
    passed, nor where an argument without an NPU counterpart is (:data:`FLASH_UNPORTED_ARGUMENTS`) other
    than None, False or 0 (Infinity's ``flash_attn_func(q, k, v, **kw)``, Kimi-Audio's
    ``return_attn_probs=output_attentions``: NPU401 leaves the call, and its import stays)."""
    if any(isinstance(arg, ast.Starred) for arg in call.args):
        return False
    for keyword in call.keywords:
        if keyword.arg is None:
            return False
        if keyword.arg in FLASH_UNPORTED_ARGUMENTS and not (
            isinstance(keyword.value, ast.Constant) and keyword.value.value in (None, False, 0)
        ):
            return False
    return True


def _kept_xformers_names(tree: ast.Module | None) -> set[str]:
    """The xFormers names (and their modules) the module-level ``from xformers... import`` statements of
    ``tree`` bind that the migration does not rewrite away: all but ``memory_efficient_attention``, the
    ``ops`` / ``fmha`` modules it is called through and the causal masks it reads (NPU409). chameleon's
    ``from xformers.ops import RMSNorm, fmha, rope_padded`` stays, and its importers fail (round 40). And
    the modules of its ``import xformers.ops`` statements where the file reads what NPU409 never rewrites
    (:func:`_unrewritten_xformers`)."""
    if tree is None:
        return set()
    kept, plain = set(), set()
    for statement in _top_statements(tree):
        if isinstance(statement, ast.ImportFrom) and (statement.module or "").split(".")[0] == "xformers":
            for alias in statement.names:
                if alias.name not in XFORMERS_REWRITTEN:
                    kept |= {f"{statement.module}.{alias.name}", statement.module}
        if isinstance(statement, ast.Import) and any(
            a.name.split(".")[0] == "xformers" and not a.asname for a in statement.names
        ):
            plain |= {a.name for a in statement.names if a.name.split(".")[0] == "xformers"}
    return kept | plain if plain and _unrewritten_xformers(tree) else kept


def _unrewritten_xformers(tree: ast.Module) -> bool:
    """``tree`` reads an attribute of ``xformers...`` that NPU409 never rewrites (PixArt-sigma's
    ``xformers.ops.fmha.BlockDiagonalMask.from_seqlens(...)``, round 45): its ``import xformers.ops`` stays."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Name, ast.Attribute)):
            chain = []
            current: ast.expr = node
            while isinstance(current, ast.Attribute):
                chain.append(current.attr)
                current = current.value
            if isinstance(current, ast.Name) and current.id == "xformers" and not set(chain) <= XFORMERS_REWRITTEN:
                return True
    return False


def failing_part(name: str, failing: dict[str, str]) -> str | None:
    """The failing project module ``name`` is, or a package above it (whose ``__init__`` runs first)."""
    parts = name.split(".")
    return next((".".join(parts[:n]) for n in range(1, len(parts) + 1) if ".".join(parts[:n]) in failing), None)
