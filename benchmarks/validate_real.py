"""`cuda2npu validate` on real projects: pinned sources, small entries and scripts, one table.

    python benchmarks/validate_real.py                   # every case, then the two timing ratios
    python benchmarks/validate_real.py nanogpt-train     # some cases (--no-measure: table only)
    python benchmarks/validate_real.py --list            # the cases and their pins
    python benchmarks/validate_real.py --markdown        # the tables as docs/validation.md shows them

Each case copies a pinned project from ``benchmarks/corpus/`` into a temporary tree, adds the
case's own files from ``benchmarks/validate_cases/<dir>/`` (a ``module:function`` entry or a short
training script written the way the project's code runs on one CUDA GPU, at toy size), runs its
``prepare`` script there (data files), migrates the tree with ``cuda2npu migrate --out`` and runs
``cuda2npu validate`` on the pair with the entry or the ``--run`` command.

The sources are the ecosystem check's corpus: PyPI sdists pinned by sha256 (``python
benchmarks/corpus.py`` fetches them) and GitHub commits exported with ``git archive`` into
``benchmarks/corpus/<owner>+<name>-<commit[:12]>/`` (``--list`` prints each pin and its directory).
A selected case whose source is not there stops the run before anything runs (exit 2, the missing
directories named). Exit 1 when a case ends otherwise than a correct migration should (its
``expected`` status: equivalent, or error where the migration leaves manual items the entry needs). A case needing a package this interpreter lacks (numpy, torchvision) is
reported "unavailable" with the reason. Pure-Python dependencies (einops) are corpus sdists put on
``PYTHONPATH``.

The measurements after the table: ``--run`` on the 2-layer nanoGPT training script (2 steps; in
float32 and in bfloat16, where the policy mode runs too) against running both scripts plainly (each
under its backend, nothing recorded), and the emulated NPU against plain CPU (``benchmarks/emulator_overhead.py``, plus the same training script's body).
Ratios are measured in this one run (best of ``--repeats``); the machine's load moves them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # noqa: E402  (benchmarks/corpus.py: PyPI pins and their cache)

HERE = Path(__file__).resolve().parent
CASES_DIR = HERE / "validate_cases"
SIDE_TIMEOUT_S = 900


@dataclass(frozen=True)
class GitSource:
    repo: str  # owner/name
    commit: str
    paths: tuple[str, ...]  # the paths exported (``git archive``) from the commit

    @property
    def directory(self) -> Path:
        return corpus.CORPUS_DIR / f"{self.repo.replace('/', '+')}-{self.commit[:12]}"

    @property
    def pin(self) -> str:
        return f"{self.repo}@{self.commit[:10]}"


@dataclass(frozen=True)
class LocalSource:
    """A fixture of this repository (``fixtures/validation/<name>``): a script written for the case."""

    name: str

    @property
    def directory(self) -> Path:
        return HERE.parent / "fixtures" / "validation" / self.name

    @property
    def pin(self) -> str:
        return f"fixtures/validation/{self.name}"


def _pypi_pin(project: corpus.Project) -> str:
    return f"{project.name}=={project.version}"


NANOGPT = GitSource(
    "karpathy/nanoGPT", "3adf61e154c3fe3fca428ad6bc3818b27a3b8291", ("model.py", "train.py", "configurator.py")
)
MINGPT = GitSource("karpathy/minGPT", "37baab71b9abea1b76ab957409a1cc2fbfba8a26", ("mingpt", "projects/adder"))
# 1.38.2 (2024-10): the last releases that need only einops besides torch
X_TRANSFORMERS = GitSource("lucidrains/x-transformers", "a24bf3eef72e53f29636d07c1017aa1244fd48bb", ("x_transformers",))
TE = GitSource(
    "NVIDIA/TransformerEngine", "d0067d0da6cb01811b8072a7d304f0e00344ce2b", ("docs/examples/quickstart_utils.py",)
)
# word_language_model before it moved to torch.accelerator (2025-08): main.py --cuda
EXAMPLES = GitSource(
    "pytorch/examples",
    "ac7e960b35f72f24f0b04c3826c9d9e228599b6b",
    tuple(f"word_language_model/{name}" for name in ("main.py", "model.py", "data.py", "generate.py")),
)
TIMM = next(p for p in corpus.PROJECTS if p.name == "timm")
EINOPS = corpus.Project("einops", "0.8.1", "de5d960a7a761225532e0f1959e5315ebeafc0cd43394732f103ca44b9837e84")

NANOGPT_TRAIN_ARGS = (
    "--dataset=tiny --n_layer=2 --n_head=2 --n_embd=32 --block_size=16 --batch_size=4 "
    "--gradient_accumulation_steps=1 --max_iters=2 --eval_interval=1000 --eval_iters=1 "
    "--compile=False --always_save_checkpoint=False --dtype=bfloat16"
)
WLM_ARGS = "--cuda --dry-run --data data/tiny --emsize 16 --nhid 16 --nlayers 2 --bptt 8 --batch_size 4 --epochs 1"


@dataclass(frozen=True)
class Case:
    name: str
    source: GitSource | corpus.Project | LocalSource
    files: str  # benchmarks/validate_cases/<files>/, copied into the tree's root ("" for none)
    entry: str = ""  # module:function
    run: str = ""  # a --run command
    root: str = ""  # the project directory within the source that becomes the tree
    prepare: str = ""  # a case file run in the original tree before the migration
    deps: tuple[corpus.Project, ...] = ()  # pure-Python packages put on PYTHONPATH
    requires: tuple[str, ...] = ()  # modules this interpreter must have
    expected: str = "equivalent"  # the status a correct migration gives
    remark: str = ""  # why, where that is not obvious from the note
    migrate_args: tuple[str, ...] = ()  # options of `cuda2npu migrate`

    @property
    def what(self) -> str:
        return f"--run {self.run.split()[0]}" if self.run else self.entry


CASES = (
    Case("nanogpt-model", NANOGPT, "nanogpt", entry="nanogpt_entry:build"),
    Case("nanogpt-train", NANOGPT, "nanogpt", run="train_tiny.py --steps 2"),
    Case("nanogpt-train-bf16", NANOGPT, "nanogpt", run="train_tiny.py --steps 2 --dtype bfloat16"),
    Case(
        "nanogpt-train.py",
        NANOGPT,
        "nanogpt",
        run=f"train.py {NANOGPT_TRAIN_ARGS}",
        prepare="prepare_tiny.py",
        requires=("numpy",),
    ),
    Case("x-transformers-decoder", X_TRANSFORMERS, "x_transformers", entry="xt_entry:decoder", deps=(EINOPS,)),
    Case("x-transformers-encoder", X_TRANSFORMERS, "x_transformers", entry="xt_entry:encoder", deps=(EINOPS,)),
    Case("x-transformers-train", X_TRANSFORMERS, "x_transformers", run="train_tiny.py --steps 2", deps=(EINOPS,)),
    Case("te-fused-block", TE, "transformer_engine", entry="te_entry:fused_block", root="docs/examples"),
    Case("te-transformer-layer", TE, "transformer_engine", entry="te_entry:transformer_layer", root="docs/examples"),
    Case(
        "te-quickstart-attention",
        TE,
        "transformer_engine",
        entry="te_entry:guide_attention_block",
        root="docs/examples",
        expected="error",
        remark="quickstart_utils.py keeps `import transformer_engine.pytorch` for its FP8 helpers (NPU606/NPU417 "
        "manual items): a person migrates them first",
    ),
    Case("te-train-fp8", TE, "transformer_engine", run="train_fp8.py --steps 2", root="docs/examples"),
    Case("wlm-lstm", EXAMPLES, "word_language_model", entry="wlm_entry:lstm", root="word_language_model"),
    Case("wlm-gru-tied", EXAMPLES, "word_language_model", entry="wlm_entry:gru_tied", root="word_language_model"),
    Case("wlm-transformer", EXAMPLES, "word_language_model", entry="wlm_entry:transformer", root="word_language_model"),
    Case(
        "wlm-main-lstm",
        EXAMPLES,
        "word_language_model",
        run=f"main.py {WLM_ARGS} --model LSTM",
        root="word_language_model",
        remark="main.py updates `p.data` by hand, no optimizer step: forwards and losses compared",
        prepare="prepare_tiny.py",
    ),
    Case(
        "wlm-main-transformer",
        EXAMPLES,
        "word_language_model",
        run=f"main.py {WLM_ARGS} --model Transformer",
        root="word_language_model",
        remark="main.py updates `p.data` by hand, no optimizer step: forwards and losses compared",
        prepare="prepare_tiny.py",
    ),
    Case("mingpt-model", MINGPT, "mingpt", entry="mingpt_entry:build", requires=("numpy",)),
    Case(
        "mingpt-adder",
        MINGPT,
        "mingpt",
        requires=("numpy",),
        run="projects/adder/adder.py --data.ndigit=1 --trainer.max_iters=2 --trainer.num_workers=0",
    ),
    Case("timm-vit", TIMM, "timm", entry="timm_entry:vit", requires=("torchvision",)),
    Case("timm-resnet", TIMM, "timm", entry="timm_entry:resnet", requires=("torchvision",)),
    Case(
        "apex-flash-o1",
        LocalSource("apex_flash"),
        "",
        run="train.py --steps 2",
        remark="apex O1 + FusedAdam + flash-attn with dropout 0.1 -> BF16 autocast, torch.optim.AdamW, npu_fusion_attention",
    ),
    Case(
        "amp-scaler-fp16",
        LocalSource("amp_scaler"),
        "",
        run="train.py --steps 2",
        migrate_args=("--precision", "fp16"),
        remark="torch.cuda.amp float16 + GradScaler, dropout 0.1, LR warm-up; migrated with --precision fp16",
    ),
)
# the --run overhead: float32 (the exact mode only) and bfloat16 (the exact and the policy mode)
TIMED_CASES = ("nanogpt-train", "nanogpt-train-bf16")


@dataclass
class Outcome:
    case: Case
    status: str  # equivalent | mismatch | error | unavailable
    max_abs: float | None = None
    migrate_s: float = 0.0
    validate_s: float = 0.0
    edits: int = 0
    manual: int = 0
    note: str = ""
    trees: tuple[Path, Path] | None = field(default=None, repr=False)

    @property
    def as_expected(self) -> bool:
        """The status a correct migration gives, or not run here (unavailable)."""
        return self.status in (self.case.expected, "unavailable")

    def to_json(self) -> dict:
        return {
            "case": self.case.name,
            "project": _pin(self.case.source),
            "what": self.case.what,
            "status": self.status,
            "expected": self.case.expected,
            "max_abs_error": self.max_abs,
            "migrate_s": round(self.migrate_s, 2),
            "validate_s": round(self.validate_s, 2),
            "edits": self.edits,
            "manual": self.manual,
            "note": self.note,
        }


def _pin(source) -> str:
    return source.pin if isinstance(source, (GitSource, LocalSource)) else _pypi_pin(source)


# --- sources ----------------------------------------------------------------------------------


def _how_to_get(source) -> str:
    """The command that puts ``source`` into the corpus."""
    if isinstance(source, GitSource):
        return (
            f"mkdir -p {source.directory} && git --git-dir=<clone of {source.repo}> archive {source.commit} "
            f"{' '.join(source.paths)} | tar -x -C {source.directory} && touch {source.directory}/.extracted"
        )
    if source in corpus.PROJECTS:
        return f"python benchmarks/corpus.py {source.name}"
    return f'cd benchmarks && python -c "import corpus; corpus.fetch(corpus.{source!r})"'


def missing_sources(cases) -> list:
    """The sources of ``cases`` (and their dependencies) not extracted in the corpus, each once."""
    needed = {_pin(s): s for case in cases for s in (case.source, *case.deps) if not isinstance(s, LocalSource)}
    return [s for s in needed.values() if not (s.directory / ".extracted").exists()]


def _missing(requires: tuple[str, ...], path: list[str], python: str = sys.executable) -> list[str]:
    """The modules of ``requires`` that ``python`` (with ``path`` first on sys.path) cannot find."""
    probe = (
        "import importlib.util, sys; print(' '.join(n for n in sys.argv[1:] if importlib.util.find_spec(n) is None))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([python, "-c", probe, *requires], capture_output=True, text=True, env=env)
    return proc.stdout.split()


# --- one case ---------------------------------------------------------------------------------


def _cuda2npu(
    *args, env: dict, timeout: int = SIDE_TIMEOUT_S, python: str = sys.executable
) -> tuple[subprocess.CompletedProcess, float]:
    start = time.perf_counter()
    proc = subprocess.run(
        [python, "-m", "cuda2npu", *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout
    )
    return proc, time.perf_counter() - start


def _environment(deps: list[Path]) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, deps), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("PYTHONWARNINGS", "ignore")
    return env


def _first_problem(proc: subprocess.CompletedProcess) -> str:
    """The line of a failed cuda2npu run that says what went wrong (else its last line)."""
    lines = [line.strip() for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
    found = [line for line in lines if "error" in line.lower() or " failed" in line]
    return (found or lines[-1:] or [f"exit status {proc.returncode}"])[0]


def _counts(report: Path) -> tuple[int, int]:
    if not report.exists():
        return 0, 0
    files = json.loads(report.read_text())["files"]
    return sum(len(f.get("edits", [])) for f in files), sum(len(f.get("manual", [])) for f in files)


def _summary(result: dict) -> tuple[float | None, str]:
    """(max abs error, note) of one validate result from its JSON."""
    if "tensors" in result:  # an entry
        errors = [t["max_abs_error"] for t in result["tensors"]]
        bad = [t for t in result["tensors"] if not t["ok"]]
        note = (
            f"{len(bad)} of {len(errors)} tensors off, first: {bad[0]['group']} {bad[0]['name']}"
            if bad
            else f"{len(errors)} tensors, bounds {result['precision']}"
        )
        return (max(errors) if errors else None), (result["problems"][0] if result["problems"] else note)
    first = result.get("first_divergence")
    if first:
        return first["max_abs"], (
            f"first divergence: step {first['step']} {first['kind']} {first['module'] or '<loss>'}"
            f" (call {first['call']})"
        )
    note = f"{result['compared']} records over {result['steps']} steps, modes: {', '.join(result['modes'])}"
    return result["max_abs_error"], (result["problems"][0] if result["problems"] else note)


def prepare_case(
    case: Case, work: Path, cases_dir: Path = CASES_DIR, python: str = sys.executable
) -> tuple[Path, Path, dict, float] | Outcome:
    """(original tree, migrated tree, environment, migrate seconds), or the Outcome that stops the case;
    ``case.files`` are read from ``cases_dir``; ``python`` runs the case's scripts."""
    tree = case.source.directory / case.root
    deps = [dep.directory for dep in case.deps]
    missing = _missing(case.requires, [str(p) for p in deps], python)
    if missing:
        return Outcome(case, "unavailable", note=f"needs {', '.join(missing)}, which this interpreter lacks")
    env = _environment(deps)
    original, migrated = work / case.name / "original", work / case.name / "migrated"
    shutil.copytree(tree, original, ignore=shutil.ignore_patterns(".extracted", "__pycache__"))
    if case.files:
        shutil.copytree(
            cases_dir / case.files, original, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
        )
    if case.prepare:
        prepared = subprocess.run(
            [python, case.prepare],
            cwd=original,
            env={**env, "CUDA2NPU_E2E_CASES": str(cases_dir)},
            capture_output=True,
            text=True,
        )
        if prepared.returncode != 0:
            return Outcome(case, "error", note=f"{case.prepare} failed: {_first_problem(prepared)}")
    proc, migrate_s = _cuda2npu("migrate", original, "--out", migrated, *case.migrate_args, env=env)
    if proc.returncode != 0 or not migrated.is_dir():
        return Outcome(case, "error", migrate_s=migrate_s, note=f"migrate failed: {_first_problem(proc)}")
    return original, migrated, env, migrate_s


def validate_case(
    case: Case, original: Path, migrated: Path, env: dict, result_file: Path, python: str = sys.executable
) -> tuple[dict | None, float, str]:
    """(the validate result's JSON, seconds, the problem when there is no result)."""
    mode = ["--run", case.run] if case.run else ["--entry", case.entry]
    try:
        proc, validate_s = _cuda2npu(
            "validate", original, migrated, *mode, "--json", result_file, env=env, python=python
        )
    except subprocess.TimeoutExpired:
        return None, SIDE_TIMEOUT_S, "validate timed out"
    if not result_file.exists():
        return None, validate_s, f"no result: {_first_problem(proc)}"
    return json.loads(result_file.read_text())["results"][0], validate_s, ""


def run_case(case: Case, work: Path) -> Outcome:
    prepared = prepare_case(case, work)
    if isinstance(prepared, Outcome):
        return prepared
    original, migrated, env, migrate_s = prepared
    edits, manual = _counts(migrated / "cuda2npu_report.json")
    result, validate_s, problem = validate_case(case, original, migrated, env, work / case.name / "validate.json")
    if result is None:
        return Outcome(case, "error", None, migrate_s, validate_s, edits, manual, problem)
    max_abs, note = _summary(result)
    status = {"skipped": "unavailable"}.get(result["status"], result["status"])
    return Outcome(case, status, max_abs, migrate_s, validate_s, edits, manual, note, (original, migrated))


# --- measurements -----------------------------------------------------------------------------

PLAIN = """\
import runpy, sys, time
from pathlib import Path
from cuda2npu.validation.strict_host import install_host
role, out = sys.argv[1], sys.argv[2]
if role != "cpu":
    install_host(role, Path("."))
sys.argv = sys.argv[3:]
sys.path.insert(0, ".")
start = time.perf_counter()
runpy.run_path(sys.argv[0], run_name="__main__")
open(out, "w").write(str(time.perf_counter() - start))
"""


def _plain(role: str, tree: Path, argv: list[str], env: dict) -> tuple[float, float]:
    """(process seconds, script-body seconds) of one plain run of ``argv`` in ``tree``."""
    with tempfile.NamedTemporaryFile(suffix=".txt", delete=False) as handle:
        body_file = Path(handle.name)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", PLAIN, role, str(body_file), *argv],
        cwd=tree,
        env=env,
        check=True,
        capture_output=True,
        timeout=SIDE_TIMEOUT_S,
    )
    wall = time.perf_counter() - start
    body = float(body_file.read_text())
    body_file.unlink()
    return wall, body


def measure_run_overhead(outcome: Outcome, repeats: int) -> dict:
    """``validate --run`` against the two scripts run plainly, and the emulated NPU against plain CPU."""
    original, migrated = outcome.trees
    case = outcome.case
    env = _environment([])
    argv = case.run.split()
    validate_s, plain_s, npu_body, cpu_body = [], [], [], []
    for _ in range(repeats):
        _, seconds = _cuda2npu("validate", original, migrated, "--run", case.run, env=env)
        validate_s.append(seconds)
        (wall_o, _), (wall_m, body_m) = _plain("original", original, argv, env), _plain("migrated", migrated, argv, env)
        plain_s.append(wall_o + wall_m)
        npu_body.append(body_m)
        cpu_body.append(_plain("cpu", original, [*argv, "--device", "cpu"], env)[1])
    return {
        "case": case.name,
        "command": case.run,
        "validate_s": min(validate_s),
        "plain_s": min(plain_s),
        "run_ratio": min(validate_s) / min(plain_s),
        "npu_body_s": min(npu_body),
        "cpu_body_s": min(cpu_body),
        "script_emulation_ratio": min(npu_body) / min(cpu_body),
    }


def measure_emulator(repeats: int) -> list[dict]:
    """The rows of ``benchmarks/emulator_overhead.py`` (forward+backward per step, CPU vs emulated npu)."""
    proc = subprocess.run(
        [sys.executable, str(HERE / "emulator_overhead.py"), "--repeats", str(repeats)],
        capture_output=True,
        text=True,
        env=_environment([]),
        timeout=SIDE_TIMEOUT_S,
        check=True,
    )
    rows = []
    for line in proc.stdout.splitlines()[1:]:
        *name, cpu, npu, ratio = line.split()
        rows.append({"model": " ".join(name), "cpu_ms": float(cpu), "npu_ms": float(npu), "ratio": float(ratio)})
    return rows


# --- output -----------------------------------------------------------------------------------


def print_rows(header: tuple[str, ...], rows: list[tuple[str, ...]], markdown: bool, summary: str) -> None:
    """A table (Markdown, or aligned columns) and its summary line: the other benchmarks' output."""
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in row) + " |")
        if summary:
            print(f"\n{summary}")
        return
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)] if rows else [0] * len(header)
    for row in (header, *rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    if summary:
        print(summary)


def _error_text(value: float | None) -> str:
    return "" if value is None else f"{value:.2g}"


def print_table(outcomes: list[Outcome], markdown: bool) -> None:
    header = (
        "case",
        "project",
        "validates",
        "status",
        "max abs error",
        "edits/manual",
        "migrate s",
        "validate s",
        "note",
    )
    rows = [
        (
            o.case.name,
            _pin(o.case.source),
            o.case.what,
            o.status if o.as_expected else f"{o.status} (expected {o.case.expected})",
            _error_text(o.max_abs),
            f"{o.edits}/{o.manual}" if o.status != "unavailable" else "",
            f"{o.migrate_s:.1f}" if o.migrate_s else "",
            f"{o.validate_s:.1f}" if o.validate_s else "",
            "; ".join(filter(None, [o.note, o.case.remark])),
        )
        for o in outcomes
    ]
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---:" if h.endswith(" s") or h == "max abs error" else "---" for h in header) + "|")
        for row in rows:
            print("| " + " | ".join(f"`{c}`" if i == 2 else c for i, c in enumerate(row)).replace("\n", " ") + " |")
        return
    widths = [max(len(h), *(len(r[i]) for r in rows)) if i < len(header) - 1 else 0 for i, h in enumerate(header)]
    for row in (header, *rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    counts = {s: sum(o.status == s for o in outcomes) for s in ("equivalent", "mismatch", "error", "unavailable")}
    print(", ".join(f"{n} {s}" for s, n in counts.items()))


def print_measurements(runs: list[dict], emulator: list[dict], markdown: bool) -> None:
    lines = []
    for run in runs:
        lines.append(
            (
                "`validate --run` / both scripts run plainly",
                "≤ 3",
                f"{run['run_ratio']:.2f} ({run['validate_s']:.1f} s / {run['plain_s']:.1f} s, `{run['case']}`)",
            )
        )
    for run in runs[:1]:
        lines.append(
            (
                "training script body on emulated npu / on plain CPU",
                "≤ 2",
                f"{run['script_emulation_ratio']:.2f} ({run['npu_body_s'] * 1e3:.0f} ms / "
                f"{run['cpu_body_s'] * 1e3:.0f} ms)",
            )
        )
    for row in emulator:
        lines.append(
            (
                f"emulated npu / plain CPU, fwd+bwd step, {row['model']}",
                "≤ 2",
                f"{row['ratio']:.2f} ({row['npu_ms']:.1f} ms / {row['cpu_ms']:.1f} ms)",
            )
        )
    if markdown:
        print("| ratio | target | measured |\n|---|---|---:|")
        for line in lines:
            print("| " + " | ".join(line) + " |")
        return
    for what, target, value in lines:
        print(f"{what:62} target {target:5} measured {value}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help="case names (default: all)")
    parser.add_argument("--list", action="store_true", help="print the cases and their pins, then exit")
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    parser.add_argument("--json", type=Path, help="write the outcomes and measurements here")
    parser.add_argument("--no-measure", action="store_true", help="skip the timing measurements")
    parser.add_argument("--repeats", type=int, default=3, help="runs per timing (best is kept)")
    args = parser.parse_args(argv)
    by_name = {c.name: c for c in CASES}
    unknown = [n for n in args.cases if n not in by_name]
    if unknown:
        parser.error(f"unknown case(s): {', '.join(unknown)}; known: {', '.join(by_name)}")
    cases = [by_name[n] for n in args.cases] or list(CASES)
    if args.list:
        for case in cases:
            print(f"{case.name:26} {_pin(case.source):40} {case.what:38} {case.source.directory}")
        return 0
    missing = missing_sources(cases)
    if missing:
        print(
            f"the pinned corpus lacks {len(missing)} source(s) these cases need, in {corpus.CORPUS_DIR}:",
            file=sys.stderr,
        )
        for source in missing:
            print(f"  {_pin(source)}: {_how_to_get(source)}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="cuda2npu-validate-real-") as tmp:
        outcomes = []
        for case in cases:
            outcomes.append(run_case(case, Path(tmp)))
            print(f"{case.name}: {outcomes[-1].status}", file=sys.stderr)
        print_table(outcomes, args.markdown)
        runs, emulator = [], []
        if not args.no_measure:
            timed = [o for o in outcomes if o.case.name in TIMED_CASES and o.trees]
            runs = [measure_run_overhead(outcome, args.repeats) for outcome in timed]
            emulator = measure_emulator(max(args.repeats, 5))
            print()
            print_measurements(runs, emulator, args.markdown)
    if args.json:
        args.json.write_text(
            json.dumps({"cases": [o.to_json() for o in outcomes], "run_overhead": runs, "emulator": emulator}, indent=2)
            + "\n"
        )
    return 0 if all(o.as_expected for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
