"""``F.scaled_dot_product_attention`` → ``torch_npu.npu_fusion_attention`` (NPU406, opt-in).

torch_npu already sends many SDPA calls on NPU tensors to the fused kernel (docs/reference/torch_npu.md
§1.8), so this rewrite is opt-in: ``--fuse-sdpa`` (``options.fuse_sdpa``) or selecting NPU406 by
its full code. It follows torch_npu's own mapping: layout BNSD, ``head_num = q.shape[1]``, scale
1/sqrt(E) unless given, ``keep_prob = 1 - dropout_p``, a boolean ``attn_mask`` inverted (NPU:
True = masked out), ``is_causal`` → the compressed 2048×2048 mask with ``sparse_mode=2``
(SDPA aligns causal masks top-left). A mask that is visibly float (an additive mask) is
reported, not rewritten: npu_fusion_attention only takes boolean masks.

Portable output (``--portable``): ``(<NPU call> if query.device.type == "npu" else <the SDPA call>)``;
the SDPA call on the other side of such a conditional is left alone (``npu_aware``).
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.kernel_rewrites import (
    CAUSAL_MASK_HELPER,
    PORTABLE_NOTE,
    ModuleFacts,
    call_source,
    dispatch,
    fresh_name,
    hoisting_fix,
    may_be_none,
    node_path,
    one_minus,
    report_mask_helper_support,
)
from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.arguments import Unbindable, arg_value, bind
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import NOT_LITERAL, literal
from cuda2npu.core.nodes import atom, code_of, expression, is_pure
from cuda2npu.core.rulebase import Rule, register

CODE = "NPU406"
SDPA = {"torch.nn.functional.scaled_dot_product_attention", "torch._C._nn.scaled_dot_product_attention"}
PARAMS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
FLOAT_HINTS = ("float", "-inf", "finfo", "masked_fill", "zeros", "full", "half", "bfloat16", "float16", "float32")


class Manual(Exception):
    pass


def _visibly_float(mask: cst.BaseExpression) -> bool:
    """Masks that are additive float masks by construction (``.float()``, ``-inf``, ``masked_fill``...)."""
    text = code_of(mask)
    return any(hint in text for hint in FLOAT_HINTS)


def _optional(mask: cst.BaseExpression) -> bool:
    """A name or attribute may hold None (``attention_mask=None``); a call, subscript or operator result not."""
    return isinstance(mask, (cst.Name, cst.Attribute))


@register
class ScaledDotProductAttention(Rule):
    codes = (CODE,)
    triggers = (r"scaled_dot_product_attention",)
    portable_support = True

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.facts = ModuleFacts.of(ctx.module)
        self.uses_mask_helper = False
        self.rewrote = False

    def visit_Call(self, node: cst.Call) -> None:
        if self.resolver.qualified_name(node.func) not in SDPA or is_cuda_alternative(self.ctx, node):
            return
        try:
            plan = self._plan(node)
        except (Manual, Unbindable) as exc:
            self.report(CODE, node, f"`scaled_dot_product_attention` not fused: {exc}", tier=Tier.MANUAL)
            return
        causal, hoist = plan
        message = (
            '`scaled_dot_product_attention` → `torch_npu.npu_fusion_attention(..., "BNSD")[0]`: needs 4-D '
            "[B, N, S, E] tensors; a boolean attn_mask is inverted (NPU: True = masked out) and must be "
            "[B,N,Sq,Skv], [B,1,Sq,Skv], [1,1,Sq,Skv] or [Sq,Skv]; scale and keep_prob passed explicitly"
        )
        if causal:
            message += "; is_causal → compressed mask with sparse_mode=2 (top-left, as SDPA)"
            self.uses_mask_helper = True
        if any(a.keyword is not None and a.keyword.value == "enable_gqa" for a in node.args):
            message += "; `enable_gqa` dropped (the NPU op groups query heads onto key/value heads itself)"
        self.rewrote = True
        if self.options.portable:
            message += PORTABLE_NOTE
        if hoist:
            statement = self.facts.heads[node]
            path = node_path(statement, node)
            self.report(
                CODE,
                statement,
                message + f"; hoists the query expression into `{hoist}` to evaluate it once",
                hoisting_fix(path, PARAMS, hoist, lambda call, name: self._portable(call, causal, name)),
            )
        else:
            self.report(CODE, node, message, lambda updated: expression(self._portable(updated, causal, None)))

    def _plan(self, node: cst.Call):
        bound = bind(node, PARAMS, max_positional=6)
        for name in ("query", "key", "value"):
            if name not in bound:
                raise Manual(f"`{name}` is missing")
        mask = arg_value(bound, "attn_mask")
        causal = arg_value(bound, "is_causal")
        causal_value = False if causal is None else literal(causal)
        if causal_value is NOT_LITERAL:
            if not is_pure(causal):
                raise Manual("`is_causal` is an expression needed twice; assign it to a variable first")
            causal_value = "expr"
        if mask is not None and literal(mask) is not None:
            if causal_value:
                raise Manual("both `attn_mask` and `is_causal` are given (SDPA rejects that)")
            if _visibly_float(mask):
                raise Manual(
                    "float (additive) `attn_mask`: npu_fusion_attention takes boolean masks only "
                    "(True = masked out); convert it, e.g. `mask == float('-inf')`, then rewrite"
                )
        scale = arg_value(bound, "scale")
        if scale is not None and literal(scale) is not None and may_be_none(scale) and not is_pure(scale):
            raise Manual("`scale` may be None at run time and is needed twice; assign it to a variable first")
        hoist = None
        if not is_pure(bound["query"].value):
            first = node.args[0]
            if node not in self.facts.heads or first is not bound["query"]:
                raise Manual("`query` is an expression needed more than once (head_num, scale); assign it first")
            hoist = fresh_name(self.resolver, "query")
        return causal_value, hoist

    def _render(self, call: cst.Call, causal, hoist: str | None) -> str:
        bound = bind(call, PARAMS)
        codes = {p: code_of(atom(a.value)) for p, a in bound.items()}
        if hoist:
            codes["query"] = hoist
        q = codes["query"]
        dim = f"{q}.shape[-1]"
        keywords: list[tuple[str, str]] = []
        mask = arg_value(bound, "attn_mask")
        helper = f"{CAUSAL_MASK_HELPER}({q}.device)"
        if causal is True:
            keywords.append(("atten_mask", helper))
        elif causal == "expr":
            keywords.append(("atten_mask", f"{helper} if {codes['is_causal']} else None"))
        elif mask is not None and literal(mask) is not None:
            inverted = f"~{codes['attn_mask']}"
            if _optional(mask):
                inverted = f"{inverted} if {codes['attn_mask']} is not None else None"
            keywords.append(("atten_mask", inverted))
        scale = arg_value(bound, "scale")
        if scale is None or literal(scale) is None:
            keywords.append(("scale", f"{dim} ** -0.5"))
        elif may_be_none(scale):
            keywords.append(("scale", f"{codes['scale']} if {codes['scale']} is not None else {dim} ** -0.5"))
        else:
            keywords.append(("scale", code_of(scale)))
        dropout = arg_value(bound, "dropout_p")
        keywords.append(("keep_prob", "1.0" if dropout is None else one_minus(dropout)))
        if causal is True:
            keywords.append(("sparse_mode", "2"))
        elif causal == "expr":
            keywords.append(("sparse_mode", f"2 if {codes['is_causal']} else 0"))
        positional = [q, codes["key"], codes["value"], f"{q}.shape[1]", '"BNSD"']
        return call_source("torch_npu.npu_fusion_attention", positional, keywords, "[0]")

    def _portable(self, call: cst.Call, causal, hoist: str | None) -> str:
        """The NPU call's source, or under ``--portable`` the dispatch between it and the SDPA call."""
        npu = self._render(call, causal, hoist)
        if not self.options.portable:
            return npu
        query = bind(call, PARAMS)["query"].value
        original = call.deep_replace(query, cst.Name(hoist)) if hoist else call
        return dispatch(npu, hoist or code_of(atom(query)), original)

    def leave_Module(self, original_node: cst.Module) -> None:
        if not self.rewrote or not self.options.fix:
            return
        report_mask_helper_support(self, CODE, original_node, self.uses_mask_helper)
