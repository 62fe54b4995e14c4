"""Helpers for rule tests: run the engine on text with options, read per-case options."""

from __future__ import annotations

import re
import textwrap
from dataclasses import fields

from cuda2npu.core.options import FailingImport, FileContext, OptionalModule, Options, ProjectFacts
from cuda2npu.core.torch_npu_target import parse_target
from cuda2npu.filekinds.python import migrate_source

OPTIONS_LINE = re.compile(r"^# cuda2npu-test:(?P<opts>.*)$", re.MULTILINE)


def options_from(text: str, **overrides) -> Options:
    """Options from a ``# cuda2npu-test: precision=fp16 apex=ascend`` line, if any."""
    values: dict = {}
    match = OPTIONS_LINE.search(text)
    if match:
        for pair in match.group("opts").split():
            key, _, value = pair.partition("=")
            values[key] = value == "true" if value in ("true", "false") else value
    values.update(overrides)
    return options_of(**values)


FACTS = {f.name for f in fields(ProjectFacts)}
CONTEXT = {f.name for f in fields(FileContext)}


def options_of(**values) -> Options:
    """Options from one flat table of settings, project facts and file context, as the tests'
    headers and variants write them (``pins=...``, ``in_package=true``, ``target_torch_npu=2.1.0``;
    ``local_modules`` is both the project's and the file's)."""
    facts = {name: values.pop(name) for name in list(values) if name in FACTS}
    context = {name: values.pop(name) for name in list(values) if name in CONTEXT}
    for name, kind in (("optional_module", OptionalModule), ("failing_import", FailingImport)):
        if name in context:  # written as a list: `optional_module = [as written, what fails, importers]`
            context[name] = kind(*context[name])
    if "local_modules" in facts:
        context["local_modules"] = facts["local_modules"]
    if "target_torch_npu" in values:
        values["target"] = parse_target(values.pop("target_torch_npu"))
    return Options(**values, project=ProjectFacts(**facts), file=FileContext(**context))


def migrate_text(text: str, options: Options | None = None, path: str = "case.py"):
    """(new text, result) for a source text."""
    result = migrate_source(text.encode(), path, options or options_from(text))
    new = result.new_source.decode() if result.new_source is not None else text
    return new, result


def without_markers(text: str) -> str:
    """``text`` without its ``# TODO(cuda2npu)`` marker lines (for tests about what is rewritten)."""
    return "".join(line for line in text.splitlines(keepends=True) if not line.lstrip().startswith("# TODO(cuda2npu):"))


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")
