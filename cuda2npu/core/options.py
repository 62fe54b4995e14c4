"""Run options shared by ``migrate`` and ``check``, and which rule codes they enable."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from cuda2npu.core.diagnostics import Tier

STRATEGY_CHOICES = {
    "precision": ("bf16", "fp16", "keep"),
    "apex": ("native", "ascend"),
    "colossalai": ("keep", "native"),
}

OPT_IN_FLAGS = {"fuse_sdpa": "NPU406"}


@dataclass(frozen=True)
class Options:
    """Everything that changes what the rules report or rewrite (part of the cache key)."""

    select: tuple[str, ...] = ("NPU",)
    ignore: tuple[str, ...] = ()
    max_tier: Tier = Tier.REVIEW
    markers: bool = True  # `# TODO(cuda2npu)` markers at the findings a human must handle
    review_markers: bool = True  # also at review items (False: at manual findings only)
    fix: bool = True
    precision: str = "bf16"
    apex: str = "native"
    colossalai: str = "keep"
    fuse_sdpa: bool = False
    target_torch_npu: str | None = None  # None: the newest version documented in the reference
    portable: bool = False  # device-agnostic output for CUDA and Ascend (cuda2npu/families/portable.py)
    target_torch: str | None = None  # --portable: the oldest torch to run on (None: see cuda2npu/families/portable.py)
    per_file_ignores: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (directory, glob, codes): config.py
    cuda_extensions: tuple[str, ...] = ()  # modules the project's setup.py builds with CUDAExtension
    local_modules: tuple[str, ...] = ()  # the project's own modules named like CUDA-only ones (flash_attn)
    loose_modules: tuple[tuple[str, str], ...] = ()  # (directory, name): such modules outside a package (for_path)
    npu_backend_classes: tuple[str, ...] = ()  # the project's classes implementing an NPU backend (NpuAccelerator)
    in_package: bool = False  # a .py file next to an __init__.py: generated files are imported relatively

    def for_path(self, path) -> "Options":
        """The options for one file: matching per-file-ignores folded into ``ignore``; ``in_package``;
        the loose modules of its own directory added to ``local_modules`` (a script imports them)."""
        options = self
        if self.loose_modules:
            directory = str(Path(path).parent)
            here = tuple(name for where, name in self.loose_modules if where == directory)
            options = replace(options, local_modules=tuple(sorted({*self.local_modules, *here})), loose_modules=())
        # only a rewrite reads it (the import of a generated file): no stat per file for `check`; not notebooks
        if self.fix and Path(path).suffix == ".py" and (Path(path).parent / "__init__.py").is_file():
            options = replace(options, in_package=True)
        if not self.per_file_ignores:
            return options
        from cuda2npu.core.globs import matching_ignores

        extra = matching_ignores(self.per_file_ignores, path)
        return replace(options, ignore=self.ignore + extra, per_file_ignores=()) if extra else options

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
