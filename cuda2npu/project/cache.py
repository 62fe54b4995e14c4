"""The result cache: a file whose bytes, path and effective options were seen before is not parsed again.

``.cuda2npu_cache/`` sits in the project root (the nearest directory above the paths holding a
``pyproject.toml``, ``cuda2npu.toml``, ``.cuda2npu.toml``, ``setup.py`` or ``.git``; else the working
directory). An entry's key is the SHA-256 of

* the tool version and a fingerprint of cuda2npu's own code and rule catalogue (the bytes of every
  file, a few milliseconds per run), so editing a rule invalidates everything;
* the effective per-file :class:`~cuda2npu.core.options.Options` (their ``repr``) and the display path;
* the file's bytes.

An entry is the :class:`~cuda2npu.core.diagnostics.FileResult` as JSON (never pickle: a cache directory
checked into a repository must not be able to run code), written to a temporary file and renamed,
so concurrent runs only ever see whole entries. An entry that cannot be read or does not decode
to a result is ignored (and recomputed). Results with an internal error are never stored.
``CUDA2NPU_NO_CACHE=1`` or ``--no-cache`` turns the cache off; ``cuda2npu clean`` removes it.

The project facts (cuda2npu/project/facts.py) are kept there too, under ``facts/``: their key is the
code's fingerprint, the project root and every discovered file's path and bytes (:meth:`Cache.facts`).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from cuda2npu import __version__
from cuda2npu.core.diagnostics import FileResult, Finding, Tier
from cuda2npu.core.options import Options, ProjectFacts
from cuda2npu.project.pins import LOCK_FILES

CACHE_DIR_NAME = ".cuda2npu_cache"
ENV_DISABLE = "CUDA2NPU_NO_CACHE"
ROOT_MARKERS = ("pyproject.toml", "cuda2npu.toml", ".cuda2npu.toml", "setup.py", ".git")
SCHEMA = 3  # 2: FileResult.imports; 3: FileResult.warnings
TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# cuda2npu result cache (https://bford.info/cachedir/)\n"


def disabled() -> bool:
    return os.environ.get(ENV_DISABLE, "").strip().lower() not in ("", "0", "false", "no")


def project_root(paths: list[Path]) -> Path:
    """The nearest directory at or above the paths' common directory holding a root marker, else the cwd."""
    directories = [os.path.abspath(p if p.is_dir() else p.parent) for p in paths] or [os.getcwd()]
    common = Path(os.path.commonpath(directories)).resolve()
    for directory in (common, *common.parents):
        if any((directory / marker).exists() for marker in ROOT_MARKERS):
            return directory
    return Path.cwd()


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Changes whenever cuda2npu's code or rule catalogue changes (the bytes of every file)."""
    from cuda2npu.core.catalogue import catalogue_dir

    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256(f"{__version__}\0{SCHEMA}".encode())
    for directory, pattern in ((package, "*.py"), (catalogue_dir(), "*.toml")):
        for path in sorted(directory.rglob(pattern)):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            digest.update(f"{path.relative_to(directory)}\0{len(data)}\0".encode())
            digest.update(data)
    return digest.hexdigest()


@dataclass(frozen=True)
class Cache:
    """A cache directory plus the fingerprint of the code that fills it (picklable for workers)."""

    directory: Path
    fingerprint: str

    @classmethod
    def for_paths(cls, paths: list[Path]) -> "Cache | None":
        if disabled():
            return None
        return cls(project_root(paths) / CACHE_DIR_NAME, code_fingerprint())

    def key(self, data: bytes, display: str, options: Options) -> str:
        digest = hashlib.sha256(f"{self.fingerprint}\0{options!r}\0{display}\0".encode())
        digest.update(data)
        return digest.hexdigest()

    def _entry(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> FileResult | None:
        try:
            return from_json(json.loads(self._entry(key).read_bytes()))
        except Exception:  # noqa: BLE001 - missing, unreadable, truncated or foreign: recompute
            return None

    def put(self, key: str, result: FileResult) -> None:
        """Store ``result`` atomically; a cache that cannot be written is silently skipped."""
        if not result.internal_error:
            self._write(self._entry(key), to_json(result))

    def facts(self, root: Path, files: list[Path], compute: Callable[[], ProjectFacts]) -> ProjectFacts:
        """The project facts of ``root`` (``compute()``), kept under ``facts/`` with a key of the code's
        fingerprint, the root and every file's path and bytes (and the root's lock files, which
        the pins read): a warm run reads them back instead of computing them (3.5 s on megatron-core)."""
        digest = hashlib.sha256(f"{self.fingerprint}\0facts\0{os.path.realpath(root)}\0".encode())
        try:
            for path in sorted({*files, *(root / name for name in LOCK_FILES if (root / name).is_file())}):
                digest.update(f"{path}\0".encode())
                digest.update(hashlib.sha256(path.read_bytes()).digest())
        except OSError:  # a file vanished or cannot be read: no key, computed as without a cache
            return compute()
        entry = self.directory / "facts" / f"{digest.hexdigest()}.json"
        try:
            return facts_from_json(json.loads(entry.read_bytes()))
        except Exception:  # noqa: BLE001 - missing, unreadable, truncated or foreign: recompute
            pass
        facts = compute()
        self._write(entry, {"schema": SCHEMA, "facts": dataclasses.asdict(facts)})
        return facts

    def _write(self, entry: Path, document: dict) -> None:
        """Write ``document`` as JSON to ``entry`` atomically; a cache that cannot be written is skipped."""
        try:
            if not self.directory.is_dir():
                self._create()
            entry.parent.mkdir(exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=entry.parent)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(json.dumps(document, separators=(",", ":")).encode())
                os.replace(tmp, entry)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError:
            pass

    def _create(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for name, text in (("CACHEDIR.TAG", TAG), (".gitignore", "# created by cuda2npu\n*\n")):
            target = self.directory / name
            if not target.exists():
                target.write_text(text, encoding="utf-8")


def to_json(result: FileResult) -> dict:
    data = dataclasses.asdict(result)
    data["findings"] = [{**dataclasses.asdict(f), "tier": int(f.tier)} for f in result.findings]
    data["new_source"] = None if result.new_source is None else base64.b64encode(result.new_source).decode()
    return {"schema": SCHEMA, "result": data}


def facts_from_json(document: dict) -> ProjectFacts:
    """:class:`ProjectFacts` from their JSON form (lists back to tuples, nested ones too)."""
    if document.get("schema") != SCHEMA:
        raise ValueError("other schema")
    data = document["facts"]
    return ProjectFacts(**{field.name: _tupled(data[field.name]) for field in dataclasses.fields(ProjectFacts)})


def _tupled(value):
    return tuple(_tupled(item) for item in value) if isinstance(value, list) else value


def from_json(document: dict) -> FileResult:
    if document.get("schema") != SCHEMA:
        raise ValueError("other schema")
    data = dict(document["result"])
    data["findings"] = [Finding(**{**f, "tier": Tier(f["tier"])}) for f in data["findings"]]
    if data["new_source"] is not None:
        data["new_source"] = base64.b64decode(data["new_source"], validate=True)
    return FileResult(**data)


def clean(paths: list[Path]) -> list[Path]:
    """Remove the cache directory of ``paths``' project root (the one a run over them uses)."""
    directory = project_root(paths) / CACHE_DIR_NAME
    if directory.is_dir() and not directory.is_symlink():
        shutil.rmtree(directory)
        return [directory]
    return []
