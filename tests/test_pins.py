"""The project's version pins: what a specifier guarantees, where pins are read, and what they decide."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import cuda2npu

from cuda2npu.core.options import Options, ProjectFacts
from cuda2npu.core.pins import allows, at_least, excludes_from, pin_at_least, pinned_torch
from cuda2npu.project.pins import project_pins, target_from_pins


@pytest.mark.parametrize(
    ("spec", "version", "expected"),
    [
        (">=4.46", "4.46", True),
        (">=4.46.1", "4.46", True),
        (">4.45", "4.46", False),  # 4.45.1 is allowed
        (">=4.40,<5", "4.46", False),
        ("==4.48.0", "4.46", True),
        ("==4.48.*", "4.46", True),
        ("~=4.47", "4.46", True),
        ("<4.50", "4.46", False),
        ("", "4.46", False),  # named without a version: any release
        ("@ git+https://x", "4.46", None),
        (">=0.4.4", "0.3.8", True),
        (">=0.3.7", "0.3.8", False),
    ],
)
def test_at_least(spec: str, version: str, expected: bool | None):
    assert at_least(spec, version) is expected


def test_allows_reads_each_clause():
    assert allows(">=2.1,<2.5,!=2.3.0", "2.4.0") is True
    assert allows(">=2.1,<2.5,!=2.3.0", "2.3.0") is False
    assert allows("==2.4.*", "2.4.1") is True
    assert allows("~=2.4.0", "2.5.0") is False
    assert allows("is 2", "2.4.0") is None


def test_pin_at_least_is_none_for_a_distribution_not_pinned():
    pins = (("colossalai", ">=0.4.4"),)
    assert pin_at_least(pins, "colossalai", "0.3.8") is True
    assert pin_at_least(pins, "transformers", "4.46") is None


def _write(root: Path, files: dict[str, str]) -> list[Path]:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return [root / name for name in files if not name.endswith(".lock")]


def test_pins_from_every_dependency_file_and_lock_file(tmp_path: Path):
    files = _write(
        tmp_path,
        {
            "requirements.txt": "torch>=2.1 ; python_version > '3.8'\nnumpy==1.26\n",
            "pyproject.toml": '[project]\nname = "p"\ndependencies = ["Transformers>=4.40,<5", "peft"]\n',
            "setup.py": 'from setuptools import setup\nsetup(install_requires=["colossalai==0.4.4"])\n',
            "uv.lock": '[[package]]\nname = "torch"\nversion = "2.4.0"\n\n[[package]]\nname = "tqdm"\nversion = "4.66"\n',
        },
    )
    pins, read, _ = project_pins(files, tmp_path)
    assert dict(pins) == {"colossalai": "==0.4.4", "torch": ">=2.1,==2.4.0", "transformers": ">=4.40,<5"}
    assert read == ("pyproject.toml", "requirements.txt", "setup.py", "uv.lock")


def test_pipfile_lock_and_a_malformed_file(tmp_path: Path):
    files = _write(
        tmp_path,
        {
            "pyproject.toml": "[project\n",  # malformed: pins nothing, no error
            "Pipfile.lock": json.dumps({"default": {"torch": {"version": "==2.6.0"}}}),
        },
    )
    pins, read, _ = project_pins(files, tmp_path)
    assert pins == (("torch", "==2.6.0"),)
    assert read == ("Pipfile.lock",)


def test_a_sub_project_s_pins_come_first_for_its_files(tmp_path: Path):
    """LMFlow: the package pins transformers>=4.31.0, contrib/text2image (a sub-project with code)
    >=4.25.1, docs/ ==4.27.4; the merged pin no install satisfies decided nothing right anywhere."""
    files = _write(
        tmp_path,
        {
            "requirements.txt": "transformers>=4.31.0\ntorch>=2.0.1\n",
            "src/lmflow/train.py": "import torch\n",
            "contrib/text2image/requirements.txt": "transformers>=4.25.1\naccelerate==0.20.3\n",
            "contrib/text2image/finetune.py": "import torch\n",
            "docs/requirements.txt": "transformers==4.27.4\n",
            "docs/conf.py": "project = 'p'\n",
            "requirements/base.txt": "deepspeed==0.14.0\n",  # no code below it: the root's
        },
    )
    pins, _, scopes = project_pins(files, tmp_path)
    assert set(dict(pins)["transformers"].split(",")) == {">=4.25.1", "==4.27.4", ">=4.31.0"}
    facts = ProjectFacts(pins=pins, pin_scopes=scopes)

    def pins_of(relative):
        return dict(Options(project=facts).for_path(tmp_path / relative).project.pins)

    root = pins_of("src/lmflow/train.py")
    assert root["transformers"] == ">=4.31.0" and root["deepspeed"] == "==0.14.0"
    assert root["accelerate"] == "==0.20.3"  # named by no scope above the file: the merged pin
    contrib = pins_of("contrib/text2image/finetune.py")
    assert contrib["transformers"] == ">=4.25.1" and contrib["torch"] == ">=2.0.1"
    assert pins_of("docs/conf.py")["transformers"] == "==4.27.4"
    assert pins_of("launch.sh")["transformers"] == ">=4.31.0"


def test_one_scope_needs_no_scoping(tmp_path: Path):
    files = _write(tmp_path, {"requirements.txt": "torch==2.4.0\n", "docker/requirements.txt": "torch==2.4.0\n"})
    assert project_pins(files, tmp_path)[2] == ()


@pytest.mark.parametrize(
    ("pins", "expected"),
    [
        ((("torch", "==2.4.0"),), ("2.4.0.post4", "torch==2.4.0")),
        ((("torch", ">=2.1,<2.7"),), ("2.6.0.post5", "torch>=2.1,<2.7")),
        ((("torch", ">=2.1"),), None),  # the newest release fits: nothing to decide
        ((("torch", "==1.13.1"),), None),  # no torch_npu for it: NPU704 says so in the file
        ((("torch", "==2.4.0"), ("torch-npu", "==2.4.0.post2")), ("2.4.0.post2", "torch_npu==2.4.0.post2")),
        ((("torchvision", "==0.19.1"),), ("2.4.0.post4", "torchvision==0.19.1")),  # torchvision 0.19 needs torch 2.4
        ((("torchaudio", "==2.4.0"), ("torchvision", "==0.19.0")), ("2.4.0.post4", "torchvision==0.19.0")),
        ((("torch", ">=2.1"), ("torchvision", "==0.19.0")), None),  # the torch pin speaks for itself
        ((), None),
    ],
)
def test_target_from_pins(pins, expected):
    assert target_from_pins(pins) == expected


@pytest.mark.parametrize(
    ("pins", "expected"),
    [
        ((("torchvision", "==0.14.1,==0.14.0"),), ("==1.13.*", "torchvision==0.14.1,==0.14.0")),
        ((("torchvision", "==0.9.0"),), ("==1.8.*", "torchvision==0.9.0")),
        ((("torchaudio", "==0.13.1"),), ("==1.13.*", "torchaudio==0.13.1")),
        ((("torchaudio", "==2.5.1"),), ("==2.5.*", "torchaudio==2.5.1")),
        ((("torchvision", "==0.14.1,==0.15.0"),), None),  # two torch releases: not one
        ((("torchvision", ">=0.14"),), None),  # a range: which torch is not known
    ],
)
def test_pinned_torch_from_torchvision_or_torchaudio(pins, expected):
    assert pinned_torch(pins) == expected


NVTX = 'import torch\n\n\ndef step(x):\n    torch.cuda.nvtx.range_push("step")\n    return x.cuda()\n'


def test_a_pinned_torch_decides_the_target_and_the_report_says_so(tmp_path: Path):
    """torch==2.4.0 gets torch_npu 2.4.0.post4 (TorchNPU 7.0.0), which has no mstx.range_push (26.1.0)."""
    (tmp_path / "requirements.txt").write_text("torch==2.4.0\n", encoding="utf-8")
    (tmp_path / "train.py").write_text(NVTX, encoding="utf-8")
    report = tmp_path / "r.json"
    result = cuda2npu("migrate", tmp_path, "--diff", "--no-cache", "--report", report)
    assert result.returncode == 1, result.stderr  # --diff: files would change
    assert 'torch.npu.mstx.range_push("step")' not in result.stdout
    assert "TorchNPU 26.1.0, the target is 2.4.0.post4" in result.stdout
    assert "target: torch_npu 2.4.0.post4, for the pin torch==2.4.0 (requirements.txt)" in result.stderr
    options = json.loads(report.read_text())["options"]
    assert options["target_torch_npu"] == "2.4.0.post4"
    assert options["target_from"] == "torch==2.4.0"
    assert options["pins"] == [["torch", "==2.4.0"]]

    chosen = cuda2npu("migrate", tmp_path, "--diff", "--no-cache", "--target-torch-npu", "2.7.1.post8")
    assert '+    torch.npu.mstx.range_push("step")' in chosen.stdout
    assert "for the pin" not in chosen.stderr


def test_setup_py_requirement_table_read_through_a_lookup(tmp_path: Path):
    """Hugging Face's setup.py keeps its pins in a module-level table that install_requires reads by
    name (``deps["transformers"]``): the pins are read from the table (a first read saw open-r1's
    ``transformers==4.52.3`` missed, and its flash_attention_2 configs rewritten needlessly)."""
    setup = tmp_path / "setup.py"
    setup.write_text(
        "import re\nfrom setuptools import setup\n"
        '_deps = ["accelerate>=1.2.1", "transformers==4.52.3", "torch==2.6.0"]\n'
        'deps = {b: a for a, b in (re.findall(r"^(([^!=<>~ ]+)(?:[!=<>~ ].*)?$)", x)[0] for x in _deps)}\n'
        'setup(name="x", install_requires=[deps["transformers"], deps["torch"]], classifiers=["A", "B"])\n'
    )
    pins, read, _ = project_pins([setup], tmp_path)
    assert dict(pins)["transformers"] == "==4.52.3" and dict(pins)["torch"] == "==2.6.0"
    assert read == ("setup.py",)


def test_a_vendored_copy_pins_its_version_and_keeps_fp16(tmp_path: Path):
    """LoRA's examples carry transformers 4.4.2 (no `bf16` field in TrainingArguments): its
    `__version__` is a pin, so a launch script's `--fp16` stays (NPU906 review), not `--bf16`."""
    files = _write(
        tmp_path,
        {
            "src/transformers/__init__.py": '__version__ = "4.4.2"\nfrom .training_args import TrainingArguments\n',
            "src/transformers/training_args.py": "class TrainingArguments:\n    fp16: bool = False\n",
            "src/other/__init__.py": '__version__ = "9.9"\n',
            "run_glue.py": "from transformers import HfArgumentParser, TrainingArguments\n",
            "run.sh": "python run_glue.py --fp16 --output_dir out\n",
        },
    )
    pins, read, _ = project_pins(files, tmp_path)
    assert dict(pins) == {"transformers": "==4.4.2"} and read == ("src/transformers/__init__.py",)
    cuda2npu("migrate", tmp_path)
    script = (tmp_path / "run.sh").read_text()
    assert "--fp16" in script and "NPU906 review: `--fp16` kept under the bf16 policy" in script


def test_several_files_exact_pins_are_alternatives():
    """streaming-vlm (round 29) pins transformers in four requirement files (`==4.52.4`, `==4.51.3`,
    `==4.50.0`, `==4.45.2`); merged, they are alternatives: 4.51 is guaranteed only if each is newer,
    and a later release is excluded only if each excludes it."""
    assert at_least("==4.52.4,==4.51.3,==4.50.0", "4.51.0") is False
    assert at_least("==4.52.4,==4.51.3", "4.51.0") is True
    assert excludes_from("==4.52.4,==4.50.0", "4.51.0") is False
    assert excludes_from("==4.40.0,==4.50.0", "4.51.0") is True
    assert excludes_from("==4.50.0", "4.51.0") is True  # one exact pin, as before


def test_a_cog_yaml_pins_the_scope_it_lies_in(tmp_path: Path):
    """DeepSeek-Math (round 37): the root `cog.yaml` builds `replicate/predict.py` with accelerate 0.27.0;
    `evaluation/environment.yml` pins 0.21.0 for the evaluation harness. Read, the root scope has its own
    pin, so the predictor no longer takes the harness's (NPU905's note named the wrong pin)."""
    (tmp_path / "cog.yaml").write_text(
        "build:\n  gpu: true\n  python_packages:\n    - torch==2.0.1\n    - accelerate==0.27.0\n"
        '    - hf_transfer\npredict: "replicate/predict.py:Predictor"\n'
    )
    (tmp_path / "replicate").mkdir()
    (tmp_path / "replicate" / "predict.py").write_text("import torch\n")
    (tmp_path / "evaluation").mkdir()
    (tmp_path / "evaluation" / "environment.yml").write_text(
        "dependencies:\n  - python=3.10\n  - pip:\n    - accelerate==0.21.0\n"
    )
    (tmp_path / "evaluation" / "run.py").write_text("import torch\n")
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    pins, read, scopes = project_pins(files, tmp_path)
    assert read == ("cog.yaml", "evaluation/environment.yml")
    assert dict(dict(scopes)[str(tmp_path.resolve())])["accelerate"] == "==0.27.0"
    assert dict(dict(scopes)[str((tmp_path / "evaluation").resolve())])["accelerate"] == "==0.21.0"
