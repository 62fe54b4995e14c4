"""The vocabulary of portable output (``--portable``): code that runs on CUDA and on Ascend NPUs.

Device functions go through ``torch.accelerator`` when the target torch has them
(``rules/tables/torch_accelerator.toml`` records the release of each), else through the function
of the same name in the generated helper module ``portable_device`` (cuda2npu/templates), which
also answers what torch.accelerator has no call for: the device type as a string that works on
a host without an accelerator, a device with an index, whether a tensor is on the accelerator,
the device module (``torch.cuda`` / ``torch.npu``).

The target torch is ``--target-torch``, else the torch release of ``--target-torch-npu``, else
the newest: every torch.accelerator call in the table is used. A version that cannot be read
counts as the oldest (helpers everywhere), so nothing newer than the target is emitted.

Rules build their replacements from these strings and register what the module then needs
(:func:`need`, :func:`report_support`): ``import torch`` and the helper's import, whose file is a
companion; the engine adds those imports.
"""

from __future__ import annotations

import re
from typing import Sequence

import libcst as cst

from cuda2npu.core.catalogue import table
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.imports import ImportNeed, binds_module
from cuda2npu.core.literals import string_value
from cuda2npu.core.names import dotted_name
from cuda2npu.core.options import Options

HELPER = "portable_device"
COMPANION = f"{HELPER}.py"
_VERSION = re.compile(r"^(\d+)\.(\d+)")


def target_torch(options: Options) -> tuple[int, int] | None:
    """(major, minor) of the oldest torch the output must run on; None: no limit (the newest)."""
    if options.target_torch:
        match = _VERSION.match(options.target_torch.strip())
        return (int(match.group(1)), int(match.group(2))) if match else (0, 0)
    torch = options.target.torch  # the torch of a targeted torch_npu package version
    return torch[:2] if torch else None


def has(options: Options, api: str) -> bool:
    """Whether the target torch has ``torch.accelerator.<api>`` (or the feature named so in the table)."""
    since = _VERSION.match(table("torch_accelerator")["since"][api])
    target = target_torch(options)
    return target is None or target >= (int(since.group(1)), int(since.group(2)))


def accelerator_function(cuda_name: str) -> str | None:
    """The torch.accelerator function answering ``torch.cuda.<cuda_name>`` (None: it has none)."""
    return table("torch_accelerator")["functions"].get(cuda_name)


def function(options: Options, name: str) -> str:
    """``torch.accelerator.<name>`` when the target has it, else the helper's function of that name."""
    return f"torch.accelerator.{name}" if has(options, name) else f"{HELPER}.{name}"


def device_type() -> str:
    """The accelerator's device type as a string (``"cuda"``, ``"npu"``; ``"cpu"`` without one)."""
    return f"{HELPER}.device_type()"


def on_npu_host() -> str:
    """The run-time test of portable output's dispatch to NPU-only code: whether this host's
    accelerator is an Ascend NPU (the code for CUDA runs everywhere else)."""
    return f'{device_type()} == "npu"'


def device(argument: str | None = None) -> str:
    """The accelerator device (with ``argument``: of that index, or a CUDA device spec mapped to it)."""
    return f"{HELPER}.device({argument or ''})"


def current_accelerator(options: Options) -> str:
    """What ``.cuda()`` moves to: torch.accelerator's device (None without one: ``.to(None)`` keeps
    the tensor where it is), or the helper's on torch < 2.7, whose current_accelerator raises there."""
    return "torch.accelerator.current_accelerator()" if has(options, "current_accelerator") else device()


def distributed_backend(options: Options) -> str:
    """The collective backend of this host's accelerator (``nccl`` on CUDA, ``hccl`` on Ascend; the
    helper's device type keeps ``nccl`` on a host without an accelerator, as the original)."""
    if has(options, "get_default_backend_for_device"):
        return f"torch.distributed.get_default_backend_for_device({device_type()})"
    return f"{HELPER}.distributed_backend()"


def device_type_fix(node: cst.SimpleString | cst.FormattedStringText):
    """Replacement of a CUDA device literal (``"cuda"``, ``"cuda:0"``, the ``"cuda:"`` of
    ``"cuda:%d" % i``, of ``f"cuda:{rank}"``) by the same text with the accelerator's type for "cuda"."""
    kind = cst.parse_expression(device_type())
    if isinstance(node, cst.FormattedStringText):  # a part of an f-string
        rest = node.value[len("cuda") :]
        head = cst.FormattedStringExpression(kind)
        return cst.FlattenSentinel([head, node.with_changes(value=rest)]) if rest else head
    if string_value(node) == "cuda":
        return kind
    prefix = node.prefix.replace("u", "").replace("U", "")
    quote = node.quote
    raw = node.value[len(node.prefix) + len(quote) : -len(quote)]
    if not raw.startswith("cuda"):  # spelled with escapes: left alone (the fix fails, the finding stays)
        raise ValueError(f"unexpected device literal {node.value}")
    text = raw[len("cuda") :]
    return cst.parse_expression(
        f"{prefix}f{quote}{{{device_type()}}}{text.replace('{', '{{').replace('}', '}}')}{quote}"
    )


def uses_helper(source: str) -> bool:
    return f"{HELPER}." in source


# --- what a module using portable code needs --------------------------------------------------


def helper_import(in_package: bool) -> ImportNeed:
    """The helper's import, for ``Report.imports``."""
    return ImportNeed(".", HELPER) if in_package else ImportNeed(HELPER)


def _imports_helper(statement: cst.CSTNode) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, cst.Import) and any(dotted_name(a.name) == HELPER for a in small.names):
            return True
        if (
            isinstance(small, cst.ImportFrom)
            and not isinstance(small.names, cst.ImportStar)
            and any(dotted_name(a.name) == HELPER for a in small.names)
        ):
            return True
    return False


# --- rules writing portable code --------------------------------------------------------------


def need(rule, tier, *sources: str) -> None:
    """Record that a fix of ``rule`` (of ``tier``) emits ``sources``: the module then needs torch and,
    if they call it, the helper (see :func:`report_support`)."""
    rule.__dict__.setdefault("_portable_needs", []).append((tier, sources))


def report_support(rule, code: str) -> None:
    """From ``leave_Module``: the fix adding ``import torch`` and the helper's import, if the rule's
    fixes need them and no other rule's support fix of this traversal adds them (at the lowest tier
    among those fixes, so it applies whenever one of them does)."""
    needs = rule.__dict__.get("_portable_needs")
    if not needs or not rule.options.fix:
        return
    added = rule.ctx.__dict__.setdefault("_portable_support", set())  # what earlier rules' fixes add
    module = rule.ctx.module
    wanted = set()
    if any("torch." in source for _, sources in needs for source in sources) and not binds_module(
        rule.resolver, "torch"
    ):
        wanted.add("torch")
    if any(uses_helper(source) for _, sources in needs for source in sources) and not any(
        _imports_helper(statement) for statement in module.body
    ):
        wanted.add(HELPER)
    wanted -= added
    if not wanted:
        return
    added |= wanted
    helper = HELPER in wanted
    parts = ["`import torch`"] if "torch" in wanted else []
    parts += [
        f"`{helper_import(rule.options.file.in_package).text()}` (the generated {COMPANION} next to this file)"
    ] * helper
    rule.report(
        code,
        module,
        f"adds {' and '.join(parts)} for the portable code",
        lambda node: node,  # the engine adds the imports
        imports=[
            *([ImportNeed("torch")] if "torch" in wanted else []),
            *([helper_import(rule.options.file.in_package)] if helper else []),
        ],
        tier=min(tier for tier, _ in needs),
        needs_torch_npu=False,
        companion=COMPANION if helper else None,
    )


def choose(npu: str, test: str, original: str) -> str:
    """``(npu if test else original)`` laid out on lines (portable output's run-time dispatch)."""
    npu = npu.replace("\n", "\n    ")
    return f"(\n    {npu}\n    if {test}\n    else {original}\n)"


def report_import_guard(
    rule, statement: cst.CSTNode, node: cst.CSTNode, names: Sequence[str], package: str, code: str, tier, edit=None
) -> None:
    """Report the import ``node`` of a CUDA-only ``package`` that portable output keeps for CUDA
    hosts, with its guard (:func:`import_guard`; ``edit``: a change to the import made with it).
    An import in a one-line suite (``if x: import ...``) is left to a human.
    ``rule.report_in``: called after the traversal."""
    if not isinstance(statement, cst.SimpleStatementLine):
        rule.report_in(
            statement,
            code,
            node,
            f"{package} import in a one-line suite: not portable yet, put it on its own line and guard it with "
            f"`try: ... except ImportError:` by hand ({package} is not installed on Ascend hosts)",
            tier=Tier.MANUAL,
        )
        return
    position = next(i for i, small in enumerate(statement.body) if small is node)
    count = len(statement.body)
    rule.report_in(
        statement,
        code,
        statement,
        f"{package} import guarded (`except ImportError: {' = '.join(names)} = None`): {package} is not "
        "installed on Ascend hosts, where only the NPU branches of the rewritten code run",
        lambda updated: import_guard(updated, _updated_import(updated, node, position, count), names, package, edit),
        tier=tier,
        needs_torch_npu=False,
    )


def _updated_import(line: cst.SimpleStatementLine, node: cst.CSTNode, position: int, count: int) -> int:
    """Where the import ``node`` (small statement ``position`` of ``count``) is in the fixed ``line``:
    at the same place unless a fix removed statements from the line, then the one equal to it."""
    if len(line.body) == count:
        return position
    return next(i for i, small in enumerate(line.body) if small.deep_equals(node))  # else the fix fails


def import_guard(
    line: cst.SimpleStatementLine, position: int, names: Sequence[str], package: str, edit=None
) -> cst.Try | cst.FlattenSentinel:
    """``try: <import> except ImportError: <names> = None`` for the import at ``position`` in ``line``
    (portable output: the CUDA-only package is absent on Ascend hosts, where only the NPU branch of
    the rewritten calls runs). The line's other statements keep their lines before and after it."""
    body = list(line.body)
    imported = edit(body[position]) if edit else body[position]
    fallback = "".join(f"    {name} = None\n" for name in names)
    guard = cst.parse_statement(
        f"try:\n    pass\nexcept ImportError:  # {package} is not installed on Ascend NPU hosts\n{fallback}"
    )
    before, after = body[:position], body[position + 1 :]
    inner = _line([imported], None if after else line.trailing_whitespace)
    guard = guard.with_changes(body=guard.body.with_changes(body=[inner]))
    if not before and not after:
        return guard.with_changes(leading_lines=line.leading_lines)
    pieces = [*([_line(before)] if before else []), guard, *([_line(after, line.trailing_whitespace)] if after else [])]
    pieces[0] = pieces[0].with_changes(leading_lines=line.leading_lines)
    return cst.FlattenSentinel(pieces)


def _line(smalls: list, trailing: cst.TrailingWhitespace | None = None) -> cst.SimpleStatementLine:
    """A statement line of ``smalls`` (the last one without its semicolon)."""
    smalls = [*smalls[:-1], smalls[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)]
    line = cst.SimpleStatementLine(body=smalls)
    return line.with_changes(trailing_whitespace=trailing) if trailing is not None else line
