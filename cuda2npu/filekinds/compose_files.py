"""Docker Compose files (``docker-compose.yml``, ``compose.yaml``, ``docker-compose.gpu.yml``, or any YAML
file whose top-level ``services:`` name an ``image:`` or ``build:``): the
NVIDIA GPUs a service asks for (NPU715, manual, as ``docker run --gpus`` in a launch script).

- ``deploy.resources.reservations.devices`` entries with ``driver: nvidia`` (also through a variable's
  default, ``${GPU_DRIVER-nvidia}``) or ``capabilities`` listing ``gpu`` (Compose's GPU support), and
  ``runtime: nvidia`` (the NVIDIA container runtime), and a service's ``gpus:`` (``gpus: all``): docker
  refuses to start the service on a host without the NVIDIA Container Toolkit, which an Ascend host
  does not have. A marker line above the entry's first such key; the entry's other keys are the same
  request and are not reported again.

The file is read line by line (a YAML mapping key at any indentation); nothing is rewritten, so
comments, order and formatting stay as they are. A ``# noqa: NPU715`` at the end of the line hides
it. The facts are in docs/reference/launch_scripts.md §1.
"""

from __future__ import annotations

import re
from pathlib import Path

from cuda2npu.core.catalogue import rule as rule_doc
from cuda2npu.core.diagnostics import Finding, Tier
from cuda2npu.core.markers import marked_above, marker_reason, marker_text
from cuda2npu.core.noqa import suppresses
from cuda2npu.core.text_edits import apply_edits

CODE = "NPU715"
NAME = re.compile(r"(?:docker-)?compose(?:[.-][\w.-]+)?\.ya?ml", re.IGNORECASE)
# `driver: nvidia`, `- driver: ${GPU_DRIVER-nvidia}`, `runtime: nvidia`, `capabilities: [gpu]`, and a
# block list `capabilities:` whose items follow (`- gpu`)
KEY = re.compile(
    r"^(?P<indent>[ \t]*)(?:-[ \t]+)?(?P<key>driver|runtime|capabilities|gpus)[ \t]*:[ \t]*(?P<value>[^#]*?)[ \t]*(?P<comment>#.*)?$"
)
NVIDIA = re.compile(r"\bnvidia\b")
GPU_ITEM = re.compile(r"""^[ \t]*-[ \t]*["']?gpu["']?[ \t]*(?:#.*)?$""")
FLOW_GPU = re.compile(r"""\[[^\]]*\bgpu\b[^\]]*\]""")
ENTRY_START = re.compile(r"^[ \t]*-[ \t]")
SERVICES = re.compile(r"^services[ \t]*:[ \t]*(?:#.*)?$", re.M)
SERVICE_KEY = re.compile(r"^[ \t]+(?:image|build)[ \t]*:", re.M)
COMPOSE_PEEK = 1 << 16  # the bytes read to tell a Compose file named otherwise


def is_compose_file(path: Path) -> bool:
    return NAME.fullmatch(path.name) is not None


def reads_as_compose_file(path: Path) -> bool:
    """A YAML file named otherwise whose text is a Compose file's: a top-level ``services:`` mapping
    whose services name an ``image:`` or a ``build:`` (AgentTuning's ``docker/agentlm-70b.yml``)."""
    if path.suffix.lower() not in (".yml", ".yaml"):
        return False
    try:
        with path.open("rb") as handle:
            head = handle.read(COMPOSE_PEEK).decode("utf-8", "replace")
    except OSError:
        return False
    return SERVICES.search(head) is not None and SERVICE_KEY.search(head) is not None


def check_compose_file(text: str, display: str, options) -> tuple[list[Finding], str]:
    """Every finding of a Compose file, and its text with the markers added."""
    doc = rule_doc(CODE)
    if not options.code_enabled(CODE, doc.opt_in):
        return [], text
    findings, edits = [], []
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    entry = None  # the line where the list entry holding the current line starts
    for number, line in enumerate(lines, start=1):
        entry = number if ENTRY_START.match(line) else entry
        match = KEY.match(line.rstrip("\r\n"))
        if match is None or not _asks_for_gpus(match, lines[number:]) or suppresses(match["comment"], CODE, options):
            continue
        if match.group("key") != "runtime" and entry is not None and any(f.line >= entry for f in findings):
            continue  # the same device entry: one request
        message = _message(match.group("key"))
        findings.append(
            Finding(display, number, len(match.group("indent")) + 1, CODE, doc.name, message, Tier.MANUAL, False)
        )
        reason = marker_reason(CODE, Tier.MANUAL, message, options, False) if options.fix else None
        if reason is not None and not marked_above(text, offsets[number - 1], CODE):
            newline = "\r\n" if line.endswith("\r\n") else "\n"
            edits.append(
                (
                    offsets[number - 1],
                    offsets[number - 1],
                    f"{match.group('indent')}{marker_text(CODE, reason)}{newline}",
                )
            )
    return findings, apply_edits(text, edits)


def _asks_for_gpus(match: re.Match, following: list[str]) -> bool:
    """``driver``/``runtime`` naming nvidia; ``capabilities`` listing ``gpu`` (a flow list, or the
    block list's items on the lines after it); a service's ``gpus:`` (``all``, a count, or device requests:
    Compose's short form of the GPU reservation, SenseVoice's ``gpus: all``, round 44)."""
    value = match.group("value")
    if match.group("key") == "gpus":
        return bool(value) or bool(following and ENTRY_START.match(following[0]))
    if match.group("key") != "capabilities":
        return NVIDIA.search(value) is not None
    if value:
        return FLOW_GPU.search(value) is not None
    items = []
    for line in following:
        if not ENTRY_START.match(line):
            break
        items.append(line)
    return any(GPU_ITEM.match(item.rstrip("\r\n")) for item in items)


def _message(key: str) -> str:
    asked = (
        "the NVIDIA container runtime"
        if key == "runtime"
        else "NVIDIA GPUs (Compose's `gpus`)"
        if key == "gpus"
        else "NVIDIA GPUs (Compose's `deploy` device reservation)"
    )
    return (
        f"the service asks for {asked}: docker refuses to start it on an Ascend host, which has no NVIDIA "
        "Container Toolkit; give the container the NPUs as devices (`/dev/davinciN`, `/dev/davinci_manager`, "
        "`/dev/devmm_svm`, `/dev/hisi_hdc`) with the host's driver mounted, or use Ascend Docker Runtime "
        "(`ASCEND_VISIBLE_DEVICES`), and an image with CANN and torch_npu"
    )
