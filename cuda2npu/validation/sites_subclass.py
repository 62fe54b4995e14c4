"""Sites that are classes: a project's subclass of a fused module whose base the migration rewrote.

``class FusedLayerNorm(apex.normalization.FusedLayerNorm)`` (fairseq, Megatron) becomes
``class FusedLayerNorm(torch.nn.LayerNorm)``; the project then builds its own class, so no call of
the API is rewritten. The site records the original class's source; its check builds both classes
(the original's under the stand-ins, the migrated file's as it is) with the API's required
constructor arguments and compares them as any module site (:mod:`.sites`).
"""

from __future__ import annotations

import ast

from cuda2npu.validation.sites_find import (
    FAMILIES,
    Location,
    SiteMissing,
    api_of,
    is_target,
    module_defs,
    module_imports,
    module_level,
    qualified,
    recorded_imports,
)

# the constructor arguments a check passes (their values come from the roles of .sites_roles)
REQUIRED = {
    "FusedLayerNorm": ("normalized_shape",),
    "FusedRMSNorm": ("normalized_shape",),
    "Linear": ("in_features", "out_features"),
    "LayerNorm": ("hidden_size",),
    "RMSNorm": ("hidden_size",),
    "LayerNormLinear": ("in_features", "out_features"),
    "LayerNormMLP": ("hidden_size", "ffn_hidden_size"),
}


def module_classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    """Module-level classes (also inside ``try``/``if`` blocks) by name."""
    return {node.name: node for node in module_level(tree) if isinstance(node, ast.ClassDef)}


def _bases(cls: ast.ClassDef, imports: dict[str, str], defs: set[str]) -> list[str]:
    return [name for name in (qualified(base, imports, defs) for base in cls.bases) if name]


def find_subclass_sites(original: str, migrated_source: str, relative: str) -> list[dict]:
    """A record per module-level class deriving from a fused module that derives from its target now
    (sources of both versions; ``[]`` if either does not parse)."""
    try:
        before, after = ast.parse(original), ast.parse(migrated_source)
    except (SyntaxError, ValueError):
        return []
    imports, defs = module_imports(before), module_defs(before)
    migrated = module_classes(after)
    imports_after, defs_after = module_imports(after), module_defs(after)
    sites = []
    for name, cls in module_classes(before).items():
        api = next((api for api in map(api_of, _bases(cls, imports, defs)) if api and api.kind == "module"), None)
        if api is None or api.final not in REQUIRED or name not in migrated:
            continue
        if not any(is_target(base, FAMILIES[api.family]) for base in _bases(migrated[name], imports_after, defs_after)):
            continue  # the base was kept (or rewritten to something this check does not know)
        roots = {n.id for n in ast.walk(cls) if isinstance(n, ast.Name)}
        line = migrated[name].lineno  # the migrated file's, which a user opens
        sites.append(
            {
                "id": f"{relative}:{line}:{name}({api.final})",
                "file": relative,
                "line": line,
                "original_line": cls.lineno,
                "scope": name,
                "family": api.family,
                "api": f"{api.prefix}.{api.final}",
                "kind": "module",
                "class": name,
                "class_source": ast.unparse(cls),
                "original": f"{name}({', '.join(REQUIRED[api.final])})",
                "imports": recorded_imports(roots, imports, relative),
            }
        )
    return sites


def locate_class(tree: ast.Module, site: dict) -> Location:
    """The class of a subclass site in the migrated file, with the constructor call its check evaluates."""
    cls = module_classes(tree).get(site["class"])
    if cls is None:
        raise SiteMissing(f"class `{site['class']}` is not in the migrated file any more")
    targets = FAMILIES[site["family"]]
    if not any(is_target(base, targets) for base in _bases(cls, module_imports(tree), module_defs(tree))):
        raise SiteMissing(f"class `{site['class']}` no longer derives from {' / '.join(targets)}")
    call = ast.parse(site["original"], mode="eval").body
    return Location(tree, cls, call, call, {})
