"""Flags of the programs a shell launch script starts: the shell side of NPU901, NPU902, NPU904, NPU906
(rules/transformers.toml), NPU201 (rules/distributed.toml), NPU104 (rules/device.toml) and NPU921
(rules/ray.toml); one code per decision, whatever the file kind.

- ``--attn_implementation flash_attention_2`` (NPU901): ``sdpa`` unless the project's transformers pin
  guarantees the NPU flash-attention path; a manual item when the launched program packs sequences
  (``DataCollatorWithFlattening``, NPU903); a review item, the value kept, where the project's own
  code tests the value on the flag's way (VLM-R1 turns it into InternVL's ``use_flash_attn``:
  :func:`_attention_switch`).
- ``--use_flash_attention_2 True`` / bare (NPU902): a manual item, the flag kept (the program's own code
  may read it: VL-RLHF turns it off for a model without FlashAttention-2); nothing for ``False`` or
  where the transformers pin guarantees the NPU flash-attention path.
- ``--tf32 True`` / bare ``--tf32`` (NPU904): ``False``; ``TrainingArguments`` raises otherwise.
- ``--fp16 True`` / bare ``--fp16`` under the bf16 policy (NPU906): ``--bf16`` (``--fp16_full_eval``:
  ``--bf16_full_eval``, LoftQ's ``train_qa.sh``, round 52); a review item when
  the command's ``--deepspeed`` config has no bf16 block (its ``"auto"`` blocks follow the flags; a
  config named ``--deepspeed ${ds_config}`` is read through the script's plain ``ds_config=x.json``;
  one the script does not name cannot be read),
  when it loads the model in float16 (``--torch_dtype float16``) with no bf16 block to cast it, or
  when the transformers pin predates bf16 on the NPU (4.34.0).
- ``--optim paged_adamw_32bit`` (NPU727): ``adamw_torch``, the same AdamW (other bitsandbytes
  optimizers: manual).
- ``--distributed-backend nccl`` (``--distributed_backend``, ``--dist-backend``, ``--ddp_backend``,
  ``--process-group-backend``; NPU201, as ``backend="nccl"`` in Python): ``hccl``, the backend torch_npu
  registers; these flags only ever name a torch.distributed backend (Megatron-LM, SwissArmyTransformer,
  DeepSpeed's examples, TrainingArguments), also inside an option string (``gpt_options="..."``)
  expanded on a later command line, also with a dotted prefix (``--ddp.dist_backend``); given as a variable the
  script sets to ``nccl`` once (``--ddp.dist_backend $dist_backend``), a review item. A bare ``--backend nccl``
  may be another program's: review item.
  Under ``--portable`` kept, and reported (the Ascend value to pass on NPU hosts).
- ``--vllm_sync_backend nccl`` / ``--vllm.sync_backend nccl`` (NPU201, review): the backend of the
  trainer → vLLM weight-sync group of OpenRLHF-style trainers; whether ``hccl`` is its NPU
  counterpart depends on the program and its release (docs/reference/vllm.md §4), so it is reported.
- ``--device cuda`` / ``--devices cuda:0 cuda:1``, also prefixed (``--vllm_device "cuda:4"``) (NPU104, as
  a device string in Python): ``npu``
  (``npu:0 npu:1``) where the launched program is a project file declaring that option
  (``add_argument("--devices", ...)``), else reported.
- ``ray start --num-gpus N`` (NPU921): ``--resources='{"NPU": N}'``, Ray's resource name of Ascend
  cards, as ``num_gpus=`` in Python; a manual item where the command passes ``--resources`` already
  or the flag is inside a quoted string, nothing where it asks for 0 GPUs or the ``"NPU"`` resource.

``--tf32`` and ``--fp16`` are rewritten only where the script launches a Python file of the project
that parses ``TrainingArguments`` (a regex over that file); a Megatron-LM entry point's
(``pretrain_gpt.py``, Megatron-DeepSpeed's ``finetune_t0.py``, also where the project leaves them out, and a project file importing
``megatron``: forks such as Megatron-DeepSpeed) are Megatron's own and left alone; elsewhere the flag may be another program's and is a review item. Only the understood token is edited, everything else stays byte-identical;
comment lines are skipped and ``# noqa`` on a line suppresses its findings and edits.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from cuda2npu.analysis.ds_config import BF16_NAMES
from cuda2npu.core.catalogue import rule as rule_doc
from cuda2npu.core.diagnostics import Finding, Tier
from cuda2npu.families.transformers.optimizer_names import optim_decision
from cuda2npu.families.transformers.releases import (
    FA2_ON_NPU,
    bf16_flag_rejected,
    fa2_replacement,
    flash_flag_off_advice,
    fp16_under_pin,
    guaranteed,
    names_softcapped_model,
    pin_text,
)
from cuda2npu.filekinds.shell_lines import ShellLine, shell_commands, shell_lines

FLAG = re.compile(
    r"(?<![\w-])--(attn_implementation|attn-implementation|use[_-]flash[_-]attention[_-]2|tf32|fp16(?:_full_eval)?|bf16|optim"
    r"|vllm[_.-]sync[_-]backend|accelerator"
    r"|(?:[a-z]+\.)?(?:dist|distributed|ddp|process[_-]group)[_-]backend|backend|(?:[a-z]+[_-])?devices?)(?![\w-])"
)
# `--device cuda`, `--devices cuda:0 cuda:1` (one or more device words, quoted or not)
# a device index may be a shell variable (kvpress's `--device "cuda:$i"`, one process per GPU)
DEVICE_INDEX = r"(?::(?:\d+|\$\w+|\$\{\w+\}))?"
DEVICE_VALUES = re.compile(
    rf"""(=|[ \t]+)((["']?)cuda{DEVICE_INDEX}\3(?:[ \t]+(["']?)cuda{DEVICE_INDEX}\4)*)(?![^\s;&|)])"""
)
VALUE = re.compile(r"""(=|[ \t]+)(["']?)([\w.-]+)\2""")
VARIABLE_VALUE = re.compile(r"""(?:=|[ \t]+)["']?\$\{?(\w+)\}?["']?""")  # `--optim $optim`, `--optim="${OPTIM}"`
PROGRAM = re.compile(r"""(?<![\w./-])(["']?)([\w./-]+\.py)\1(?![\w-])""")
PARSES_TRAINING_ARGUMENTS = re.compile(r"HfArgumentParser|TrainingArguments")
PACKING = re.compile(r"DataCollatorWithFlattening")
# a framework whose argument parser owns `--fp16` (SwissArmyTransformer's `get_args`: VisualGLM, CogVLM)
# frameworks whose parsers own --fp16: SwissArmyTransformer's `get_args`, fairseq's `options` (OFA, round 65)
IMPORTS_OWN_PARSER = re.compile(r"^[ \t]*(?:from|import)[ \t]+(?:sat|fairseq|fairseq_cli)\b", re.M)
OWN_FP16 = re.compile(r"""add_argument\(\s*["']--fp16["']""")
ASSIGNMENT = re.compile(r"[ \t]*(?:export[ \t]+)?([A-Za-z_]\w*)=")  # `ARGS="..."`, `export ARGS=...`
# Megatron-LM's entry points, bigscience Megatron-DeepSpeed's fine-tuning ones (octopack, round 49), their checkouts
MEGATRON_PROGRAM = re.compile(r"(?:^|/)(?:pretrain_\w+\.py$|finetune_(?:t0|mtf)\.py$|Megatron-(?:LM|DeepSpeed)/)")
IMPORTS_MEGATRON = re.compile(r"^[ \t]*(?:from|import)[ \t]+megatron\b", re.M)
MEGATRON_WORD = re.compile(r"megatron", re.IGNORECASE)  # a script launching Megatron-LM or Megatron-DeepSpeed
IMPORTS_LIGHTNING = re.compile(r"^[ \t]*(?:from|import)[ \t]+(?:pytorch_)?lightning\b", re.M)
LIGHTNING_DEEPSPEED = re.compile(r"(?<![\w-])--strategy(?:=|[ \t]+)[\"']?deepspeed")
# the HF Trainer's `--deepspeed X.json`, DeepSpeed's own `--deepspeed_config X.json` (Megatron-DeepSpeed)
DEEPSPEED = re.compile(r"""(?<![\w-])--deepspeed(?:[_-]config)?(?:=|[ \t]+)(["']?)([\w./-]+\.json)\1""")
# the same flags given a shell variable, `--deepspeed ${ds_config}` / `$ds_config` / `"$ds_config"` (its name)
DEEPSPEED_VARIABLE = re.compile(
    r"""(?<![\w-])--deepspeed(?:[_-]config)?(?:=|[ \t]+)("?)\$(?:\{(\w+)\}|(\w+))\1(?![^\s;&|)])"""
)
CONFIG_PATH = re.compile(r"[\w./-]+\.json")
# `name=value` alone on its line (`export` allowed), the value one literal word, quoted or not
PLAIN_ASSIGNMENT = re.compile(
    r"""[ \t]*(?:export[ \t]+)?([A-Za-z_]\w*)=(?:"([^"$`\\]*)"|'([^']*)'|([^\s"'$`\\;&|()<>]*))[ \t]*;?[ \t]*"""
)
# any other way a line sets a variable: `name=$1`, `DS=x cmd`, `local name=...`, `for name in`, `read name`
OTHER_ASSIGNMENT = re.compile(
    r"""(?:^|[\s;&|(`])(?:(?:export|local|readonly|declare(?:[ \t]+-\w+)*)[ \t]+)?([A-Za-z_]\w*)\+?="""
    r"""|(?<![\w-])(?:for|read(?:[ \t]+-\w+)*)[ \t]+([A-Za-z_]\w*)"""
)
LMDEPLOY = re.compile(
    r"(?<![\w./-])lmdeploy(?![\w-])"
)  # its CLI before the flag: `lmdeploy serve api_server m --device cuda`
# `--trust_remote_code` (bare or with a value): the model's class comes with its checkpoint
TRUST_REMOTE_CODE = re.compile(r"""(?<![\w-])--trust[_-]remote[_-]code(?:(?:=|[ \t]+)(["']?\w+["']?))?(?![\w-])""")
# `--torch_dtype float16`: the launched program loads the model's weights in float16
FLOAT16_WEIGHTS = re.compile(r"""(?<![\w-])--torch[_-]dtype(?:=|[ \t]+)(["']?)float16\1(?![\w.-])""")
TRUE = {"true", "1", "yes", "y", "t"}  # transformers' string_to_bool
NEGATED = {"True": "False", "true": "false", "TRUE": "FALSE", "1": "0", "yes": "no", "Yes": "No", "y": "n", "t": "f"}
FA2 = "flash_attention_2"
# `ray start` and, up to the end of its command (a separator), its --num-gpus and --resources flags
RAY_START = re.compile(
    r"(?P<ray>(?<![\w./-])ray[ \t]+start(?![\w-]))|(?P<end>&&|\|\||[;&|()])"
    r"|(?<![\w-])--(?P<flag>num-gpus|resources)(?![\w-])"
)
SHELL_VARIABLE = re.compile(r"""(=|[ \t]+)(["]?)(\$(?:\w+|\{[^}\s"']+\}))\2(?![^\s;&|)])""")
NPU = "NPU"  # Ray's resource name of Ascend cards (cuda2npu/families/ray/common.py)
SYNC_NOTE = (
    "is the backend of the trainer → vLLM weight-sync group, and NCCL does not run on Ascend; name `hccl` "
    "only where the program hands it to torch.distributed (OpenRLHF releases before its vLLM "
    "PyNcclCommunicator sync of 2025-08), with vllm-ascend serving: Ray's collective groups "
    "(`--vllm_sync_with_ray`) have no HCCL backend (NPU926), and later OpenRLHF syncs through vLLM's "
    "PyNcclCommunicator whatever the flag says (NPU932)"
)


@dataclass
class _Program:
    known: bool  # a project file parsing TrainingArguments
    packs: bool  # it uses DataCollatorWithFlattening
    source: str  # its text (the options it declares)
    megatron: bool = False  # a Megatron-LM entry point: its --fp16/--bf16/--tf32 are Megatron's own
    lightning: bool = False  # it imports Lightning: its --accelerator is a Trainer's (NPU951)
    # its precision flags are its own: it declares `--fp16` itself or imports a framework owning it,
    # without parsing TrainingArguments (:func:`_own_precision`)
    own_precision: bool = False


def check_launch_flags(
    text: str, path: Path, display: str, options
) -> tuple[list[Finding], list[tuple[int, int, str]]]:
    """Findings for the launch flags of a shell script, and the edits of the fixes applied
    (``(start, end, replacement)`` offsets in ``text``)."""
    findings: list[Finding] = []
    edits: list[tuple[int, int, str]] = []
    variables = script_variables(text)
    softcapped = names_softcapped_model([text])
    megatron_script = MEGATRON_WORD.search(text) is not None
    commands = shell_commands(text, options.ignore_noqa)
    for command in commands:
        program = _program(command, path)
        # flags in a variable another command expands: that command's program reads them, and its own
        # arguments (a DeepSpeed config) are not read here, so they are reported, not rewritten
        through_variable = program is None and (program := _program_of_variable(command, commands, path)) is not None
        flags = [(line, match) for line in command for match in FLAG.finditer(line.code)]
        has_bf16 = any(match.group(1) == "bf16" for _, match in flags)
        fp16_kept = _fp16_kept(command, path, variables)
        found_flags = [
            (
                line,
                match,
                _flag(line, match, program, has_bf16, fp16_kept, options, softcapped, megatron_script, variables),
            )
            for line, match in flags
        ]
        found_flags = _attention_kept(found_flags, command, path, text, options)
        if any(LMDEPLOY.search(line.code) for line in command):  # its `--device` names a platform ("ascend"): NPU935's
            found_flags = [(line, match, found) for line, match, found in found_flags if not _names_device(match)]
        for line, match, found in [*found_flags, *_ray_start(command)]:
            if found is None:
                continue
            code, message, tier, edit = found
            if through_variable and edit is not None:
                message, tier, edit = (
                    f"{message} (in a variable the launch command expands: check it there)",
                    Tier.REVIEW,
                    None,
                )
            doc = rule_doc(code)
            if not options.code_enabled(code, doc.opt_in):
                continue
            if line.directive is not None and line.directive.matches(code):
                continue
            fixable = edit is not None
            applied = fixable and options.fix
            column = match.start() + 1
            findings.append(Finding(display, line.number, column, code, doc.name, message, tier, fixable, applied))
            if applied:
                start, end, new = edit
                edits.append((line.start + start, line.start + end, new))
    return findings, edits


def _flag(
    line: ShellLine,
    match: re.Match,
    program: _Program | None,
    has_bf16: bool,
    fp16_kept: str | None,
    options,
    softcapped: bool = False,
    megatron_script: bool = False,
    variables: dict[str, str] | None = None,
):
    """(code, message, tier, edit or None) for one flag, None when nothing is asked (``fp16_kept``: why the
    command's ``--fp16`` cannot become ``--bf16`` alone, :func:`_fp16_kept`; ``softcapped``: the script
    names a Gemma-2 model; ``megatron_script``: it names Megatron; ``variables``: :func:`script_variables`)."""
    name = match.group(1)
    if _names_device(match):  # `--device`, `--vllm_device` (TRL's vLLM generation device)
        return _device(name, line.code, match, program)
    value = _value(line.code, match.end())
    if value is _UNKNOWN:
        if name.endswith("backend") and name != "backend":
            return _backend_through_variable(line.code, match, variables or {})
        return _optim_through_variable(line.code, match, variables or {}) if name == "optim" else None
    word = value.group(3) if value is not None else None
    if name == "bf16":
        return _bf16(word, program, options)
    if name.startswith("attn"):
        return None if word != FA2 else _attention(name, value, program, options, line.code, softcapped)
    if name.startswith("use"):
        return _flash_attention_flag(name, word, program, options)
    if name.startswith("vllm"):
        return None if word != "nccl" else ("NPU201", f"`--{name} nccl` {SYNC_NOTE}", Tier.REVIEW, None)
    if name.endswith("backend"):
        external = program.megatron and not program.source if program is not None else megatron_script
        return None if word != "nccl" else _backend(name, value, options, external)
    if name == "optim":
        return _optim(word, value, program)
    if name == "accelerator":
        return _lightning_accelerator(word, program, line.code)
    if word is not None and word.lower() not in TRUE:
        return None
    if program is not None and program.megatron:
        return None  # Megatron's own precision flags: its fp16 (with its loss scaler) runs on Ascend (MindSpeed)
    if program is not None and program.own_precision and name in ("fp16", "fp16_full_eval", "tf32"):
        return None  # the program's own flag (VisualGLM's SwissArmyTransformer, OpenChatKit): not TrainingArguments'
    known = program is not None and program.known
    if program is None and name.startswith("fp16") and options.project.own_fp16_flag:
        return None  # a program the script does not show, of a project with its own --fp16 and no TrainingArguments
    if name == "tf32":
        message = "`--tf32 True` makes TrainingArguments raise on an NPU host (no TF32 there, every release): False"
        if not known:
            return "NPU904", f"{message}, if this flag is TrainingArguments'", Tier.REVIEW, None
        message += "; the NPU's analogue, HF32 (torch.npu.matmul.allow_hf32), is a different format: enable it yourself"
        if value is None:
            return "NPU904", message, Tier.NUMERIC, (match.end(), match.end(), " False")
        return "NPU904", message, Tier.NUMERIC, (value.start(3), value.end(3), NEGATED.get(word, "False"))
    if options.precision != "bf16":
        return None
    kept = fp16_under_pin(options)
    if kept is not None:  # where the flag's program is not seen to be TrainingArguments' (CLIP-ViL's own
        # `--fp16` for apex.amp), the pin is NPU705's to mark, in the dependency file
        return (
            ("NPU906", f"`--{name}` kept under the bf16 policy: {kept}", Tier.REVIEW, None) if kept and known else None
        )
    bf16 = name.replace("fp16", "bf16", 1)  # `--fp16_full_eval`: `--bf16_full_eval`, TrainingArguments' too
    message = f"`--{name}` under the bf16 policy: `--{bf16}` (BF16 is the NPU's native mixed-precision type)"
    if not known or has_bf16 or fp16_kept:
        if has_bf16:
            reason = "this command also passes --bf16"
        elif fp16_kept:
            reason = fp16_kept
        else:
            reason = "if this flag is TrainingArguments'"
        return "NPU906", f"{message}, {reason}", Tier.REVIEW, None
    return "NPU906", message, Tier.NUMERIC, (match.start(1), match.end(1), bf16)


def _bf16(word: str | None, program: _Program | None, options):
    """NPU906 for ``--bf16 True`` under a transformers pin whose TrainingArguments cannot train in bf16
    on an NPU device (LLM-Shearing's ``sft.sh`` under 4.33.0; before 4.32 it does not know the NPU
    at all), None otherwise."""
    message = bf16_flag_rejected(options, "--bf16")
    if message is None or (word is not None and word.lower() not in TRUE) or (program and program.megatron):
        return None
    if program is None or not program.known:
        message += ", if this flag is TrainingArguments'"
    return "NPU906", message, Tier.REVIEW, None


def _device(name: str, code: str, match: re.Match, program: _Program | None):
    """NPU104 for ``--device cuda`` / ``--devices cuda:0 cuda:1``: ``npu`` (``npu:N``) where the
    launched program is a project file declaring that option (its value is then the program's
    torch device), else reported."""
    values = DEVICE_VALUES.match(code, match.end())
    if values is None:
        return None
    words = values.group(2)
    new = re.sub(r"\bcuda\b", "npu", words)
    message = f"`--{name} {words}` names CUDA devices; on an NPU host they are `npu` (`npu:N`)"
    if program is None or not re.search(rf"""["']--{name}["']""", program.source):
        return "NPU104", f"{message}, if the program hands this flag to torch", Tier.REVIEW, None
    return "NPU104", message, Tier.EXACT, (values.start(2), values.end(2), new)


def _backend(name: str, value: re.Match, options, external_megatron: bool):
    """NPU201 for ``--distributed-backend nccl``-style flags: ``hccl``, the backend torch_npu registers
    (a bare ``--backend`` may be another program's, and ``--portable`` keeps the CUDA value: reported).
    ``external_megatron``: the program is a Megatron entry point outside the project (or one the script, naming
    Megatron, launches from elsewhere), whose
    ``--distributed-backend`` Megatron-LM and Megatron-DeepSpeed restrict to ``choices=['nccl', 'gloo']``,
    so ``hccl`` makes their argparse exit (octopack, round 49): reported; the project's own argparse
    calls are rewritten with the flag."""
    shown = f"`--{name} nccl`"
    if external_megatron and name.replace("_", "-") == "distributed-backend" and not options.portable:
        message = (
            f"{shown}: NCCL does not run on Ascend, but the launched program is not in the project, and Megatron-LM "
            "and Megatron-DeepSpeed declare this flag with `choices=['nccl', 'gloo']` (their argparse exits on "
            "`hccl`): pass `hccl` where the program accepts it (SwissArmyTransformer does), else add `'hccl'` to "
            "the program's choices"
        )
        return "NPU201", message, Tier.REVIEW, None
    if options.portable:
        message = (
            f"{shown} kept for CUDA hosts (portable output): on Ascend hosts pass `hccl` (NCCL does not run there)"
        )
        return "NPU201", message, Tier.REVIEW, None
    if name == "backend":
        message = (
            f"{shown}: NCCL does not run on Ascend; if the program hands this flag to torch.distributed, "
            "pass `hccl` (the backend torch_npu registers)"
        )
        return "NPU201", message, Tier.REVIEW, None
    message = (
        f"{shown} names the torch.distributed backend, and NCCL does not run on Ascend → `hccl` (the backend "
        "torch_npu registers); where the program restricts the flag's choices (Megatron-LM's "
        "`choices=['nccl', 'gloo']`), `hccl` must be one of them (cuda2npu rewrites them in the project's own "
        "argparse calls)"
    )
    return "NPU201", message, Tier.EXACT, (value.start(3), value.end(3), "hccl")


def _backend_through_variable(code: str, match: re.Match, variables: dict[str, str]):
    """NPU201 (review) for ``--ddp.dist_backend $dist_backend`` where the script sets ``dist_backend="nccl"``
    once (InspireMusic's ``run.sh``, round 58): the value to change is at the assignment, which other commands
    may read too."""
    reference = VARIABLE_VALUE.match(code, match.end())
    if reference is None or variables.get(reference.group(1)) != "nccl":
        return None
    return (
        "NPU201",
        f"`--{match.group(1)} {reference.group(0).strip()}` passes `{reference.group(1)}=nccl` as the "
        "torch.distributed backend, and NCCL does not run on Ascend: set it to `hccl` (the backend torch_npu "
        "registers) where the script assigns it",
        Tier.REVIEW,
        None,
    )


def _optim_through_variable(code: str, match: re.Match, variables: dict[str, str]):
    """NPU727 (review) for ``--optim $optim`` where the script sets ``optim=paged_adamw_32bit`` once (KnowLM,
    round 51): the value to change is at the assignment, which other commands may read too."""
    reference = VARIABLE_VALUE.match(code, match.end())
    word = variables.get(reference.group(1)) if reference is not None else None
    decision = (
        optim_decision(word, f"`--optim {reference.group(0).strip()}` (`{reference.group(1)}={word}`)")
        if word
        else None
    )
    if decision is None:
        return None
    new, message = decision
    where = f"; set `{reference.group(1)}={new}` where the script assigns it" if new else ""
    return "NPU727", f"{message}{where}", Tier.REVIEW, None


def _optim(word: str | None, value: re.Match | None, program: _Program | None):
    """NPU727 for ``--optim NAME`` naming a bitsandbytes or apex optimizer: ``adamw_torch`` where
    that is the same AdamW and the flag is TrainingArguments', else reported."""
    decision = optim_decision(word, f"`--optim {word}`") if word else None
    if decision is None:
        return None
    new, message = decision
    if new is None:
        return "NPU727", message, Tier.MANUAL, None
    if program is None or not program.known:
        return "NPU727", f"{message}, if this flag is TrainingArguments'", Tier.REVIEW, None
    return "NPU727", message, Tier.NUMERIC, (value.start(3), value.end(3), new)


def _lightning_accelerator(word: str | None, program: _Program | None, code: str):
    """NPU951 for ``--accelerator gpu`` (or ``auto``) given to a Lightning program of the project
    (RWKV's launch scripts): Lightning has no NPU accelerator, "gpu" raises and "auto" picks the CPU."""
    if program is None or not program.lightning or word not in ("gpu", "cuda", "auto"):
        return None
    effect = "picks the CPU there" if word == "auto" else "raises there (its GPUs are CUDA and MPS)"
    message = f"`--accelerator {word}` reaches a Lightning program, which has no Ascend NPU accelerator: it {effect}"
    if LIGHTNING_DEEPSPEED.search(code):
        message += (
            ", and its DeepSpeed strategy (`--strategy deepspeed...`) raises for any accelerator but CUDA's (and "
            "XPU's in recent releases), one of your own for the NPU included: use another strategy (ddp, fsdp)"
        )
    message += "; give the program an `Accelerator` of its own that runs on torch.npu, or run it with plain torch"
    return "NPU951", message, Tier.MANUAL, None


def _attention(name: str, value: re.Match, program: _Program | None, options, command: str, softcapped: bool):
    """NPU901 for ``--attn_implementation flash_attention_2``: the replacement of :func:`fa2_replacement`
    for the model the command loads (its own code; a Gemma-2 named in the script: ``softcapped``)."""
    if guaranteed(options, FA2_ON_NPU):
        return None
    if program is not None and program.packs:
        return _packing(f"`--{name} {FA2}`", options)
    replacement, why = fa2_replacement(options, _remote_code(command), softcapped)
    message = (
        f"`--{name} {FA2}` raises on an NPU host before transformers {FA2_ON_NPU} ({pin_text(options)}): "
        f"{replacement} ({why}); transformers >= {FA2_ON_NPU} keeps {FA2} on NPU"
    )
    return "NPU901", message, Tier.NUMERIC, (value.start(3), value.end(3), replacement)


def _packing(shown: str, options):
    """NPU903 for a flash-attention flag of a program that packs sequences without padding."""
    message = (
        f"{shown} with padding-free packing (DataCollatorWithFlattening) raises on an NPU host before "
        f"transformers {FA2_ON_NPU} ({pin_text(options)}), and SDPA there ignores the packed position_ids: "
        f"require transformers >= {FA2_ON_NPU} or pad the batches"
    )
    return "NPU903", message, Tier.MANUAL, None


def _flash_attention_flag(name: str, word: str | None, program: _Program | None, options):
    """NPU902 for ``--use_flash_attention_2 True`` (bare too: ``HfArgumentParser`` reads a bare bool
    flag as True), a field of the launched program's arguments class that its code hands to
    ``from_pretrained`` (VL-RLHF's ``TrainingArguments`` subclass), or reads itself: a manual item, the
    flag kept; nothing for ``False`` or under a transformers pin guaranteeing the NPU path."""
    if (word is not None and word.lower() not in TRUE) or guaranteed(options, FA2_ON_NPU):
        return None
    shown = f"`--{name}`" if word is None else f"`--{name} {word}`"
    if program is not None and program.packs:
        return _packing(shown, options)
    advice = flash_flag_off_advice(
        options, f"pass `--{name} False`", 'have the program pass `attn_implementation="{value}"`'
    )
    message = (
        f"{shown}: where the program hands it to transformers' `from_pretrained`, it raises ImportError on an "
        f"NPU host before transformers {FA2_ON_NPU} ({pin_text(options)}), flash-attn being CUDA-only; the "
        f"program's own code may read the flag, so it is not rewritten: {advice}"
    )
    return "NPU902", message, Tier.MANUAL, None


def _names_device(match: re.Match) -> bool:
    """The flag is a device flag (``--device``, ``--vllm_device``, ``--devices``)."""
    return match.group(1).endswith(("device", "devices"))


def _remote_code(code: str) -> bool:
    """The command loads the model's own code: ``--trust_remote_code`` (bare, or set true)."""
    match = TRUST_REMOTE_CODE.search(code)
    return match is not None and (match.group(1) is None or match.group(1).strip("\"'").lower() in TRUE)


def _attention_kept(found_flags: list, command: list[ShellLine], script: Path, text: str, options) -> list:
    """``found_flags`` (``(line, match, finding)``) with the NPU901 rewrites of the command's
    ``--attn_implementation flash_attention_2`` turned into review items where the project's own
    code reads the value as its switch on the flag's way (:func:`_attention_switch`)."""
    if not any(found is not None and found[0] == "NPU901" for _, _, found in found_flags):
        return found_flags
    switch = _attention_switch(command, script, text, options)
    if switch is None:
        return found_flags
    return [
        (line, match, _switch_review(match.group(1), switch, options) if found and found[0] == "NPU901" else found)
        for line, match, found in found_flags
    ]


def _attention_switch(command: list[ShellLine], script: Path, text: str, options) -> str | None:
    """``file:line`` of the project's own test of ``"flash_attention_2"`` on the way of the command's
    flag (``ProjectFacts.attention_switches``, analysis/attention_choices.py): the
    launched project file is that file or imports it (any switch where the script launches no
    project file it names: the way is not known); a switch the project picks by a model's name
    (VLM-R1's ``internvl_module.py``, for ``"internvl" in model_name``) only where the script
    (``text``, its file name) names that model: the flags of its other models reach transformers."""
    switches = options.project.attention_switches
    if not switches:
        return None
    program = _launched_file(command, script)
    named = f"{script.name}\n{text}".lower()
    for reacher, shown, words in switches:
        if program is not None and reacher != str(program):
            continue
        if not words or any(word in named for word in words.split(",")):
            return shown
    return None


def _switch_review(name: str, switch: str, options):
    """NPU901 for ``--attn_implementation flash_attention_2`` read by the project's own switch: kept, reported."""
    replacement, _ = fa2_replacement(options)
    message = (
        f"`--{name} {FA2}` kept: the project's code tests this value itself on the flag's way ({switch}), "
        f"and may turn it into a switch of its own (a remote-code model's `use_flash_attn`, which falls back "
        f"to eager attention without flash-attn) where `{replacement}` would take another branch or reach a "
        f"model class that refuses it; where the value reaches transformers' `attn_implementation` unchanged, "
        f"it raises on an NPU host before transformers {FA2_ON_NPU} ({pin_text(options)}): pass "
        f"`{replacement}` for those runs"
    )
    return "NPU901", message, Tier.REVIEW, None


def _launched_file(command: list[ShellLine], script: Path) -> Path | None:
    """The project file the command launches (the first ``*.py`` it names, :func:`project_file`), or None."""
    for line in command:
        match = PROGRAM.search(line.code)
        if match is not None:
            return project_file(script, match.group(2))
    return None


def _ray_start(command: list[ShellLine]) -> list[tuple[ShellLine, re.Match, tuple | None]]:
    """The ``--num-gpus`` flags of the ``ray start`` commands in a script command, each with its
    finding (a tuple as :func:`_flag` returns, or None)."""
    found = []
    gpus: list[tuple[ShellLine, re.Match]] = []
    resources: list[str] = []  # what follows each --resources flag on its line
    inside = False

    def close() -> None:
        for line, match in gpus:
            found.append((line, match, _num_gpus(line, match, resources)))
        gpus.clear()
        resources.clear()

    for line in command:
        for match in RAY_START.finditer(line.code):
            if match.group("ray") or match.group("end"):
                close()
                inside = bool(match.group("ray"))
            elif inside and match.group("flag") == "num-gpus":
                gpus.append((line, match))
            elif inside:
                resources.append(line.code[match.end() :])
    close()
    return found


def _num_gpus(line: ShellLine, match: re.Match, resources: list[str]):
    """``--num-gpus N`` of ``ray start`` → ``--resources='{"NPU": N}'``; ``resources``: the text after
    each ``--resources`` flag of the same command."""
    value = _value(line.code, match.end())
    if value is _UNKNOWN:
        value = SHELL_VARIABLE.match(line.code, match.end())  # `$N`, `${N}`, or None
    word = value.group(3) if value is not None else None
    if word == "0" or any(NPU in text for text in resources):
        return None  # asks for no GPU, or for the NPUs already
    end = value.end() if value is not None else match.end()
    shown = f"`{line.code[match.start() : end]}`"
    if word is not None and word.startswith("$"):
        new = f'--resources="{{\\"{NPU}\\": {word}}}"'
    elif word is not None and word.isdigit():
        new = f"--resources='{{\"{NPU}\": {word}}}'"
    else:
        new = None
    if new is None or resources or _quoted(line.code, match.start()):
        where = "its `--resources` JSON" if resources else "a `--resources` JSON"
        message = (
            f'{shown} registers GPUs, which an Ascend host has none of: ask for `{{"{NPU}": n}}` in {where} '
            "by hand (Ray's resource name of Ascend cards; `ray start` counts them by itself without it)"
        )
        return "NPU921", message, Tier.MANUAL, None
    message = (
        f'{shown} → `{new}` (Ray schedules Ascend cards as the "{NPU}" resource; `ray start` counts them '
        "by itself without it)"
    )
    return "NPU921", message, Tier.EXACT, (match.start(), end, new)


def _quoted(code: str, end: int) -> bool:
    """Whether ``code[end]`` is inside a quoted string (``ssh host "ray start ..."``)."""
    quote = None
    escaped = False
    for char in code[:end]:
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote is None and char in "\"'":
            quote = char
        elif char == quote:
            quote = None
    return quote is not None


_UNKNOWN = object()


def _value(code: str, end: int):
    """The value word after a flag (a match, group 3), None for a bare flag, _UNKNOWN for a value not
    spelled out (``--tf32 $TF32``)."""
    rest = code[end:].lstrip(" \t")
    if not code[end:].startswith("=") and (not rest or rest[0] in "-\\;|&)"):
        return None
    value = VALUE.match(code, end)
    return value if value is not None and not value.group(3).startswith("-") else _UNKNOWN


def _program(command: list[ShellLine], script: Path) -> _Program | None:
    """The Python file the command launches, when it is a file of the project next to the script or
    above it; a Megatron-LM entry point (``pretrain_gpt.py``, ``Megatron-LM/...``) is known not to
    parse TrainingArguments even where the project does not carry it (a submodule left out), and a
    project file importing ``megatron`` (a fork such as Megatron-DeepSpeed or gpt-neox) is one."""
    for line in command:
        match = PROGRAM.search(line.code)
        if match is None:
            continue
        source = _project_text(script, match.group(2))
        if source is None and MEGATRON_PROGRAM.search(match.group(2)):
            return _Program(False, False, "", megatron=True)
        if source is None:
            return None
        known = PARSES_TRAINING_ARGUMENTS.search(source) is not None
        megatron = not known and IMPORTS_MEGATRON.search(source) is not None
        lightning = IMPORTS_LIGHTNING.search(source) is not None
        own = not known and _own_precision(source)
        return _Program(
            known, PACKING.search(source) is not None, source, megatron=megatron, lightning=lightning, own_precision=own
        )
    return None


def _program_of_variable(command: list[ShellLine], commands: list[list[ShellLine]], script: Path) -> _Program | None:
    """The program a command launches with the variable ``command`` assigns (Megatron's
    ``BERT_ARGS="... --fp16"`` … ``torchrun pretrain_bert.py $BERT_ARGS``): the flags are its."""
    assigned = ASSIGNMENT.match(command[0].code)
    if assigned is None:
        return None
    use = re.compile(rf"\$\{{?{assigned.group(1)}\b")
    launches = (other for other in commands if other is not command and any(use.search(line.code) for line in other))
    return next((program for other in launches if (program := _program(other, script)) is not None), None)


def _own_precision(source: str) -> bool:
    """A launched program whose ``--fp16``/``--tf32`` are not TrainingArguments': it declares the option
    with its own ``add_argument`` (OpenChatKit's ``dist_clm_train.py``), or imports a framework whose
    parser owns it (SwissArmyTransformer's ``get_args``: VisualGLM's finetuning; fairseq's ``options``: OFA)."""
    return OWN_FP16.search(source) is not None or IMPORTS_OWN_PARSER.search(source) is not None


def _fp16_kept(command: list[ShellLine], script: Path, variables: dict[str, str]) -> str | None:
    """Why the command's ``--fp16`` cannot become ``--bf16`` alone (None: nothing says so): its
    DeepSpeed config has no bf16 block (the HF Trainer fills the ``"auto"`` fp16/bf16 blocks from the
    flags, and a bf16 flag with no bf16 block there trains in fp32), or it loads the model in float16
    (``--torch_dtype float16``), which the flag does not change unless a bf16 block makes DeepSpeed
    cast the model to bf16."""
    configs = _deepspeed_configs(command, script, variables)
    without_bf16 = [shown for shown, config in configs if not _has_bf16_block(config)]
    reasons = []
    if without_bf16:
        reasons.append(
            f'with a `"bf16": {{"enabled": "auto"}}` block in {without_bf16[0]}, which has none (or cannot be '
            "read): the Trainer turns its fp16 block off and, with no bf16 block, DeepSpeed trains in fp32"
        )
    if len(without_bf16) == len(configs) and any(FLOAT16_WEIGHTS.search(line.code) for line in command):
        reasons.append(
            "with `--torch_dtype bfloat16` in place of this command's `--torch_dtype float16`: `--bf16` alone "
            "trains the float16 weights it loads with no loss scaling"
        )
    return "; and ".join(reasons) or None


def _has_bf16_block(config: object) -> bool:
    """Whether a parsed DeepSpeed config has a ``"bf16"`` (``"bfloat16"``) block."""
    return isinstance(config, dict) and any(name in config for name in BF16_NAMES)


def _deepspeed_configs(command: list[ShellLine], script: Path, variables: dict[str, str]) -> list[tuple[str, object]]:
    """(how it is shown, its parsed JSON or None where it cannot be read) of each ``--deepspeed``
    config the command passes; one named through a shell variable (``variables``) is read where the
    project has that file, and cannot be read where the script does not say which file it is
    (FastChat's ``--deepspeed $PATH_TO_DEEPSPEED_CONFIG``, round 36: a config nothing shows may have no
    bf16 block)."""
    found = []
    for line in command:
        named = deepspeed_config_name(line.code, variables)
        if named is None:
            variable = DEEPSPEED_VARIABLE.search(line.code)
            if variable is not None:
                found.append((f"`${variable.group(2) or variable.group(3)}`", None))
            continue
        relative, shown = named
        found.append((shown, json_config(script, relative)))
    return found


def deepspeed_config_name(code: str, variables: dict[str, str]) -> tuple[str, str] | None:
    """The config path a line passes as ``--deepspeed`` (``--deepspeed_config``) and how it is shown:
    a literal path as itself, a shell variable (``--deepspeed ${ds_config}``) through its plain
    assignment in the script (:func:`script_variables`) as ``path (`${ds_config}`)``; None for none
    or a variable whose value is not known to be a JSON path."""
    literal = DEEPSPEED.search(code)
    if literal is not None:
        return literal.group(2), literal.group(2)
    variable = DEEPSPEED_VARIABLE.search(code)
    if variable is None:
        return None
    name = variable.group(2) or variable.group(3)
    value = variables.get(name)
    if value is None or CONFIG_PATH.fullmatch(value) is None:
        return None
    return value, f"{value} (`${{{name}}}`)"


def script_variables(text: str) -> dict[str, str]:
    """The shell variables a script sets to one literal word, each by plain assignments alone on their
    lines (``ds_config=configs/ds.json``, ``export DS="ds.json"``) that all give the same value; a
    variable also set another way (``DS=$1``, ``DS=${DS:-x}``, a prefix ``DS=x cmd``, ``for DS in``) is
    left out."""
    values: dict[str, set[str | None]] = {}
    for line in shell_lines(text, ignore_noqa=True):
        plain = PLAIN_ASSIGNMENT.fullmatch(line.code)
        if plain is not None:
            value = next(group for group in plain.groups()[1:] if group is not None)
            values.setdefault(plain.group(1), set()).add(value)
            continue
        for match in OTHER_ASSIGNMENT.finditer(line.code):
            values.setdefault(match.group(1) or match.group(2), set()).add(None)
    return {name: found.pop() for name, found in values.items() if len(found) == 1 and None not in found}


def project_file(near: Path, relative: str) -> Path | None:
    """The file ``relative`` names, looked up next to the file ``near`` (a script, a config naming
    it) and up to three directories above."""
    for directory in [near.parent, *near.parent.parents][:4]:
        if (directory / relative).is_file():
            return (directory / relative).resolve()
    return None


def _project_text(near: Path, relative: str) -> str | None:
    """The text of the file ``relative`` names (:func:`project_file`), None where there is none."""
    path = project_file(near, relative)
    try:
        return path.read_text(encoding="utf-8", errors="replace") if path is not None else None
    except OSError:
        return None


def json_config(near: Path, relative: str) -> object:
    """The parsed JSON of the file ``relative`` names (:func:`project_file`); None where there is
    none or it is not JSON."""
    text = _project_text(near, relative)
    try:
        return json.loads(text) if text is not None else None
    except ValueError:
        return None
