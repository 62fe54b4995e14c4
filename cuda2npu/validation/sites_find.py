"""The fused-op call sites a migration rewrote, found with ``ast`` alone (no torch, no rule engine).

``migrate --out`` records one site per rewritten call (flash-attn / SDPA / xFormers → npu_fusion_attention,
RMSNorm, rotary, apex norms and optimizers, TransformerEngine modules) in
``npu_validation/sites.json``; the per-site checks (:mod:`cuda2npu.validation.sites`) find it
again in the migrated file when they run, with :func:`locate`.

Pairing: in each scope (function qualname, ``<module>`` for module level), the calls of one
family (the original APIs and what the migration writes instead, e.g. flash-attn, SDPA and
``torch_npu.npu_fusion_attention``) are listed in source order in both files. When the two lists
are equally long, the n-th call of the original corresponds to the n-th of the migrated file;
an original API call facing a migrated one is a site. A site is addressed by its scope, its
family's targets and the ordinal of its migrated call among them, plus the path from that call's
statement to the expression that replaced the original call (``[0]`` and the layout transposes
after ``npu_fusion_attention`` belong to it; code around it does not).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

MODULE_SCOPE = "<module>"


@dataclass(frozen=True)
class Api:
    """An original fused API: ``prefix`` (package) … ``final`` (its name), how a check exercises it."""

    prefix: str
    final: str
    family: str
    kind: str  # "call" (compare what it returns) | "module" (build, then forward) | "optimizer" (steps)


FAMILIES = {
    "attention": ("torch_npu.npu_fusion_attention",),
    "rms_norm_op": ("torch_npu.npu_rms_norm",),
    "rotary": ("_npu_apply_rotary_emb",),
    "layer_norm": ("torch.nn.LayerNorm", "te_npu_modules.LayerNorm"),
    "rms_norm": ("torch.nn.RMSNorm", "te_npu_modules.RMSNorm"),
    "layer_norm_fn": ("torch.nn.functional.layer_norm",),
    "rms_norm_fn": ("torch.nn.functional.rms_norm",),
    "linear": ("torch.nn.Linear", "te_npu_modules.Linear"),
    "layernorm_linear": ("te_npu_modules.LayerNormLinear",),
    "layernorm_mlp": ("te_npu_modules.LayerNormMLP",),
    "adam": ("torch_npu.optim.NpuFusedAdamW", "torch_npu.optim.NpuFusedAdam", "torch.optim.AdamW", "torch.optim.Adam"),
    "sgd": ("torch_npu.optim.NpuFusedSGD", "torch.optim.SGD"),
    "adagrad": ("torch.optim.Adagrad",),
}

_FLASH = (
    "flash_attn_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_kvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_qkvpacked_func",
    "flash_attn_varlen_kvpacked_func",
)
APIS = (
    *(Api("flash_attn", name, "attention", "call") for name in _FLASH),
    Api("torch.nn.functional", "scaled_dot_product_attention", "attention", "call"),
    Api("xformers.ops", "memory_efficient_attention", "attention", "call"),
    Api("flash_attn.ops", "rms_norm", "rms_norm_op", "call"),
    Api("flash_attn.ops", "rms_norm_fn", "rms_norm_op", "call"),
    Api("flash_attn.layers.rotary", "apply_rotary_emb", "rotary", "call"),
    Api("flash_attn.layers.rotary", "apply_rotary_emb_func", "rotary", "call"),
    Api("flash_attn.ops.triton.rotary", "apply_rotary", "rotary", "call"),
    Api("apex.normalization", "FusedLayerNorm", "layer_norm", "module"),
    Api("apex.normalization", "FusedRMSNorm", "rms_norm", "module"),
    Api("apex.normalization", "fused_layer_norm_affine", "layer_norm_fn", "call"),
    Api("apex.normalization", "fused_layer_norm", "layer_norm_fn", "call"),
    Api("apex.normalization", "fused_rms_norm_affine", "rms_norm_fn", "call"),
    Api("apex.normalization", "fused_rms_norm", "rms_norm_fn", "call"),
    Api("apex.optimizers", "FusedAdam", "adam", "optimizer"),
    Api("apex.optimizers", "FusedSGD", "sgd", "optimizer"),
    Api("apex.optimizers", "FusedAdagrad", "adagrad", "optimizer"),
    Api("transformer_engine.pytorch", "Linear", "linear", "module"),
    Api("transformer_engine.pytorch", "LayerNorm", "layer_norm", "module"),
    Api("transformer_engine.pytorch", "RMSNorm", "rms_norm", "module"),
    Api("transformer_engine.pytorch", "LayerNormLinear", "layernorm_linear", "module"),
    Api("transformer_engine.pytorch", "LayerNormMLP", "layernorm_mlp", "module"),
)


class SiteMissing(LookupError):
    """The recorded site is not (any more) in the migrated file."""


def api_of(name: str | None) -> Api | None:
    """The fused API ``name`` (a qualified name) refers to, also through submodules."""
    if not name:
        return None
    for api in APIS:
        if name.startswith(api.prefix + ".") and name.endswith("." + api.final):
            return api
    return None


def is_target(name: str | None, targets) -> bool:
    """``name`` calls one of ``targets`` (``te_npu_modules`` also relative: ``.te_npu_modules.Linear``)."""
    if not name:
        return False
    name = name.lstrip(".")
    return any(name == t or name.endswith("." + t) for t in targets)


def _bind_import(imports: dict[str, str], node: ast.stmt) -> None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                imports[alias.asname] = alias.name
            else:
                root = alias.name.split(".", 1)[0]
                imports[root] = root
    elif isinstance(node, ast.ImportFrom):
        base = "." * node.level + (node.module or "")
        for alias in node.names:
            if alias.name != "*":
                joiner = "" if base.endswith(".") or not base else "."
                imports[alias.asname or alias.name] = f"{base}{joiner}{alias.name}"


def module_level(tree: ast.Module):
    """Module-level statements, also inside ``if``/``try``/``with`` blocks (not inside defs)."""
    pending = list(tree.body)
    while pending:
        node = pending.pop(0)
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With, getattr(ast, "TryStar", ast.Try))):
            for field in ("body", "orelse", "finalbody"):
                pending.extend(getattr(node, field, []))
            for handler in getattr(node, "handlers", []):
                pending.extend(handler.body)


def module_imports(tree: ast.Module) -> dict[str, str]:
    """Name → the qualified name a module-level import binds it to."""
    imports: dict[str, str] = {}
    for node in module_level(tree):
        _bind_import(imports, node)
    return imports


def module_defs(tree: ast.Module) -> set[str]:
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def qualified(node: ast.expr, imports: dict[str, str], defs: set[str] = frozenset()) -> str | None:
    """``a.b.c`` with ``a`` resolved through the imports (a module-level def is its own name)."""
    if isinstance(node, ast.Name):
        return imports.get(node.id) or (node.id if node.id in defs else None)
    if isinstance(node, ast.Attribute):
        base = qualified(node.value, imports, defs)
        return None if base is None else f"{base}.{node.attr}"
    return None


def target_name(node: ast.expr, imports: dict[str, str], defs: set[str] = frozenset()) -> str | None:
    """What a migrated call names: :func:`qualified`, else its text when the root is not imported in
    the scope (``torch_npu.npu_fusion_attention`` where the migration put ``import torch_npu`` in
    another function): still the site, whose check then says the name is unbound there."""
    name = qualified(node, imports, defs)
    if name is None and isinstance(node, ast.Attribute):
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id not in imports and root.id not in defs:
            return ast.unparse(node)
    return name


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _scopes(tree: ast.Module) -> tuple[dict[str, list[ast.Call]], dict[str, list[ast.stmt]]]:
    """qualname → the calls evaluated in that scope (nested defs are scopes of their own), in source
    order; qualname → the import statements run in that scope."""
    found: dict[str, list[ast.Call]] = {}
    imports: dict[str, list[ast.stmt]] = {}

    def visit(node: ast.AST, scope: str) -> None:
        if isinstance(node, ast.Call):
            found.setdefault(scope, []).append(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.setdefault(scope, []).append(node)
        if not isinstance(node, _SCOPES):
            for child in ast.iter_child_nodes(node):
                visit(child, scope)
            return
        inner = node.name if scope == MODULE_SCOPE else f"{scope}.{node.name}"
        outside = [*node.decorator_list, *getattr(node, "bases", ()), *getattr(node, "keywords", ())]
        if isinstance(node, ast.ClassDef):
            arguments = []
        else:
            arguments = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
        for part in (*outside, *arguments):
            visit(part, scope)
        for statement in node.body:
            visit(statement, inner)

    for statement in tree.body:
        visit(statement, MODULE_SCOPE)
    for calls in found.values():
        calls.sort(key=lambda c: (c.lineno, c.col_offset))
    return found, imports


def scope_calls(tree: ast.Module) -> dict[str, list[ast.Call]]:
    """qualname → the calls evaluated in that scope, in source order (:func:`_scopes`)."""
    return _scopes(tree)[0]


def scope_imports(tree: ast.Module) -> dict[str, dict[str, str]]:
    """qualname → the names imports bind there: the module's, then those of each enclosing def
    (``from flash_attn import flash_attn_func`` inside the function that calls it)."""
    calls, statements = _scopes(tree)
    module = module_imports(tree)
    resolved = {}
    for scope in set(calls) | set(statements):
        names = dict(module)
        parts = [] if scope == MODULE_SCOPE else scope.split(".")
        for depth in range(1, len(parts) + 1):
            for node in statements.get(".".join(parts[:depth]), ()):
                _bind_import(names, node)
        resolved[scope] = names
    return resolved


def parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def statement_of(node: ast.AST, up: dict[ast.AST, ast.AST]) -> ast.stmt:
    while not isinstance(node, ast.stmt):
        node = up[node]
    return node


def path_to(node: ast.AST, up: dict[ast.AST, ast.AST]) -> list[list]:
    """``[[field, index], ...]`` from ``node``'s statement down to ``node``."""
    steps = []
    while not isinstance(node, ast.stmt):
        parent = up[node]
        for field, value in ast.iter_fields(parent):
            if value is node:
                steps.append([field, None])
                break
            if isinstance(value, list) and any(v is node for v in value):
                steps.append([field, next(i for i, v in enumerate(value) if v is node)])
                break
        node = parent
    return steps[::-1]


def follow(node: ast.AST, path: list[list]) -> ast.AST | None:
    for field, index in path:
        node = getattr(node, field, None)
        if index is not None:
            node = node[index] if isinstance(node, list) and index < len(node) else None
        if node is None:
            return None
    return node


@dataclass
class Location:
    """A site in the migrated file: its statement, the expression replacing the original call, the call."""

    tree: ast.Module
    statement: ast.stmt
    expression: ast.expr
    call: ast.Call
    parents: dict


def _targets_in(calls: list[ast.Call], targets, imports, defs) -> list[ast.Call]:
    return [c for c in calls if is_target(target_name(c.func, imports, defs), targets)]


def locate(tree: ast.Module, qualname: str, family: str, ordinal: int, path: list[list]) -> Location:
    """The site ``ordinal`` of ``family`` in scope ``qualname``; :class:`SiteMissing` saying why not."""
    calls = scope_calls(tree).get(qualname)
    if calls is None:
        raise SiteMissing(f"`{qualname}` is not in the migrated file any more")
    targets = FAMILIES[family]
    found = _targets_in(calls, targets, scope_imports(tree).get(qualname, {}), module_defs(tree))
    if ordinal >= len(found):
        raise SiteMissing(
            f"`{qualname}` has {len(found)} call(s) of {' / '.join(targets)}; the site was call {ordinal + 1}"
        )
    call = found[ordinal]
    up = parents(tree)
    statement = statement_of(call, up)
    expression = follow(statement, path)
    inside = call
    while inside is not expression and inside in up and inside is not statement:
        inside = up[inside]
    if expression is None or inside is not expression:
        raise SiteMissing(
            f"the statement around call {ordinal + 1} of {targets[0]} in `{qualname}` changed shape "
            f"(line {call.lineno}); regenerate the checks with `cuda2npu migrate --out`"
        )
    return Location(tree, statement, expression, call, up)


def _family_calls(calls, imports, defs, family) -> list[tuple[ast.Call, Api | None]]:
    """Calls of ``family``: (call, its original API) or (call, None) for a call of one of its targets."""
    listed = []
    for call in calls:
        name = qualified(call.func, imports, defs)
        api = api_of(name)
        if api is not None and api.family == family:
            listed.append((call, api))
        elif is_target(target_name(call.func, imports, defs), FAMILIES[family]):
            listed.append((call, None))
    return listed


def find_sites(original: str, migrated: str, relative: str) -> list[dict]:
    """The rewritten fused calls of one file (sources of both versions); ``[]`` if either does not parse.

    A family whose calls do not line up in a scope gives one record with a ``skip`` reason.
    """
    try:
        before, after = ast.parse(original), ast.parse(migrated)
    except (SyntaxError, ValueError):
        return []
    defs_before, defs_after = module_defs(before), module_defs(after)
    scoped_before, scoped_after = scope_imports(before), scope_imports(after)
    calls_after = scope_calls(after)
    up = parents(before)
    sites = []
    for scope, calls in scope_calls(before).items():
        imports_before, imports_after = scoped_before[scope], scoped_after.get(scope, module_imports(after))
        for family in FAMILIES:
            old = _family_calls(calls, imports_before, defs_before, family)
            if not any(api for _, api in old):
                continue
            new = _family_calls(calls_after.get(scope, []), imports_after, defs_after, family)
            if len(old) != len(new):
                call, api = next((c, a) for c, a in old if a is not None)
                sites.append(
                    _record(
                        relative,
                        scope,
                        family,
                        call,
                        api,
                        0,
                        [],
                        imports_before,
                        skip=f"the {family} calls of `{scope}` do not line up between the original "
                        f"({len(old)}) and the migrated file ({len(new)})",
                    )
                )
                continue
            ordinal = 0
            for (call, api), (_, migrated_api) in zip(old, new):
                if migrated_api is not None:
                    continue  # the migrated file still calls an original API: not rewritten
                if api is not None:
                    path = path_to(call, up)
                    site = _record(relative, scope, family, call, api, ordinal, path, imports_before)
                    try:
                        migrated_call = locate(after, scope, family, ordinal, path).call
                    except SiteMissing as exc:
                        site["skip"] = str(exc)
                    else:  # the id names the line a user opens: the migrated file's
                        site.update(id=f"{relative}:{migrated_call.lineno}:{api.final}", line=migrated_call.lineno)
                    sites.append(site)
                ordinal += 1
    return sites


def absolute(qualified: str, relative: str) -> str:
    """``qualified`` with a relative import (``._operation.f``) resolved against the package of the
    file ``relative`` (a path in the tree), so that the check can import it by name."""
    level = len(qualified) - len(qualified.lstrip("."))
    if not level:
        return qualified
    package = list(Path(relative).parent.parts)
    base = package[: len(package) - level + 1] if level > 1 else package
    return ".".join([*base, qualified[level:]])


def recorded_imports(roots: set[str], imports: dict[str, str], relative: str) -> dict[str, str]:
    """The module-level imports the names ``roots`` refer to, as absolute qualified names."""
    return {name: absolute(imports[name], relative) for name in sorted(roots) if name in imports}


def _record(relative, scope, family, call, api, ordinal, path, imports, skip=None) -> dict:
    roots = {n.id for n in ast.walk(call) if isinstance(n, ast.Name)}
    name = qualified(call.func, imports) or f"{api.prefix}.{api.final}"
    site = {
        "id": f"{relative}:{call.lineno}:{api.final}",
        "file": relative,
        "line": call.lineno,
        "original_line": call.lineno,
        "scope": scope,
        "family": family,
        "api": name,
        "kind": api.kind,
        "ordinal": ordinal,
        "path": path,
        "original": ast.unparse(call),
        "imports": recorded_imports(roots, imports, relative),
    }
    if skip:
        site["skip"] = skip
    return site
