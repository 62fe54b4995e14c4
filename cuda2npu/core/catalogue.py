"""The rule catalogue: codes, names, tiers, docs and examples, read from ``rules/*.toml``.

The catalogue is data so that ``cuda2npu rules`` and generated docs never import rule code.
In a wheel it ships as ``cuda2npu/catalogue``; in a source checkout it is the top-level ``rules/``.
"""

from __future__ import annotations

import difflib
import functools
import sys
from dataclasses import dataclass, field
from pathlib import Path

from cuda2npu.core.diagnostics import Tier

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class Example:
    """``before`` must produce the rule's finding; ``after`` is the migrated text (None: no fix)."""

    before: str
    after: str | None
    options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RuleDoc:
    code: str
    name: str
    tier: Tier
    fixable: bool
    summary: str
    why: str
    fix: str
    family: str
    references: tuple[str, ...] = ()
    examples: tuple[Example, ...] = ()
    valid: tuple[str, ...] = ()
    opt_in: bool = False  # enabled only by its full code in `select` (or its flag): not by a prefix or ALL
    selected_by_default: bool = True  # False: outside `check`'s default selection, enabled by any selector (NPU8)

    @property
    def off_by_default(self) -> bool:
        """Not enabled unless asked for: an opt-in rule or one outside the default selection."""
        return self.opt_in or not self.selected_by_default


def catalogue_dir() -> Path:
    """Directory holding the catalogue TOML files (bundled copy first, then the source tree)."""
    package = Path(__file__).resolve().parent.parent
    bundled = package / "catalogue"
    return bundled if bundled.is_dir() else package.parent / "rules"


def _load_toml(path: Path) -> dict:
    with path.open("rb") as handle:
        return tomllib.load(handle)


def _parse_rule(raw: dict, family: str, source: Path, selected_by_default: bool = True) -> RuleDoc:
    try:
        return RuleDoc(
            code=raw["code"],
            name=raw["name"],
            tier=Tier.parse(raw["tier"]),
            fixable=bool(raw["fixable"]),
            summary=raw["summary"].strip(),
            why=raw["why"].strip(),
            fix=raw["fix"].strip(),
            family=family,
            references=tuple(raw.get("references", ())),
            examples=tuple(
                Example(ex["before"], ex.get("after"), ex.get("options", {})) for ex in raw.get("example", ())
            ),
            valid=tuple(raw.get("valid", ())),
            opt_in=bool(raw.get("opt_in", False)),
            selected_by_default=selected_by_default,
        )
    except KeyError as exc:
        raise ValueError(f"{source}: rule {raw.get('code', '?')} lacks key {exc}") from None


@functools.lru_cache(maxsize=1)
def all_rules() -> dict[str, RuleDoc]:
    """Every documented rule, keyed by code, in code order."""
    rules: dict[str, RuleDoc] = {}
    for path in sorted(catalogue_dir().glob("*.toml")):
        data = _load_toml(path)
        family = data.get("family", path.stem)
        default = bool(data.get("selected_by_default", True))  # a family's: false for the advisories
        for raw in data.get("rule", ()):
            doc = _parse_rule(raw, family, path, default)
            if doc.code in rules:
                raise ValueError(f"{path}: duplicate rule code {doc.code}")
            rules[doc.code] = doc
    return dict(sorted(rules.items()))


@functools.lru_cache(maxsize=None)
def table(name: str) -> dict:
    """A mapping table from ``rules/tables/<name>.toml``."""
    return _load_toml(catalogue_dir() / "tables" / f"{name}.toml")


def is_advisory_code(code: str) -> bool:
    """A code whose findings change nothing at run time (the NPU8xx advisories, an unused noqa, ...):
    reported, never marked in the code (rules/tables/markers.toml ``unmarked``)."""
    return code in table("markers")["unmarked"]


def rule(code: str) -> RuleDoc:
    return all_rules()[code]


def matching(prefix: str) -> list[str]:
    """Codes starting with ``prefix`` (``NPU3``: every apex/AMP rule), in code order."""
    return [code for code in all_rules() if code.startswith(prefix)]


def no_match(code: str) -> str:
    """Why ``code`` selects no rule, with the nearest codes or family prefixes (not the whole list)."""
    families = sorted({known[:4] for known in all_rules()})
    known = [*all_rules(), *families]
    close = difflib.get_close_matches(code, known, n=3, cutoff=0.6)
    # a code with a character too many (NPU1011) means the code it extends first
    close = sorted(close, key=lambda candidate: not code.upper().startswith(candidate))
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"{code!r} matches no rule code{hint} (a code such as NPU101, a prefix such as NPU1, or ALL; `cuda2npu rules` lists them)"
