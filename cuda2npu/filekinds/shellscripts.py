"""Shell launch scripts (``*.sh`` found with the Python code): their CUDA and NCCL settings reported.

- NPU711 ``shell-cuda-env``: ``CUDA_VISIBLE_DEVICES=…`` (and the other CUDA variables of
  rules/tables/env_vars.toml) set or exported; the message names the Ascend variable.
- NPU712 ``shell-nvidia-smi``: ``nvidia-smi`` invoked (``npu-smi info`` on Ascend).
- NPU713 ``shell-nccl-env``: ``NCCL_*`` / ``TORCH_NCCL_*`` variables set or exported; the
  message names the documented HCCL counterpart, or says there is none. NCCL's logging variables
  (``NCCL_DEBUG``, ...: rules/tables/env_vars.toml ``nccl_logging``) ask nothing and are not reported.

They are reported, not rewritten: a launch script is usually changed by hand together with the
cluster set-up. Comment lines are skipped; ``# noqa: NPU711`` on a line suppresses it. The Hugging
Face Trainer flags of a launched program (``--tf32``, ``--fp16``, ``--attn_implementation``), the
vLLM sync-backend flag and ``ray start --num-gpus`` are cuda2npu/filekinds/launch_flags.py's, which
edits the flag it understands (:func:`check_shell_file`).
"""

from __future__ import annotations

import re
from pathlib import Path

from cuda2npu.core.catalogue import rule as rule_doc
from cuda2npu.core.catalogue import table
from cuda2npu.core.diagnostics import Finding
from cuda2npu.filekinds.launch_flags import check_launch_flags
from cuda2npu.filekinds.shell_lines import shell_lines

ASSIGNMENT = re.compile(r"(?:^|[\s;&|(`])(?:export\s+|env\s+)?([A-Z_][A-Z0-9_]*)=")
NVIDIA_SMI = re.compile(r"(?<![\w-])nvidia-smi(?![\w-])")


def is_shell_script(path: Path) -> bool:
    return path.suffix in (".sh", ".bash")


def _variables() -> tuple[dict[str, str], dict[str, str], dict[str, str], list[str]]:
    env = table("env_vars")
    return env["cuda"], env["nccl"], env["nccl_manual"], env["nccl_logging"]["names"]


def check_shell_file(text: str, path: Path, display: str, options) -> tuple[list[Finding], str]:
    """Every finding of a shell script, and its text with the launch-flag fixes applied."""
    flags, new_text = check_launch_flags(text, path, display, options)
    return sorted([*check_shell_script(text, display, options), *flags], key=Finding.sort_key), new_text


def check_shell_script(text: str, display: str, options) -> list[Finding]:
    cuda, nccl, nccl_manual, logging = _variables()
    findings: list[Finding] = []

    def report(code: str, line: int, column: int, message: str) -> None:
        doc = rule_doc(code)
        if options.code_enabled(code, doc.opt_in):
            findings.append(Finding(display, line, column, code, doc.name, message, doc.tier, False))

    for line in shell_lines(text, options.ignore_noqa):
        number, code_part, directive = line.number, line.code, line.directive
        before = len(findings)
        for match in ASSIGNMENT.finditer(code_part):
            name, column = match.group(1), match.start(1) + 1
            if name in logging:
                continue  # NCCL's own logging: nothing to migrate
            if name in cuda:
                report(
                    "NPU711", number, column, f"`{name}` selects CUDA devices/behaviour: on Ascend set `{cuda[name]}`"
                )
            elif name in nccl:
                report("NPU713", number, column, f"`{name}` configures NCCL: on Ascend set `{nccl[name]}` (HCCL)")
            elif name in nccl_manual:
                report("NPU713", number, column, f"`{name}` configures NCCL: {nccl_manual[name]}")
            elif name.startswith(("NCCL_", "TORCH_NCCL_")):
                report(
                    "NPU713",
                    number,
                    column,
                    f"`{name}` configures NCCL, which Ascend does not use (HCCL has no documented counterpart)",
                )
        for match in NVIDIA_SMI.finditer(code_part):
            report(
                "NPU712", number, match.start() + 1, "`nvidia-smi` queries NVIDIA GPUs: use `npu-smi info` on Ascend"
            )
        if directive is not None:
            findings[before:] = [f for f in findings[before:] if not directive.matches(f.code)]
    return findings
