"""``torch.cuda.*`` → ``torch.npu.*`` (NPU103), ``torch.cuda.amp`` → NPU AMP (NPU106) and
torch.cuda APIs with no NPU counterpart (NPU601). Mapping data: ``rules/tables/torch_cuda_api.toml``."""

from __future__ import annotations

import libcst as cst

from cuda2npu.catalogue import table
from cuda2npu.diagnostics import Tier
from cuda2npu.names import dotted_name
from cuda2npu.rulebase import Rule, register

NPU_MODULES = {"torch.cuda": "torch_npu.npu", "torch.cuda.amp": "torch_npu.npu.amp"}


def _attribute_chain(dotted: str) -> cst.BaseExpression:
    parts = dotted.split(".")
    node: cst.BaseExpression = cst.Name(parts[0])
    for part in parts[1:]:
        node = cst.Attribute(node, cst.Name(part))
    return node


def _api_status(module: str, name: str) -> tuple[str, str]:
    """(status, note) of ``module.name``: renamed | review | unchanged | unsupported."""
    api = table("torch_cuda_api")
    if module == "torch.cuda.amp":
        if name in api["amp"]:
            return "renamed", ""
        return "unsupported", f"torch.npu.amp has no `{name}`; use torch.autocast / torch.amp APIs"
    if name in api["unchanged"]:
        return "unchanged", ""
    if name in api["renamed"]:
        return "renamed", ""
    if name in api["review"]:
        return "review", api["review"][name]
    if name in api["unsupported"]:
        return "unsupported", api["unsupported"][name]
    return "unsupported", f"`torch.cuda.{name}` is not in torch.npu's documented API"


def _code_for(module: str, name: str) -> str:
    return "NPU106" if module == "torch.cuda.amp" or name == "amp" else "NPU103"


@register
class TorchCudaApi(Rule):
    codes = ("NPU103", "NPU106", "NPU601")
    triggers = (r"\bcuda\b",)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        base = node.value
        qualified = self.resolver.qualified_names(base)
        if "torch.cuda" not in qualified:
            return
        name = node.attr.value
        status, note = _api_status("torch.cuda", name)
        if status == "unchanged":
            return
        if status == "unsupported":
            self.report("NPU601", node, f"`torch.cuda.{name}` has no NPU counterpart: {note}")
            return
        if isinstance(base, cst.Attribute) and base.attr.value == "cuda":
            fix = lambda n: n.with_changes(value=n.value.with_changes(attr=cst.Name("npu")))  # noqa: E731
        else:  # `cuda.X` / `tc.X`: the name's import is rewritten to torch_npu.npu, the use stays
            fix = lambda n: n  # noqa: E731
        message = f"`torch.cuda.{name}` → `torch.npu.{name}`"
        if status == "review":
            self.report(_code_for("torch.cuda", name), node, f"{message}; {note}", fix, tier=Tier.REVIEW)
        else:
            self.report(_code_for("torch.cuda", name), node, message, fix)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            module = dotted_name(alias.name)
            if module in NPU_MODULES and alias.asname is not None:
                target = NPU_MODULES[module]
                self.report(
                    _code_for(module, ""),
                    alias,
                    f"`import {module}` → `import {target}`",
                    lambda a, t=target: a.with_changes(name=_attribute_chain(t)),
                )

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = dotted_name(node.module)
        if module == "torch":
            self._from_torch(node)
        elif module in NPU_MODULES:
            self._from_cuda_module(node, module)

    def _from_torch(self, node: cst.ImportFrom) -> None:
        """``from torch import cuda [as x]`` → ``from torch_npu import npu as <x or cuda>``.

        Keeping the bound name keeps every use of it valid without renaming; other names imported
        from torch on the same line stay in their own statement.
        """
        if not any(dotted_name(a.name) == "cuda" for a in node.names):
            return
        alias = next(a for a in node.names if dotted_name(a.name) == "cuda")
        bound = alias.asname.name.value if alias.asname is not None else "cuda"
        npu_import = cst.ImportFrom(
            module=cst.Name("torch_npu"),
            names=[cst.ImportAlias(cst.Name("npu"), asname=cst.AsName(cst.Name(bound)))],
        )

        def fix(stmt: cst.ImportFrom):
            others = [a for a in stmt.names if dotted_name(a.name) != "cuda"]
            if not others:
                return npu_import
            others[-1] = others[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            return cst.FlattenSentinel([stmt.with_changes(names=others), npu_import])

        self.report("NPU103", node, f"`from torch import cuda` → `from torch_npu import npu as {bound}`", fix)

    def _from_cuda_module(self, node: cst.ImportFrom, module: str) -> None:
        target = NPU_MODULES[module]
        unsupported = False
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            status, note = _api_status(module, name)
            if status == "unsupported":
                unsupported = True
                self.report("NPU601", alias, f"`{module}.{name}` has no NPU counterpart: {note}")
            elif status == "review":
                self.report(_code_for(module, name), alias, f"`{module}.{name}`: {note}", tier=Tier.REVIEW)
        if not unsupported:
            self.report(
                _code_for(module, ""),
                node.module,
                f"`from {module} import ...` → `from {target} import ...`",
                lambda _, t=target: _attribute_chain(t),
            )
