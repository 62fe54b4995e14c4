"""What went wrong in a side's child process, said so that a user can act on it: a short name for
the cause, the innermost line of the side's own tree that was running, and the traceback (the
tree's frames only, and whole)."""

from __future__ import annotations

import ast
import json
import traceback
from pathlib import Path
from typing import Callable

MISSING_DEPENDENCY = "missing dependency of the original"
CUDA_ONLY_IMPORT = "CUDA-only import on the migrated side (it fails on an NPU host)"
NPU_NOT_REGISTERED = "the npu device is not registered (is `import torch_npu` missing?)"


class NoExampleInputs(LookupError):
    """A module class was given as entry but says nothing about its inputs."""


def classify(exc: BaseException, role: str) -> str:
    """A short name for what went wrong, pointing at the likely cause."""
    text = str(exc)
    if isinstance(exc, ModuleNotFoundError) and "on an NPU host" in text:
        return CUDA_ONLY_IMPORT
    if "same device" in text:
        return "device mixing (a tensor was left on another device; look for a missed .cuda()/.to())"
    if role == "migrated" and ("npu" in text and ("device type" in text or "has no attribute 'npu'" in text)):
        return NPU_NOT_REGISTERED  # before the CUDA test: torch's message lists "cuda" among the device types
    if role == "migrated" and ("CUDA" in text or "cuda" in text):
        return "CUDA call on the migrated side (a CUDA-only call survived the migration)"
    if isinstance(exc, NoExampleInputs):
        return "no example inputs"
    if role == "original" and isinstance(exc, ModuleNotFoundError):
        return MISSING_DEPENDENCY
    if isinstance(exc, (ImportError, LookupError)):
        return "entry not found" if isinstance(exc, LookupError) else "import failure"
    if isinstance(exc, RuntimeError) and "state_dict" in text:
        return "weights do not load (parameter names or shapes differ)"
    return "the model code raised"


def _explain_missing(exc: BaseException, role: str, tree: Path) -> None:
    """A CUDA-only module missing on the migrated side: say so in the exception's message."""
    from cuda2npu.validation.strict_host import npu_host_reason

    name = getattr(exc, "name", None)
    if role == "migrated" and isinstance(exc, ModuleNotFoundError) and name and "on an NPU host" not in str(exc):
        why = npu_host_reason(tree)(name)
        if why:
            exc.msg = f"No module named {name!r} on an NPU host: {why}"  # what str() of an ImportError shows
            exc.args = (exc.msg,)


def describe(exc: BaseException, role: str, tree: Path) -> dict:
    """The error file a child writes: kind, message, location, short and full traceback."""
    _explain_missing(exc, role, tree)
    prefix = str(tree.resolve()) + "/"
    frames = traceback.extract_tb(exc.__traceback__)
    own = [frame for frame in frames if frame.filename.startswith(prefix)]
    kind = classify(exc, role)
    location = getattr(exc, "cuda2npu_place", None) or ""  # the recorder's better place (devices mixed)
    if own and not location:
        last = own[-1]
        location = f"{last.filename[len(prefix) :]}:{last.lineno}"
        if kind == NPU_NOT_REGISTERED:
            location = _imports_span(Path(last.filename), last.filename[len(prefix) :]) or location
    short = [
        f"  {frame.filename[len(prefix) :]}:{frame.lineno} in {frame.name}: {(frame.line or '').strip()}"
        for frame in own
    ]
    message = f"{type(exc).__name__}: {exc}"
    return {
        "error": kind,
        "message": message,
        "location": location,
        "short_traceback": "\n".join([*short[-6:], f"  {message}"]),
        "traceback": "".join(traceback.format_exception(exc)),
        "module": getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None,
    }


def _imports_span(path: Path, relative: str) -> str | None:
    """``path:first-last`` of a file's module-level imports: where a missing ``import torch_npu`` goes."""
    try:
        body = ast.parse(path.read_bytes()).body
    except (OSError, SyntaxError, ValueError):
        return None
    lines = [node.lineno for node in body if isinstance(node, (ast.Import, ast.ImportFrom))]
    return f"{relative}:{min(lines)}-{max(lines)}" if lines else None


def child_main(argv: list[str], run: Callable[[dict], object], role: str | None = None) -> int:
    """A validation child (``--run``'s trace, the smoke test): ``run`` the spec in ``argv[1]`` and write
    its result to the spec's ``out`` (exit 0), or what failed, described for ``role`` (default: the
    spec's), to ``out.error.json`` (exit 2), for the parent to read."""
    spec = json.loads(Path(argv[1]).read_text())
    out = Path(spec["out"])
    try:
        result = run(spec)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        error = describe(exc, role or spec["role"], Path(spec["tree"]))
        out.with_suffix(".error.json").write_text(json.dumps(error))
        return 2
    out.write_text(json.dumps(result))
    return 0
