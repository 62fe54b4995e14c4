"""Baselines: adopt the lint on a large repository and fail only on new CUDA-only code.

``cuda2npu check --baseline FILE --write-baseline`` records the current findings;
``cuda2npu check --baseline FILE`` reports (and fails on) only findings not recorded there.

A finding is identified by (path, code, fingerprint): the fingerprint hashes the rule code with
the finding's source line, stripped of surrounding whitespace and with inner whitespace
collapsed, plus the occurrence index among identical (path, code, line text) findings in that
file. Line numbers are not part of it, so edits above a finding do not break the baseline;
re-indenting or moving the line within the file does not either. Changing the line itself
makes it a new finding. Paths are stored relative to the baseline file's directory, so the
baseline works from any working directory.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path

from cuda2npu import __version__
from cuda2npu.core.diagnostics import Finding

BASELINE_VERSION = 1


class BaselineError(Exception):
    pass


def line_text(finding: Finding, sources: dict) -> str:
    """The source line of a finding ('' when unknown); notebooks index lines per cell."""
    lines = sources.get(finding.path)
    cell = getattr(finding, "cell", None)
    if isinstance(lines, dict):
        lines = lines.get(cell, [])
    if not lines or not 0 < finding.line <= len(lines):
        return ""
    return lines[finding.line - 1]


def line_hash(code: str, text: str) -> str:
    normalized = " ".join(text.split())
    return hashlib.sha256(f"{code}\0{normalized}".encode("utf-8", "surrogatepass")).hexdigest()[:16]


def fingerprints(findings: list[Finding], sources: dict) -> list[str]:
    """One fingerprint per finding (in the given order): ``<line hash>:<occurrence index>``."""
    seen: Counter = Counter()
    result = []
    for finding in sorted(findings, key=lambda f: f.sort_key()):
        cell = getattr(finding, "cell", None)
        text = line_text(finding, sources) or finding.message
        digest = line_hash(finding.code if cell is None else f"{finding.code}@cell", text)
        key = (finding.path, finding.code, digest)
        result.append((id(finding), f"{digest}:{seen[key]}"))
        seen[key] += 1
    by_id = dict(result)
    return [by_id[id(f)] for f in findings]


def _relative(display: str, base: Path) -> str:
    """A display path (relative to the cwd, or absolute) relative to the baseline's directory."""
    absolute = Path(display) if os.path.isabs(display) else Path.cwd() / display
    try:
        return Path(os.path.relpath(absolute.resolve(), base.resolve())).as_posix()
    except ValueError:
        return absolute.as_posix()


def write(path: Path, findings: list[Finding], sources: dict) -> int:
    base = path.absolute().parent
    entries = [
        {
            "path": _relative(f.path, base),
            "code": f.code,
            "fingerprint": fp,
            "line": f.line,
            "message": f.message,
        }
        for f, fp in zip(findings, fingerprints(findings, sources))
    ]
    entries.sort(key=lambda e: (e["path"], e["line"], e["code"], e["fingerprint"]))
    data = {"version": BASELINE_VERSION, "tool": "cuda2npu", "tool_version": __version__, "findings": entries}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return len(entries)


def read(path: Path) -> Counter:
    """Recorded (path, code, fingerprint) keys with their counts."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BaselineError(f"baseline {path} does not exist; create it with --write-baseline") from None
    except (OSError, ValueError) as exc:
        raise BaselineError(f"baseline {path} cannot be read: {exc}") from None
    if (
        not isinstance(data, dict)
        or data.get("version") != BASELINE_VERSION
        or not isinstance(data.get("findings"), list)
    ):
        raise BaselineError(f"baseline {path} is not a version {BASELINE_VERSION} cuda2npu baseline")
    try:
        return Counter((e["path"], e["code"], e["fingerprint"]) for e in data["findings"])
    except (KeyError, TypeError):
        raise BaselineError(f"baseline {path}: every finding needs path, code and fingerprint") from None


def new_findings(findings: list[Finding], sources: dict, recorded: Counter, path: Path) -> tuple[list[Finding], int]:
    """(findings not in the baseline, number of baselined findings)."""
    base = path.absolute().parent
    remaining = Counter(recorded)
    new = []
    for finding, fp in zip(findings, fingerprints(findings, sources)):
        key = (_relative(finding.path, base), finding.code, fp)
        if remaining[key] > 0:
            remaining[key] -= 1
        else:
            new.append(finding)
    return new, len(findings) - len(new)
