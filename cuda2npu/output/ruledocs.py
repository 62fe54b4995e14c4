"""Rendering the rule catalogue: the `rules` table, one rule's page, JSON and Markdown."""

from __future__ import annotations

import textwrap

from cuda2npu.core.catalogue import RuleDoc


def as_dict(doc: RuleDoc) -> dict:
    return {
        "code": doc.code,
        "name": doc.name,
        "family": doc.family,
        "tier": str(doc.tier),
        "fixable": doc.fixable,
        "fix_availability": fix_availability(doc),  # ruff's words: yes ("always"), sometimes, no
        "opt_in": doc.off_by_default,  # off unless asked for: by its code (NPU406), or by any selector (NPU8)
        "summary": doc.summary,
        "why": doc.why,
        "fix": doc.fix,
        "references": list(doc.references),
        "examples": [{"before": e.before, "after": e.after} for e in doc.examples],
    }


def fix_availability(doc: RuleDoc) -> str:
    """ruff's words: a rule of the manual tier that fixes some of its cases (NPU304: FusedAdagrad is
    rewritten, FusedLARS is not) fixes "sometimes"."""
    if not doc.fixable:
        return "no"
    return "sometimes" if str(doc.tier) == "manual" else "yes"


def table(docs: list[RuleDoc]) -> str:
    width = max((len(doc.name) for doc in docs), default=4) + 2
    rows = [f"{'code':<8}{'name':<{width}}{'tier':<9}{'fix':<10}summary"]
    for doc in docs:
        rows.append(f"{doc.code:<8}{doc.name:<{width}}{str(doc.tier):<9}{fix_availability(doc):<10}{doc.summary}")
    return "\n".join(rows)


def _example_text(doc: RuleDoc) -> list[str]:
    lines = []
    for example in doc.examples:
        lines += ["", "Before:", textwrap.indent(textwrap.dedent(example.before).strip("\n"), "    ")]
        if example.after is not None and example.after != example.before:
            lines += ["After:", textwrap.indent(textwrap.dedent(example.after).strip("\n"), "    ")]
    return lines


def text(doc: RuleDoc) -> str:
    lines = [
        f"{doc.code} {doc.name}",
        "",
        f"Tier: {doc.tier}    Fixable: {fix_availability(doc)}    Family: {doc.family}",
        "",
        "What it does:",
        textwrap.indent(doc.summary, "  "),
        "",
        "Why:",
        textwrap.indent(doc.why, "  "),
        "",
        "Fix:",
        textwrap.indent(doc.fix, "  "),
    ]
    if doc.examples:
        lines += ["", "Example:"] + _example_text(doc)
    if doc.references:
        lines += ["", "References:"] + [f"  - {ref}" for ref in doc.references]
    return "\n".join(lines)


def markdown(docs: list[RuleDoc]) -> str:
    out = ["# cuda2npu rules", "", "| code | name | tier | fixable | summary |", "|---|---|---|---|---|"]
    out += [f"| {d.code} | {d.name} | {d.tier} | {fix_availability(d)} | {d.summary} |" for d in docs]
    for doc in docs:
        out += [
            "",
            f"## {doc.code} {doc.name}",
            "",
            f"Tier: `{doc.tier}`. Fixable: {fix_availability(doc)}.",
            "",
        ]
        out += [doc.summary, "", "**Why.** " + doc.why, "", "**Fix.** " + doc.fix]
        for example in doc.examples:
            out += ["", "```python", textwrap.dedent(example.before).strip("\n"), "```"]
            if example.after is not None and example.after != example.before:
                out += ["becomes", "", "```python", textwrap.dedent(example.after).strip("\n"), "```"]
        if doc.references:
            out += [""] + [f"- {ref}" for ref in doc.references]
    return "\n".join(out) + "\n"
