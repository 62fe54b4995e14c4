"""The result cache (cuda2npu/project/cache.py): faithful, keyed on everything that matters, safe to share."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

from cuda2npu.core.diagnostics import FileResult, Finding, Tier
from cuda2npu.core.options import Options
from cuda2npu.project.cache import (
    CACHE_DIR_NAME,
    Cache,
    code_fingerprint,
    from_json,
    to_json,
)
from cuda2npu.project.runner import process_file

SOURCE = b"import torch\nx = torch.ones(1).cuda()\n"


def cuda2npu(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cuda2npu", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def project(tmp_path: Path, files: int = 1) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    for i in range(files):
        (root / f"m{i}.py").write_bytes(SOURCE + b"# %d\n" % i)
    return root


def entries(root: Path) -> list[Path]:
    """The result entries (not the project facts kept under ``facts/``)."""
    return sorted(p for p in (root / CACHE_DIR_NAME).glob("*/*.json") if p.parent.name != "facts")


def test_entries_round_trip_file_results_faithfully():
    finding = Finding("a.py", 2, 19, "NPU101", "cuda-method-call", "msg ✓", Tier.EXACT, True, applied=True)
    result = FileResult("a.py", "changed", "why", [finding], new_source=b"\xff\x00latin \xe9\r\n", internal_error="")
    assert from_json(json.loads(json.dumps(to_json(result)))) == result
    assert from_json(json.loads(json.dumps(to_json(FileResult("b.py", "unchanged"))))) == FileResult(
        "b.py", "unchanged"
    )


def test_hit_miss_and_key(tmp_path):
    root = project(tmp_path)
    cache = Cache(root / CACHE_DIR_NAME, code_fingerprint())
    path = root / "m0.py"
    first = process_file(path, "m0.py", Options(), cache)
    assert first.status == "changed" and len(entries(root)) == 1
    assert process_file(path, "m0.py", Options(), cache) == first
    # every part of the key makes a new entry: options, display path, content, code fingerprint
    process_file(path, "m0.py", Options(fix=False), cache)
    process_file(path, "other/m0.py", Options(), cache)
    path.write_bytes(SOURCE + b"y = 1\n")
    process_file(path, "m0.py", Options(), cache)
    process_file(path, "m0.py", Options(), replace(cache, fingerprint="other"))
    assert len(entries(root)) == 5
    assert cache.key(SOURCE, "a.py", Options()) != cache.key(SOURCE, "a.py", Options(ignore=("NPU101",)))


def test_cached_result_is_served_and_corrupt_entries_are_ignored(tmp_path):
    root = project(tmp_path)
    cache = Cache(root / CACHE_DIR_NAME, code_fingerprint())
    path = root / "m0.py"
    truth = process_file(path, "m0.py", Options(fix=False), cache)
    (entry,) = entries(root)
    document = json.loads(entry.read_text())
    document["result"]["findings"][0]["message"] = "from the cache"
    entry.write_text(json.dumps(document))
    assert process_file(path, "m0.py", Options(fix=False), cache).findings[0].message == "from the cache"
    for corrupt in (b"", b"{not json", b'{"schema": 1, "result": {"path": 3}}', b'{"schema": 999}', b"\x00\xff"):
        entry.write_bytes(corrupt)
        assert process_file(path, "m0.py", Options(fix=False), cache) == truth
        assert from_json(json.loads(entry.read_text())) == truth  # rewritten whole


def test_results_with_internal_errors_are_not_stored(tmp_path):
    cache = Cache(tmp_path / CACHE_DIR_NAME, "x")
    cache.put("ab" * 32, FileResult("a.py", "failed", "internal error", internal_error="Traceback"))
    assert cache.get("ab" * 32) is None


def _check_many(args):
    root, worker = args
    cache = Cache(Path(root) / CACHE_DIR_NAME, code_fingerprint())
    return [process_file(p, p.name, Options(fix=False), cache) for p in sorted(Path(root).glob("*.py"))]


def test_concurrent_runs_share_the_cache_safely(tmp_path):
    root = project(tmp_path, files=40)
    with ProcessPoolExecutor(4) as pool:
        runs = list(pool.map(_check_many, [(str(root), i) for i in range(4)]))
    assert all(run == runs[0] for run in runs)
    assert len(entries(root)) == 40
    for entry in entries(root):
        from_json(json.loads(entry.read_text()))
    assert not list((root / CACHE_DIR_NAME).glob("*/.*.tmp"))


def test_cli_cache_no_cache_and_clean(tmp_path):
    root = project(tmp_path)
    cold = cuda2npu("check", "--format", "json", ".", cwd=root)
    assert cold.returncode == 1 and len(entries(root)) == 1
    cache_dir = root / CACHE_DIR_NAME
    assert (cache_dir / "CACHEDIR.TAG").is_file() and (cache_dir / ".gitignore").read_text().strip().endswith("*")
    (entry,) = entries(root)
    document = json.loads(entry.read_text())
    document["result"]["findings"][0]["message"] = "from the cache"
    entry.write_text(json.dumps(document))
    warm = cuda2npu("check", "--format", "json", ".", cwd=root)
    assert json.loads(warm.stdout)["diagnostics"][0]["message"] == "from the cache"
    fresh = cuda2npu("check", "--format", "json", "--no-cache", ".", cwd=root)
    assert json.loads(fresh.stdout)["diagnostics"] == json.loads(cold.stdout)["diagnostics"]
    assert entry.read_text() == json.dumps(document)  # --no-cache writes nothing either
    cleaned = cuda2npu("clean", ".", cwd=root)
    assert cleaned.returncode == 0 and not cache_dir.exists() and (root / "m0.py").exists()
    assert "No cache" in cuda2npu("clean", cwd=root).stderr


def test_migrate_out_writes_no_cache_into_the_source(tmp_path):
    root = project(tmp_path)
    result = cuda2npu("migrate", "--out", str(tmp_path / "out"), ".", cwd=root)
    assert result.returncode == 0, result.stderr
    assert not (root / CACHE_DIR_NAME).exists()
    assert b".npu()" in (tmp_path / "out" / "m0.py").read_bytes()


def test_a_change_of_the_project_facts_is_not_answered_from_the_cache(tmp_path):
    """The key hashes the file's effective options, project facts included: a setup.py that starts
    declaring a CUDAExtension changes what `check` finds in a file that did not change."""
    root = project(tmp_path)
    (root / "pkg").mkdir()
    (root / "pkg" / "use.py").write_text("import torch\nimport mykernels\n")
    args = ("check", "--output-format", "json", "--select", "NPU606", "pkg/use.py")
    before = cuda2npu(*args, cwd=root)
    assert before.returncode == 0 and len(entries(root)) == 1, before.stderr
    (root / "setup.py").write_text(
        "from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n"
        'setup(ext_modules=[CUDAExtension("mykernels", ["k.cu"])])\n'
    )
    after = cuda2npu(*args, cwd=root)
    assert after.returncode == 1, after.stderr
    assert [(d["path"], d["line"], d["code"]) for d in json.loads(after.stdout)["diagnostics"]] == [
        ("pkg/use.py", 2, "NPU606")
    ]
    assert len(entries(root)) == 2


def test_project_facts_are_kept_and_follow_every_file(tmp_path, monkeypatch):
    """A warm run reads the project facts back (3.5 s on megatron-core otherwise); any file's bytes,
    a new file or a new lock file make them computed again; migrate --out's settings keep none."""
    from cuda2npu.project import settings as settings_module

    computed = []
    real = settings_module.project_facts
    monkeypatch.setattr(settings_module, "project_facts", lambda *a: computed.append(1) or real(*a))
    root = project(tmp_path)
    (root / "requirements.txt").write_text("torch==2.4.0\n")

    def facts(**cli):
        return settings_module.RunSettings([root], settings_module.CommandLine(**cli)).facts(root)

    first = facts()
    assert facts() == first and len(computed) == 1
    assert dict(first.pins) == {"torch": "==2.4.0"}
    (root / "requirements.txt").write_text("torch==2.5.1\n")
    assert dict(facts().pins) == {"torch": "==2.5.1"} and len(computed) == 2
    (root / "uv.lock").write_text('[[package]]\nname = "torch"\nversion = "2.5.1"\n')
    facts()
    assert len(computed) == 3
    assert len(list((root / CACHE_DIR_NAME / "facts").glob("*.json"))) == 3
    facts(cache=False)
    assert len(computed) == 4 and len(list((root / CACHE_DIR_NAME / "facts").glob("*.json"))) == 3
