"""xFormers' ``memory_efficient_attention`` → ``torch_npu.npu_fusion_attention`` or
``F.scaled_dot_product_attention`` (NPU409), the calls without a faithful rewrite (NPU410), and
the xFormers imports the rewrites leave unused (NPU409).

Semantics: docs/reference/xformers.md (xFormers side) and docs/reference/torch_npu.md §1.

* xFormers takes ``[B, M, H, K]``, the legacy ``[B, M, K]`` (H = 1) and ``[B, M, G, H, K]`` (GQA);
  the rank is rarely visible in the file, so the rewrites are exact for all three: the NPU call
  gets heads merged into the hidden dimension, layout ``"BSH"`` (``x.flatten(2)``, a view of a
  contiguous tensor) with ``head_num = q.shape[2:-1].numel()``, and its ``[B, M, N*Kv]`` output
  is split back with ``.unflatten(-1, (*q.shape[2:-1], -1))``; SDPA gets ``movedim(1, -2)``
  (``[B, M, H, K]`` → ``[B, H, M, K]``, a no-op for 3-D) and its output ``movedim(-2, 1)``.
* ``attn_bias`` kinds (:mod:`.xformers_bias`): none, ``LowerTriangularMask()`` (top-left causal:
  ``sparse_mode=2``), ``LowerTriangularFromBottomRightMask()`` (``sparse_mode=3``), both with
  the compressed mask of the ``_npu_causal_mask`` helper, also chosen by a test
  (``... if causal else None``); an additive tensor goes to SDPA's float ``attn_mask`` (the NPU
  op's ``pse`` is added before the scale and is UNVERIFIED on hardware). Anything else: NPU410.
* ``scale`` defaults to ``K ** -0.5`` as in xFormers and is always passed to the NPU op (its
  default is 1.0); ``keep_prob = 1 - p``. ``op=`` only selects xFormers' kernel and is dropped;
  ``output_dtype=`` is reported.
* ``q`` is needed several times on the NPU path: an expression is hoisted into ``query = ...``
  when the call is the first thing its statement evaluates, else the call is reported.
* A call through a name an ``except ImportError:`` handler sets to None, under an ``if`` testing that
  name (``if xops is not None:``), never runs on an NPU host: left as written, unreported.
* ``xformers.__version__`` read in a file whose calls are migrated (a version test around them):
  NPU410, it raises where xFormers is not installed.
* ``torch.ops.xformers_flash.flash_fwd`` (an operator namespace a CUDA build of xFormers registers when
  imported) read where no AttributeError is caught (lingua's selective-checkpointing set): NPU410 there,
  and the file's xFormers imports stay (removing them would hide that it still needs xFormers).
"""

from __future__ import annotations

import functools

import libcst as cst

from cuda2npu.analysis.exports import exported
from cuda2npu.analysis.hf_sources import statement_of
from cuda2npu.analysis.kernel_rewrites import (
    CAUSAL_MASK_HELPER,
    ModuleFacts,
    call_source,
    fresh_name,
    hoisting_fix,
    may_be_none,
    node_path,
    one_minus,
    plan_import_removals,
    report_mask_helper_support,
)
from cuda2npu.analysis.never_run import in_never_run_code
from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.arguments import Unbindable, arg_value, bind
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.imports import catches, catches_import_error, remove_import_names
from cuda2npu.core.literals import literal
from cuda2npu.core.names import dotted_name, module_qualified, target_names
from cuda2npu.core.nodes import atom, code_of, expression, is_pure
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes
from cuda2npu.families.attention.flash_guards import tests_set
from cuda2npu.families.attention.xformers_bias import Conditional, Unknown, bias_kind

REWRITE, MANUAL = "NPU409", "NPU410"
FUNCTIONS = {"xformers.ops.memory_efficient_attention", "xformers.ops.fmha.memory_efficient_attention"}
PARAMS = ("query", "key", "value", "attn_bias", "p", "scale", "op", "output_dtype")
SPARSE_MODE = {"top-left": "2", "bottom-right": "3"}
HEADS = "{q}.shape[2:-1]"  # the head dimensions: () for [B, M, K], (H,) or (G, H)
ATTRIBUTE_ERRORS = frozenset({"AttributeError", "Exception", "BaseException"})


class Manual(Exception):
    """The call cannot be rewritten faithfully; the message says why."""


def _npu_source(bound: dict[str, cst.Arg], kind, q: str) -> str:
    """The ``npu_fusion_attention`` call for a mask kind (``none``, a mask or a :class:`Conditional`)."""
    codes = {name: code_of(atom(arg.value)) for name, arg in bound.items()}
    heads = HEADS.format(q=q)
    mask = f"{CAUSAL_MASK_HELPER}({q}.device)"
    keywords: list[tuple[str, str]] = []
    if isinstance(kind, Conditional):
        test = code_of(atom(kind.test))
        on, off = (f"{mask} if {test} else None", f"{SPARSE_MODE[kind.kind]} if {test} else 0")
        if kind.negated:
            on, off = (f"None if {test} else {mask}", f"0 if {test} else {SPARSE_MODE[kind.kind]}")
        keywords.append(("atten_mask", on))
        sparse = off
    elif kind in SPARSE_MODE:
        keywords.append(("atten_mask", mask))
        sparse = SPARSE_MODE[kind]
    else:
        sparse = None
    keywords.append(("scale", _scale(bound, codes, q)))
    p = arg_value(bound, "p")
    keywords.append(("keep_prob", "1.0" if p is None else one_minus(p)))
    if sparse is not None:
        keywords.append(("sparse_mode", sparse))
    tensors = [f"{q}.flatten(2)", f"{codes['key']}.flatten(2)", f"{codes['value']}.flatten(2)"]
    positional = [*tensors, f"{heads}.numel()", '"BSH"']
    return call_source("torch_npu.npu_fusion_attention", positional, keywords, f"[0].unflatten(-1, (*{heads}, -1))")


def _scale(bound: dict[str, cst.Arg], codes: dict[str, str], q: str) -> str:
    scale = arg_value(bound, "scale")
    default = f"{q}.shape[-1] ** -0.5"
    if scale is None or literal(scale) is None:
        return default
    if may_be_none(scale):
        return f"{codes['scale']} if {codes['scale']} is not None else {default}"
    return code_of(scale)


def _sdpa_source(bound: dict[str, cst.Arg]) -> str:
    """``F.scaled_dot_product_attention`` over ``[..., M, K]`` views, for an additive tensor bias."""
    codes = {name: code_of(atom(arg.value)) for name, arg in bound.items()}
    keywords = [("attn_mask", code_of(bound["attn_bias"].value))]
    if arg_value(bound, "p") is not None:
        keywords.append(("dropout_p", code_of(bound["p"].value)))
    scale = arg_value(bound, "scale")
    if scale is not None and literal(scale) is not None:
        keywords.append(("scale", code_of(scale)))
    positional = [f"{codes[name]}.movedim(1, -2)" for name in ("query", "key", "value")]
    return call_source(
        "torch.nn.functional.scaled_dot_product_attention", positional, keywords, ".movedim(-2, 1).contiguous()"
    )


@register
class MemoryEfficientAttention(Rule):
    """NPU409/NPU410: ``xformers.ops.memory_efficient_attention`` calls, and the imports they leave."""

    codes = (REWRITE, MANUAL)
    triggers = (r"xformers",)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self.facts = ModuleFacts.of(ctx.module)
        packages = () if "xformers" in self.options.file.local_modules else ("xformers",)
        self.op_reads = self._op_reads() if packages else {}
        self.op_marked: set[cst.CSTNode] = set()  # statements with an NPU410 marker for an operator read
        # an xFormers operator read stays (NPU410): so do the imports that register it
        keep = (lambda node, name: True) if self.op_reads else functools.partial(exported, ctx)
        self.removals = plan_import_removals(self.facts, packages, keep)
        self.target = self.options.target
        self.functions: list[cst.FunctionDef] = []
        self.mask_helper = False
        self.rewrote = False

    def _op_reads(self) -> dict[cst.Attribute, tuple[cst.CSTNode, str]]:
        """``torch.ops.xformers*`` namespaces read where no AttributeError is caught → (their statement,
        the whole attribute chain read: ``torch.ops.xformers_flash.flash_fwd.default``)."""
        if "ops.xformers" not in self.ctx.code:
            return {}
        index = TreeIndex.of(self.ctx)
        found = {}
        for node in iter_nodes(self.ctx.module, cst.Attribute):
            if (
                node.attr.value.startswith("xformers")
                and module_qualified(self.resolver.module_scope, node.value) == "torch.ops"
            ):
                chain: cst.CSTNode = node
                while isinstance(index.parents.get(chain), cst.Attribute) and index.parents[chain].value is chain:
                    chain = index.parents[chain]
                statement = statement_of(self.ctx, chain)
                if statement is not None and not self._catches_attribute_error(index, statement):
                    found[node] = (statement, code_of(chain))
        return found

    def _catches_attribute_error(self, index: TreeIndex, statement: cst.CSTNode) -> bool:
        """``statement`` runs in a ``try`` body whose handler catches AttributeError, or under ``with
        contextlib.suppress(AttributeError)``."""
        for owner, role in index.enclosing(statement):
            if (
                isinstance(owner, cst.Try)
                and role == "body"
                and any(catches(h, ATTRIBUTE_ERRORS) for h in owner.handlers)
            ):
                return True
            if isinstance(owner, cst.With) and any(
                isinstance(item.item, cst.Call)
                and module_qualified(self.resolver.module_scope, item.item.func) == "contextlib.suppress"
                and any((dotted_name(a.value) or "").rsplit(".", 1)[-1] in ATTRIBUTE_ERRORS for a in item.item.args)
                for item in owner.items
            ):
                return True
        return False

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "__version__" and self._version_read(node):
            return
        statement, shown = self.op_reads.get(node, (None, ""))
        if statement is None or statement in self.op_marked:
            return
        self.op_marked.add(statement)
        self.report_in(
            statement,
            MANUAL,
            node,
            f"`{shown}` reads an operator namespace that a CUDA build of xFormers registers when imported: "
            "xFormers cannot be installed on an NPU host, so this raises AttributeError there (the xFormers import "
            "is kept for it); drop the read, or make it under `contextlib.suppress(AttributeError)`",
            tier=Tier.MANUAL,
        )

    def _version_read(self, node: cst.Attribute) -> bool:
        """``xformers.__version__`` read (generative-models' ``if version.parse(xformers.__version__) >=
        ...:`` around the calls) in a file whose xFormers calls are migrated: xFormers is not installed on
        an NPU host, so the read raises there (NPU410), unless an AttributeError/NameError is caught."""
        if module_qualified(self.resolver.module_scope, node) != "xformers.__version__":
            return False
        if "memory_efficient_attention" not in self.ctx.code:
            return True  # no call migrated here: the import's own marker says what is missing
        index = TreeIndex.of(self.ctx)
        statement = statement_of(self.ctx, node)
        if statement is None or statement in self.op_marked or self._catches_attribute_error(index, statement):
            return True
        if in_never_run_code(self.ctx, node):
            return True  # under `if is_xformers_available():` (InstantID, round 57): never read on an NPU host
        self.op_marked.add(statement)
        self.report_in(
            statement,
            MANUAL,
            node,
            "`xformers.__version__` is read where xFormers' calls are migrated to the NPU: xFormers is not "
            "installed on an NPU host, so the read raises there (a NameError where its import is guarded); "
            "drop the version test (the migrated calls need no xFormers)",
            tier=Tier.MANUAL,
        )
        return True

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.functions.pop()

    def visit_Call(self, node: cst.Call) -> None:
        if self.resolver.qualified_name(node.func) not in FUNCTIONS or is_cuda_alternative(self.ctx, node):
            return
        if self._behind_missing_import(node):
            return  # never runs on an NPU host: left as written
        try:
            bound, kind, hoist = self._plan(node)
        except (Manual, Unbindable) as exc:
            self.report(MANUAL, node, f"`memory_efficient_attention` not rewritten: {exc}", tier=Tier.MANUAL)
            return
        message = self._message(bound, kind, hoist)
        if hoist:
            statement = self.facts.heads[node]
            self.report(
                REWRITE,
                statement,
                message,
                hoisting_fix(
                    node_path(statement, node), PARAMS, hoist, lambda call, name: self._source(call, kind, name)
                ),
            )
        else:
            self.report(
                REWRITE,
                node,
                message,
                lambda updated: expression(self._source(updated, kind, None)),
                needs_torch_npu=kind != "tensor",
            )
        self.rewrote = True
        self.mask_helper = self.mask_helper or kind not in ("none", "tensor")

    def _behind_missing_import(self, node: cst.Call) -> bool:
        """``try: from xformers import ops as xops`` / ``except ImportError: xops = None`` and the call
        under ``if xops is not None:`` (``if xops:``, an ``and`` with it; an ``if``/``else`` expression too): the
        name is None on an NPU host, so the call never runs there."""
        root = node.func
        while isinstance(root, cst.Attribute):
            root = root.value
        if not isinstance(root, cst.Name) or root.value not in self._none_on_import_error:
            return False
        index = TreeIndex.of(self.ctx)
        child, parent = node, index.parents.get(node)
        while parent is not None:
            if isinstance(parent, cst.IndentedBlock | cst.SimpleStatementSuite):
                owner = index.parents.get(parent)
                if isinstance(owner, cst.If) and parent is owner.body and tests_set(owner.test, root.value):
                    return True
            elif isinstance(parent, cst.IfExp) and child is parent.body and tests_set(parent.test, root.value):
                return True
            child, parent = parent, index.parents.get(parent)
        return False

    @functools.cached_property
    def _none_on_import_error(self) -> frozenset[str]:
        """Names an ``except ImportError:`` handler sets to None (the fallback of an optional import)."""
        names = set()
        for handler in iter_nodes(self.ctx.module, cst.ExceptHandler):
            if catches_import_error(handler):
                for assign in iter_nodes(handler.body, cst.Assign):
                    if isinstance(assign.value, cst.Name) and assign.value.value == "None":
                        names.update(n for t in assign.targets for n in target_names(t.target))
        return frozenset(names)

    def _plan(self, node: cst.Call):
        bound = bind(node, PARAMS, max_positional=6)
        missing = [name for name in ("query", "key", "value") if name not in bound]
        if missing:
            raise Manual(f"`{missing[0]}` is missing")
        output_dtype = arg_value(bound, "output_dtype")
        if output_dtype is not None and literal(output_dtype) is not None:
            raise Manual("`output_dtype=` asks for an output dtype other than the query's; cast by hand")
        op = arg_value(bound, "op")
        if op is not None and not is_pure(op):
            raise Manual("`op=` is an expression with side effects; it only selects xFormers' kernel: remove it first")
        scope = self.functions[-1] if self.functions else self.ctx.module
        kind = bias_kind(self, arg_value(bound, "attn_bias"), scope)
        if isinstance(kind, Unknown):
            raise Manual(kind.reason)
        if kind == "tensor":
            scale = arg_value(bound, "scale")
            if scale is not None and literal(scale) is not None and not self.target.torch_at_least((2, 1)):
                raise Manual("SDPA's `scale=` needs torch >= 2.1, older than the target")
            return bound, kind, None
        problems = self.target.unsupported("npu_fusion_attention", ["atten_mask", "scale", "keep_prob", "sparse_mode"])
        if problems:
            raise Manual("; ".join(problems))
        scale = arg_value(bound, "scale")
        if scale is not None and literal(scale) is not None and may_be_none(scale) and not is_pure(scale):
            raise Manual("`scale` may be None at run time and is needed twice; assign it to a variable first")
        hoist = None
        if not is_pure(bound["query"].value):
            if node not in self.facts.heads or node.args[0] is not bound["query"]:
                raise Manual("`query` is an expression needed more than once (heads, scale); assign it first")
            hoist = fresh_name(self.resolver, "query")
        return bound, kind, hoist

    def _message(self, bound: dict[str, cst.Arg], kind, hoist: str | None) -> str:
        if kind == "tensor":
            parts = [
                "`memory_efficient_attention` with an additive tensor bias → `F.scaled_dot_product_attention` with "
                "attn_mask=bias (added to the scaled scores, as in xFormers) on `movedim(1, -2)` views "
                "([B, M, H, K] → [B, H, M, K]; 3-D [B, M, K] unchanged), output moved back and made contiguous"
            ]
        else:
            parts = [
                '`memory_efficient_attention` → `torch_npu.npu_fusion_attention(..., "BSH")[0]` with the heads '
                "merged into the hidden dimension (exact for xFormers' [B, M, K], [B, M, H, K] and [B, M, G, H, K]), "
                "scale passed explicitly (the NPU default is 1.0) and keep_prob = 1 - p"
            ]
            if kind == "top-left" or getattr(kind, "kind", None) == "top-left":
                parts.append("LowerTriangularMask (top-left causal) → compressed mask with sparse_mode=2")
            elif kind != "none":
                parts.append("LowerTriangularFromBottomRightMask → compressed mask with sparse_mode=3")
        if arg_value(bound, "op") is not None:
            parts.append("`op=` dropped (it only selects xFormers' CUDA kernel)")
        if hoist:
            parts.append(f"hoists the query expression into `{hoist}` to evaluate it once")
        return "; ".join(parts)

    def _source(self, call: cst.Call, kind, hoist: str | None) -> str:
        bound = bind(call, PARAMS)
        if kind == "tensor":
            return _sdpa_source(bound)
        return _npu_source(bound, kind, hoist or code_of(atom(bound["query"].value)))

    # ---------------------------------------------------------------- imports and module support
    def visit_Import(self, node: cst.Import) -> None:
        self._import(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._import(node)

    def _import(self, node: cst.CSTNode) -> None:
        unused = self.removals.get(node)
        if unused and not in_never_run_code(self.ctx, node):  # `if is_xformers_available(): import xformers`
            self.report(
                REWRITE,
                node,
                f"xFormers import of {', '.join(f'`{n}`' for n in unused)} is unused (xFormers cannot be installed "
                "on an NPU host); removed",
                remove_import_names(node, unused),
                tier=Tier.EXACT,
                needs_torch_npu=False,
            )

    def leave_Module(self, original_node: cst.Module) -> None:
        if not self.rewrote or not self.options.fix:
            return
        report_mask_helper_support(self, REWRITE, original_node, self.mask_helper)
