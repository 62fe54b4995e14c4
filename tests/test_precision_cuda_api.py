"""torch.cuda → torch.npu (NPU103/NPU106/NPU601): the signature table is sourced and complete, and
no rewrite emits a keyword torch_npu's callable lacks."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest
from helpers import migrate_text

from cuda2npu.core.catalogue import table
from cuda2npu.core.names import dotted_name
from cuda2npu.core.options import Options
from cuda2npu.families.device.cuda_api_checks import signature

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "rules" / "cuda_api"
# renamed torch.cuda names that are not called with arguments (objects, modules, tensor types)
NOT_CALLABLES = {"default_generators", "random", "amp", "memory", "_initialized"} | {
    n for n in table("torch_cuda_api")["renamed"] if n.endswith("Tensor")
}


def _emitted_names() -> set[str]:
    """Every name under torch.npu that a rename can emit (``Event``, ``mstx.annotate``)."""
    api = table("torch_cuda_api")
    names = set(api["renamed"]) | set(api["review"])
    for spec in api["submodules"].values():
        renamed = spec["renamed"]
        targets = renamed.values() if isinstance(renamed, dict) else renamed
        names |= {f"{spec['target']}.{t}" for t in targets}
    return names


SIGNATURES = table("torch_npu_signatures")


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_signature_entry_names_its_source_and_is_consistent(name):
    entry = SIGNATURES[name]
    assert entry["source"].startswith("torch_npu/"), "name the upstream file"
    params = entry["params"]
    assert len(set(params)) == len(params)
    for cuda_keyword, npu_keyword in entry.get("renamed_keywords", {}).items():
        assert npu_keyword in params, f"{cuda_keyword}= is renamed to {npu_keyword}=, which torch_npu lacks"
    for keyword, default in entry.get("cuda_only", {}).items():
        assert keyword not in params
        ast.literal_eval(default)
    for keyword, values in entry.get("values", {}).items():
        assert keyword in params
        [ast.literal_eval(v) for v in values]
    if "since" in entry:
        assert all(part.isdigit() for part in entry["since"].split("."))
    assert name in _emitted_names(), f"{name} is not emitted by any rename"


def test_every_emitted_callable_has_a_signature():
    emitted = {n for n in _emitted_names() if n.split(".")[-1] not in NOT_CALLABLES}
    missing = sorted(n for n in emitted if signature(n) is None)
    assert missing == [], "add these to rules/tables/torch_npu_signatures.toml"


def _npu_calls(source: str):
    """(torch.npu name, keywords) of every call of a torch.npu callable in ``source``."""
    found = []

    class Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            name = dotted_name(node.func) or ""
            if name.startswith("torch.npu."):
                found.append((name.removeprefix("torch.npu."), [a.keyword.value for a in node.args if a.keyword]))

    cst.parse_module(source).visit(Calls())
    return found


@pytest.mark.parametrize(
    "case", sorted(p for p in FIXTURES.glob("*.py") if not p.name.endswith(".out.py")), ids=lambda p: p.stem
)
def test_rewrites_emit_only_keywords_torch_npu_takes(case):
    migrated, _ = migrate_text(case.read_text(encoding="utf-8"), Options())
    for name, keywords in _npu_calls(migrated):
        entry = SIGNATURES.get(name)
        if entry is None or entry.get("var_keyword"):
            continue
        assert set(keywords) <= set(entry["params"]), f"torch.npu.{name}({keywords}) in {case.name}"


@pytest.mark.parametrize(
    ("source", "code", "kept"),
    [
        ("import torch\ne = torch.cuda.Event(external=True)\n", "NPU601", "torch.cuda.Event"),
        (
            "import torch\ns = torch.cuda.amp.GradScaler(1.0, 2.0, 0.5, 100, False)\n",
            "NPU601",
            "torch.cuda.amp.GradScaler",
        ),
        ("import torch\nwith torch.cuda.nvtx.range('step {}', 1):\n    pass\n", "NPU601", "torch.cuda.nvtx.range"),
        (
            "import torch\nimport lightning as L\n\nif torch.cuda.is_available():\n"
            '    trainer = L.Trainer(accelerator="gpu")\n',
            "NPU103",
            "if torch.cuda.is_available():",
        ),
        (
            "import torch\nfrom torch.cuda import Event\ne = Event(external=True)\n",
            "NPU601",
            "from torch.cuda import Event",
        ),
    ],
)
def test_calls_torch_npu_cannot_take_stay_and_are_marked(source, code, kept):
    migrated, result = migrate_text(source, Options())
    assert kept in migrated
    assert f"TODO(cuda2npu): {code}" in migrated
    assert code in {f.code for f in result.findings}


def test_a_kept_feature_switch_asks_nothing():
    """``fused = torch.cuda.is_available()`` stays CUDA's (the fused path is off on an NPU host, as on
    any host without CUDA) and is not reported: there is nothing to decide."""
    source = "import torch\nfused = torch.cuda.is_available()\n"
    migrated, result = migrate_text(source, Options())
    assert migrated == source and not result.findings


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n", "torch.npu.is_available()"),
        ("import torch\nif torch.cuda.is_available():\n    model.cuda()\n", "if torch.npu.is_available():"),
        ("import torch\nuse_cuda = torch.cuda.is_available() and not args.cpu\n", "torch.npu.is_available()"),
        ("import torch\nfrom torch.cuda import _lazy_call\n_lazy_call(cb)\n", "from torch_npu.npu import _lazy_call"),
        (
            "import torch\ntorch.cuda.memory._record_memory_history(max_entries=10)\n",
            "torch.npu.memory._record_memory_history(max_entries=10)",
        ),
        ("import torch\ntorch.cuda.nvtx.range_push('x')\n", "torch.npu.mstx.range_push('x')"),
        # rewritten, but with a visible review marker: None unless TORCH_NPU_DEVICE_CAPABILITY is set
        ("import torch\nmajor, minor = torch.cuda.get_device_capability()\n", "TODO(cuda2npu): NPU103 review"),
        ("import torch\nmajor, minor = torch.cuda.get_device_capability()\n", "= torch.npu.get_device_capability()"),
    ],
)
def test_device_checks_and_counterparts_are_rewritten(source, expected):
    migrated, _ = migrate_text(source, Options())
    assert expected in migrated


def test_tables_name_upstream_sources_not_shared_notes():
    for name in ("torch_cuda_api.toml", "torch_npu_signatures.toml"):
        assert "shared" not in (ROOT / "rules" / "tables" / name).read_text(encoding="utf-8")
    assert "shared" not in (ROOT / "docs" / "reference" / "torch_npu_api.md").read_text(encoding="utf-8")


AUTOCAST_STATE = """
import json, sys
import torch
from cuda2npu.emulation import emulate_npu
emulate_npu()
sys.path.insert(0, sys.argv[1])
import amp_defaults
x = torch.ones(2, device="npu")
with torch.autocast("npu", dtype=torch.bfloat16):
    cast = amp_defaults.cast_if_autocast_enabled(x).dtype
    inside = amp_defaults.float32_region(lambda: torch.npu.is_autocast_enabled())
    after = torch.npu.is_autocast_enabled()
print(json.dumps({"cast": str(cast), "inside": inside, "after": after, "scaler": amp_defaults.scaler.is_enabled()}))
"""


@pytest.mark.parametrize("migrated", [False, True], ids=["original", "migrated"])
def test_cuda_autocast_state_calls_answer_for_the_npu_once_migrated(tmp_path, migrated):
    """In an NPU bfloat16 autocast region (emulated), CUDA's state calls say "off": the input stays
    float32, the float32 region still autocasts, and the device-less GradScaler disables itself;
    the NPU's calls cast to bfloat16 and switch the region off."""
    source = (FIXTURES / "amp_defaults.py").read_text()
    (tmp_path / "amp_defaults.py").write_text(migrate_text(source, Options())[0] if migrated else source)
    proc = subprocess.run(
        [sys.executable, "-c", AUTOCAST_STATE, str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    if migrated:
        assert seen == {"cast": "torch.bfloat16", "inside": False, "after": True, "scaler": True}
    else:
        assert seen == {"cast": "torch.float32", "inside": True, "after": True, "scaler": False}
