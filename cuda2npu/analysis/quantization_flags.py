"""The project's quantization flags that something may switch on: a project fact (names only), so
that NPU907 leaves a ``load_in_8bit=load_in_8bit`` whose parameter defaults to ``False`` where no
file of the project ever passes it anything else (VLMEvalKit's model wrappers, built through
``partial(InternVLChat, model_path=...)`` in its config: round 31, x-attention, 13 markers asking
nothing).

A flag is a name with ``4bit`` or ``8bit`` in it (``load_in_8bit``, ``load_4bit``). It may be on where
the project's Python text sets it (a keyword, an assignment, a dict entry or a dataclass field's
``default``) to anything but ``False``, ``None`` or a name ending in the same flag (a pass-through:
``load_in_8bit=load_in_8bit``, ``self.load_in_8bit = load_in_8bit``), or defines a command-line option
of its name (``--load-in-8bit``), which a user may give. Run configs outside Python are not read: a
flag is known off only by what the Python says, so a YAML ``load_in_8bit: true`` passed as
``**config`` is missed (NPU907's docs say so).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

FLAG = r"[A-Za-z_]\w*?[48]_?bit\w*"
# `name = value`, `name: type = value`, `"name": value`, `name=value`: the flag set (not `==`)
SETTING = re.compile(rf"""(?<![\w.-])["']?({FLAG})["']?[ \t]*(?::[^=\n]*?)?(?<![=!<>])=(?!=)[ \t]*([^,)\n#]*)""")
ENTRY = re.compile(rf"""["']({FLAG})["'][ \t]*:[ \t]*([^,}}\n#]*)""")
OPTION = re.compile(r"""["']--([A-Za-z][\w-]*?[48][-_]?bit[\w-]*)["']""")  # `--load-in-8bit`
OFF = {"False", "None", "false", "0"}
# a dataclass field's value is its default: `load_in_4bit: bool = field(default=False, ...)` (LLM-Blender, round 38)
FIELD_CALL = re.compile(r"(?:[\w.]+\.)?(?:field|Field|HfArg)\(")
FIELD_DEFAULT = re.compile(r"[^()]*?\bdefault[ \t]*=[ \t]*([^,)\s#]*)")


def quantization_flags_on(texts: Mapping[Path, bytes]) -> tuple[str, ...]:
    """The flags (:data:`FLAG`) some Python file of the project may set on, sorted."""
    found: set[str] = set()
    for raw in texts.values():
        if b"bit" not in raw:
            continue
        text = raw.decode("utf-8", "replace")
        for match in [*SETTING.finditer(text), *ENTRY.finditer(text)]:
            name, value = match.group(1), _set_to(text, match)
            if value not in OFF and not re.fullmatch(rf"(?:[\w.]+\.)?{re.escape(name)}", value):
                found.add(name)
        found.update(option.replace("-", "_") for option in OPTION.findall(text))
    return tuple(sorted(found))


def _set_to(text: str, match: re.Match) -> str:
    """The value a setting gives its flag: a dataclass field's ``default`` (``field(default=False,`` on
    one line or over several), else the text after ``=`` or ``:``."""
    value = match.group(2).strip()
    call = FIELD_CALL.match(value)
    if call is None:
        return value
    default = FIELD_DEFAULT.match(text, match.start(2) + call.end())
    return default.group(1) if default else value
