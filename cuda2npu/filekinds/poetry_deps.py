"""Poetry's dependency entries (``name = constraint`` in ``[tool.poetry.dependencies]`` and its
groups' tables), read as the PEP 508 requirements they stand for so that depfiles.py checks them
like ``[project] dependencies`` strings, and the entry to write for a requirement it adds
(docs/reference/packaging.md §4).
"""

from __future__ import annotations

import re

RELEASE = re.compile(r"v?(\d+(?:\.\d+)*)")
VERSION = re.compile(r"v?\d+(?:\.\d+)*(?:\.\*|[A-Za-z0-9.+-]*)")
COMPARISON = re.compile(r"(===|==|!=|~=|<=|>=|<|>)\s*(\S+)")
ADDED = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:==\s*([^\s;]+))?\s*(?:;\s*(.+))?")


def specifier(constraint: str) -> str | None:
    """A Poetry version constraint as a PEP 440 specifier (``^1.2`` → ``>=1.2,<2``, ``2.1.0`` →
    ``==2.1.0``, ``*`` → ``""``); None for one cuda2npu does not read (``||`` alternatives)."""
    found = []
    for clause in constraint.split(","):
        clause = clause.strip()
        if clause in ("", "*"):
            continue
        comparison = COMPARISON.fullmatch(clause)
        bounded = RELEASE.match(clause[1:]) if clause[:1] in "^~" and VERSION.fullmatch(clause[1:]) else None
        if comparison:
            found.append(f"{comparison.group(1)}{comparison.group(2)}")
        elif bounded:
            parts = [int(part) for part in bounded.group(1).split(".")]
            if clause[0] == "^":  # the left-most non-zero part may not change
                bump = next((i for i, part in enumerate(parts) if part), len(parts) - 1)
            else:  # `~1.2.3`, `~1.2`: the minor part; `~1`: the major
                bump = min(1, len(parts) - 1)
            upper = ".".join(str(part) for part in [*parts[:bump], parts[bump] + 1])
            found.append(f">={clause[1:].lstrip('v')},<{upper}")
        elif VERSION.fullmatch(clause):
            found.append(f"=={clause}")  # a bare version, `1.2.*` too
        else:
            return None
    return ",".join(found)


def requirement(name: str, value) -> str:
    """The PEP 508 requirement a Poetry entry stands for: ``xformers = ">=0.0.24"`` →
    ``xformers>=0.0.24``; a table's ``version``, ``extras``, ``markers``, ``git`` / ``url``
    (``name @ url``); a list of tables (several constraints): their versions joined by ``||``."""
    if isinstance(value, list):
        versions = [str(item.get("version", "*")) for item in value if isinstance(item, dict)]
        return f"{name} ({' || '.join(versions)})"
    table = value if isinstance(value, dict) else {"version": value}
    extras = table.get("extras")
    text = name + (f"[{','.join(map(str, extras))}]" if isinstance(extras, list) and extras else "")
    if isinstance(table.get("git"), str):
        ref = next((table[key] for key in ("rev", "tag", "branch") if isinstance(table.get(key), str)), None)
        subdirectory = table.get("subdirectory")
        text += f" @ git+{table['git']}" + (f"@{ref}" if ref else "")
        text += f"#subdirectory={subdirectory}" if isinstance(subdirectory, str) else ""
    elif isinstance(table.get("url"), str):
        text += f" @ {table['url']}"
    elif isinstance(table.get("version"), str):
        spec = specifier(table["version"])
        text += spec if spec is not None else f" ({table['version']})"
    markers = table.get("markers")
    return text + (f"; {markers}" if isinstance(markers, str) and markers.strip() else "")


def entry(added: str) -> str:
    """The Poetry entry for a requirement cuda2npu adds (``torch_npu==2.1.0.post17; sys_platform ==
    "linux"`` → ``torch_npu = { version = "2.1.0.post17", markers = 'sys_platform == "linux"' }``)."""
    match = ADDED.fullmatch(added.strip())
    name, version, markers = match.groups() if match else (added, None, None)
    constraint = f'"{version or "*"}"'
    if not markers:
        return f"{name} = {constraint}"
    quoted = f"'{markers}'" if "'" not in markers else '"' + markers.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"{name} = {{ version = {constraint}, markers = {quoted} }}"
