"""Cog's build file (``cog.yaml``, Replicate's): what makes its image CUDA-only, beside the pins
depfiles.py reads from ``python_packages``.

- ``build: gpu: true`` (NPU717, manual): Cog builds the image on one of NVIDIA's CUDA base images (its
  ``cuda`` and torch versions chosen for it) for NVIDIA's container runtime; Cog has no Ascend target.
  A marker line above the key.
- the shell commands of ``build: run:`` (``- pip install -U flash-attn --no-build-isolation``, or
  ``- command: ...``) get a launch script's checks (NPU701, NPU702, NPU712, ...), their markers above the item.

Infinity (round 42), VoiceCraft (round 45) and OmniGen (round 46) ship such files. The file is read
line by line; nothing else is rewritten, so comments, order and formatting stay as they are.
"""

from __future__ import annotations

import re

from cuda2npu.core.catalogue import rule as rule_doc
from cuda2npu.core.diagnostics import Finding, Tier
from cuda2npu.core.markers import marked_above, marker_reason, marker_text
from cuda2npu.core.noqa import suppresses
from cuda2npu.core.text_edits import apply_edits
from cuda2npu.filekinds.shellscripts import check_shell_script

CODE = "NPU717"
GPU = re.compile(r"^(?P<indent>[ \t]+)gpu[ \t]*:[ \t]*(?:true|True|yes)[ \t]*(?P<comment>#.*)?$")
RUN = re.compile(r"^(?P<indent>[ \t]*)run[ \t]*:[ \t]*(?:#.*)?$")
ITEM = re.compile(r"^(?P<indent>[ \t]*)-[ \t]+(?:command[ \t]*:[ \t]*)?(?P<command>.*)$")
MESSAGE = (
    "`gpu: true` makes Cog build this image on an NVIDIA CUDA base image (CUDA and a CUDA build of torch) "
    "for NVIDIA's container runtime, and Cog has no Ascend target: build the NPU image from a Dockerfile on a "
    "CANN image (`quay.io/ascend/cann:<cann>-<chip>-<os>-<python>`) with torch's CPU wheel and torch_npu"
)


def is_cog_file(name: str) -> bool:
    return name == "cog.yaml"


def check_cog_file(text: str, display: str, options) -> tuple[list[Finding], str]:
    """The findings of ``cog.yaml``'s ``gpu:`` and ``run:`` commands, and its text with their markers."""
    findings, edits = check_shell_script(_run_commands(text), display, options)
    doc = rule_doc(CODE)
    if options.code_enabled(CODE, doc.opt_in):
        offset = 0
        for number, line in enumerate(text.splitlines(keepends=True), start=1):
            match = GPU.match(line.rstrip("\r\n"))
            if match is not None and not suppresses(match["comment"], CODE, options):
                findings.append(
                    Finding(display, number, len(match["indent"]) + 1, CODE, doc.name, MESSAGE, Tier.MANUAL, False)
                )
                reason = marker_reason(CODE, Tier.MANUAL, MESSAGE, options, False) if options.fix else None
                if reason is not None and not marked_above(text, offset, CODE):
                    newline = "\r\n" if line.endswith("\r\n") else "\n"
                    edits.append((offset, offset, f"{match['indent']}{marker_text(CODE, reason)}{newline}"))
            offset += len(line)
    return sorted(findings, key=Finding.sort_key), apply_edits(text, edits)


def _run_commands(text: str) -> str:
    """``text`` with every character blanked (offsets and line breaks kept) but the comment lines and the
    commands of the ``run:`` list items (at their own columns), for the shell checks."""
    shown, run_indent = [], None
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        blank = re.sub(r"[^\r\n]", " ", line)
        if body.lstrip().startswith("#"):
            shown.append(line)  # a comment line: the shell checks find their markers there
            continue
        if run_indent is not None:
            item = ITEM.match(body)
            if item is not None and len(item["indent"]) >= run_indent:
                start = item.start("command")
                shown.append(" " * start + body[start:] + line[len(body) :])
                continue
            if body.strip() and (len(body) - len(body.lstrip())) <= run_indent:
                run_indent = None
        match = RUN.match(body)
        if match is not None:
            run_indent = len(match["indent"])
        shown.append(blank)
    return "".join(shown)
