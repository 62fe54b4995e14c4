"""Shell launch scripts (``*.sh``, ``*.bash`` and Slurm's ``*.slurm`` / ``*.sbatch`` batch scripts
found with the Python code): their CUDA and NCCL settings.

- NPU711 ``shell-cuda-env``: a CUDA variable of rules/tables/env_vars.toml (``CUDA_VISIBLE_DEVICES``,
  ...) set, read (``$NAME``, ``${NAME...}``), exported or unset: renamed to the Ascend variable, as
  NPU202 does in Python; a review item where ``CUDA_VISIBLE_DEVICES`` is set to IDs out of order
  (``ASCEND_RT_VISIBLE_DEVICES`` must be ascending) or to none (``""``, ``-1``).
- NPU712 ``shell-nvidia-smi``: ``nvidia-smi`` invoked (``npu-smi info`` on Ascend): manual; not an
  existence check (``command -v nvidia-smi``) nor an NVLink probe that answers "none" without it
  (``$(nvidia-smi topo -m 2>/dev/null | grep -o 'NV[0-9]*' | wc -l)``, an ``if`` test, ``|| ...``),
  nor after a guard that exits where it is missing (``if ! command -v nvidia-smi; then exit 0; fi``).
- NPU713 ``shell-nccl-env``: ``NCCL_*`` / ``TORCH_NCCL_*`` variables: renamed where the table has a
  documented HCCL counterpart (review, as NPU203 does in Python); one with an analog of another
  unit or syntax (``NCCL_BUFFSIZE``, ``nccl_manual``) set or exported is a manual item naming it.
  NCCL's logging and tuning switches (``NCCL_DEBUG``, ``NCCL_P2P_DISABLE``, ``NCCL_IB_DISABLE``, any
  other ``NCCL_*``) ask nothing and are not reported, as in Python.
- NPU714 ``shell-cuda-module``: ``module load cuda/12.4`` (and ``cudnn``, ``nccl``,
  ``cudatoolkit``; Lmod's ``ml``), and ``LD_LIBRARY_PATH`` set to a CUDA path alone
  (``export LD_LIBRARY_PATH=${CUDA_HOME}/lib64``: CANN's libraries drop out of it): manual.
- NPU715 ``shell-docker-gpus`` (``docker run --gpus all``), NPU716 ``shell-slurm-gpus``
  (``#SBATCH --gres=gpu:8``), and the shell side of NPU701 (``pip install flash-attn``), NPU702
  (``conda install pytorch-cuda``), NPU705 (``pip install vllm==0.6.5``) and NPU103
  (``python -c 'import torch; print(torch.cuda.device_count())'``): the programs the script runs,
  read word by word in cuda2npu/filekinds/shell_programs.py. ``#SBATCH`` lines are read too.

A variable is not renamed where the script names its Ascend counterpart already (it handles both),
nor under ``--portable`` (kept, and the Ascend name reported to set as well). Findings left to a
human, and the launched programs' flag findings left to one, get a ``# TODO(cuda2npu): CODE``
line above their command (above the first line of a backslash-continued one);
``--no-markers`` / ``--no-review-markers`` apply. Comment lines are
skipped; ``# noqa: NPU711`` on a line suppresses it. The flags of a launched program (``--tf32``,
``--fp16``, ``--attn_implementation``, the vLLM sync backend, ``ray start --num-gpus``) are
cuda2npu/filekinds/launch_flags.py's (:func:`check_shell_file` runs both).
"""

from __future__ import annotations

import re
from pathlib import Path

from cuda2npu.core.catalogue import rule as rule_doc
from cuda2npu.core.catalogue import table
from cuda2npu.core.diagnostics import Finding, Tier
from cuda2npu.core.markers import MARKER_PREFIX, marker_reason, marker_text
from cuda2npu.core.text_edits import apply_edits
from cuda2npu.families.device.env_vars import hccl_value_problem
from cuda2npu.filekinds.launch_flags import check_launch_flags
from cuda2npu.filekinds.shell_lines import ShellLine, heredoc_openers, sbatch_lines, shell_commands
from cuda2npu.filekinds.shell_programs import Found, check_programs, check_sbatch_line

SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch")
# `NAME=`, `export NAME=`, `export 'NAME=value'` (LongWriter's train scripts, round 33), `env NAME=`
# `NAME=` at a command's start; after a quote too: a command held in a variable (MoA's
# `command="CUDA_VISIBLE_DEVICES=0 python ..."; eval $command`, round 35)
ASSIGNMENT = re.compile(r"(?:^|[\s;&|(`\"'])(?:export\s+[\"']?|env\s+)?([A-Z_][A-Z0-9_]*)=")
READ = re.compile(r"\$\{?([A-Z_][A-Z0-9_]*)(?!\w)")
NAMED = re.compile(
    r"(?:^|[\s;&|(`])(?:unset(?:[ \t]+-v)?|export|readonly|env[ \t]+-u)[ \t]+([A-Z_][A-Z0-9_]*)(?![\w=])"
)
ASSIGNED_VALUE = re.compile(r"""["']?([^\s"';&|()`]*)""")
VALUE = re.compile(r"""(["']?)([^\s"';&|()]*)\1(?=$|[\s;&|)])""")
NVIDIA_SMI = re.compile(r"(?<![\w-])nvidia-smi(?![\w-])")
EXISTENCE_CHECK = re.compile(r"(?:^|[\s;&|(`])(?:command[ \t]+-v|which|type|hash)[ \t]+$")  # `command -v nvidia-smi`
# the script exits where nvidia-smi is missing: `if ! command -v nvidia-smi ...; then ... exit ...; fi`, or
# `command -v nvidia-smi >/dev/null || exit 0` (SpecForge's CI kill script, round 38)
MISSING_TEST = re.compile(r"^\s*if\s+!\s*(?:command[ \t]+-v|which|type|hash)[ \t]+nvidia-smi\b")
MISSING_EXIT = re.compile(r"^\s*(?:command[ \t]+-v|which|type|hash)[ \t]+nvidia-smi\b[^|]*\|\|\s*exit\b")
BLOCK_END = re.compile(r"^\s*fi\b")
# `if command -v nvidia-smi &> /dev/null; then`, `if check_cuda; then` (a function of the script probing it)
NVIDIA_PROBE = re.compile(
    r"(?:command[ \t]+-v|which|type|hash)[ \t]+nvidia-smi\b|(?<![\w-])nvidia-smi[ \t]+(?:-L\b|&>|>)"
)
IF_THEN = re.compile(r"^\s*if\s+(?P<test>.*?)\s*;?\s*(?:then\b.*)?$")
FUNCTION = re.compile(r"^\s*(?:function\s+)?(?P<name>\w+)\s*\(\s*\)\s*\{")
BLOCK_START = re.compile(r"^\s*(?:if|case)\b")
BRANCH = re.compile(r"^\s*(?:else|elif)\b")
EXIT = re.compile(r"(?<![\w-])exit\b")
CONDITION = re.compile(r"(?:^|[;&(]|\bthen|\bdo|\belse)\s*(?:if|elif|while|until)\s+(?:!\s*)?$")
PIPELINE_END = re.compile(r"\|\||&&|[;)`]")
NVLINK_WORDS = re.compile(r"(?<![\w-])(?:topo|nvlink)(?![\w-])")  # nvidia-smi's topology and NVLink queries
NVLINK_PATTERN = re.compile(r"\bgrep\b.*NV")  # a grep for NVLink in its output (`NV[0-9]*`, `NVLink`)
PIPEFAIL = re.compile(r"\bpipefail\b")
ERREXIT = re.compile(r"^[ \t]*set[ \t]+(?:-[A-Za-z]*e|-o[ \t]+errexit)", re.M)  # `set -e`, `set -o errexit`
ERREXIT_SHEBANG = re.compile(r"#!.*[ \t]-[A-Za-z]*e\b")  # `#!/bin/bash -e`
CUDA_MODULE = re.compile(
    r"(?<![\w-])(?:module[ \t]+(?:load|add|try-load|try-add)|ml)(?:[ \t]+[^\s;&|]+)*?"
    r"[ \t]+([\"']?)(?:cuda|cudnn|nccl|cudatoolkit|cuda-toolkit)(?:[/@-][\w.+${}-]*)?\1(?![\w/@.+-])",
    re.IGNORECASE,
)
# `export LD_LIBRARY_PATH=${CUDA_HOME}/lib64`: a library path set to CUDA's alone, not extending itself
CUDA_LIBRARY_PATH = re.compile(
    r"(?:^|[;&|]\s*|\bexport[ \t]+)(?P<name>LD_LIBRARY_PATH)=(?!\S*\$\{?LD_LIBRARY_PATH\b)"
    r"(?=[^\s;&|]*(?:cuda|CUDA))[^\s;&|]*"
)
NVIDIA_SMI_MESSAGE = (
    "`nvidia-smi` is not installed on an Ascend host (a GPU count read from it is 0): use `npu-smi info` "
    "(`npu-smi info -l` lists the NPUs), or count the devices with "
    "`python -c 'import torch, torch_npu; print(torch.npu.device_count())'`"
)


def is_shell_script(path: Path) -> bool:
    return path.suffix in SUFFIXES


def check_shell_file(text: str, path: Path, display: str, options) -> tuple[list[Finding], str]:
    """Every finding of a shell script, and its text with the fixes and markers applied."""
    flags, flag_edits = check_launch_flags(text, path, display, options)
    findings, edits = check_shell_script(text, display, options, flags)
    return sorted([*findings, *flags], key=Finding.sort_key), apply_edits(text, [*flag_edits, *edits])


def check_shell_script(
    text: str,
    display: str,
    options,
    flags: list[Finding] = (),
    settings: str | None = None,
    heredoc_scripts: bool = False,
) -> tuple[list[Finding], list[tuple[int, int, str]]]:
    """The NPU71x findings of a shell script, and the edits of its renames and markers (also the
    markers of ``flags``, the launched programs' flag findings, above their commands).
    ``settings``: the text where the script's environment is set (a Dockerfile's ``ENV`` lines too;
    default: the script's code). ``heredoc_scripts``: the here-documents ``text`` shows are scripts the
    markers may go into (a Dockerfile's ``RUN <<EOF``); else their markers go above the command opening them."""
    env = table("env_vars")
    renames = {
        **{n: ("NPU711", new) for n, new in env["cuda"].items()},
        **{n: ("NPU713", new) for n, new in env["nccl"].items()},
    }
    commands = shell_commands(text, options.ignore_noqa)
    lines = [line for command in commands for line in command]
    code_text = "\n".join(line.code for line in lines)
    findings: list[Finding] = []
    edits: list[tuple[int, int, str]] = []
    marks: list[tuple[str, str]] = []  # the markers of the command at hand: (code, reason)
    openers = {} if heredoc_scripts else heredoc_openers(lines)
    first_of = {line.number: command[0] for command in commands for line in command}
    nvidia_branches = _nvidia_branches(lines)

    opener_codes: dict[int, set[str]] = {}  # the codes marked above each command opening a here-document

    def place_markers(first: ShellLine) -> None:
        """The markers of ``marks`` above ``first``; for a line of a here-document's body (a job script the
        script writes, octopack's `cat <<EOT > $eval_script`), above the command opening it, one per code."""
        if first.number in openers:
            first = first_of.get(openers[first.number], first)
            done = opener_codes.setdefault(first.number, set())
            marks[:] = [(code, reason) for code, reason in marks if code not in done]
            done.update(code for code, _ in marks)
        edits.extend(_markers(text, first, marks))
        marks.clear()

    def report(line: ShellLine, column: int, code: str, message: str, tier=None, edit=None) -> None:
        if line.number in nvidia_branches:
            return  # taken only where nvidia-smi is installed
        doc = rule_doc(code)
        if not options.code_enabled(code, doc.opt_in) or (line.directive and line.directive.matches(code)):
            return
        tier = tier or doc.tier
        fixable = edit is not None and tier <= options.max_tier
        applied = fixable and options.fix
        findings.append(Finding(display, line.number, column, code, doc.name, message, tier, fixable, applied))
        if applied:
            edits.append((line.start + edit[0], line.start + edit[1], edit[2]))
        reason = _marker(findings[-1], options)
        if reason is not None:
            marks.append((code, reason))

    def report_found(found: list[Found]) -> None:
        for item in found:
            edit = (item.start, item.end, item.edit) if item.edit is not None else None
            report(item.line, item.start + 1, item.code, item.message, item.tier, edit)

    for line in sbatch_lines(text, options.ignore_noqa):
        report_found(check_sbatch_line(line))
        place_markers(line)
    stops = bool(ERREXIT.search(code_text) or ERREXIT_SHEBANG.match(text))  # the script stops at a failure
    guard = _exits_without_nvidia_smi(lines)
    for command in commands:
        for line in command:
            for name, start, end, assigned in _variables(line.code):
                if name in env["nccl_logging"]["names"]:
                    continue  # NCCL's own logging: nothing to migrate
                if name in renames:
                    code, new = renames[name]
                    problem = hccl_value_problem(new, _assigned_value(line.code, end)) if assigned else None
                    if problem is not None:
                        report(line, start + 1, code, f"`{name}` → `{new}` {problem}", Tier.MANUAL)
                    elif re.search(rf"(?<!\w){new}(?!\w)", code_text) is None:  # else: it handles both already
                        report(line, start + 1, code, *_rename(line.code, name, new, end, assigned, options))
                elif not assigned:
                    continue  # a read: asks nothing of HCCL
                elif name in env["nccl_manual"]:  # an analog with another unit or syntax, or a hint
                    report(
                        line, start + 1, "NPU713", f"`{name}` configures NCCL: {env['nccl_manual'][name]}", Tier.MANUAL
                    )
            for match in NVIDIA_SMI.finditer(line.code):
                if not (guard is not None and line.number >= guard) and not _harmless_probe(
                    line.code, match, code_text, stops
                ):
                    report(line, match.start() + 1, "NPU712", NVIDIA_SMI_MESSAGE)
            for match in CUDA_LIBRARY_PATH.finditer(line.code):
                message = (
                    f"`{match.group().strip()}` replaces the library path with CUDA's: on an Ascend host that drops "
                    "CANN's libraries (set by its `set_env.sh`), and `import torch_npu` fails (`libhccl.so`, "
                    "`libascendcl.so` not found): drop it, or keep the path it extends (`...:$LD_LIBRARY_PATH`)"
                )
                report(line, match.start("name") + 1, "NPU714", message)
            for match in CUDA_MODULE.finditer(line.code):
                message = (
                    f"`{match.group()}` loads the CUDA toolkit's environment module, which an Ascend host does not "
                    "have (the command fails there, and ends a `set -e` script): set up CANN instead "
                    "(`source /usr/local/Ascend/ascend-toolkit/set_env.sh`, or the cluster's CANN module)"
                )
                report(line, match.start() + 1, "NPU714", message)
        report_found(check_programs(command, options, code_text if settings is None else settings))
        numbers = {line.number for line in command}
        for flag in (f for f in flags if f.line in numbers):
            reason = _marker(flag, options)
            if reason is not None and all(code != flag.code for code, _ in marks):  # one per flag code and command
                marks.append((flag.code, reason))
        place_markers(command[0])
    return findings, edits


def _nvidia_branches(lines: list) -> set[int]:
    """The numbers of the lines in the ``then`` branch of an ``if`` probing for ``nvidia-smi`` (``if command
    -v nvidia-smi ...; then``, or a call of a function of the script that probes it: RAGEN's ``if check_cuda;
    then`` ... ``conda install cuda-toolkit``, round 55) that has an ``else``: an NPU host, without nvidia-smi,
    takes that branch, so what these lines install or run is CUDA's alone and asks nothing of it."""
    probes = set()
    current = None
    for line in lines:
        match = FUNCTION.match(line.code)
        if match is not None:
            current = match.group("name")
        if current is not None and NVIDIA_PROBE.search(line.code):
            probes.add(current)
    found: set[int] = set()
    for index, line in enumerate(lines):
        match = IF_THEN.match(line.code)
        if match is None:
            continue
        test = match.group("test")
        words = test.split()
        if not (NVIDIA_PROBE.search(test) or (words and words[0] in probes)) or test.lstrip().startswith("!"):
            continue
        depth, branch = 0, set()
        for later in lines[index + 1 :]:
            if BLOCK_START.match(later.code):
                depth += 1
            elif BLOCK_END.match(later.code) or re.match(r"^\s*esac\b", later.code):
                if depth == 0:
                    break  # no other branch: an NPU host does nothing here, and the branch's findings say what to add
                depth -= 1
            elif BRANCH.match(later.code) and depth == 0:
                found |= branch  # the `else` is what a host without nvidia-smi runs
                break
            branch.add(later.number)
    return found


def _exits_without_nvidia_smi(lines: list) -> int | None:
    """The number of the line from which the script runs only where nvidia-smi is installed: it exits
    otherwise (``if ! command -v nvidia-smi ...; then ... exit 0; fi``, ``command -v nvidia-smi || exit``).
    On an Ascend host it stops there, so no later ``nvidia-smi`` runs (nor the guard's own messages)."""
    for index, line in enumerate(lines):
        if MISSING_EXIT.search(line.code):
            return line.number
        if MISSING_TEST.search(line.code):
            block = []
            for later in lines[index:]:
                block.append(later)
                if later is not line and BLOCK_END.search(later.code):
                    break
            if any(EXIT.search(later.code) for later in block):
                return line.number
            return None
    return None


def _harmless_probe(code: str, match: re.Match, script: str, stops: bool) -> bool:
    """Whether the ``nvidia-smi`` at ``match`` is a probe whose failure gives the Ascend answer: a
    check that the command exists (``command -v nvidia-smi``), or an NVLink probe (``nvidia-smi
    topo -m | grep -o 'NV[0-9]*' | wc -l``) whose pipeline still succeeds without the program (it
    ends in ``wc``, without ``pipefail``; or ``|| ...`` follows; or it is an ``if``/``while`` test):
    no NVLink, which is right on an Ascend host. Or a command of its own whose output only goes to
    the log (``nvidia-smi``, ``nvidia-smi -L``: ProLong's and DejaVu's Slurm scripts, round 33) in a
    script that does not stop at a failing command (no ``set -e``): "command not found" is all it does."""
    before = code[: match.start()]
    if EXISTENCE_CHECK.search(before):
        return True
    end = PIPELINE_END.search(code, match.end())
    pipeline = code[match.start() : end.start() if end else len(code)]
    commands = [c.strip() for c in pipeline.split("|")]
    alone = not before.strip() and end is None and len(commands) == 1 and not code.rstrip().endswith("\\")
    if alone and not stops:  # a command of its own, on one line
        return True
    nvlink = NVLINK_WORDS.search(commands[0]) or any(NVLINK_PATTERN.search(c) for c in commands[1:])
    if not nvlink:
        return False
    if (end is not None and end.group() == "||") or CONDITION.search(before):
        return True
    return len(commands) > 1 and commands[-1].startswith("wc") and not PIPEFAIL.search(script)


def _variables(code: str) -> list[tuple[str, int, int, bool]]:
    """(name, start, end, assigned) of every variable a line's code sets, reads, exports or unsets."""
    found = [(m.group(1), m.start(1), m.end(1), True) for m in ASSIGNMENT.finditer(code)]
    found += [(m.group(1), m.start(1), m.end(1), False) for pattern in (READ, NAMED) for m in pattern.finditer(code)]
    return sorted(found, key=lambda item: item[1])


def _assigned_value(code: str, end: int) -> str:
    """The value assigned after a variable's name ending at ``end``, up to the next blank or quote
    (``22`` in ``NCCL_IB_TIMEOUT="22"``, and in ``OPTS="NCCL_DEBUG=info NCCL_IB_TIMEOUT=22"``)."""
    return ASSIGNED_VALUE.match(code, end + 1).group(1)


def _rename(code: str, name: str, new: str, end: int, assigned: bool, options):
    """(message, tier, edit) for a variable with an Ascend counterpart (``end``: where its name ends)."""
    if options.portable:
        message = (
            f"`{name}` kept for CUDA hosts (portable output); on Ascend hosts the variable is `{new}`: set it as well"
        )
        return message, Tier.REVIEW, None
    start = end - len(name)
    if name.startswith(("NCCL_", "TORCH_NCCL_")):
        return (
            f"`{name}` configures NCCL → `{new}` (closest HCCL analog; no official mapping table exists)",
            None,
            (start, end, new),
        )
    message = f"`{name}` is ignored on Ascend → `{new}`"
    value = VALUE.match(code, end + 1) if assigned and name == "CUDA_VISIBLE_DEVICES" else None
    ids = value.group(2).split(",") if value is not None else []
    if value is not None and (not value.group(2) or any(i.startswith("-") for i in ids)):
        message += f"; `{name}={value.group()}` hides every CUDA device: check that it hides the NPUs too"
        return message, Tier.REVIEW, (start, end, new)
    numbers = [int(i) for i in ids] if all(i.isdigit() for i in ids) else []
    if numbers != sorted(numbers):
        message += (
            f"; its IDs must be ascending (parsing stops at the first one out of order), and `{value.group(2)}` is not"
        )
        return message, Tier.REVIEW, (start, end, new)
    return message, None, (start, end, new)


def _marker(finding: Finding, options) -> str | None:
    """The reason of a finding's ``# TODO(cuda2npu)`` marker line, as in the Python files (None: no
    marker, and none in ``check``, which writes nothing)."""
    if not options.fix:
        return None
    return marker_reason(finding.code, finding.tier, finding.message, options, finding.applied)


def _markers(text: str, first: ShellLine, marks: list[tuple[str, str]]) -> list[tuple[int, int, str]]:
    """Marker lines above a command's first line, indented like it, but for the codes the comment
    lines just above already carry a marker for."""
    above = text[: first.start].splitlines()
    marked = set()
    while above and above[-1].strip().startswith("#"):
        marked.add(above.pop().strip())
    line = text[first.start :].split("\n", 1)[0]
    indent = re.match(r"[ \t]*", line).group(0)
    newline = "\r\n" if line.endswith("\r") else "\n"
    edits = []
    for code, reason in dict.fromkeys(marks):
        if not any(comment.startswith(f"{MARKER_PREFIX}{code}") for comment in marked):
            edits.append((first.start, first.start, f"{indent}{marker_text(code, reason)}{newline}"))
    return edits
