"""End to end: real projects migrated with zero hand edits, run on the strict emulated NPU host.

    python benchmarks/e2e.py                 # every project
    python benchmarks/e2e.py alpaca nanogpt  # some
    python benchmarks/e2e.py --markdown      # the table as docs/validation.md shows it
    python benchmarks/e2e.py --list          # the projects, their pins and commands

Each project is a pinned source (a GitHub commit exported from a mirror into ``benchmarks/corpus/``,
as ``benchmarks/validate_real.py`` does) and a tiny run command of its own training script, with
what that command needs kept in ``benchmarks/e2e_cases/<project>/`` (a script preparing tiny data,
a tiny local model and tokenizer for the projects on transformers: nothing from a model hub).
Half of them train on the current LLM stack (transformers' Trainer, TRL, PEFT, FastChat with its
flash-attn patch); the others are classic PyTorch training code.

For each: the tree is copied, prepared, migrated with ``cuda2npu migrate --out`` (no hand edit),
and then

1. **original runs here**: the command in the original tree on the emulated CUDA host (a project
   whose original cannot run here says nothing about the migration: its row says why);
2. **runs out of the box**: the command in the migrated tree on the strict emulated NPU host
   (``cuda2npu.validation.strict_host``: CUDA-only packages cannot be imported, torch_npu only
   once imported), until ``--steps`` optimizer steps or its end: yes, or the first failure with its
   file:line;
3. **validate**: ``cuda2npu validate ORIGINAL MIGRATED --run COMMAND``: equivalent or not.

The score is the share of projects whose original runs here that run out of the box (target: 80 %).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import validate_real  # noqa: E402  (sources, set-up and validate runs shared with validate_real.py)
from validate_real import Case, GitSource  # noqa: E402

HERE = Path(__file__).resolve().parent
E2E_CASES = HERE / "e2e_cases"
STEPS = 2

RUNNER = """
import json, runpy, sys
from pathlib import Path
import torch
from cuda2npu.validation.failures import describe
from cuda2npu.validation.strict_host import install_host

out, role, steps, *argv = sys.argv[1:]
tree = Path.cwd().resolve()
install_host(role, tree)
sys.path.insert(0, str(tree))


class Done(BaseException):
    pass


count = [0]


def stepped(optimizer, args, kwargs):
    count[0] += 1
    if count[0] >= int(steps):
        raise Done


from torch.optim.optimizer import register_optimizer_step_post_hook

register_optimizer_step_post_hook(stepped)
sys.argv = argv
result = {"status": "finished"}
try:
    runpy.run_path(str(tree / argv[0]), run_name="__main__")
except Done:
    result["status"] = "steps reached"
except SystemExit as exc:
    if exc.code not in (None, 0):
        result = {"status": "failed", **describe(exc, role, tree)}
except BaseException as exc:
    result = {"status": "failed", **describe(exc, role, tree)}
result["steps"] = count[0]
Path(out).write_text(json.dumps(result))
"""


@dataclass(frozen=True)
class Project:
    case: Case
    stack: str  # "LLM stack" | "classic"
    files: Path = E2E_CASES  # where case.files is: e2e_cases/, or validate_cases/ for cases shared with validate_real
    environment: tuple[str, ...] = ()  # pip requirements of a virtual environment of its own (else this one)


REPO = HERE.parent


def interpreter(requirements: tuple[str, ...]) -> str:
    """The Python of a virtual environment with torch 2.13.0, this cuda2npu and ``requirements``
    (pip resolves them together; cached in the corpus), or this interpreter for none."""
    if not requirements:
        return sys.executable
    key = hashlib.sha256(" ".join(sorted(requirements)).encode()).hexdigest()[:12]
    venv = validate_real.corpus.CORPUS_DIR / ".venvs" / key
    python = venv / "bin" / "python"
    if not (venv / ".installed").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "torch==2.13.0"], check=True)  # the CPU build on this disk, first
        subprocess.run([*pip, "-e", str(REPO), "torch==2.13.0", *requirements], check=True)
        (venv / ".installed").write_text("\n".join(requirements) + "\n")
    return str(python)


NANOGPT = validate_real.NANOGPT
FASTCHAT = GitSource("lm-sys/FastChat", "0e6d3e4beaab66f4d3f93db72541a4abab8af28d", ("fastchat", "pyproject.toml"))
ALPACA = GitSource("tatsu-lab/stanford_alpaca", "761dc5bfbdeeffa89b8bff5d038781a4055f796a", ("train.py", "utils.py"))
TRL = GitSource("huggingface/trl", "f2cd57710ae345ea6428ae95363267fcf38a3dc8", ("trl", "pyproject.toml"))
LLAMA_COOKBOOK = GitSource(
    "meta-llama/llama-cookbook", "0e0033518623d03ac5c1654bf04b7e480f7d5e5a", ("src/llama_cookbook",)
)
PEFT = GitSource("huggingface/peft", "5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40", ("examples/olora_finetuning",))

# the last transformers 4 release line: Trainer(tokenizer=...), as 2023-24 training code calls it
TRANSFORMERS_4 = (
    "transformers>=4.46,<5",
    "accelerate<1.13",  # accelerate.utils.is_ccl_available, which llama-cookbook imports, went in 1.13
    "datasets",
    "peft",
    "sentencepiece",
    "numpy",
    "fire",
    "openai==0.28.1",
)
HF_ARGS = "--per_device_train_batch_size 2 --max_steps 2 --learning_rate 2e-4 --report_to none --save_strategy no"

PROJECTS = (
    Project(
        Case(
            "nanogpt",
            NANOGPT,
            "nanogpt",
            run=f"train.py {validate_real.NANOGPT_TRAIN_ARGS}",
            prepare="prepare_tiny.py",
            requires=("numpy",),
        ),
        "classic",
        validate_real.CASES_DIR,
    ),
    Project(
        Case(
            "mingpt-adder",
            validate_real.MINGPT,
            "mingpt",
            run="projects/adder/adder.py --data.ndigit=1 --trainer.max_iters=2 --trainer.num_workers=0",
            requires=("numpy",),
        ),
        "classic",
        validate_real.CASES_DIR,
    ),
    Project(
        Case(
            "x-transformers",
            validate_real.X_TRANSFORMERS,
            "x_transformers",
            run="train_tiny.py --steps 2",
            deps=(validate_real.EINOPS,),
        ),
        "classic",
        validate_real.CASES_DIR,
    ),
    Project(
        Case(
            "word-language-model",
            validate_real.EXAMPLES,
            "word_language_model",
            run=f"main.py {validate_real.WLM_ARGS} --model Transformer",
            root="word_language_model",
            prepare="prepare_tiny.py",
        ),
        "classic",
        validate_real.CASES_DIR,
    ),
    Project(
        Case("te-fp8", validate_real.TE, "transformer_engine", run="train_fp8.py --steps 2", root="docs/examples"),
        "classic",
        validate_real.CASES_DIR,
    ),
    Project(
        Case(
            "alpaca",
            ALPACA,
            "stanford_alpaca",
            run=f"train.py --model_name_or_path tiny-llama --data_path tiny_alpaca.json --output_dir out --bf16 True {HF_ARGS}",
            prepare="prepare_tiny.py",
            requires=("transformers", "openai"),
        ),
        "LLM stack",
        environment=TRANSFORMERS_4,
    ),
    Project(
        Case(
            "fastchat",
            FASTCHAT,
            "fastchat",
            run="fastchat/train/train.py --model_name_or_path tiny-llama --data_path tiny_sharegpt.json "
            f"--output_dir out --bf16 True --model_max_length 64 {HF_ARGS}",
            prepare="prepare_tiny.py",
            requires=("transformers",),
        ),
        "LLM stack",
        environment=TRANSFORMERS_4,
    ),
    Project(
        Case(
            "llama-cookbook",
            LLAMA_COOKBOOK,
            "llama_cookbook",
            run="llama_cookbook/finetuning.py --model_name tiny-llama --output_dir out --use_peft --peft_method lora "
            "--dataset custom_dataset --custom_dataset.file tiny_dataset.py --batch_size_training 2 "
            "--batching_strategy padding --context_length 64 --num_epochs 1 --max_train_step 2 "
            "--run_validation False --save_model False --num_workers_dataloader 0",
            root="src",
            prepare="prepare_tiny.py",
            requires=("transformers", "peft", "fire", "datasets"),
        ),
        "LLM stack",
        environment=TRANSFORMERS_4,
    ),
    Project(
        Case(
            "trl-sft",
            TRL,
            "trl",
            run="trl/scripts/sft.py --model_name_or_path tiny-llama --dataset_name tiny_sft --output_dir out "
            f"--max_length 64 --bf16 True {HF_ARGS}",
            prepare="prepare_tiny.py",
            requires=("transformers", "datasets", "accelerate"),
        ),
        "LLM stack",
    ),
    Project(
        Case(
            "peft-olora",
            PEFT,
            "peft_olora",
            run="examples/olora_finetuning/olora_finetuning.py --base_model tiny-llama --data_path tiny_alpaca "
            "--output_dir out --batch_size 2 --val_set_size 2 --cutoff_len 64 --lora_r 4",
            prepare="prepare_tiny.py",
            requires=("transformers", "datasets", "peft"),
        ),
        "LLM stack",
    ),
)


@dataclass
class Row:
    project: Project
    original: dict = field(default_factory=dict)
    migrated: dict = field(default_factory=dict)
    validate: str = ""
    checked: str = ""  # what validate compared
    note: str = ""

    @property
    def runs_here(self) -> bool:
        return self.original.get("status") in ("finished", "steps reached")

    @property
    def out_of_the_box(self) -> bool:
        return self.migrated.get("status") in ("finished", "steps reached")

    def first_failure(self, side: dict) -> str:
        if side.get("status") != "failed":
            return ""
        return f"{side.get('location') or '?'}: {side.get('message', '')}"[:200]

    def to_json(self) -> dict:
        return {
            "project": self.project.case.name,
            "stack": self.project.stack,
            "pin": validate_real._pin(self.project.case.source),
            "command": self.project.case.run,
            "original": self.original,
            "migrated": {k: v for k, v in self.migrated.items() if k != "traceback"},
            "runs_out_of_the_box": self.out_of_the_box,
            "validate": self.validate,
            "checked": self.checked,
            "note": self.note,
        }


def _side(role: str, tree: Path, case: Case, env: dict, work: Path, python: str) -> dict:
    out = work / f"{case.name}.{role}.json"
    try:
        proc = subprocess.run(
            [python, "-c", RUNNER, str(out), role, str(STEPS), *case.run.split()],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=validate_real.SIDE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return {"status": "failed", "message": f"timed out after {validate_real.SIDE_TIMEOUT_S} s"}
    if not out.exists():
        return {
            "status": "failed",
            "message": "the runner stopped: " + " | ".join(proc.stderr.strip().splitlines()[-3:]),
        }
    return json.loads(out.read_text())


def run_project(project: Project, work: Path) -> Row:
    case = project.case
    row = Row(project)
    python = interpreter(project.environment)
    prepared = validate_real.prepare_case(case, work, project.files, python)
    if isinstance(prepared, validate_real.Outcome):
        row.note = f"{prepared.status}: {prepared.note}"
        return row
    original, migrated, env, _ = prepared
    row.original = _side("original", original, case, env, work, python)
    row.migrated = _side("migrated", migrated, case, env, work, python)
    if not row.runs_here:
        row.note = "the original does not run here: " + row.first_failure(row.original)
        return row
    result, _, problem = validate_real.validate_case(
        case, original, migrated, env, work / f"{case.name}.validate.json", python
    )
    if result is None:
        row.validate = f"no result ({problem})"
    else:
        row.validate = result["status"]
        row.checked = ", ".join(f"{n} {kind}" for kind, n in result.get("checked", {}).items())
        nan = [note for note in result.get("notes", []) if "NaN" in note]
        first = result.get("first_divergence") or {}
        if first:
            row.note = f"first divergence at {first.get('where') or '?'}: {first.get('what') or first.get('kind')}"
        elif result.get("problems"):
            row.note = result["problems"][0][:200]
        elif nan:
            row.note = nan[0]
    return row


def print_table(rows: list[Row], markdown: bool) -> None:
    header = (
        "project",
        "stack",
        "pin",
        "original runs here",
        "runs out of the box",
        "first failure",
        "validate",
        "compared",
        "note",
    )
    cells = [
        (
            r.project.case.name,
            r.project.stack,
            validate_real._pin(r.project.case.source),
            "yes" if r.runs_here else "no",
            ("yes" if r.out_of_the_box else "no") if r.runs_here else "n/a",
            r.first_failure(r.migrated),
            r.validate,
            r.checked,
            r.note,
        )
        for r in rows
    ]
    counted = [r for r in rows if r.runs_here]
    ran = sum(r.out_of_the_box for r in counted)
    summary = (
        f"{ran} of {len(counted)} projects whose original runs here run out of the box on the strict NPU host "
        f"({100 * ran / max(1, len(counted)):.0f} %); validate: "
        + ", ".join(f"{sum(r.validate == s for r in counted)} {s}" for s in ("equivalent", "mismatch", "error"))
    )
    validate_real.print_rows(header, cells, markdown, summary)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("projects", nargs="*", help="project names (default: all)")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    by_name = {p.case.name: p for p in PROJECTS}
    unknown = [n for n in args.projects if n not in by_name]
    if unknown:
        parser.error(f"unknown project(s): {', '.join(unknown)}; known: {', '.join(by_name)}")
    projects = [by_name[n] for n in args.projects] or list(PROJECTS)
    if args.list:
        for project in projects:
            print(
                f"{project.case.name:22} {project.stack:10} {validate_real._pin(project.case.source):45} {project.case.run}"
            )
        return 0
    missing = validate_real.missing_sources([p.case for p in projects])
    if missing:
        print(f"the corpus lacks {len(missing)} source(s):", file=sys.stderr)
        for source in missing:
            print(f"  {validate_real._pin(source)}: {validate_real._how_to_get(source)}", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="cuda2npu-e2e-") as tmp:
        for project in projects:
            rows.append(run_project(project, Path(tmp)))
            print(f"{project.case.name}: {rows[-1].migrated.get('status', '-')} {rows[-1].validate}", file=sys.stderr)
    print_table(rows, args.markdown)
    if args.json:
        args.json.write_text(json.dumps([r.to_json() for r in rows], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
