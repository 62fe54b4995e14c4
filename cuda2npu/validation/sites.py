"""Per-site checks of the fused-op rewrites: the original API against the migrated code, call by call.

``npu_validation/test_sites.py`` (written by ``migrate --out``) calls :func:`check_site` for each
site of ``npu_validation/sites.json`` (:mod:`.sites_find`). A check reads the migrated file as it
is when it runs, finds the site again, and evaluates, at each argument configuration of
:mod:`.sites_roles` (dtype, self/cross attention with GQA, every value of a condition such as
``causal=flag`` or ``self.training``):

* the original call — the real library when it imports, else cuda2npu's CPU stand-in, under
  :func:`cuda2npu.emulation.emulate_cuda` unless CUDA is present; never the migrated tree's own
  copy of the library (flash-attn's tests call the tree's ``flash_attn``, which is migrated code);
* the migrated expression that replaced it (``torch_npu.npu_fusion_attention(...)[0]`` with its
  layout transposes) — on real torch_npu on an NPU host, else on :func:`cuda2npu.emulation.emulate_npu`;

with the same synthetic values bound to the free names (:mod:`.sites_bind`). Functions compare
their outputs and the gradients of their tensor arguments, modules (built from the site's
constructor call with the same weights) their outputs and gradients, optimizers the parameters
after three steps; tolerances are those of :mod:`.compare`. Dropout is compared at p = 0 (the
two sides draw different masks), and the migrated ``keep_prob`` must evaluate to ``1 - dropout_p``
for the site's own ``dropout_p``. A site whose free names have no generic synthetic value is
skipped with the reason; a site that is gone from the migrated file fails.
"""

from __future__ import annotations

import ast
import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from cuda2npu.validation import sites_roles as roles
from cuda2npu.validation.compare import DTYPE_PRECISION, TensorComparison, compare_tensors
from cuda2npu.validation.sites_bind import (
    MigratedModule,
    MissingDependency,
    NotApplicable,
    Unbindable,
    assign,
    call_arguments,
    combinations,
    free_names,
    hoisted,
    import_object,
    leaves_of,
    outside_tree,
    random_tensor,
    references,
    tensor_shape,
    tree_object,
)
from cuda2npu.validation.sites_find import SiteMissing, locate
from cuda2npu.validation.sites_subclass import locate_class

OPTIMIZER_STEPS = 3
PROJECTION_SEED = 1000
KEEP_PROB_INDEX = 9  # npu_fusion_attention(query, key, value, head_num, input_layout, pse, padding_mask, atten_mask, scale, keep_prob, ...)
PARAMS = "__site_params__"


@dataclass
class SiteResult:
    site: str
    status: str  # "ok" | "mismatch" | "error" | "skipped"
    reason: str = ""
    checked: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    rows: list[TensorComparison] = field(default_factory=list)

    def report(self) -> str:
        lines = [f"{self.site}: {self.status.upper()}" + (f" ({self.reason})" if self.reason else "")]
        lines += [f"  {problem}" for problem in self.problems[:10]]
        for row in [r for r in self.rows if not r.ok][:10]:
            lines.append(
                f"  {row.group} {row.name}: max abs error {row.max_abs:.3g}, max rel {row.max_rel:.3g} {row.note}"
            )
        lines.append(f"  configurations compared: {len(self.checked)}")
        return "\n".join(lines)


def load_sites(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["sites"] if path.is_file() else []


@contextlib.contextmanager
def original_side():
    """The original's device: CUDA when present, else the CPU under the CUDA emulation (stand-ins)."""
    if torch.cuda.is_available():
        yield "cuda"
        return
    from cuda2npu.emulation import emulate_cuda

    with emulate_cuda():
        yield "cpu"


def migrated_device() -> str:
    """Install the NPU emulation unless a working torch_npu is there; the migrated side's device."""
    from cuda2npu.emulation import emulate_npu

    emulate_npu()
    return "npu"


def check_site(site: dict, migrated_root: Path) -> SiteResult:
    """Run one site's check; never raises for problems of the project's code."""
    if site.get("skip"):
        return SiteResult(site["id"], "skipped", site["skip"])
    file = migrated_root / site["file"]
    try:
        tree = ast.parse(file.read_bytes())
        if site.get("class"):
            location = locate_class(tree, site)
        else:
            location = locate(tree, site["scope"], site["family"], site["ordinal"], site["path"])
    except (OSError, SyntaxError, SiteMissing) as exc:
        return SiteResult(site["id"], "error", f"{site['file']}: {exc}")
    migrated_device()
    try:
        check = SiteCheck(site, location, MigratedModule(tree, file, migrated_root))
    except (Unbindable, ImportError) as exc:  # no generic value, or an optional dependency is not installed
        return SiteResult(site["id"], "skipped", str(exc) if isinstance(exc, Unbindable) else _missing(exc))
    except UnknownName as exc:
        return SiteResult(site["id"], "error", str(exc))
    except Exception as exc:  # noqa: BLE001 - an import or helper of the migrated file fails
        return SiteResult(site["id"], "error", f"the migrated file's names do not load: {type(exc).__name__}: {exc}")
    return check.run()


def _imported(name: str, qualified: str, root: Path, api_package: str):
    """The object a name of the original call refers to (a name the project itself defines also from
    its source in the tree ``root`` when its module does not import, never the API's own package:
    the tree's copy of it is migrated code); which one fails to import, if one does."""
    try:
        try:
            return import_object(qualified)
        except MissingDependency:
            raise
        except ImportError as exc:
            if qualified.split(".", 1)[0] == api_package:
                raise
            return tree_object(qualified, root, exc)
    except MissingDependency:
        raise
    except ImportError as exc:
        raise MissingDependency(f"`{name}` ({qualified}) does not import here: {type(exc).__name__}: {exc}") from exc


def _missing(exc: ImportError) -> str:
    if isinstance(exc, MissingDependency):
        return str(exc)
    return f"a module the site needs is not installed here: {type(exc).__name__}: {exc}"


def _argument_slot(call: ast.Call, node: ast.expr):
    """(container, key) holding ``node`` among ``call``'s arguments."""
    for index, arg in enumerate(call.args):
        if arg is node:
            return call.args, index
    for keyword in call.keywords:
        if keyword.value is node:
            return keyword, "value"
    raise LookupError(node)


@contextlib.contextmanager
def _replaced(call: ast.Call, node: ast.expr | None, new: ast.expr):
    """``call`` with argument ``node`` replaced by ``new`` while the block runs (no-op for None)."""
    if node is None:
        yield
        return
    holder, key = _argument_slot(call, node)
    if isinstance(holder, list):
        holder[key] = ast.copy_location(new, node)
    else:
        setattr(holder, key, ast.copy_location(new, node))
    try:
        yield
    finally:
        if isinstance(holder, list):
            holder[key] = node
        else:
            setattr(holder, key, node)


def _compile(node: ast.expr, what: str):
    return compile(ast.fix_missing_locations(ast.Expression(node)), what, "eval")


def _keyword_or_position(call: ast.Call, name: str, index: int | None) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    if index is not None and index < len(call.args):
        return call.args[index]
    return None


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    return []


def _backward(outputs: list[torch.Tensor]) -> None:
    """Backward of a fixed random projection of the outputs (identical weights on both sides)."""
    total = None
    for index, out in enumerate(o for o in outputs if o.is_floating_point() and o.requires_grad):
        generator = torch.Generator().manual_seed(PROJECTION_SEED + index)
        weight = torch.randn(out.shape, generator=generator).to(out.device)
        term = (out.float() * weight).sum()
        total = term if total is None else total + term
    if total is not None:
        total.backward()


class UnknownName(NameError):
    """The migrated expression needs a name the original call does not have (a hand edit, usually)."""


class SiteCheck:
    """One site: the original call bound to its API, the migrated expression, their namespaces."""

    def __init__(self, site: dict, location, module: MigratedModule) -> None:
        self.site, self.location, self.module = site, location, module
        self.api = site["api"].rsplit(".", 1)[-1]
        self.call = ast.parse(site["original"], mode="eval").body
        with original_side():
            self.params = self._bind(self._original_namespace({}))
        self.leaves = leaves_of(self.params, self.api, set(site["imports"]))
        self.roots = {leaf.text.split(".", 1)[0] for leaf in self.leaves} | (
            {PARAMS} if site["kind"] == "optimizer" else set()
        )
        self._bind_migrated_names()

    # -- binding -------------------------------------------------------------------------------
    def _bind(self, namespace: dict) -> dict[str, ast.expr]:
        """Parameter → argument expression of the original call, through its API's signature."""
        try:
            callee = eval(_compile(self.call.func, "<site callee>"), namespace)  # noqa: S307
        except ImportError as exc:
            raise MissingDependency(f"the original API does not import here: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - an API this machine cannot load
            raise Unbindable(f"the original API cannot be loaded here: {type(exc).__name__}: {exc}") from exc
        return call_arguments(self.call, self.site["original"], callee, self.api)

    def _original_namespace(self, values: dict) -> dict:
        package, root = self.site["api"].split(".", 1)[0], self.module.root
        with outside_tree(package, root):
            namespace = {
                name: _imported(name, qualified, root, package) for name, qualified in self.site["imports"].items()
            }
        if self.site.get("class_source"):  # a subclass site: the project's class over the original API
            exec(compile(self.site["class_source"], f"<original {self.site['class']}>", "exec"), namespace)  # noqa: S102
        for text, value in values.items():
            assign(namespace, text, value)
        return namespace

    @contextlib.contextmanager
    def _migrated_view(self):
        """The migrated expression with keep_prob at 1.0 and an optimizer's parameters replaced."""
        call, family = self.location.call, self.site["family"]
        keep = _keyword_or_position(call, "keep_prob", KEEP_PROB_INDEX) if family == "attention" else None
        substitute = _keyword_or_position(call, "params", 0) if self.site["kind"] == "optimizer" else None
        with _replaced(call, keep, ast.Constant(1.0)), _replaced(call, substitute, ast.Name(PARAMS, ast.Load())):
            yield self.location.expression

    def _bind_migrated_names(self) -> None:
        """The migrated expression's names that are not leaves: hoisted operands, then module-level names."""
        self.hoisted: list[tuple[str, object]] = []
        with self._migrated_view() as expression:
            pending = free_names(expression) - self.roots
            self.code = _compile(expression, "<migrated expression>")
        seen = set()
        while pending:
            name = pending.pop()
            seen.add(name)
            value = hoisted(self.location, name)
            if value is not None:
                self.hoisted.insert(0, (name, _compile(value, f"<hoisted {name}>")))
                pending |= free_names(value) - self.roots - seen
                continue
            statement = _scope_import(self.location, name)
            if statement is not None:  # ``import torch_npu`` in the function around the site
                code = compile(ast.Module([statement], []), self.module.namespace["__file__"], "exec")
                exec(code, self.module.namespace)  # noqa: S102 - the migrated file's own import
                continue
            if self.module.bind({name}):
                elsewhere = sorted({f"line {node.lineno}" for node in _imports_of(self.location.tree, name)})
                raise UnknownName(
                    f"the migrated code uses `{name}`, which neither the original call's names nor the "
                    "migrated module provide"
                    + (f" (the migrated file imports it only elsewhere: {', '.join(elsewhere)})" if elsewhere else "")
                )

    # -- running ---------------------------------------------------------------------------------
    def run(self) -> SiteResult:
        result = SiteResult(self.site["id"], "ok")
        skipped = []
        bound = {param: ast.unparse(expr) for param, expr in self.params.items()}
        # names only the dropout argument uses do not change the numbers (compared at p = 0): they
        # take all their values in the keep_prob check, one in the numeric runs
        dropout_only = [leaf for leaf in self.leaves if self._dropout_only(leaf)]
        numeric = [leaf for leaf in self.leaves if leaf not in dropout_only]
        keep_checked = self._dropout_param not in self.params
        for label, dims, dtype in roles.variants(self.api, bound):
            dims = roles.dims_of(dims)
            try:
                self._sizes(dims)
                combos = combinations(numeric, dims)
                dropout = combinations(dropout_only, dims)
                tensors = self._tensor_values(dims, dtype)
            except (NotApplicable, Unbindable) as exc:
                skipped.append(f"{label or dtype}: {exc}")
                continue
            for combo in combos:
                name = ", ".join(
                    filter(
                        None, [label, str(dtype).replace("torch.", ""), *(f"{k}={_short(v)}" for k, v in combo.items())]
                    )
                )
                self._one(result, name, {**tensors, **dropout[0], **combo}, dims, dtype, skipped)
            if not keep_checked and result.checked:
                keep_checked = True
                for values in dropout:
                    self._problem(result, self._keep_prob({**combos[0], **values}))
        if result.status == "ok" and not result.checked:
            return SiteResult(self.site["id"], "skipped", "; ".join(skipped) or "no configuration applies")
        return result

    def _sizes(self, dims: dict) -> None:
        """A literal ``size`` argument (``FusedLayerNorm(768)``) sets the trailing dimension D."""
        table = roles.ARGUMENTS.get(self.api, {})
        for param, expr in self.params.items():
            if table.get(param) not in ("size", "shape") or references(expr, set(self.site["imports"])):
                continue  # a free name: the leaf takes D
            try:
                with original_side():
                    value = eval(_compile(expr, "<size>"), self._original_namespace({}))  # noqa: S307
            except Exception:  # noqa: BLE001 - computed from a tensor: keeps the default
                continue
            value = value[0] if isinstance(value, (tuple, list)) and len(value) == 1 else value
            if not isinstance(value, int):
                raise Unbindable(f"`{param}={ast.unparse(expr)}`: only one trailing dimension is checked")
            dims["D"] = value

    def _tensor_values(self, dims: dict, dtype) -> dict:
        """A CPU tensor for every tensor leaf, shaped so that its argument has the API's layout."""
        values = {}
        operands = {leaf.text: roles.PART[roles.OPERAND][0] for leaf in self.leaves if _operand(leaf)}
        with original_side():
            namespace = self._original_namespace(operands)  # ``v.pow(self.gamma)`` evaluates with a gamma
        for leaf in (leaf for leaf in self.leaves if leaf.is_tensor):
            shapes = {
                tensor_shape(leaf.text, expr, roles.shape_of(spec, dims), namespace, dtype)
                for _, spec, _, expr in leaf.uses
                if isinstance(spec, tuple)
            }
            if len(shapes) > 1:
                raise NotApplicable(f"`{leaf.text}` would need the shapes {sorted(shapes)}")
            values[leaf.text] = random_tensor(leaf.text, shapes.pop(), dtype, seed=len(values))
        return values

    def _one(self, result: SiteResult, name: str, values: dict, dims: dict, dtype, skipped: list) -> None:
        with original_side() as device:
            try:
                expected = self._original(values, device, dims, dtype)
            except Exception as exc:  # noqa: BLE001 - a configuration the original API refuses
                skipped.append(f"{name}: the original raised {type(exc).__name__}: {exc}")
                return
        try:
            actual = self._migrated(values, migrated_device(), dims, dtype, expected)
        except Exception as exc:  # noqa: BLE001 - reported as the check's failure
            result.status = "error"
            result.problems.append(f"{name}: the migrated code raised {type(exc).__name__}: {exc}")
            return
        result.checked.append(name)
        problems = []
        for group in ("outputs", "grads"):
            left, right = expected[group], actual[group]
            if set(left) != set(right) or len(left) != len(right):
                problems.append(f"{name}: {group} differ in number or names ({sorted(left)} / {sorted(right)})")
            for key in sorted(set(left) & set(right)):
                precision = DTYPE_PRECISION.get(left[key].dtype, "fp32")
                row = compare_tensors(group[:-1], f"{key} [{name}]", left[key], right[key].cpu(), precision)
                result.rows.append(row)
                if not row.ok and result.status == "ok":
                    result.status = "mismatch"
        self._problem(result, problems)

    @staticmethod
    def _problem(result: SiteResult, problems: list[str]) -> None:
        for problem in problems:
            if problem not in result.problems:
                result.problems.append(problem)
            if result.status == "ok":
                result.status = "mismatch"

    @property
    def _dropout_param(self) -> str:
        """The API's dropout probability argument (``dropout_p``; xFormers' ``p``)."""
        return roles.dropout_param(self.api)

    def _dropout_only(self, leaf) -> bool:
        return self.site["family"] == "attention" and all(param == self._dropout_param for param, _, _, _ in leaf.uses)

    def _namespace(self, base: dict, values: dict, device) -> tuple[dict, dict]:
        """``base`` plus the leaves on ``device``; the tensor leaves (requiring grad when floating)."""
        namespace, tensors = dict(base), {}
        for text, value in values.items():
            if isinstance(value, torch.Tensor):
                value = value.detach().to(device)
                if value.is_floating_point():
                    value.requires_grad_(True)
                tensors[text] = value
            assign(namespace, text, value)
        return namespace, tensors

    def _original(self, values: dict, device, dims: dict, dtype) -> dict:
        namespace, tensors = self._namespace(self._original_namespace({}), values, device)
        dropout = self.params.get(self._dropout_param) if self.site["family"] == "attention" else None
        substitute = self.params.get("params") if self.site["kind"] == "optimizer" else None
        with (
            _replaced(self.call, dropout, ast.Constant(0.0)),
            _replaced(self.call, substitute, ast.Name(PARAMS, ast.Load())),
        ):
            code = _compile(self.call, "<original call>")
        return self._exercise(code, namespace, tensors, device, dims, dtype, None)

    def _migrated(self, values: dict, device, dims: dict, dtype, expected: dict) -> dict:
        namespace, tensors = self._namespace(self.module.namespace, values, device)
        for name, code in self.hoisted:
            namespace[name] = eval(code, namespace)  # noqa: S307 - the migrated file's own statement
        return self._exercise(self.code, namespace, tensors, device, dims, dtype, expected)

    def _keep_prob(self, values: dict) -> list[str]:
        """The migrated keep_prob against 1 - the original's dropout_p, for these values of the free names."""
        with original_side():
            namespace = self._original_namespace(values)
            p = eval(_compile(self.params[self._dropout_param], "<dropout_p>"), namespace)  # noqa: S307
        node = _keyword_or_position(self.location.call, "keep_prob", KEEP_PROB_INDEX)
        namespace = dict(self.module.namespace)
        for text, value in values.items():
            assign(namespace, text, value)
        keep = 1.0 if node is None else eval(_compile(node, "<keep_prob>"), namespace)  # noqa: S307
        if abs(float(keep) - (1.0 - float(p))) > 1e-6:
            written = "absent (default 1.0)" if node is None else f"`{ast.unparse(node)}`"
            at = ", ".join(f"{k}={_short(v)}" for k, v in values.items() if not isinstance(v, torch.Tensor))
            return [
                f"keep_prob {written} is {float(keep):g} where the original dropout_p is {float(p):g}"
                f"{' (' + at + ')' if at else ''}: keep_prob must be 1 - dropout_p = {1.0 - float(p):g}"
            ]
        return []

    # -- what is compared --------------------------------------------------------------------------
    def _exercise(self, code, namespace: dict, tensors: dict, device, dims: dict, dtype, expected) -> dict:
        kind = self.site["kind"]
        if kind == "optimizer":
            return self._steps(code, namespace, device)
        value = eval(code, namespace)  # noqa: S307 - the site's own expression
        inputs = dict(tensors)
        if kind == "module":
            value, inputs = self._forward(value, device, dims, expected)
        outputs = _tensors(value)
        if not outputs:
            raise TypeError(f"the site returned {type(value).__name__}, not tensors")
        _backward(outputs)
        grads = {text: t.grad.detach().cpu() for text, t in inputs.items() if t.grad is not None}
        return {"outputs": {f"output[{i}]": o.detach().cpu() for i, o in enumerate(outputs)}, "grads": grads}

    def _forward(self, module, device, dims: dict, expected):
        """The module built by the site, with the original's (random) weights, on a random input."""
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"the site built {type(module).__name__}, not an nn.Module")
        module = module.to(device).eval()
        if expected is None:
            with torch.no_grad():
                for index, (name, tensor) in enumerate(module.state_dict().items()):
                    if tensor.is_floating_point():
                        tensor.copy_(random_tensor(name, tensor.shape, tensor.dtype, seed=100 + index))
            self._state = {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}
        else:
            from cuda2npu.validation.keys import map_state_dict

            state, _ = map_state_dict(self._state, module.state_dict())
            module.load_state_dict(state)
        floating = [p for p in module.parameters() if p.is_floating_point()]
        dtype = floating[0].dtype if floating else torch.float32
        x = (
            random_tensor("input", roles.shape_of(roles.MODULE_INPUT, dims), dtype, seed=0)
            .to(device)
            .requires_grad_(True)
        )
        inputs = {"input": x, **{f"param {n}": p for n, p in module.named_parameters()}}
        return module(x), inputs

    def _steps(self, code, namespace: dict, device) -> dict:
        """Parameters after OPTIMIZER_STEPS steps with the same gradients on both sides."""
        params = [
            torch.nn.Parameter(random_tensor(f"param{i}", shape, torch.float32, seed=200).to(device))
            for i, shape in enumerate(((4, 3), (3,)))
        ]
        namespace[PARAMS] = params
        optimizer = eval(code, namespace)  # noqa: S307 - the site's own expression
        for step in range(OPTIMIZER_STEPS):
            for index, p in enumerate(params):
                grad = random_tensor(f"grad{index}", p.shape, p.dtype, seed=300 + step).to(device)
                if p.grad is None:
                    p.grad = grad
                else:
                    p.grad.copy_(grad)  # fused optimizers keep the first gradient tensors
            optimizer.step()
        return {"outputs": {f"param{i}": p.detach().cpu() for i, p in enumerate(params)}, "grads": {}}


def _scope_import(location, name: str) -> ast.stmt | None:
    """An import of ``name`` run in a function around the site (the nearest one), as a statement of
    its own; None when there is none (class bodies do not count: their names are not visible inside)."""
    node = location.statement
    while node in location.parents:
        node = location.parents[node]
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        pending = list(node.body)
        while pending:
            statement = pending.pop(0)
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            if isinstance(statement, (ast.Import, ast.ImportFrom)):
                for alias in statement.names:
                    if (alias.asname or alias.name.split(".")[0]) == name:
                        fields = {field: getattr(statement, field) for field in statement._fields}
                        return ast.copy_location(type(statement)(**{**fields, "names": [alias]}), statement)
            pending.extend(c for c in ast.iter_child_nodes(statement) if isinstance(c, (ast.stmt, ast.excepthandler)))
    return None


def _imports_of(tree: ast.Module, name: str) -> list[ast.stmt]:
    """The import statements anywhere in ``tree`` that bind ``name``."""
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        and any((alias.asname or alias.name.split(".")[0]) == name for alias in node.names)
    ]


def _operand(leaf) -> bool:
    return any(spec == roles.OPERAND for _, spec, _, _ in leaf.uses)


def _short(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"<{list(value.shape)} tensor>"
    return repr(value)
