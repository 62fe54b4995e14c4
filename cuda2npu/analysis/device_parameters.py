"""The project's classes and functions with a parameter named like a device (lingua's ``class
GPUMemoryMonitor: def __init__(self, device: str = "cuda:0")``, LatentSync's ``class VideoProcessor:
def __init__(self, resolution: int = 512, device: str = "cpu")``): a project fact
(cuda2npu/project/facts.py), so that ``GPUMemoryMonitor("cuda")`` or ``VideoProcessor(256,
f"cuda:{i}")`` in another file passes "npu" (NPU104). Read from the text of the files that name a
device: module-level ``def`` lines and the ``__init__`` of module-level classes, signatures without
nested parentheses.

Also the keyword names of the project's device parameters (:func:`device_keywords`): DiffSynth's
pipelines take ``rand_device: str = "cpu"`` in ``__call__``, so ``pipe(prompt, rand_device="cuda")``
passes a device wherever ``pipe`` comes from."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

DEFINITION = re.compile(
    rb"^(?:class[ \t]+(?P<cls>\w+)|(?:def[ \t]+(?P<function>\w+)|(?P<indent>[ \t]+)def[ \t]+__init__)[ \t]*\((?P<params>[^()]*)\))",
    re.M,
)
PARAMETER = re.compile(r"^\s*(\w+)\s*(?::[^=]+)?(?:=\s*(.+?))?\s*$", re.S)
DEVICE_PARAM = re.compile(r"(^|_)device$|^device(_|$)")
BRACKETS = {"[": 1, "{": 1, "(": 1, "]": -1, "}": -1, ")": -1}  # `Dict[str, int]`, `size=(1, 2)` hold commas
ANY_DEF = re.compile(rb"^[ \t]*(?:async[ \t]+)?def[ \t]+\w+[ \t]*\(", re.M)
DEVICE_LITERAL = re.compile(r"""[rRuU]?(["'])(cuda|cpu|meta|mps|npu)(:\d+)?\1""")


def device_parameters(texts: Mapping[Path, bytes]) -> tuple[tuple[str, int, str], ...]:
    """``("GPUMemoryMonitor", 0, "device")``: (callable, position of the parameter among the positional
    arguments of a call, its name) for each parameter named like a device, whatever its default
    (``"cuda"``, ``"cpu"``, none): a ``"cuda"`` passed there is a device. A name the project defines
    twice with other device parameters is left out (which one a call means is not known)."""
    found: dict[str, tuple[tuple[str, int, str], ...] | None] = {}
    for text in texts.values():
        if b"device" not in text:
            continue
        owner = None
        for match in DEFINITION.finditer(text):
            cls, function, method_indent, params = match.group("cls", "function", "indent", "params")
            if cls is not None:
                owner = cls.decode()
                continue
            name = function.decode() if function is not None else owner
            if name is None:
                continue
            entries = _device_parameters(name, params.decode("utf-8", "replace"), skip_first=method_indent is not None)
            if entries:
                found[name] = None if name in found and found[name] != entries else entries
    return tuple(sorted(entry for entries in found.values() if entries is not None for entry in entries))


def device_keywords(texts: Mapping[Path, bytes]) -> tuple[str, ...]:
    """The names, other than ``device``, of the parameters named like a device whose default is a
    device string (``rand_device: str = "cpu"``, ``offload_device="cuda"``) in any function or method
    of the project: a ``"cuda"`` passed under that keyword is a device, whichever callable of the
    project receives it (a call through an instance, ``pipe(..., rand_device="cuda")``)."""
    found: set[str] = set()
    for text in texts.values():
        if b"_device" not in text and b"device_" not in text:
            continue
        for match in ANY_DEF.finditer(text):
            for part in _top_level_parts(_signature(text.decode("utf-8", "replace"), match.end())):
                parsed = PARAMETER.match(part.lstrip("*"))
                if not parsed or parsed.group(1) == "device" or not DEVICE_PARAM.search(parsed.group(1)):
                    continue
                if parsed.group(2) is not None and DEVICE_LITERAL.fullmatch(parsed.group(2)):
                    found.add(parsed.group(1))
    return tuple(sorted(found))


def _signature(text: str, start: int) -> str:
    """The parameter list that opens just before ``start``, up to its closing parenthesis, without
    comments (DiffSynth's signatures hold ``# Randomness`` lines)."""
    kept, depth, quote, comment = [], 1, "", False
    for char in text[start : start + 4000]:
        if comment:
            comment = char != "\n"
            continue
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#":
            comment = True
            continue
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return "".join(kept)
        kept.append(char)
    return ""


def _device_parameters(name: str, params: str, skip_first: bool) -> tuple[tuple[str, int, str], ...]:
    """The positional parameters named like a device of the parameter list ``params`` (those before
    a ``*``)."""
    positional = [part for part in _top_level_parts(params) if part.strip() and part.strip() != "/"]
    if skip_first:
        positional = positional[1:]  # self
    found = []
    for position, part in enumerate(positional):
        if part.strip().startswith("*"):
            break
        parsed = PARAMETER.match(part)
        if parsed and DEVICE_PARAM.search(parsed.group(1)):
            found.append((name, position, parsed.group(1)))
    return tuple(found)


def _top_level_parts(params: str) -> list[str]:
    """``params`` split at the commas outside brackets and strings (``sep: str = ","``)."""
    parts, depth, start, quote = [], 0, 0, ""
    for index, char in enumerate(params):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "," and depth == 0:
            parts.append(params[start:index])
            start = index + 1
        else:
            depth += BRACKETS.get(char, 0)
    return [*parts, params[start:]]
