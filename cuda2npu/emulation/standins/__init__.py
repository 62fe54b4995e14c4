"""CPU stand-ins for CUDA-only libraries, used on the ORIGINAL side of a migration.

The validation harness runs the user's original CUDA code next to the migrated NPU code.
Where the original imports ``flash_attn``, ``apex`` or ``transformer_engine`` and the real
package is not installed (it never is on an NPU host), :func:`install_finder` lets those
imports resolve to the stand-in packages in this directory. Each stand-in mirrors the real
import layout and re-implements the documented semantics in plain PyTorch; every module's
docstring names the upstream source it follows and what it does not emulate.

A stand-in is loaded under the real top-level name (``flash_attn``), with its
``__path__`` pointing here, so submodules (``flash_attn.flash_attn_interface``) resolve
through ordinary path-based import. The finder sits at the END of ``sys.meta_path``: a real
installation is always found first. Of the CUDA extension modules only ``amp_C`` (the
multi-tensor kernels scripts call directly, with ``apex.multi_tensor_apply``) has a stand-in;
the others (``fused_layer_norm_cuda``, ``flash_attn_2_cuda``, ``transformer_engine_torch``) do
not, so code that guards them with ``try: import ... except ImportError`` takes its fallback
path.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from pathlib import Path

STANDIN_ROOTS = ("flash_attn", "apex", "transformer_engine", "amp_C", "xformers")

_HERE = Path(__file__).resolve().parent


class StandinFinder(importlib.abc.MetaPathFinder):
    """Resolve a missing top-level ``flash_attn``/``apex``/``transformer_engine``/``amp_C`` to its stand-in."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in STANDIN_ROOTS:
            return None
        package_dir = _HERE / fullname
        return importlib.util.spec_from_file_location(
            fullname, package_dir / "__init__.py", submodule_search_locations=[str(package_dir)]
        )


_FINDER = StandinFinder()


def install_finder() -> None:
    """Append the stand-in finder to ``sys.meta_path`` (idempotent)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)


def uninstall_finder() -> None:
    """Remove the finder and forget stand-in modules imported under the real names."""
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for name in [name for name, module in sys.modules.items() if _is_standin_import(name, module)]:
        del sys.modules[name]


def _is_standin_import(name: str, module) -> bool:
    if name.split(".", 1)[0] not in STANDIN_ROOTS:
        return False
    origin = getattr(getattr(module, "__spec__", None), "origin", None)
    return origin is not None and Path(origin).resolve().is_relative_to(_HERE)
