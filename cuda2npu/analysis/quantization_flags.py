"""The project's quantization flags that something may switch on: a project fact (names only), so
that NPU907 leaves a ``load_in_8bit=load_in_8bit`` whose parameter defaults to ``False`` where no
file of the project ever passes it anything else (VLMEvalKit's model wrappers, built through
``partial(InternVLChat, model_path=...)`` in its config: round 31, x-attention, 13 markers asking
nothing).

A flag is a name with ``4bit`` or ``8bit`` in it (``load_in_8bit``, ``load_4bit``). It may be on where
the project's Python text sets it (a keyword, an assignment, a dict entry or a dataclass field) to
anything but ``False``, ``None`` or a name ending in the same flag (a pass-through:
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


def quantization_flags_on(texts: Mapping[Path, bytes]) -> tuple[str, ...]:
    """The flags (:data:`FLAG`) some Python file of the project may set on, sorted."""
    found: set[str] = set()
    for raw in texts.values():
        if b"bit" not in raw:
            continue
        text = raw.decode("utf-8", "replace")
        for name, value in [*SETTING.findall(text), *ENTRY.findall(text)]:
            value = value.strip()
            if value not in OFF and not re.fullmatch(rf"(?:[\w.]+\.)?{re.escape(name)}", value):
                found.add(name)
        found.update(option.replace("-", "_") for option in OPTION.findall(text))
    return tuple(sorted(found))
