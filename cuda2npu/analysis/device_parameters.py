"""The project's classes and functions with a device parameter (lingua's ``class
GPUMemoryMonitor: def __init__(self, device: str = "cuda:0")``, LatentSync's ``class VideoProcessor:
def __init__(self, resolution: int = 512, device: str = "cpu")``): a project fact
(cuda2npu/project/facts.py), so that ``GPUMemoryMonitor("cuda")`` or ``VideoProcessor(256,
f"cuda:{i}")`` in another file passes "npu" (NPU104). Read from the text of the files that name a
device or call ``.to(``: module-level ``def`` lines and the ``__init__`` of module-level classes, with
their bodies (the lines indented below them).

Also the keyword names of the project's device parameters (:func:`device_keywords`): DiffSynth's
pipelines take ``rand_device: str = "cpu"`` in ``__call__``, so ``pipe(prompt, rand_device="cuda")``
passes a device wherever ``pipe`` comes from.

A parameter counts by what the function's body does with it (:func:`_uses_as_device`): one named
like a device unless every read of it is a label (a key, a formatted field, a ``print`` argument:
``results[device] = ms``), one otherwise named when the body passes it in a device position
(``torch.as_tensor(ids, device=dev)``, ``.to(dev)``, ``torch.device(dev)``) and tests it against no
string."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path

DEFINITION = re.compile(  # the parameter list follows (`_signature`: nested brackets, comments)
    r"^(?:class[ \t]+(?P<cls>\w+)|(?:async[ \t]+)?def[ \t]+(?P<function>\w+)[ \t]*\("
    r"|(?P<indent>[ \t]+)(?:async[ \t]+)?def[ \t]+__init__[ \t]*\("
    r"|(?P<cm_indent>[ \t]+)@classmethod[ \t]*\r?\n(?P=cm_indent)(?:async[ \t]+)?def[ \t]+(?P<method>\w+)[ \t]*\()",
    re.M,
)
PARAMETER = re.compile(r"^\s*(\w+)\s*(?::[^=]+)?(?:=\s*(.+?))?\s*$", re.S)
DEVICE_PARAM = re.compile(r"(^|_)device$|^device(_|$)")
BRACKETS = {"[": 1, "{": 1, "(": 1, "]": -1, "}": -1, ")": -1}  # `Dict[str, int]`, `size=(1, 2)` hold commas
PLAIN_SIGNATURE = re.compile(r"[^()\[\]{}#'\"]*\)")  # no brackets, strings or comments: the common case
ANY_DEF = re.compile(rb"^[ \t]*(?:async[ \t]+)?def[ \t]+\w+[ \t]*\(", re.M)
DEVICE_LITERAL = re.compile(r"""[rRuU]?(["'])(cuda|cpu|meta|mps|npu)(:\d+)?\1""")
# a device default: a device string, or one given to `torch.device` (`torch.device("cpu")`)
DEVICE_DEFAULT = re.compile(r"""(torch\.device\([ \t]*)?[rRuU]?(["'])(cuda|cpu|meta|mps|npu)(:\d+)?\2(?(1)[ \t]*\))""")
# an annotated field of a class body (a dataclass's `orig_device: torch.device | str = torch.device("cpu")`)
ANNOTATED_FIELD = re.compile(rb"^[ \t]+(\w+)[ \t]*:[^=\n]*=[ \t]*([^\n#]*?)[ \t]*(?:#[^\n]*)?$", re.M)
# a name passed in a device position of the body: `device=dev`, `map_location=dev`, `.to(dev)`, `torch.device(dev)`
DEVICE_POSITION = re.compile(
    r"(?:\b(?:device|map_location|device_type)[ \t]*=[ \t]*|\.to\([ \t]*|\bdevice\([ \t]*)(\w+)(?=[ \t]*[,)])"
)
DOCSTRING = re.compile(r"""(?<![fF\w])[rRuU]?(\"\"\"|\'\'\')[\s\S]*?\1|^[ \t]*#[^\n]*""", re.M)  # f-strings stay
# `backend == "cuda"`, `"cuda" != backend`, `backend in ("cuda", "cpu")`: a name tested against strings
COMPARED_WITH_STRING = r"""(?<![\w.]){name}[ \t]*(?:[!=]=|(?:not[ \t]+)?in\b)[ \t]*[\[({{]?[ \t]*[rRuU]?["']|["'][ \t]*[!=]=[ \t]*{name}\b"""
LOGGING_CALL = re.compile(r"[ \t]*(?:print|warnings\.warn|(?:\w+\.)*(?:logger|logging|log|LOGGER|LOG)\.\w+)\(")


def device_parameters(texts: Mapping[Path, bytes]) -> tuple[tuple[str, int, str], ...]:
    """``("GPUMemoryMonitor", 0, "device")``: (callable, position of the parameter among the positional
    arguments of a call, its name) for each parameter its module-level function, class's
    ``__init__`` or classmethod (``"LoRAModel.from_lora_tensors"``: vLLM's, called with a positional
    ``"cuda"`` in its tests, round 31) uses as a device (:func:`_uses_as_device`), whatever its default (``"cuda"``,
    ``"cpu"``, none): a ``"cuda"`` passed there is a device (ToolBench's ``generate_stream(model,
    tokenizer, params, device, context_len=8192)``). A name the project defines twice with other
    device parameters is left out (which one a call means is not known)."""
    found: dict[str, tuple[tuple[str, int, str], ...] | None] = {}
    for raw in texts.values():
        if b"device" not in raw and b".to(" not in raw:
            continue
        text, owner = raw.decode("utf-8", "replace"), None
        for match in DEFINITION.finditer(text):
            cls, function, method_indent, method = match.group("cls", "function", "indent", "method")
            if cls is not None:
                owner = cls
                continue
            if method is not None:  # a classmethod, called on its class: `LoRAModel.from_lora_tensors(...)`
                name, method_indent = (f"{owner}.{method}" if owner else None), match.group("cm_indent")
            else:
                name = function if function is not None else owner
            if name is None:
                continue
            params, end = _signature_and_end(text, match.end())
            body = _body(text, end, method_indent or "")
            entries = _device_parameters(name, params, body, skip_first=method_indent is not None)
            if entries:
                found[name] = None if name in found and found[name] != entries else entries
    return tuple(sorted(entry for entries in found.values() if entries is not None for entry in entries))


@functools.lru_cache(maxsize=4)
def by_callable(entries: tuple[tuple[str, int, str], ...]) -> dict[str, tuple[tuple[int, str], ...]]:
    """:func:`device_parameters`' entries as callable → ((position, parameter), ...), once per run."""
    grouped: dict[str, tuple[tuple[int, str], ...]] = {}
    for name, position, param in entries:
        grouped[name] = (*grouped.get(name, ()), (position, param))
    return grouped


def device_keywords(texts: Mapping[Path, bytes]) -> tuple[str, ...]:
    """The names, other than ``device``, of the parameters named like a device whose default is a
    device (``rand_device: str = "cpu"``, ``offload_device="cuda"``, ``torch.device("cpu")``) in any
    function or method of the project, and of the class fields so named and set (lmquant's dataclass
    ``TensorCache``: ``orig_device: torch.device | str = torch.device("cpu")``): a ``"cuda"`` passed
    under that keyword is a device, whichever callable of the project receives it (a call through an
    instance, ``pipe(..., rand_device="cuda")``; ``TensorCache(..., orig_device="cuda")``)."""
    found: set[str] = set()
    for text in texts.values():
        if b"_device" not in text and b"device_" not in text:
            continue
        for match in ANY_DEF.finditer(text):
            for part in _top_level_parts(_signature(text.decode("utf-8", "replace"), match.end())):
                parsed = PARAMETER.match(part.lstrip("*"))
                if not parsed or parsed.group(1) == "device" or not DEVICE_PARAM.search(parsed.group(1)):
                    continue
                if parsed.group(2) is not None and DEVICE_DEFAULT.fullmatch(parsed.group(2)):
                    found.add(parsed.group(1))
        for match in ANNOTATED_FIELD.finditer(text):
            name, default = match.group(1).decode(), match.group(2).decode("utf-8", "replace")
            if name != "device" and DEVICE_PARAM.search(name) and DEVICE_DEFAULT.fullmatch(default):
                found.add(name)
    return tuple(sorted(found))


def _signature(text: str, start: int) -> str:
    """The parameter list that opens just before ``start``, up to its closing parenthesis, without
    comments (DiffSynth's signatures hold ``# Randomness`` lines)."""
    return _signature_and_end(text, start)[0]


def _signature_and_end(text: str, start: int) -> tuple[str, int]:
    """:func:`_signature`, and the index in ``text`` just after its closing parenthesis (``start``
    where none closes within 4000 characters)."""
    plain = PLAIN_SIGNATURE.match(text, start)
    if plain is not None:
        return text[start : plain.end() - 1], plain.end()
    kept, depth, quote, comment = [], 1, "", False
    for offset, char in enumerate(text[start : start + 4000]):
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
                return "".join(kept), start + offset + 1
        kept.append(char)
    return "", start


def _device_parameters(name: str, params: str, body: str, skip_first: bool) -> tuple[tuple[str, int, str], ...]:
    """The positional parameters (those before a ``*``) of the parameter list ``params`` that the
    function's ``body`` uses as a device (:func:`_uses_as_device`)."""
    positional = [part for part in _top_level_parts(params) if part.strip() and part.strip() != "/"]
    if skip_first:
        positional = positional[1:]  # self
    found = []
    for position, part in enumerate(positional):
        if part.strip().startswith("*"):
            break
        parsed = PARAMETER.match(part)
        if parsed and _uses_as_device(parsed.group(1), body):
            found.append((name, position, parsed.group(1)))
    return tuple(found)


def _uses_as_device(param: str, body: str) -> bool:
    """Whether the function whose body is ``body`` takes a device in ``param``: one named like a
    device unless every read of it is a label (:func:`_label_read`: ``results[device] = ms``,
    ``print("on", device)``; one never read, a stub's, counts), one otherwise named where the body
    passes it in a device position (``torch.as_tensor(ids, device=dev)``, ``.to(dev)``) and compares
    it with no string (``backend == "cuda"`` names an implementation)."""
    if DEVICE_PARAM.search(param):
        code = _code_of(body)
        reads = list(re.finditer(rf"(?<![\w.]){param}\b(?![ \t]*=(?!=))", code))
        return not reads or not all(_label_read(code, read) for read in reads)
    if "dtype" in param:  # `.to(torch_dtype)`: `.to()` takes a dtype too
        return False
    return param in _passed_as_device(body) and re.search(COMPARED_WITH_STRING.format(name=param), body) is None


@functools.lru_cache(maxsize=4)
def _passed_as_device(body: str) -> frozenset[str]:
    """The names ``body`` passes in a device position (:data:`DEVICE_POSITION`), once per body."""
    if "device" not in body and ".to(" not in body:
        return frozenset()
    return frozenset(match.group(1) for match in DEVICE_POSITION.finditer(body))


@functools.lru_cache(maxsize=4)
def _code_of(body: str) -> str:
    """``body`` without docstrings and comment lines (their words are no reads), once per body."""
    return DOCSTRING.sub("", body) if "#" in body or '""' in body or "''" in body else body


def _label_read(body: str, read: re.Match) -> bool:
    """The read ``read`` of a parameter in ``body`` uses its value as a label, not as a device: a key
    (``table[device]``, ``table.get(device)``, ``{device: ms}``), a formatted field (``f"{device}"``,
    but not ``f"{device}:{rank}"``, a device string), a plain argument of ``print`` or a logging call."""
    line_start = body.rfind("\n", 0, read.start()) + 1
    line_end = body.find("\n", read.end())
    before = body[line_start : read.start()].rstrip()
    after = body[read.end() : len(body) if line_end < 0 else line_end].lstrip()
    if before.endswith("[") and after.startswith("]"):
        return True
    if re.search(r"\.(?:get|setdefault|pop)\($", before) and after[:1] in (",", ")"):
        return True
    if before.endswith("{") and re.match(r"}(?!:)|!|:(?!=)", after):
        return True
    return LOGGING_CALL.match(body, line_start) is not None and before[-1:] in ("(", ",") and after[:1] in (",", ")")


def _body(text: str, start: int, indent: str) -> str:
    """The body of the definition indented by ``indent`` whose signature ends at ``start``: the rest
    of its line and the lines after it indented deeper (blank and comment lines within)."""
    line_end = text.find("\n", start)
    if line_end < 0:
        return text[start:]
    dedent = re.compile(rf"^(?!{re.escape(indent)}[ \t]|[ \t]*(?:#|\r?$))", re.M).search(text, line_end + 1)
    return text[start : len(text) if dedent is None else dedent.start()]


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
