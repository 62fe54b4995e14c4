"""The benchmark corpus: pinned source distributions of real GPU projects from PyPI.

    python benchmarks/corpus.py            # download + extract into benchmarks/corpus/ (git-ignored)
    python benchmarks/corpus.py --list     # print the pinned projects
    python benchmarks/corpus.py timm fairseq

Each project is pinned by name, version and the sdist's sha256. The sdist's URL is the one the
package index's simple API lists for that file (PEP 691, what `pip download --no-deps
--no-binary :all: NAME==VERSION` resolves; pip itself is not used because it would run the
packages' build backends to read their metadata, and flash-attn's needs CUDA). Archives are cached in
``benchmarks/corpus/.archives/`` and verified; extraction is skipped when already done.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
ARCHIVES = CORPUS_DIR / ".archives"
INDEX = "https://pypi.org/simple/{name}/"  # PEP 691 JSON form of the simple index, as pip reads it


@dataclass(frozen=True)
class Project:
    name: str
    version: str
    sha256: str

    @property
    def directory(self) -> Path:
        return CORPUS_DIR / f"{self.name}-{self.version}"


PROJECTS = (
    Project("colossalai", "0.5.0", "883913dfd1165937f444f2673752475efdc63506c4bc3d00af33c7c8fac6d39d"),
    Project("megatron-core", "0.19.2", "de643eee32007a7504ad52f061103fe7432503603b6321c16c861eb67dbd3353"),
    Project("deepspeed", "0.19.8", "9e491abd0827ea5c389dd702e15e11e13d83d904bac4a20d6c2a4cb37207a9af"),
    Project("flash-attn", "2.8.3.post2", "d0f9f0b08a986cdeadbffcf5ec8b3a8f514366c68ad1853d3ab061bc83cc340b"),
    Project("timm", "1.0.31", "baa0b333339c46d3d6d4965d99b69f5053afed71210e8f433d7ea5ee6a18f0ec"),
    Project("diffusers", "0.42.1", "ce855ab670c8cd1c7a61be8f12fbc68c081bca8ec5e747273946d8d6c2aff23b"),
    Project("fairseq", "0.12.2", "34f1b18426bf3844714534162f065ab733e049597476daa35fffb4d06a92b524"),
)


def _sdist_url(project: Project) -> tuple[str, str]:
    request = urllib.request.Request(
        INDEX.format(name=project.name), headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        index = json.load(response)
    for entry in index["files"]:
        if entry.get("hashes", {}).get("sha256") == project.sha256 and entry["filename"].endswith(".tar.gz"):
            return entry["url"], entry["filename"]
    raise RuntimeError(f"{project.name}=={project.version}: no sdist with the pinned sha256 on the index")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(project: Project) -> Path:
    """The extracted source tree of ``project`` (downloaded and verified on first use)."""
    marker = project.directory / ".extracted"
    if marker.exists():
        return project.directory
    ARCHIVES.mkdir(parents=True, exist_ok=True)
    archive = next((p for p in ARCHIVES.glob(f"*{project.version}*") if _sha256(p) == project.sha256), None)
    if archive is None:
        url, filename = _sdist_url(project)
        archive = ARCHIVES / filename
        partial = archive.with_suffix(".part")
        print(f"downloading {project.name}=={project.version} ({filename})", file=sys.stderr)
        with urllib.request.urlopen(url, timeout=300) as response, partial.open("wb") as out:
            while block := response.read(1 << 20):
                out.write(block)
        if _sha256(partial) != project.sha256:
            partial.unlink()
            raise RuntimeError(f"{filename}: sha256 mismatch")
        partial.rename(archive)
    project.directory.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]  # no links out of the tree
        for member in members:
            parts = Path(member.name).parts
            member.name = str(Path(*parts[1:])) if len(parts) > 1 else "."
        tar.extractall(project.directory, members=[m for m in members if m.name != "."], filter="data")
    marker.touch()
    return project.directory


def selected(names: list[str]) -> list[Project]:
    if not names:
        return list(PROJECTS)
    by_name = {p.name: p for p in PROJECTS}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise SystemExit(f"unknown project(s): {', '.join(unknown)}; known: {', '.join(by_name)}")
    return [by_name[n] for n in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("projects", nargs="*", help="project names (default: all)")
    parser.add_argument("--list", action="store_true", help="print the pinned projects and exit")
    args = parser.parse_args(argv)
    for project in selected(args.projects):
        if args.list:
            print(f"{project.name}=={project.version}  sha256:{project.sha256}")
            continue
        path = fetch(project)
        files = [p for p in path.rglob("*.py") if p.is_file()]
        size = sum(p.stat().st_size for p in files)
        print(f"{project.name:15} {project.version:12} {len(files):6} .py files {size / 1e6:7.1f} MB  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
