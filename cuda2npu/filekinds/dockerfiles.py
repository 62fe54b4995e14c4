"""Dockerfiles (``Dockerfile``, ``Dockerfile.*``, ``Dockerfile-*``, ``*.Dockerfile``, ``Containerfile``):
the image a stage builds on, and the shell of its ``RUN`` instructions.

- NPU717 ``dockerfile-cuda-image`` (manual): a stage built on a CUDA image (``nvidia/cuda``, NGC's
  ``nvcr.io/nvidia/...``, a tag naming a CUDA build: ``pytorch/pytorch:2.1.0-cuda12.1-cudnn8-devel``,
  ``...:cu121``), also through the default of an ``ARG`` declared before the first ``FROM``
  (``ARG BASE=nvidia/cuda:12.1.0-devel-ubuntu22.04`` / ``FROM ${BASE}``): a marker line above the
  ``FROM``. A stage built on an earlier one (``FROM base AS dev``) is not reported again.
- ``RUN`` instructions (their ``\\`` continuation lines, and the script of a ``RUN <<EOF`` heredoc)
  are shell, read with the checks of a launch script (cuda2npu/filekinds/shellscripts.py
  :func:`check_shell_script`): ``pip install flash-attn`` (NPU701), ``conda install pytorch-cuda``
  (NPU702), ``pip install vllm==0.6.5`` (NPU705), ``nvidia-smi`` (NPU712), ... Exec-form ``RUN ["pip", ...]`` is not read. The other
  instructions are not read either: ``ENV CUDA_VISIBLE_DEVICES=...`` belongs to the image NPU717
  asks to replace.

Markers are ``# TODO(cuda2npu): CODE`` comment lines, a comment in a Dockerfile too. A ``FROM`` line
cannot carry a comment (Docker reads ``#`` there as an argument), so its ``# noqa: NPU717`` may also
stand on a comment line just above it; the ``RUN`` lines take theirs at the end of the line, as in a
shell script. The facts are in docs/reference/launch_scripts.md §3.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from cuda2npu.core.catalogue import rule as rule_doc
from cuda2npu.core.diagnostics import Finding, Tier
from cuda2npu.core.markers import comments_above, marked_above, marker_reason, marker_text
from cuda2npu.core.noqa import suppresses
from cuda2npu.core.text_edits import apply_edits
from cuda2npu.filekinds.shellscripts import check_shell_script

NAMES = ("dockerfile", "containerfile")
# suffixes of the files other file kinds read, and of documents named after a Dockerfile
OTHER_KINDS = frozenset(
    ".py .pyi .ipynb .sh .bash .slurm .sbatch .md .rst .txt .json .yml .yaml .toml .cfg .dockerignore".split()
)
INSTRUCTION = re.compile(r"[ \t]*([A-Za-z]+)(?=\s|$)")
HEREDOC = re.compile(r"<<(-?)([\"']?)([A-Za-z_]\w*)\2")
# a RUN whose whole command is a heredoc script (`RUN <<EOF`, `RUN --mount=... bash -e <<EOF`)
SHELL_HEREDOC = re.compile(
    r"RUN(?:[ \t]+--\S+)*(?:[ \t]+(?:/bin/)?(?:ba)?sh(?:[ \t]+-\w+)*)?[ \t]+<<-?[\"']?\w+[\"']?[ \t]*"
)
VARIABLE = re.compile(r"\$(?:\{(\w+)(?::?-([^}]*))?\}|(\w+))")
WORD = re.compile(r"""(?:"[^"]*"|'[^']*'|\S)+""")
COMMENT = re.compile(r"(?:^|\s)#")
CUDA_TAG = re.compile(r"(?:^|[-_.+])(?:cuda|cu\d{2,3}(?!\d))", re.IGNORECASE)
NGC = ("nvcr.io/nvidia/", "nvidia/cuda")
# serving images built on a CUDA image whatever their tag says (dots.ocr's `from vllm/vllm-openai:v0.9.1`, round 42),
# each with its Ascend image where one is published (docs/reference/vllm.md)
CUDA_BUILT = {"vllm/vllm-openai": "quay.io/ascend/vllm-ascend:<tag>", "lmsysorg/sglang": None}
CANN_IMAGE = "quay.io/ascend/cann:8.3.rc1-910b-ubuntu22.04-py3.11"


@dataclass
class _Instruction:
    keyword: str  # upper case
    number: int  # 1-based line of its first line
    start: int  # offset of its first line
    lines: list[str]  # its lines (comment lines left out), continuation backslashes kept


def is_dockerfile(path: Path) -> bool:
    name = path.name.lower()
    if path.suffix.lower() in OTHER_KINDS:
        return False
    return (
        name in NAMES or name.startswith(tuple(f"{n}{s}" for n in NAMES for s in ".-_")) or name.endswith(".dockerfile")
    )


def check_dockerfile(text: str, display: str, options) -> tuple[list[Finding], str]:
    """Every finding of a Dockerfile, and its text with the fixes and markers applied."""
    instructions, shell = _read(text)
    findings, edits = check_shell_script(shell, display, options, settings=text, heredoc_scripts=True)
    images, image_edits = _base_images(text, instructions, display, options)
    return sorted([*findings, *images], key=Finding.sort_key), apply_edits(text, [*edits, *image_edits])


def _read(text: str) -> tuple[list[_Instruction], str]:
    """The instructions of a Dockerfile, and its shell: the text with every line blanked (offsets
    kept) but the comment lines and the lines of ``RUN`` instructions and of their heredoc scripts."""
    instructions: list[_Instruction] = []
    shell = []
    current: _Instruction | None = None
    heredocs: list[tuple[str, bool, bool]] = []  # the bodies to come: (delimiter, tabs stripped, shell script)
    offset = 0
    for number, raw in enumerate(text.splitlines(keepends=True), start=1):
        line = raw.rstrip("\r\n")
        keep = False
        if heredocs:
            delimiter, tabs, script = heredocs[0]
            if (line.lstrip("\t") if tabs else line) == delimiter:
                heredocs.pop(0)
            else:
                keep = script
        elif line.lstrip().startswith("#"):
            keep = True  # a comment line, also between the lines of an instruction
        elif current is not None or line.strip():
            if current is None:
                keyword = INSTRUCTION.match(line)
                current = _Instruction(keyword.group(1).upper() if keyword else "", number, offset, [])
                instructions.append(current)
            current.lines.append(line)
            keep = current.keyword == "RUN"
            if not line.rstrip().endswith("\\"):
                code = " ".join(part.rstrip().removesuffix("\\") for part in current.lines)
                script = current.keyword == "RUN" and SHELL_HEREDOC.fullmatch(code.strip()) is not None
                heredocs = [(m.group(3), m.group(1) == "-", script) for m in HEREDOC.finditer(code)]
                current = None
        shell.append(raw if keep else re.sub(r"[^\r\n]", " ", raw))
        offset += len(raw)
    return instructions, "".join(shell)


def _base_images(
    text: str, instructions: list[_Instruction], display: str, options
) -> tuple[list[Finding], list[tuple[int, int, str]]]:
    """NPU717 for the stages built on a CUDA image, and their marker lines."""
    code = "NPU717"
    doc = rule_doc(code)
    if not options.code_enabled(code, doc.opt_in):
        return [], []
    arguments: dict[str, str] = {}  # the defaults of the ARGs before the first FROM
    stages: set[str] = set()  # the names of the stages so far
    global_scope = True  # before the first FROM
    findings, edits = [], []
    for instruction in instructions:
        words = [w for line in instruction.lines for w in WORD.findall(line.rstrip().removesuffix("\\"))][1:]
        if instruction.keyword == "ARG" and global_scope:
            for name, equals, default in (word.partition("=") for word in words):
                if equals:
                    arguments[name] = _expand(default.strip("\"'"), arguments)[0]
            continue
        if instruction.keyword != "FROM":
            continue
        global_scope = False
        names = [w for w in words if not w.startswith("--")]
        earlier = not names or names[0].lower() in stages  # built on an earlier stage
        if len(names) >= 3 and names[1].lower() == "as":
            stages.add(names[2].lower())
        if earlier:
            continue
        image, complete = _expand(names[0], arguments)
        if not _cuda_image(image) or _suppressed(text, instruction, code, options):
            continue
        via = f" (`{image}` with its ARG defaults)" if image != names[0] and complete else ""
        ascend = CUDA_BUILT.get(_repository_and_tag(image)[0])
        message = (
            f"`FROM {names[0]}`{via} builds on a CUDA image: CUDA libraries (and a CUDA build of torch, in the "
            "PyTorch images) with neither CANN nor torch_npu, made for NVIDIA's container runtime: "
            + (
                f"vLLM Ascend publishes its own image, `{ascend}` (CANN, torch_npu, vLLM and vllm-ascend)"
                if ascend
                else ""
            )
            + (" or " if ascend else "")
            + f"build on a CANN image (`{CANN_IMAGE}`; Ascend publishes `<cann>-<chip>-<os>-<python>` tags as "
            "`quay.io/ascend/cann` and `ascendai/cann`), then install torch's CPU wheel and its torch_npu there"
        )
        column = instruction.lines[0].find(names[0]) + 1
        findings.append(Finding(display, instruction.number, column, code, doc.name, message, Tier.MANUAL, False))
        reason = marker_reason(code, Tier.MANUAL, message, options, False) if options.fix else None
        if reason is not None and not marked_above(text, instruction.start, code):
            indent = re.match(r"[ \t]*", instruction.lines[0]).group(0)
            newline = "\r\n" if text[instruction.start :].split("\n", 1)[0].endswith("\r") else "\n"
            edits.append((instruction.start, instruction.start, f"{indent}{marker_text(code, reason)}{newline}"))
    return findings, edits


def _expand(word: str, arguments: dict[str, str]) -> tuple[str, bool]:
    """``word`` with its ``$NAME`` / ``${NAME}`` / ``${NAME:-default}`` replaced by the ARG defaults,
    and whether each had one (one without is left empty, as Docker does)."""
    missing = []

    def value(match: re.Match) -> str:
        name = match.group(1) or match.group(3)
        if name in arguments:
            return arguments[name]
        if match.group(2) is None:
            missing.append(name)
        return match.group(2) or ""

    expanded = VARIABLE.sub(value, word)
    return expanded, not missing


def _cuda_image(image: str) -> bool:
    """Whether an image reference names a CUDA image: NGC's, ``nvidia/cuda*``, one built on it
    (:data:`CUDA_BUILT`), or a tag naming CUDA."""
    repository, tag = _repository_and_tag(image)
    return repository.startswith(NGC) or repository in CUDA_BUILT or CUDA_TAG.search(tag) is not None


def _repository_and_tag(image: str) -> tuple[str, str]:
    """``("vllm/vllm-openai", "v0.9.1")`` for ``docker.io/vllm/vllm-openai:v0.9.1``, lower-cased; the tag "" if none."""
    reference = image.lower().removeprefix("docker.io/").split("@", 1)[0]
    repository, _, tag = reference.rpartition(":") if ":" in reference.rsplit("/", 1)[-1] else (reference, "", "")
    return repository, tag


def _suppressed(text: str, instruction: _Instruction, code: str, options) -> bool:
    """Whether a ``# noqa`` on the instruction's first line, or on a comment line just above it, names ``code``."""
    comment = COMMENT.search(instruction.lines[0])
    comments = [instruction.lines[0][comment.end() - 1 :]] if comment else []
    return any(suppresses(c, code, options) for c in [*comments, *comments_above(text, instruction.start)])
