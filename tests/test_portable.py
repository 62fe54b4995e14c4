"""Portable output (``--portable``): one codebase for CUDA GPUs and Ascend NPUs.

The goldens in ``fixtures/rules/portable`` (rewrites: tests/test_golden.py) are run here: each one
under the CUDA emulation and under the NPU emulation with the same results (``cuda2npu validate
TREE TREE``, which runs the original side on ``emulate_cuda()`` and the migrated side on
``emulate_npu()``), each side on its own device and branch, and on a host with neither
(torch_npu and flash-attn absent: their imports are guarded). ``check --portable`` reports
nothing fixable in them.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tomllib
import torch
from cli_helpers import REPO, cuda2npu
from helpers import migrate_text, options_of

from cuda2npu.core.catalogue import table
from cuda2npu.core.options import Options

PORTABLE = REPO / "fixtures" / "rules" / "portable"
HELPER = REPO / "cuda2npu" / "templates" / "portable_device.py"
APEX_OPTIMIZERS = REPO / "cuda2npu" / "templates" / "apex_npu_optimizers.py"  # FusedLAMB in apex_fused
TE_MODULES = REPO / "cuda2npu" / "templates" / "te_npu_modules.py"  # TransformerEngine's fused modules
# apex's DDP (and apex.amp with a static loss scale) stay as written in them (not portable yet):
# they need apex, which Ascend hosts lack; TE code without a portable rewrite likewise needs TE
KEPT_NPU_ONLY = {"not_portable_yet", "not_portable_yet_keep", "te_not_portable_yet"}
GOLDENS = sorted(p.name.removesuffix(".out.py") for p in PORTABLE.glob("*.out.py"))
# goldens of a library the test environment does not install (their import is not what is tested)
NEEDS_LIBRARY = {"lmdeploy_r15_portable"}
RUNNABLE = [name for name in GOLDENS if name not in KEPT_NPU_ONLY | NEEDS_LIBRARY]
# a TE subclass's base is chosen when the class is defined: on a host with neither device that is
# TE's class (the helper's device type is "cuda" there: the code behaves as written), as the original
TE_AT_IMPORT = {"te_subclass"}


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """The portable goldens as modules, next to the generated companions."""
    root = tmp_path_factory.mktemp("portable")
    for name in GOLDENS:
        shutil.copy(PORTABLE / f"{name}.out.py", root / f"{name}.py")
    for companion in (HELPER, APEX_OPTIMIZERS, TE_MODULES):
        shutil.copy(companion, root / companion.name)
    return root


def _side(tree: Path, emulation: str, script: str) -> dict:
    """Run ``script`` (which sets ``result``) in a fresh process under one emulation ("" for none)."""
    setup = f"from cuda2npu.emulation import {emulation}; {emulation}()\n" if emulation else ""
    code = f"import json, sys\nsys.path.insert(0, {str(tree)!r})\n{setup}{textwrap.dedent(script)}\nprint(json.dumps(result))\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tree)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # each case runs the original and the migrated golden in subprocesses
@pytest.mark.parametrize("name", RUNNABLE)
def test_golden_runs_the_same_on_cuda_and_on_npu(tree, tmp_path, name):
    report = tmp_path / "report.json"
    result = cuda2npu("validate", tree, tree, "--entry", f"{name}:build", "--json", report)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(report.read_text())["results"][0]
    assert data["status"] == "equivalent"
    assert data["backends"] == {"original": "cpu (emulated cuda)", "migrated": "npu (emulated)"}
    assert {row["group"] for row in data["tensors"]} >= {"output", "grad"}


def test_every_golden_but_the_kept_apex_amp_one_is_validated():
    """(and but those of a library this environment does not install, ``NEEDS_LIBRARY``)"""
    assert set(GOLDENS) - set(RUNNABLE) == KEPT_NPU_ONLY | NEEDS_LIBRARY
    for name in RUNNABLE:
        functions = {
            n.name for n in ast.parse((PORTABLE / f"{name}.out.py").read_text()).body if isinstance(n, ast.FunctionDef)
        }
        assert "build" in functions, name


DEVICE_AND_BACKEND = """
import portable_device, torch, distributed_setup
result = {"type": portable_device.device_type(), "backend": distributed_setup.backend_of_this_host(),
          "backend_25": __import__("distributed_setup_torch25").backend_of_this_host(),
          "count": torch.accelerator.device_count()}
"""


@pytest.mark.parametrize(
    ("emulation", "device", "backend"), [("emulate_cuda", "cuda", "nccl"), ("emulate_npu", "npu", "hccl")]
)
def test_each_host_gets_its_device_and_collective_backend(tree, emulation, device, backend):
    seen = _side(tree, emulation, DEVICE_AND_BACKEND)
    assert seen == {"type": device, "backend": backend, "backend_25": backend, "count": 1}


ATTENTION_BRANCH = """
import torch, flash_attention
model, (x,) = flash_attention.build()
out = model(x)
result = {"flash_attn": flash_attention.flash_attn_func is not None, "torch_npu": hasattr(flash_attention, "torch_npu"),
          "device": out.device.type}
"""


def test_attention_runs_flash_attn_on_cuda_and_the_fused_op_on_npu(tree):
    # on the CUDA side torch_npu is absent (the NPU branch cannot run); on the NPU side flash-attn
    # is (its guarded import left None): each side ran the only branch it can run
    assert _side(tree, "emulate_cuda", ATTENTION_BRANCH) == {"flash_attn": True, "torch_npu": False, "device": "cpu"}
    assert _side(tree, "emulate_npu", ATTENTION_BRANCH) == {"flash_attn": False, "torch_npu": True, "device": "npu"}


APEX_BRANCH = """
import copy, sys, torch, apex_fused
def origin(optimizer):
    cls, npu = type(optimizer), sys.modules.get("torch_npu")
    found = "torch_npu.optim" if npu is not None and cls is getattr(npu.optim, cls.__name__, None) else cls.__module__
    return found.split(".")[0] + "." + cls.__name__
torch.manual_seed(0)
model, (x,), _ = apex_fused.build()
x, weight = (torch.randn(x.shape, generator=torch.Generator().manual_seed(s)).to(x.device) for s in (1, 2))
classes, steps = [], []
for factory in (apex_fused.adam, apex_fused.sgd, apex_fused.lamb):
    trained = copy.deepcopy(model)
    optimizer = factory(trained.parameters())
    for _ in range(2):
        optimizer.zero_grad()
        (trained(x) * weight).sum().backward()
        optimizer.step()
    classes.append(origin(optimizer))
    steps.append([p.detach().cpu().double().sum().item() for p in trained.parameters()])
result = {"classes": classes, "steps": steps, "norm": type(model.norm).__module__ + "." + type(model.norm).__name__}
"""


def test_apex_optimizers_are_torch_optim_on_both_hosts_with_the_same_steps(tree):
    cuda, npu = _side(tree, "emulate_cuda", APEX_BRANCH), _side(tree, "emulate_npu", APEX_BRANCH)
    assert cuda["classes"] == npu["classes"] == ["torch.AdamW", "torch.SGD", "apex_npu_optimizers.FusedLAMB"]
    assert cuda["norm"] == npu["norm"] == "torch.nn.modules.normalization.LayerNorm"
    for name, on_cuda, on_npu in zip(("adam", "sgd", "lamb"), cuda["steps"], npu["steps"]):
        assert on_cuda == pytest.approx(on_npu, rel=1e-4, abs=1e-5), name
    assert cuda["steps"][0] != cuda["steps"][1]  # the optimizers moved the parameters, each its own way


TE_BRANCH = """
import torch, te_modules, te_subclass
model, (x,) = te_modules.build()
out = model(x)
origin = lambda m: type(m).__module__.split(".")[0] + "." + type(m).__name__
result = {"modules": [origin(getattr(model, n)) for n in ("norm", "fc1", "mlp", "rms")],
          "context": [origin(te_modules.fp8_context()), origin(te_modules.without_fp8())],
          "recipe": model.fp8_recipe is not None,
          "linears": te_modules.te_linears(model), "base": te_subclass.Projection.__mro__[1].__module__.split(".")[0],
          "device": out.device.type}
"""


def test_transformer_engine_on_cuda_and_the_generated_modules_on_npu(tree):
    # the CUDA side has TE (its CPU stand-in) and no torch_npu, the NPU side torch_npu and no TE:
    # each side built the only modules it can build
    cuda, npu = _side(tree, "emulate_cuda", TE_BRANCH), _side(tree, "emulate_npu", TE_BRANCH)
    assert cuda["modules"] == ["transformer_engine.LayerNorm", "transformer_engine.Linear"] + [
        "transformer_engine.LayerNormMLP",
        "transformer_engine.RMSNorm",
    ]
    assert npu["modules"] == [
        "torch.LayerNorm",
        "te_npu_modules.Linear",
        "te_npu_modules.LayerNormMLP",
        "torch.RMSNorm",
    ]
    assert cuda["context"] == ["contextlib._GeneratorContextManager"] * 2  # TE's FP8 autocasts
    assert npu["context"] == ["torch.autocast", "contextlib.nullcontext"]
    assert (cuda["recipe"], npu["recipe"]) == (True, False)  # TE's recipe, None where BF16 autocast takes none
    assert cuda["linears"] == npu["linears"] == ["fc1", "fc2"]
    assert (cuda["base"], npu["base"]) == ("transformer_engine", "te_npu_modules")
    assert (cuda["device"], npu["device"]) == ("cpu", "npu")


AMP_SCALER = """
import torch, apex_amp
model, (x,) = apex_amp.build()
result = {"scaler": apex_amp.scaler._device, "enabled": apex_amp.scaler.is_enabled(), "scale": apex_amp.scaler.get_scale()}
"""


# the CUDA emulation runs "cuda" on the CPU: its GradScaler("cuda") is torch's CPU one
@pytest.mark.parametrize(("emulation", "device"), [("emulate_cuda", "cpu"), ("emulate_npu", "npu")])
def test_apex_amp_becomes_native_amp_on_the_hosts_device(tree, emulation, device):
    assert _side(tree, emulation, AMP_SCALER) == {"scaler": device, "enabled": True, "scale": 2.0**16}


@pytest.mark.parametrize("name", [name for name in RUNNABLE if name not in TE_AT_IMPORT])
def test_golden_imports_without_torch_npu_or_flash_attn(tree, name):
    """No emulation: torch_npu and flash-attn are not installed here, as on a plain host."""
    assert _side(tree, "", f"import {name}\nresult = True") is True


def test_check_reports_nothing_fixable_in_portable_output(tree):
    result = cuda2npu(
        "check", tree, "--portable", "--precision", "keep", "--fuse-sdpa", "--format", "json", "--no-cache"
    )
    data = json.loads(result.stdout)
    assert data["summary"]["fixable"] == 0
    kept = {(Path(d["path"]).stem, d["code"]) for d in data["diagnostics"]}
    assert {stem for stem, _ in kept} <= KEPT_NPU_ONLY  # only the apex.amp it keeps is reported (not portable yet)


def test_npu_only_rewrites_are_kept_and_reported_as_not_portable_yet():
    source = (PORTABLE / "not_portable_yet.py").read_text()
    bf16, keep = ((PORTABLE / f"{name}.out.py").read_text() for name in ("not_portable_yet", "not_portable_yet_keep"))
    kept = ("from apex.parallel import DistributedDataParallel as DDP", "model = DDP(model)")
    assert all(line in text for line in kept for text in (source, bf16, keep))
    assert "torch.autocast(portable_device.device_type(), dtype=torch.float16)" in bf16  # --precision bf16 not applied
    assert 'amp.initialize(model, optimizer, opt_level="O1", loss_scale=128.0)' in keep  # a static loss scale
    markers = {
        name: [line.split()[2:] for line in text.splitlines() if "TODO(cuda2npu)" in line]
        for name, text in (("bf16", bf16), ("keep", keep))
    }
    assert [m[0] for m in markers["bf16"]] == ["NPU330", "NPU322", "NPU340"]
    assert [m[0] for m in markers["keep"]] == ["NPU330", "NPU330", "NPU310", "NPU322"]
    for m in markers["bf16"] + markers["keep"]:  # NPU330: the apex import stays, for the code kept
        assert m[0] == "NPU330" or "not portable yet" in " ".join(m[1:5]), m


def test_te_code_without_a_portable_rewrite_is_kept_and_reported_as_not_portable_yet():
    text = (PORTABLE / "te_not_portable_yet.out.py").read_text()
    markers = [line.split("TODO(cuda2npu): ")[1] for line in text.splitlines() if "TODO(cuda2npu)" in line]
    assert [m.split()[0] for m in markers] == ["NPU412", "NPU417", "NPU415"]
    assert all("not portable yet, kept as written" in m for m in markers)
    kept = ("te.Linear(hidden, hidden, tp_group=tp_group, tp_size=2)", "te.GroupedLinear(4, hidden, hidden)")
    assert all(line in text for line in kept)
    assert "else te.LayerNorm(hidden)" in text  # the rest of the file is portable


def test_te_in_a_package_imports_the_generated_modules_relatively():
    source = (PORTABLE / "te_subclass.py").read_text()
    migrated, _ = migrate_text(source, options_of(portable=True, precision="keep", in_package=True))
    assert "from . import portable_device, te_npu_modules" in migrated
    assert (
        'class Projection(te_npu_modules.Linear if portable_device.device_type() == "npu" else te.Linear):' in migrated
    )


def _project(tmp_path: Path, config: str) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(f"[tool.cuda2npu]\n{config}\n")
    shutil.copy(PORTABLE / "train_step.py", project / "train.py")
    return project


def test_config_portable_writes_the_golden_and_the_helper(tmp_path):
    project = _project(tmp_path, "portable = true")
    out = tmp_path / "out"
    assert cuda2npu("migrate", project, "--out", out).returncode == 0, "migrate failed"
    assert (out / "train.py").read_text() == (PORTABLE / "train_step.out.py").read_text()
    assert (out / "portable_device.py").read_bytes() == HELPER.read_bytes()
    again = cuda2npu("migrate", out, "--check", "--allow-dirty")
    assert again.returncode == 0, again.stdout + again.stderr  # a second run changes nothing


def test_target_torch_in_config_or_from_torch_npu_chooses_the_helper(tmp_path):
    project = _project(tmp_path, 'portable = true\ntarget-torch = "2.6"')
    expected = (PORTABLE / "train_step_torch26.out.py").read_text()
    out = tmp_path / "out"
    assert cuda2npu("migrate", project, "--out", out).returncode == 0
    assert (out / "train.py").read_text() == expected
    # --target-torch-npu 2.6.0.post3 is a build for torch 2.6
    out2 = tmp_path / "out2"
    assert (
        cuda2npu(
            "migrate", project, "--isolated", "--portable", "--target-torch-npu", "2.6.0.post3", "--out", out2
        ).returncode
        == 0
    )
    assert (out2 / "train.py").read_text() == expected


def test_installed_torch_has_every_accelerator_call_the_table_names():
    """torch 2.13 here is newer than every `since` of the table: each named call must exist."""
    accelerator = table("torch_accelerator")
    names = set(accelerator["functions"].values()) | set(accelerator["since"]) - {"get_default_backend_for_device"}
    assert all(hasattr(torch.accelerator, name) for name in names), sorted(
        n for n in names if not hasattr(torch.accelerator, n)
    )
    assert hasattr(torch.distributed, "get_default_backend_for_device")


def test_helper_stands_in_for_every_accelerator_function():
    defined = {n.name for n in ast.parse(HELPER.read_text()).body if isinstance(n, ast.FunctionDef)}
    accelerator = table("torch_accelerator")
    assert set(accelerator["functions"].values()) <= defined
    assert {"device_type", "device", "on_accelerator", "device_module", "distributed_backend"} <= defined
    assert not (set(accelerator["since"]) - {"current_accelerator", "get_default_backend_for_device"}) - defined


def test_variants_are_portable_goldens_too():
    variants = tomllib.loads((PORTABLE / "variants.toml").read_text())
    assert all(v["options"]["portable"] for v in variants.values()) and set(variants) <= set(GOLDENS)


EMULATED_CUDA_ACCELERATOR = """
import torch
seen = (str(torch.accelerator.current_accelerator()), torch.accelerator.is_available(), torch.accelerator.device_count(),
        torch.accelerator.current_device_index(), torch.accelerator.memory_allocated())
torch.accelerator.synchronize()
model = torch.nn.Linear(2, 2).to(torch.accelerator.current_accelerator())
model(torch.ones(1, 2, device="cuda")).sum().backward()
torch.optim.Adam(model.parameters()).step()  # torch's own graph-capture check keeps the CPU build's answer
batches = list(torch.utils.data.DataLoader(torch.ones(4, 2), batch_size=2, pin_memory=True))
result = {"seen": list(seen), "batches": len(batches)}
"""


def test_emulated_cuda_answers_torch_accelerator_for_the_program_only(tree):
    seen = _side(tree, "emulate_cuda", EMULATED_CUDA_ACCELERATOR)
    assert seen == {"seen": ["cuda", True, 1, 0, 0], "batches": 2}


GUARD_CASES = {
    "flash-attn": (
        "import torch\n{prefix}from flash_attn import flash_attn_func\n\n"
        "def attend(q, k, v):\n    return flash_attn_func(q, k, v, causal=True)\n"
    ),
    "TransformerEngine": "import torch\n{prefix}import transformer_engine.pytorch as te\n\nlayer = te.Linear(16, 16)\n",
    "apex": (  # an earlier release's portable output: FusedAdam kept on the CUDA side
        "import torch\n{prefix}from apex.optimizers import FusedAdam\n\n"
        "def build(model):\n"
        "    return torch.optim.AdamW(model.parameters()) if torch.npu.is_available() else FusedAdam(model.parameters())\n"
    ),
}


@pytest.mark.parametrize("package", sorted(GUARD_CASES))
def test_portable_import_guards_are_reported_the_same_way_for_every_package(package):
    """One helper (families/portable.report_import_guard) for flash-attn, TE and apex imports."""
    options = Options(portable=True)
    new, result = migrate_text(GUARD_CASES[package].format(prefix=""), options)
    guarded = [f.message for f in result.findings if "import guarded" in f.message]
    assert guarded and guarded[0].startswith(f"{package} import guarded (`except ImportError: ")
    assert f"{package} is not installed on Ascend hosts, where only the NPU branches" in guarded[0]
    assert f"except ImportError:  # {package} is not installed on Ascend NPU hosts" in new
    _, result = migrate_text(GUARD_CASES[package].format(prefix="if True: "), options)
    manual = [f for f in result.findings if "one-line suite" in f.message]
    assert manual and manual[0].message.startswith(f"{package} import in a one-line suite: not portable yet")
    assert manual[0].tier.name == "MANUAL"


@pytest.mark.parametrize("package", sorted(GUARD_CASES))
def test_an_import_sharing_its_line_is_guarded_on_a_line_of_its_own(package):
    source = GUARD_CASES[package].format(prefix="import os; ").replace("import torch\n", "import torch\n# why\n")
    new, _ = migrate_text(source.replace("\n\n", "; import sys  # the line's comment\n\n", 1), Options(portable=True))
    lines = new.splitlines()
    imported = lines.index(f"    {source.splitlines()[2].removeprefix('import os; ')}")  # in the guard's `try`
    assert lines[lines.index("# why") + 1] == "import os"
    assert lines.index("import os") < imported - 1 and lines[imported - 1] == "try:"
    assert lines[imported + 1] == f"except ImportError:  # {package} is not installed on Ascend NPU hosts"
    assert lines[imported + 3] == "import sys  # the line's comment"
    assert migrate_text(new, Options(portable=True))[0] == new


def test_a_rerun_guards_an_apex_import_the_cuda_branch_of_portable_output_still_needs():
    """A use on the CUDA side of code that already handles the NPU (an earlier release's portable
    output) keeps the import for CUDA hosts: guarded (an exact fix), not reported as used by code
    that was not migrated."""
    migrated, _ = migrate_text(GUARD_CASES["apex"].format(prefix=""), Options(portable=True))
    guard = (
        "try:\n    from apex.optimizers import FusedAdam\n"
        "except ImportError:  # apex is not installed on Ascend NPU hosts\n    FusedAdam = None\n"
    )
    assert guard in migrated
    unguarded = migrated.replace(guard, "from apex.optimizers import FusedAdam\n")
    again, result = migrate_text(unguarded, Options(portable=True))
    assert again == migrated
    assert [(f.code, f.tier.name) for f in result.findings] == [("NPU330", "EXACT")]
