"""The mutant catalogue: migration bugs injected into correct migrations, and whether `validate` catches them.

    python benchmarks/mutants.py                      # every operator on every case of validate_real.py
    python benchmarks/mutants.py apex-flash-o1 nanogpt-train --operators keep_prob,scale_dropped
    python benchmarks/mutants.py --markdown           # the tables as docs/validation.md and benchmarks/MUTANTS.md show them
    python benchmarks/mutants.py --list               # the operators
    python benchmarks/mutants.py --from-json run.json --markdown   # an earlier run's tables

Each case of ``benchmarks/validate_real.py`` is set up and migrated as that benchmark does (its
sources must be in the corpus). Each operator then edits the migrated tree at the first place it
applies (the case's script or entry module first, then the other files in path order), the way a
wrong rewrite or a careless hand edit after the migration would, and the mutant is checked twice:

* ``validate``: ``cuda2npu validate`` with the case's ``--run`` command or ``--entry``; caught when
  it ends MISMATCH or ERROR (a SKIPPED run proves nothing and is not caught);
* ``harness``: ``pytest npu_validation`` in the mutated tree (the generated per-site checks);
  caught when a check fails.

A caught mutant has the right location when the tool names the mutated file and a line within
``NEAR`` lines of the edit, a line span holding it (a class), or a line of the same innermost
function: the first divergence's place or the error's line for ``validate`` (for an entry, the
place it says to look at first), a failing site's file for the harness ("file": the file only). The operators are applied to the correct migration
only where they change it (an operator with no place in a case is "not applicable").

The score is the share of applicable mutants caught by validate or the harness; the table lists
each operator's mutants, what caught them and where. Runs take a while (two subprocess runs of a
training script per mutant): select cases and operators to iterate.
"""

from __future__ import annotations

import argparse
import ast
import bisect
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
import tokenize
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import validate_real  # noqa: E402  (benchmarks/validate_real.py: the cases and their set-up)

NEAR = 3
HARNESS_TIMEOUT_S = 900


@dataclass(frozen=True)
class Edit:
    path: str  # relative to the migrated tree
    line: int  # 1-based line of the edit in the mutated file
    text: str  # the mutated file


Apply = Callable[[str, Callable[[int], bool]], "tuple[int, str] | None"]  # (text, usable offset?)


@dataclass(frozen=True)
class Operator:
    name: str
    what: str
    apply: Apply  # (file text, may this character offset be edited?) -> (line, mutated text) or None
    needs: str = ""  # "reduced precision" / "fp16": where the case computes so; "the only torch_npu import"


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _sub(pattern: str, replacement, flags: int = re.MULTILINE) -> Apply:
    """The first match of ``pattern`` on a line the case runs, replaced (``replacement`` a string
    template or a function of the match)."""
    regex = re.compile(pattern, flags)

    def apply(text: str, usable: Callable[[int], bool]) -> tuple[int, str] | None:
        for match in regex.finditer(text):
            line = _line_of(text, match.start())
            new = match.expand(replacement) if isinstance(replacement, str) else replacement(match)
            if new != match.group(0) and usable(match.start()):
                return line, text[: match.start()] + new + text[match.end() :]
        return None

    return apply


OPTIMIZER_CALL = re.compile(
    r"\b(?:torch\.optim\.|optim\.|torch_npu\.optim\.)?(?:Npu\w+|Fused\w+|AdamW|Adam|SGD|LAMB|Lamb)\(", re.MULTILINE
)


def _optimizer_keyword(keyword: str, mutate: Callable[[str | None], str]) -> Apply:
    """Set ``keyword`` where the run's optimizer takes it: a param group's ``"keyword": value`` first
    (it overrides the constructor's), else the first optimizer construction (``Adam*``, ``SGD``,
    ``*Lamb``, ``Npu*``): ``mutate(old value or None)`` gives the new value's source."""
    group_key = re.compile(rf"""(['"]){keyword}\1\s*:\s*""")

    def apply(text: str, usable: Callable[[int], bool]) -> tuple[int, str] | None:
        for match in group_key.finditer(text):
            if usable(match.start()):
                end = _argument_end(text, match.end(), len(text))
                return _line_of(text, match.start()), text[: match.end()] + mutate(text[match.end() : end]) + text[end:]
        for match in OPTIMIZER_CALL.finditer(text):
            end = _closing(text, match.end() - 1)
            if end is None or not usable(match.start()):
                continue
            arguments = text[match.end() : end]
            if "param" not in arguments and "group" not in arguments and "model" not in arguments:
                continue
            existing = re.search(rf"\b{keyword}\s*=\s*", arguments)
            if existing:
                value_start = match.end() + existing.end()
                value_end = _argument_end(text, value_start, end)
                new_text = text[:value_start] + mutate(text[value_start:value_end]) + text[value_end:]
            else:
                separator = "" if arguments.rstrip().endswith(",") or not arguments.strip() else ", "
                insert = end - (len(arguments) - len(arguments.rstrip()))
                new_text = text[:insert] + f"{separator}{keyword}={mutate(None)}" + text[insert:]
            return _line_of(text, match.start()), new_text
        return None

    return apply


def _closing(text: str, open_index: int) -> int | None:
    depth = 0
    for index in range(open_index, len(text)):
        if text[index] in "([{":
            depth += 1
        elif text[index] in ")]}":
            depth -= 1
            if depth == 0:
                return index
    return None


def _argument_end(text: str, start: int, limit: int) -> int:
    depth = 0
    for index in range(start, limit):
        if text[index] in "([{":
            depth += 1
        elif text[index] in ")]}":
            depth -= 1
            if depth < 0:
                return index
        elif text[index] == "," and depth == 0:
            return index
    return limit


def _remove_scaler(text: str, usable: Callable[[int], bool]) -> tuple[int, str] | None:
    """``scaler.scale(loss).backward()`` -> ``loss.backward()``; ``scaler.step(opt)`` -> ``opt.step()``;
    ``scaler.update()`` dropped."""
    match = re.search(r"\b(\w+)\.scale\((\w+)\)\.backward\(\)", text)
    if match is None or not usable(match.start()):
        return None
    scaler = match.group(1)
    new = text.replace(match.group(0), f"{match.group(2)}.backward()")
    new = re.sub(rf"\b{scaler}\.step\((\w+)\)", r"\1.step()", new)
    new = re.sub(rf"^(\s*){scaler}\.update\(\)", r"\1pass", new, flags=re.MULTILINE)
    return _line_of(text, match.start()), new


TORCH_NPU_IMPORT = re.compile(r"^\s*(?:import torch_npu\b|from torch_npu\b)", re.MULTILINE)


def _remove_import_torch_npu(text: str, usable: Callable[[int], bool]) -> tuple[int, str] | None:
    """The file's ``import torch_npu``, where nothing else in the file names torch_npu."""
    match = re.search(r"^import torch_npu[^\n]*\n", text, re.MULTILINE)
    if match is None or re.search(r"\btorch_npu\.", text) or not usable(match.start()):
        return None
    return _line_of(text, match.start()), text[: match.start()] + text[match.end() :]


def _insert_cuda_only_import(text: str, usable: Callable[[int], bool]) -> tuple[int, str] | None:
    match = re.search(r"^import torch\n", text, re.MULTILINE)
    if match is None or not usable(match.start()):
        return None
    return _line_of(text, match.end()), text[: match.end()] + "import xformers.ops  # noqa: F401\n" + text[
        match.end() :
    ]


def _layernorm_eps(text: str, usable: Callable[[int], bool]) -> tuple[int, str] | None:
    """A LayerNorm's eps: its literal (``eps=1e-5``, ``layer_norm(..., 1e-5)``) to 1e-2, else ``eps=1e-2`` added
    to the first ``nn.LayerNorm(...)``, on a line the case runs."""
    for literal in re.finditer(r"(layer_?norm\w*\([^\n]*?)(\beps\s*=\s*)?\b1e-0?[56]\b", text, re.IGNORECASE):
        start = literal.end() - len(re.search(r"1e-0?[56]$", literal.group(0)).group(0))
        if usable(start):
            return _line_of(text, start), text[:start] + "1e-2" + text[literal.end() :]
    for call in re.finditer(r"\bnn\.LayerNorm\(", text):
        end = _closing(text, call.end() - 1)
        if end is not None and usable(call.start()):
            return _line_of(text, call.start()), text[:end] + ", eps=1e-2" + text[end:]
    return None


def _signature_lines(text: str) -> set[int]:
    """The lines of function signatures (a default there depends on what the callers pass)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    return {
        line
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
        for line in range(node.lineno, node.body[0].lineno)
    }


def _tensor_on_cpu(text: str, usable: Callable[[int], bool]) -> tuple[int, str] | None:
    """``device="npu"`` of a call (a tensor factory, a module) turned into ``device="cpu"``; not a
    signature's default."""
    signatures = _signature_lines(text)
    for match in re.finditer(r'device\s*=\s*"npu(?::0)?"', text):
        line = _line_of(text, match.start())
        if line not in signatures and usable(match.start()):
            return line, text[: match.start()] + 'device="cpu"' + text[match.end() :]
    return None


OPERATORS = (
    Operator("keep_prob", "keep_prob = dropout_p (not 1 - p)", _sub(r"keep_prob\s*=\s*1(?:\.0)?\s*-\s*", "keep_prob=")),
    Operator(
        "scale_dropped",
        "the attention scale argument removed",
        _sub(r"^[ \t]*scale=[^\n]*,[ \t]*\n|,\s*scale=[^,)\n]+(?=[,)])", ""),
    ),
    Operator("scale_1_over_d", "1/d instead of 1/sqrt(d)", _sub(r"\*\*\s*-0\.5", "** -1")),
    Operator("layout", 'the input layout "BSND" called "BNSD" (no transpose)', _sub(r'"BSND"', '"BNSD"')),
    Operator("mask_polarity", "the attention mask inverted", _sub(r"\batten_mask=([^,\n]+)", r"atten_mask=~(\1)")),
    Operator("causal_dropped", "the causal mask line removed", _sub(r"^[ \t]*atten_mask=[^\n]*,[ \t]*\n", "")),
    Operator(
        "autocast_fp16",
        "bfloat16 autocast turned into float16",
        _sub(r"(autocast\([^\n]*dtype=)torch\.bfloat16", r"\1torch.float16"),
        needs="reduced precision",
    ),
    Operator(
        "autocast_removed",
        "autocast disabled",
        _sub(
            r"\b(torch\.autocast|torch\.npu\.amp\.autocast|torch\.amp\.autocast)\(([^()\n]*)\)",
            lambda m: f"{m.group(1)}({m.group(2)}{', ' if m.group(2).strip() else ''}enabled=False)",
        ),
        needs="reduced precision",
    ),
    Operator("grad_scaler_removed", "GradScaler removed (scale, step, update)", _remove_scaler, needs="fp16"),
    Operator("betas", "optimizer betas changed", _optimizer_keyword("betas", lambda old: "(0.8, 0.9)")),
    Operator("eps", "optimizer eps changed", _optimizer_keyword("eps", lambda old: "1e-4")),
    Operator(
        "weight_decay",
        "optimizer weight decay changed",
        _optimizer_keyword("weight_decay", lambda old: "0.3" if old is None else f"({old}) * 3 + 0.05"),
    ),
    Operator(
        "lr",
        "optimizer learning rate halved",
        _optimizer_keyword("lr", lambda old: f"({old}) * 0.5" if old else "5e-4"),
    ),
    Operator(
        "adam_w_mode",
        "AdamW turned into Adam (L2 decay)",
        _sub(r"\b(NpuFusedAdamW|optim\.AdamW)\(", lambda m: m.group(1).replace("AdamW", "Adam") + "("),
    ),
    Operator("layernorm_eps", "a LayerNorm's eps changed", _layernorm_eps),
    Operator(
        "model_on_cpu",
        "the model not moved to the device",
        _sub(r"^(\s*\w+\s*=\s*[\w.]+\([^\n]*\))\.(?:npu\(\)|to\([^()\n]*\))$", r"\1"),
    ),
    Operator("tensor_on_cpu", "a tensor created on the CPU instead of the device", _tensor_on_cpu),
    Operator(
        "import_torch_npu_removed",
        "the run's only `import torch_npu` removed",
        _remove_import_torch_npu,
        needs="the only torch_npu import",
    ),
    Operator(
        "step_removed",
        "the optimizer step removed",
        _sub(r"^(\s*)(?:\w*opt\w*\.step\(\)|\w+\.step\(\w*opt\w*\))[ \t]*$", r"\1pass"),
    ),
    Operator("backward_removed", "backward() removed", _sub(r"^(\s*)[\w.()]+\.backward\(\)[ \t]*$", r"\1pass")),
    Operator("cuda_only_import", "a CUDA-only import (xformers) left in", _insert_cuda_only_import),
)


TRACER = """
import json, runpy, sys, threading
from pathlib import Path
from cuda2npu.validation.strict_host import install_host

out, mode, target, *argv = sys.argv[1:]
tree = Path.cwd().resolve()
prefix = str(tree) + "/"
install_host("migrated", tree)
sys.path.insert(0, str(tree))
lines = {}

def local(frame, event, arg):
    if event == "line":
        lines.setdefault(frame.f_code.co_filename, set()).add(frame.f_lineno)
    return local

def calls(frame, event, arg):
    if frame.f_code.co_filename.startswith(prefix):
        lines.setdefault(frame.f_code.co_filename, set()).add(frame.f_lineno)
        return local
    return None

sys.settrace(calls)
threading.settrace(calls)
try:
    if mode == "run":
        sys.argv = [target, *argv]
        runpy.run_path(str(tree / target), run_name="__main__")
    else:
        import importlib
        from cuda2npu.validation import side
        module, _, function = target.partition(":")
        model, inputs, factory = side._unpack(side._build(getattr(importlib.import_module(module), function)))
        side._projection(side._tensors(side._call(model, inputs))).backward()
        if factory is not None:
            factory(model).step()
except SystemExit:
    pass
except BaseException as exc:
    print(f"the traced run stopped: {type(exc).__name__}: {exc}", file=sys.stderr)
finally:
    sys.settrace(None)
    Path(out).write_text(json.dumps({f[len(prefix):]: sorted(n) for f, n in lines.items() if f.startswith(prefix)}))
"""


def executed_lines(case: validate_real.Case, tree: Path, env: dict, work: Path) -> dict[str, set[int]]:
    """The lines of the migrated tree the case runs (its script, or its entry's build, forward,
    backward and optimizer step), from one traced run on the emulated NPU host."""
    out = work / f"{case.name}.lines.json"
    target = case.run.split() if case.run else [case.entry]
    mode = "run" if case.run else "entry"
    subprocess.run(
        [sys.executable, "-c", TRACER, str(out), mode, *target],
        cwd=tree,
        env=env,
        capture_output=True,
        timeout=validate_real.SIDE_TIMEOUT_S,
    )
    if not out.exists():
        return {}
    return {path: set(lines) for path, lines in json.loads(out.read_text()).items()}


# Places where an operator's edit changes nothing the run computes, although the line runs (read
# and judged by a person; the mutant is applied at the operator's next place instead): path -> the
# line's text -> why.
EQUIVALENT_PLACES = {
    "te_entry.py": {
        'self.projection = torch.nn.Linear(HIDDEN, HIDDEN, bias=True, device="npu")': "the entry moves the "
        "whole block to the device after building it",
    },
    "x_transformers/attend.py": {
        "scale = default(self.scale, q.shape[-1] ** -0.5)": "Attention always passes its scale (dim_head ** -0.5) "
        "to Attend, so the default after it is never used",
    },
}


def _usable(text: str, executed: set[int], path: str = "") -> Callable[[int], bool]:
    """May the character at an offset be edited: code (not a comment or a string over several lines)
    in a statement the case runs (its line, or the first line of the statement holding it), not a
    place of :data:`EQUIVALENT_PLACES`."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    masked: list[tuple[int, int]] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            multiline = token.type == tokenize.STRING and token.start[0] != token.end[0]
            if token.type == tokenize.COMMENT or multiline:
                masked.append((starts[token.start[0] - 1] + token.start[1], starts[token.end[0] - 1] + token.end[1]))
        statements = [node for node in ast.walk(ast.parse(text)) if isinstance(node, ast.stmt)]
    except (SyntaxError, tokenize.TokenError, ValueError):
        return lambda offset: False
    first_line: dict[int, int] = {}
    for node in sorted(statements, key=lambda n: (n.end_lineno or n.lineno) - n.lineno, reverse=True):
        simple = not any(isinstance(getattr(node, f, None), list) for f in ("body", "orelse", "handlers", "finalbody"))
        last = (node.end_lineno or node.lineno) if simple else node.lineno
        for line in range(node.lineno, last + 1):
            first_line[line] = node.lineno

    equivalent = EQUIVALENT_PLACES.get(path, {})
    lines = text.splitlines()

    def usable(offset: int) -> bool:
        if any(start <= offset < end for start, end in masked):
            return False
        line = bisect.bisect_right(starts, offset)
        if lines[line - 1].strip() in equivalent:
            return False
        return line in executed or first_line.get(line) in executed

    return usable


def _candidate_files(case: validate_real.Case, tree: Path) -> list[Path]:
    """The case's script (or entry module) first, then the tree's other Python files in path order."""
    first = case.run.split()[0] if case.run else case.entry.partition(":")[0].replace(".", "/") + ".py"
    files = [p for p in sorted(tree.rglob("*.py")) if "npu_validation" not in p.parts and p.name != "setup.py"]
    return sorted(files, key=lambda p: p.relative_to(tree).as_posix() != first)


def mutate(case: validate_real.Case, operator: Operator, tree: Path, executed: dict[str, set[int]]) -> Edit | None:
    """The operator applied at the first place it changes code that the case runs."""
    importing = [p for p in executed if TORCH_NPU_IMPORT.search((tree / p).read_text())]
    for path in _candidate_files(case, tree):
        relative = path.relative_to(tree).as_posix()
        if relative not in executed:
            continue
        if operator.needs == "the only torch_npu import" and importing != [relative]:
            continue  # another module the run imports registers the device: removing this one changes nothing
        text = path.read_text()
        applied = operator.apply(text, _usable(text, executed[relative], relative))
        if applied is not None:
            line, mutated = applied
            return Edit(relative, line, mutated)
    return None


def _innermost_definition(text: str, line: int) -> tuple[int, int] | None:
    """(first, last) line of the innermost function or class of ``text`` holding ``line``."""
    try:
        nodes = [
            n for n in ast.walk(ast.parse(text)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        ]
    except SyntaxError:
        return None
    holding = [(n.lineno, n.end_lineno) for n in nodes if n.lineno <= line <= (n.end_lineno or n.lineno)]
    return min(holding, key=lambda span: span[1] - span[0], default=None)


SPANS = r"\d+(?:-\d+)?(?:, \d+(?:-\d+)?)*"  # a place's lines: `12`, `3-9`, or an entry's `7, 11-22`


def _place_matches(place: str, edit: Edit) -> bool:
    """The place names the edit: a line within ``NEAR`` of it, a span holding it, or a line of the
    same innermost function (the function to read: an optimizer built a few lines below its groups)."""
    path, _, spans = (place or "").rpartition(":")
    if path != edit.path or not re.fullmatch(SPANS, spans):
        return False
    function = _innermost_definition(edit.text, edit.line)
    for span in spans.split(", "):  # an entry's place: its function, the functions and names it reads
        first, _, last = span.partition("-")
        first, last = int(first), int(last or first)
        if first - NEAR <= edit.line <= last + NEAR:
            return True
        if first == last and function is not None and function == _innermost_definition(edit.text, first):
            return True
    return False


@dataclass
class Verdict:
    case: str
    operator: str
    edit: Edit
    validate_status: str = ""
    validate_place: str = ""
    validate_caught: bool = False
    harness_status: str = ""
    harness_place: str = ""
    harness_caught: bool = False

    @property
    def caught(self) -> bool:
        return self.validate_caught or self.harness_caught

    @property
    def located(self) -> str:
        """yes (a catching tool named the edited line) / file (only its file) / n/a (an entry's
        mismatch, which names tensors) / no."""
        places = [
            place
            for place, caught in (
                (self.validate_place, self.validate_caught),
                (self.harness_place, self.harness_caught),
            )
            if caught
        ]
        if not places:
            return ""
        if any(_place_matches(place, self.edit) for place in places):
            return "yes"
        if any(place == self.edit.path for place in places):
            return "file"
        return "n/a" if "n/a" in places else "no"

    def to_json(self) -> dict:
        return {
            "case": self.case,
            "operator": self.operator,
            "edit": f"{self.edit.path}:{self.edit.line}",
            "validate": {"status": self.validate_status, "place": self.validate_place, "caught": self.validate_caught},
            "harness": {"status": self.harness_status, "place": self.harness_place, "caught": self.harness_caught},
            "caught": self.caught,
            "located": self.located,
        }


def _validate_place(result: dict) -> str:
    first = result.get("first_divergence")
    if first:
        return first.get("where") or ""
    if result.get("location"):
        return result["location"]
    if "tensors" in result:  # an entry: the place it says to look at first, else the error's line
        if result.get("where"):
            return result["where"]
        match = re.search(rf"\(at ([^()]+:{SPANS})\)", " ".join(result.get("problems", [])))
        return match.group(1) if match else "n/a"
    return ""


def _harness(tree: Path, env: dict) -> tuple[str, str, bool]:
    """(status, the first failing site's file, caught) of the generated per-site checks."""
    checks = tree / "npu_validation"
    if not (checks / "test_sites.py").exists():
        return "none", "", False
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(checks)],
            cwd=tree,
            capture_output=True,
            text=True,
            env=env,
            timeout=HARNESS_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return "timeout", "", False
    failed = re.findall(r"FAILED \S+::\S+\[([^\]]+)\]", proc.stdout)
    status = "failed" if proc.returncode == 1 else "passed" if proc.returncode == 0 else f"exit {proc.returncode}"
    place = failed[0].split(":")[0] if failed else ""
    return status, place, proc.returncode == 1


def applies(operator: Operator, baseline: dict) -> bool:
    """The operator's precondition on the case (what its correct migration's validation showed)."""
    modes = " ".join(baseline.get("modes", []))
    if operator.needs == "reduced precision":
        return "policy" in modes
    if operator.needs == "fp16":
        return "policy (fp16)" in modes
    return True


def run_mutant(
    case: validate_real.Case,
    operator: Operator,
    trees: tuple[Path, Path],
    env: dict,
    work: Path,
    executed: dict[str, set[int]],
) -> Verdict | None:
    original, migrated = trees
    tree = work / f"{case.name}--{operator.name}"
    shutil.copytree(migrated, tree)
    edit = mutate(case, operator, tree, executed)
    if edit is None:
        shutil.rmtree(tree)
        return None
    (tree / edit.path).write_text(edit.text)
    # mutants run at once: a script that writes into its tree (word_language_model saves model.pt
    # and loads it back) must not meet another mutant's original run
    own_original = work / f"{case.name}--{operator.name}--original"
    shutil.copytree(original, own_original)
    verdict = Verdict(case.name, operator.name, edit)
    result, _, problem = validate_real.validate_case(
        case, own_original, tree, env, work / f"{case.name}--{operator.name}.json"
    )
    if result is None:
        verdict.validate_status = f"no result ({problem})"
    else:
        verdict.validate_status = result["status"]
        verdict.validate_caught = result["status"] in ("mismatch", "error")
        verdict.validate_place = _validate_place(result)
    verdict.harness_status, verdict.harness_place, verdict.harness_caught = _harness(tree, env)
    shutil.rmtree(tree)
    shutil.rmtree(own_original)
    return verdict


def print_tables(verdicts: list[dict], markdown: bool) -> None:
    """Per operator (what each kind of bug gets), then per mutant; ``verdicts`` in their JSON form."""
    by_operator: dict[str, list[dict]] = {}
    for verdict in verdicts:
        by_operator.setdefault(verdict["operator"], []).append(verdict)
    summary_rows = [
        (
            name,
            next((o.what for o in OPERATORS if o.name == name), ""),
            str(len(group)),
            str(sum(v["caught"] for v in group)),
            str(sum(v["validate"]["caught"] for v in group)),
            str(sum(v["harness"]["caught"] for v in group)),
            str(sum(v["located"] == "yes" for v in group)),
            ", ".join(
                f"{v['case']} ({'missed' if not v['caught'] else v['located']})" for v in group if v["located"] != "yes"
            ),
        )
        for name, group in by_operator.items()
    ]
    header = ("operator", "bug", "mutants", "caught", "by validate", "by the harness", "at the line", "the others")
    caught = sum(v["caught"] for v in verdicts)
    located = {kind: sum(v["located"] == kind for v in verdicts) for kind in ("yes", "file", "n/a", "no")}
    summary = (
        f"{caught} of {len(verdicts)} mutants caught ({100 * caught / max(1, len(verdicts)):.0f} %): "
        f"validate {sum(v['validate']['caught'] for v in verdicts)}, harness "
        f"{sum(v['harness']['caught'] for v in verdicts)}; where the catching tool points: the edited line "
        f"{located['yes']}, its file only {located['file']}, an entry's tensors (no line) {located['n/a']}, "
        f"elsewhere {located['no']}"
    )
    validate_real.print_rows(header, summary_rows, markdown, summary)
    print()
    rows = [
        (
            v["case"],
            v["operator"],
            v["edit"],
            v["validate"]["status"] + (f" @ {v['validate']['place']}" if v["validate"]["place"] else ""),
            v["harness"]["status"] + (f" @ {v['harness']['place']}" if v["harness"]["place"] else ""),
            "yes" if v["caught"] else "NO",
            v["located"],
        )
        for v in verdicts
    ]
    header = ("case", "operator", "edit", "validate", "harness", "caught", "location")
    validate_real.print_rows(header, rows, markdown, "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help="case names of validate_real.py (default: all)")
    parser.add_argument("--operators", help="comma-separated operator names (default: all)")
    parser.add_argument("--list", action="store_true", help="print the operators, then exit")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--json", type=Path, help="write the verdicts here")
    parser.add_argument("--jobs", type=int, default=2, help="mutants checked at once (default: 2)")
    parser.add_argument("--from-json", type=Path, help="print the tables of an earlier run's --json, run nothing")
    args = parser.parse_args(argv)
    operators = {o.name: o for o in OPERATORS}
    if args.from_json:
        print_tables(json.loads(args.from_json.read_text()), args.markdown)
        return 0
    if args.list:
        for operator in OPERATORS:
            print(f"{operator.name:26} {operator.what}")
        return 0
    chosen = [operators[n] for n in args.operators.split(",")] if args.operators else list(OPERATORS)
    by_name = {c.name: c for c in validate_real.CASES}
    cases = [by_name[n] for n in args.cases] or list(validate_real.CASES)
    missing = validate_real.missing_sources(cases)
    if missing:
        print(f"the corpus lacks {len(missing)} source(s); see benchmarks/validate_real.py --list", file=sys.stderr)
        return 2
    verdicts = []
    with tempfile.TemporaryDirectory(prefix="cuda2npu-mutants-") as tmp:
        work = Path(tmp)
        for case in cases:
            prepared = validate_real.prepare_case(case, work)
            if isinstance(prepared, validate_real.Outcome):
                print(f"{case.name}: {prepared.status} ({prepared.note})", file=sys.stderr)
                continue
            original, migrated, env, _ = prepared
            baseline, _, problem = validate_real.validate_case(
                case, original, migrated, env, work / f"{case.name}.json"
            )
            if baseline is None or baseline["status"] != "equivalent":
                status = baseline["status"] if baseline else problem
                print(f"{case.name}: the correct migration is not equivalent ({status}): no mutants", file=sys.stderr)
                continue
            executed = executed_lines(case, migrated, env, work)
            operators = [o for o in chosen if applies(o, baseline)]
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:  # each mutant runs in subprocesses
                found = pool.map(
                    lambda operator: run_mutant(case, operator, (original, migrated), env, work, executed), operators
                )
                for verdict in filter(None, found):
                    verdicts.append(verdict)
                    print(
                        f"{case.name} {verdict.operator}: {'caught' if verdict.caught else 'MISSED'} {verdict.located}",
                        file=sys.stderr,
                    )
    found = [v.to_json() for v in verdicts]
    print_tables(found, args.markdown)
    if args.json:
        args.json.write_text(json.dumps(found, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
