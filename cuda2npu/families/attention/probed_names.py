"""NPU408: a module-level name the file assigns only under a flash-attn availability probe and reads
in a function whose flash-attn calls the migration rewrites.

transformers' Mistral, Qwen2 and Phi-3 modeling files (vendored by Bunny and SnapKV) define
``_flash_supports_window_size = "window_size" in inspect.signature(flash_attn_func).parameters``
inside ``if is_flash_attn_2_available():``, and their FlashAttention-2 forward reads it. On an NPU host
flash-attn is not installed: the probe is False, the name is never bound, and the migrated forward
(its flash-attn calls now npu_fusion_attention) raises NameError there. Reported at the ``if`` (review,
no fix): what the name should be on the NPU is the project's to say (npu_fusion_attention takes a
sliding window: ``True`` keeps it). A function left as written (a class only transformers 4.34's
``_flash_attn_2_enabled`` selects) is no such reader.

Also a name imported under the probe from transformers' ``modeling_flash_attention_utils``
(``_flash_attention_forward``; VLM2Vec's vendored Qwen2-VL, round 38) and read by any function, where
the transformers pin guarantees 4.51: that release runs ``flash_attention_2`` on the NPU through that
helper, so the project's FlashAttention-2 classes are chosen there, and the probe leaves it unbound.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.flash_attention2_classes import FA2_ON_NPU
from cuda2npu.analysis.flash_probes import file_probe_flags, requires_probe
from cuda2npu.core.bindings import assigned_values
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.imports import bound_name
from cuda2npu.core.names import dotted_name, target_names
from cuda2npu.core.nodes import code_of
from cuda2npu.core.pins import pin_at_least
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes

REWRITTEN_CALLS = ("NPU401", "NPU402")  # flash-attn calls → npu_fusion_attention
TRANSFORMERS_HELPERS = "transformers.modeling_flash_attention_utils"  # its NPU path from 4.51 (FA2_ON_NPU)
VALUE = (
    "is bound only where flash-attn is installed (`{test}`) and read by code whose flash-attn calls are migrated: "
    "on an NPU host the probe is False and that code raises NameError; bind it before the `if` with the NPU's "
    "value (npu_fusion_attention takes a sliding window)"
)
HELPER = (
    "is imported only where flash-attn is installed (`{test}`) and read by this file's functions: transformers "
    ">= {release} (pinned) runs flash_attention_2 on an NPU host through it, where the probe is False and that "
    "code raises NameError; import it before the `if`"
)


@register
class ProbedNames(Rule):
    codes = ("NPU408",)
    triggers = (r"is_flash_attn_2_available|is_flash_attn_available|find_spec",)

    def leave_Module(self, original_node: cst.Module) -> None:
        flags = file_probe_flags(self.ctx)
        index = TreeIndex.of(self.ctx)
        migrated = {
            index.function.get(index.statement_of(report.node))
            for report in self.ctx.reports
            if report.code in REWRITTEN_CALLS and report.fix is not None
        } - {None}
        helpers_run = pin_at_least(self.options.project.pins, "transformers", FA2_ON_NPU) is True
        for statement in original_node.body:
            if not isinstance(statement, cst.If) or not requires_probe(statement.test, flags):
                continue
            otherwise = statement.orelse
            names = (
                [] if otherwise else sorted(self._read_by(original_node, statement, _assigned_in(statement), migrated))
            )
            if helpers_run:
                functions = set(TreeIndex.of(self.ctx).functions)
                unbound = {
                    name for name in _transformers_helpers(statement) if not (otherwise and _binds(otherwise, name))
                }
                self._unbound(statement, sorted(self._read_by(original_node, statement, unbound, functions)), HELPER)
            self._unbound(statement, names, VALUE)

    def _unbound(self, statement: cst.If, names: list[str], note: str) -> None:
        """NPU408 (review) at the probe's ``if`` for the ``names`` it alone binds (none: nothing)."""
        if names:
            listed = ", ".join(f"`{name}`" for name in names)
            message = f"{listed} {note.format(test=code_of(statement.test), release=FA2_ON_NPU)}"
            self.report_in(statement, "NPU408", statement.test, message, tier=Tier.REVIEW)

    def _read_by(self, module: cst.Module, statement: cst.If, names: set[str], functions: set) -> set[str]:
        """Of ``names``, those read in ``functions`` and bound nowhere else at module level."""
        outside = [s for s in module.body if s is not statement]
        read = {name.value for function in functions for name in iter_nodes(function, cst.Name) if name.value in names}
        return {name for name in read if not any(_binds(s, name) for s in outside)}


def _assigned_in(statement: cst.If) -> set[str]:
    """The names the ``if`` body binds by assignment (its imports are the probe's own)."""
    return {
        name
        for assign in iter_nodes(statement.body, cst.Assign)
        for t in assign.targets
        for name in target_names(t.target)
    }


def _transformers_helpers(statement: cst.If) -> set[str]:
    """The names the ``if`` body imports from transformers' flash-attention helpers."""
    return {
        bound_name(alias, node)
        for node in iter_nodes(statement.body, cst.ImportFrom)
        if not isinstance(node.names, cst.ImportStar)
        and (dotted_name(node.module) or "").startswith(TRANSFORMERS_HELPERS)
        for alias in node.names
    }


def _binds(statement: cst.CSTNode, name: str) -> bool:
    """``statement`` binds ``name`` (an assignment, or any other binding: ``assigned_values`` None)."""
    values = assigned_values(statement, name)
    return values is None or bool(values)
