"""CUDA-only libraries and modules imported where nothing guards the import (NPU604, NPU606): the
file fails on an NPU host at import, or when the importing function runs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from cuda2npu.analysis.cuda_gates import kept_cuda_blocks, kept_cuda_test
from cuda2npu.analysis.cuda_only_modules import (
    CUDA_LIBRARIES,
    EXTENSION_SUFFIX,
    cuda_call,
    cuda_call_roots,
    cuda_module,
    cuda_module_roots,
    import_port,
    is_cuda_extension,
    npu_release,
    unported_module,
)
from cuda2npu.analysis.failing_modules import failing_part, written_imports
from cuda2npu.analysis.kernel_rewrites import import_port_note, marked_imports
from cuda2npu.analysis.never_run import torch_npu_fallbacks
from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.analysis.raising_fallbacks import raising_fallbacks
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.imports import bound_name, bound_object, catches_import_error, reraises
from cuda2npu.core.literals import literal, string_value
from cuda2npu.core.names import dotted_name
from cuda2npu.core.pins import pin_at_least, pin_predates
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex, leaves
from cuda2npu.core.traversal import iter_nodes
from cuda2npu.families.custom_kernels.fallbacks import (
    class_read,
    guards_import,
    hollow_fallback,
    means_missing,
    none_called,
    type_checking,
)

# packages whose uses cuda2npu migrates call by call (xFormers' attention → SDPA / npu_fusion_attention,
# NPU409/NPU410) → the names those rules report: another name a function imports (a mask class used
# as a causal flag, a compatibility check) is what still needs the package after the migration, so
# NPU606 marks each function's import of it, not only the file's first (flash-attn's and
# TransformerEngine's uses are reported at each use; a kernel package's file marker says it all)
MIGRATED_AT_USES = {
    "xformers": ("xformers.ops.memory_efficient_attention", "xformers.ops.fmha.memory_efficient_attention"),
}

# NPU606's message for each way a module of rules/tables/cuda_only_packages.toml fails (`when`: in a function)
CUDA_ONLY_MESSAGES = {
    "imports": "`{module}` cannot be imported on an NPU host{when}: {note}",
    "kernels": "`{module}` runs CUDA kernels, which fail on an NPU host{when}: {note}",
    "review": "`{module}` imports on an NPU host, but some of its operations need CUDA: {note}",
    # a package that runs on an NPU from some release on, which the project's pins do not guarantee
    "release": "`{module}` runs on an NPU host only from {distribution} {first} on, which the project's pins do not guarantee{when}: {note}",
}

# unported packages imported unguarded at module level: the marker is all `migrate` writes
UNPORTED_MESSAGE = "{modules} cannot run on an NPU host, nor can this file, which cuda2npu left as written: {note}"

NONE_CALLED_NOTE = (
    "the `except` around it binds `{name}` to None, and the file calls `{name}(...)` where nothing tests it: "
    "TypeError there (not a fallback); choose another implementation on an NPU host, or test `{name}` first"
)

HOLLOW_NOTE = (
    "the `except` around it only reports the ImportError and binds nothing, and the file uses the module "
    "afterwards: NameError there (not a fallback)"
)

# NPU606's message at the failing import of a module the project imports only where it falls back
OPTIONAL_MODULE_MESSAGE = (
    "`{module}` cannot be imported on an NPU host{through}, nor can this module; the project imports it only"
    " under a fallback for that failure ({importers}), which is what runs there: cuda2npu left this file as written"
)

FAILING_IMPORT_MESSAGE = (
    "`{module}` cannot be imported on an NPU host: through the project's imports it reaches `{what}`, which fails"
    " there, and so does this file, which cuda2npu left as written; port that, then run cuda2npu again"
)

PACKAGE_MESSAGE = (  # a module of a package whose `__init__` fails (FailingImport.written "")
    "this module cannot be imported on an NPU host: importing it runs its package's `__init__` first, which "
    "reaches `{what}`, which fails there; cuda2npu left this file as written: port that, then run cuda2npu again"
)
PORTED_PACKAGE_MESSAGE = (  # the same where what fails is ported by hand (a flash-attn name): the file is migrated
    "this module cannot be imported on an NPU host: importing it runs its package's `__init__` first, which "
    "reaches `{what}`, which fails there; port that (see its NPU606 marker), and this module works again"
)
DIRECT_IMPORT_MESSAGE = (  # a relative import of the project's compiled extension (nunchaku's `from .._C import ops`)
    "`{module}` (`{what}`) cannot be imported on an NPU host, nor can this file, which cuda2npu left as written: "
    "a compiled CUDA extension of the project (or a module compiling CUDA at import); port its kernels to "
    "Ascend C (torch_npu's NpuExtension) or torch ops, then run cuda2npu again"
)

CUDA_CALL_MESSAGES = {  # the same for a call of a module that imports there (`calls`, `review_calls`)
    "calls": "`{name}(...)` fails on an NPU host: {note}",
    "review_calls": "`{name}(...)` selects a CUDA-only path: {note}",
}


@register
class CudaOnlyImports(Rule):
    """NPU604 (a CUDA-only library imported anywhere) and NPU606 (a CUDA-only module imported), both
    only where nothing guards the import: the file fails on an NPU host, at import or, in a function,
    when the function runs. NPU606 marks one import per top-level package and file, and xFormers'
    again in each function importing it (:data:`MIGRATED_AT_USES`); not ``import
    triton`` in a file defining Triton kernels (NPU603 marks them), nor an import whose ``except
    ImportError`` raises later (NPU606 marks the raise, see raising_fallbacks). In a module the
    project imports only where it falls back (project fact ``optional_modules``), NPU606 at its
    failing import is the file's one report (``Report.sole``): the file is left as written."""

    codes = ("NPU604", "NPU606")
    triggers = (
        r"pycuda",
        r"cupy",
        r"numba",
        r"\btriton\b",
        r"(?<![\w.])transformer_engine",  # a module's first name, not megatron's `extensions.transformer_engine`
        r"flash_attn",
        r"xformers",
        r"tensorrt",
        r"\bcuda\b",
        EXTENSION_SUFFIX + r"\b",  # the end of a compiled extension's name, not `get_cuda_rng_tracker`
        *(rf"(?<![\w.]){re.escape(root)}\b" for root in cuda_module_roots()),
    )

    @classmethod
    def triggers_for(cls, options) -> tuple[str, ...]:
        """Also the extension modules the project's setup.py declares (``swin_window_process``) and the
        packages of its modules that fail at import (``failing_modules``): a file importing one may not
        mention CUDA at all, or no longer once its other calls are migrated."""
        declared = {module.rsplit(".", 1)[-1] for module in options.project.cuda_extensions}
        declared |= {module.split(".")[0] for module, _ in options.project.failing_modules}
        for failing in (options.file.optional_module, options.file.failing_import):
            if failing:  # its failing import, which stays: `from .ops import scan`
                declared.add(failing.written.rpartition(".")[2])
        through_package = options.file.failing_import is not None and not options.file.failing_import.written
        anything = (r"\S",) if through_package else ()  # its marker goes at its first statement, whatever it holds
        return cls.triggers + anything + tuple(rf"\b{re.escape(name)}\b" for name in sorted(declared) if name)

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        # blocks whose imports do not run as written on an NPU host: "fallback" (a try body whose
        # ImportError handler does not re-raise, an availability-probed if body), "static" (`if
        # TYPE_CHECKING:`, a CUDA feature switch the migration keeps)
        self._guards: dict[cst.CSTNode, str] = {}
        # "hollow": a try body whose ImportError handler only reports it, the module used later (hollow_fallback);
        # "none": one whose handler binds the names None, one of them called unguarded later (none_called)
        self._depth = {"fallback": 0, "static": 0, "hollow": 0, "none": 0}
        self._none_called: dict[cst.CSTNode, str] = {}  # such a try body -> the name called
        self._functions: dict[cst.CSTNode, str] = {}  # function body -> the function's name
        self._running: list[cst.CSTNode] = []  # the bodies of the functions enclosing the current node
        self._marked: set[str] = set()  # top-level packages NPU606 marked in this file
        self._marked_in: set[tuple[cst.CSTNode, str]] = set()  # (function body or class, package) marked there
        self._unported: set[str] = set()  # of them, unported ones imported unguarded at module level
        self._sole: _SoleMarker | None = None  # the marker naming them
        # statements after an early exit that guards them as a block would: `if <not installed>:
        # return` ("fallback"), `if not torch.cuda.is_available(): return` before CUDA-only code ("static")
        self._after: dict[cst.CSTNode, str] = {}
        self._raising: set[cst.CSTNode] = set()  # try bodies whose fallback raises (NPU606 at the raise)
        self._inside_raising = 0  # how many of them enclose the current node
        self._called: set[tuple] = set()  # (block, package) NPU606 marked for a CUDA-only call
        self._failing_import_marked = False  # NPU606 marked the import that keeps the file from loading
        self._what_fails: dict[str, str] | None = None  # the project's failing modules, when a function imports
        # whether the file names a module of the table's CUDA-only calls (`faiss`) at all
        self._calls_possible = ctx.text is None or any(root.encode() in ctx.text for root in cuda_call_roots())

    def visit_Try(self, node: cst.Try) -> None:
        for body in torch_npu_fallbacks(node):  # `try: import torch_npu ... except ImportError: <CUDA path>`
            self._guards[body] = "static"
        if not any(catches_import_error(h) and not reraises(h) for h in node.handlers):
            return
        if node.body in raising_fallbacks(self.ctx).tries:
            # `except ImportError: HAVE_X = False`, then `if not HAVE_X: raise`: NPU606 marks the raise
            self._raising.add(node.body)
        elif hollow_fallback(self.ctx, node):
            self._guards[node.body] = "hollow"
        elif (called := none_called(self.ctx, node)) is not None:
            self._guards[node.body] = "none"
            self._none_called[node.body] = called
        else:
            self._guards[node.body] = "fallback"

    def visit_Raise(self, node: cst.Raise) -> None:
        self._raises_without(node)

    def visit_Assert(self, node: cst.Assert) -> None:
        self._raises_without(node)

    def _raises_without(self, node: cst.Raise | cst.Assert) -> None:
        """NPU606 at a ``raise``/``assert`` that a fallback's False flag reaches (see raising_fallbacks)."""
        found = raising_fallbacks(self.ctx).raises.get(node)
        if found is not None:
            self.report("NPU606", node, found.message())

    def visit_If(self, node: cst.If) -> None:
        if type_checking(node.test):
            self._guards[node.body] = "static"
        elif guards_import(node.test):
            self._guards[node.body] = "fallback"
            if means_missing(node.test) and leaves(node.body):
                # `if find_spec("xformers") is None: return False`: what follows runs only where it is installed
                self._after.update(dict.fromkeys(TreeIndex.of(self.ctx).following(node), "fallback"))
        elif self._mentions_cuda():
            # `if torch.cuda.is_available(): from knn_cuda import KNN`: a feature switch the migration
            # keeps CUDA's (cuda_gates), False on an NPU host; also what follows `if not ...: return`
            for block in kept_cuda_blocks(self.ctx, node):
                (self._guards if isinstance(block, cst.BaseSuite) else self._after)[block] = "static"

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions[node.body] = node.name.value
        self._kept_test(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._kept_test(node)

    def _kept_test(self, node: cst.FunctionDef | cst.ClassDef) -> None:
        """``@pytest.mark.skipif(not torch.cuda.is_available(), ...)`` over a test of CUDA-only code:
        a feature switch the migration keeps (cuda_gates), so the test is skipped on an NPU host."""
        if node.decorators and self._mentions_cuda() and kept_cuda_test(self.ctx, node):
            self._guards[node.body] = "static"

    def _mentions_cuda(self) -> bool:
        return self.ctx.text is None or b"cuda" in self.ctx.text

    def _after_guard(self) -> str | None:
        """How the current statement (or one holding it) is guarded by an early exit before it."""
        statement = self.ctx.statement
        if not self._after or statement is None:
            return None
        return next(
            (
                self._after[owner]
                for owner in (statement, *TreeIndex.of(self.ctx).ancestors(statement))
                if owner in self._after
            ),
            None,
        )

    def _enter(self, block: cst.CSTNode, step: int) -> None:
        guard = self._guards.get(block)
        if guard is not None:
            self._depth[guard] += step
        if block in self._raising:
            self._inside_raising += step
        if block in self._functions:
            if step > 0:
                self._running.append(block)
            else:
                self._running.pop()

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._enter(node, 1)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        self._enter(original_node, -1)

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._enter(node, 1)

    def leave_SimpleStatementSuite(self, original_node: cst.SimpleStatementSuite) -> None:
        self._enter(original_node, -1)

    def visit_Import(self, node: cst.Import) -> None:
        if self._failing_import_marked or self._optional_module(node):
            return  # an optional module, left as written: the NPU606 at its failing import says it all
        if is_cuda_alternative(self.ctx, node):
            return  # the CUDA side of code that handles the NPU (a CudaPlatform beside the project's NPUPlatform)
        if not any(self._depth.values()):
            for alias in node.names:
                self._library(alias, dotted_name(alias.name) or "")
        self._cuda_only(node, [dotted_name(alias.name) or "" for alias in node.names])
        self._failing_project_module(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if self._failing_import_marked or self._optional_module(node):
            return  # an optional module, left as written: the NPU606 at its failing import says it all
        if is_cuda_alternative(self.ctx, node):
            return
        if node.module is not None and not node.relative:
            module = dotted_name(node.module) or ""
            names = [] if isinstance(node.names, cst.ImportStar) else [dotted_name(a.name) for a in node.names]
            candidates = [module, *(f"{module}.{n}" for n in names)]
            if not any(self._depth.values()):
                self._library(node, *candidates)
            self._cuda_only(node, candidates)
        self._failing_project_module(node)

    def _optional_module(self, node: cst.Import | cst.ImportFrom) -> bool:
        """NPU606 at the failing import of a module that never loads on an NPU host, as the file's only
        report (``Report.sole``: the file stays as written):

        - one the project imports only where it falls back when the import fails (project fact
          ``optional_modules``: Otter's ``modeling_persimmon.py``, which imports flash-attn's fused
          ops, imported by ``modeling_fuyu.py`` in ``try: ... except ImportError: from transformers
          import PersimmonForCausalLM``);
        - one whose import reaches, through the project's modules, a compiled CUDA extension, an
          unported package or a CUDA build at import (``failing_imports``: SpQR's tests import
          ``spqr_quant``, whose ``inference_kernels/cuda_kernel.py`` compiles its kernel at import);
          a module failing through its own package's ``__init__`` has no such import: its marker goes
          at its first statement (``leave_Module``)."""
        optional, failing = self.options.file.optional_module, self.options.file.failing_import
        if failing and not failing.left_as_written:
            failing = None  # marked where it is imported (_failing_project_module), the file migrated
        failing_import = (optional or failing).written if optional or failing else ""
        if not failing_import or self._failing_import_marked or failing_import not in _written(node):
            return False
        if not self._module_level() and not self._module_level_handler():
            return False
        self._failing_import_marked = True
        if optional:
            what = optional.what_fails
            through = f" (through the project's imports it reaches `{what}`, which fails there)" if what else ""
            message = OPTIONAL_MODULE_MESSAGE.format(
                module=failing_import, through=through, importers=optional.importers
            )
        elif failing_import.startswith(".") and failing.what_fails.endswith(failing_import.lstrip(".")):
            message = DIRECT_IMPORT_MESSAGE.format(module=failing_import, what=failing.what_fails)
        else:
            message = FAILING_IMPORT_MESSAGE.format(module=failing_import, what=failing.what_fails)
        self.report("NPU606", node, message, sole=True)
        return True

    def _failing_project_module(self, node: cst.Import | cst.ImportFrom) -> None:
        """NPU606 at the module-level import of a project module that fails at import on an NPU host
        (project fact ``failing_imports``: VideoMamba's models importing its vendored ``mamba_ssm``,
        which imports ``selective_scan_cuda``; TriForce's ``from .tensor_op import ...``), in a file with
        no NPU606 marker yet."""
        failing = self.options.file.failing_import
        if failing is None and self._running and not any(self._depth.values()):
            self._lazy_failing_import(node)
        if not failing or failing.written not in _written(node) or self._marked or any(self._depth.values()):
            return
        if not self._module_level():
            return
        written, what = failing.written, failing.what_fails
        self._marked.add(written.lstrip(".").split(".")[0] or written)
        reaches = f"`{what}`, which fails there" + (
            f", and {failing.also}, CUDA-only too; port (or guard) those imports"
            if failing.also
            else "; port (or guard) that import"
        )
        self.report(
            "NPU606",
            node,
            f"`{written}` cannot be imported on an NPU host: through the project's imports it reaches {reaches},"
            " and this one works again",
        )

    def _lazy_failing_import(self, node: cst.Import | cst.ImportFrom) -> None:
        """NPU606 at an absolute import, in a function, of a project module that fails at import on an NPU
        host (qmoe's `switch.py`: `if args.save: from sub1 import Sub1CheckpointManager`, where `sub1.py`
        imports the compiled `sub1_cuda`): the function fails when it runs."""
        if self._what_fails is None:
            self._what_fails = dict(self.options.project.failing_modules)
        what_fails = self._what_fails
        # the module, or a package above it whose `__init__` runs first (DINO's `from models.registry import
        # MODULE_BUILD_FUNCS` in `build_model_main()`, `models/__init__.py` reaching the compiled extension, round 59)
        written, failing = next(
            (
                (name, part)
                for name in _written(node)
                if not name.startswith(".") and (part := failing_part(name, what_fails))
            ),
            (None, None),
        )
        if written is None or written.split(".")[0] in self._marked:
            return
        self._marked.add(written.split(".")[0])
        through = "" if failing == written else f" (its package `{failing}` runs first)"
        self.report(
            "NPU606",
            node,
            f"`{written}` cannot be imported on an NPU host{through}: through the project's imports it reaches "
            f"`{what_fails[failing]}`, which fails there; the function importing it fails when it runs",
        )

    def visit_Call(self, node: cst.Call) -> None:
        """``importlib.import_module("fused_mix_prec_layer_norm_cuda")`` (Megatron-DeepSpeed's fused layer
        norm), and a call that needs a library's CUDA build (``faiss.StandardGpuResources()``)."""
        if self._calls_possible and not is_cuda_alternative(self.ctx, node):
            self._cuda_call(node, self.resolver.qualified_name(node.func) or "")
        if not node.args or node.args[0].keyword is not None:
            return
        module = string_value(node.args[0].value)
        if module and self.resolver.qualified_name(node.func) == "importlib.import_module":
            self._cuda_only(node, [module])

    def _cuda_call(self, node: cst.Call, qualified: str) -> None:
        """NPU606 at a call of the table's ``calls`` / ``review_calls`` (one per block and package:
        ``res = faiss.StandardGpuResources()`` then ``faiss.index_cpu_to_gpu(res, ...)`` in one ``if
        use_gpu:`` block ask one thing), unless a static guard (``if TYPE_CHECKING:``, a kept CUDA
        switch) keeps it from running."""
        found = cuda_call(qualified)
        if found is not None and _cuda_turned_off(node):
            return  # `torch_fidelity.calculate_metrics(..., cuda=False)`: the library's CPU path
        placement = TreeIndex.of(self.ctx).placement.get(self.ctx.statement)
        key = (placement.block if placement is not None else self.ctx.statement, qualified.split(".")[0])
        if found is None or key in self._called or self._depth["static"] or self._after_guard() == "static":
            return
        self._called.add(key)
        message = CUDA_CALL_MESSAGES[found[0]].format(name=qualified, note=found[1])
        self.report("NPU606", node, message, tier=Tier.REVIEW if found[0] == "review_calls" else None)

    def _library(self, node: cst.CSTNode, *candidates: str) -> None:
        for candidate in candidates:
            for library, reason in CUDA_LIBRARIES.items():
                if candidate == library or candidate.startswith(library + "."):
                    self.report("NPU604", node, f"`{library}`: {reason}; no NPU equivalent")
                    return

    def _cuda_only(self, node: cst.CSTNode, modules: list[str]) -> None:
        """NPU606 for the first of ``modules`` the table knows, unless a guard keeps the import from
        running (a fallback only for an import that fails: a library that imports runs past it), the
        file has a marker for its package already or another marker says it (Triton kernels, a raise)."""
        after = self._after_guard()
        if self._depth["static"] or after == "static":
            return
        for module in modules:
            found = cuda_module(module, self.options.project.cuda_extensions, self.options.file.local_modules)
            fallback = self._depth["fallback"] or after == "fallback" or self._inside_raising
            if found is None or (found[0] == "imports" and fallback):
                continue
            root = module.split(".")[0]
            if root == "triton":
                return  # the import works where Triton or Triton-Ascend is installed; NPU603 marks the kernels
            release = npu_release(module)
            kind, note = found if release is None else _by_pin(found, *release, self.options.project.pins)
            if kind is None:
                return  # the project's pin guarantees a release that runs on an NPU
            if kind == "review" and self._only_classes_read(node):
                return  # `isinstance(m, bnb.nn.Linear4bit)`: nothing of the library runs
            compiled = is_cuda_extension(module, self.options.project.cuda_extensions)
            unported = (unported_module(module) or compiled) and not fallback and self._module_level()
            if unported and root not in self._unported and self._sole is not None:
                self._unported.add(root)  # named in the file's one marker (see _SoleMarker)
                self._marked.add(root)
                self._sole.modules.append((module, note))
                return
            if (
                root not in self._marked
                or (unported and root not in self._unported)
                or self._again_in_function(node, root, compiled)
            ):
                self._marked.add(root)
                if self._running:
                    self._marked_in.add((self._running[-1], root))
                    if self._owner() is not None:
                        self._marked_in.add((self._owner(), root))
                when = f" (`{self._functions[self._running[-1]]}` fails here when it runs)" if self._running else ""
                notes = [HOLLOW_NOTE] if self._depth["hollow"] else []
                if self._depth["none"]:
                    notes.append(NONE_CALLED_NOTE.format(name=self._none_name()))
                ported = _import_ported(node)
                if ported and self.options.code_enabled("NPU606"):
                    marked_imports(self.ctx).add(node)
                    notes.append(import_port_note(ported))
                if unported:  # reported in leave_Module, naming every unported package the file imports
                    self._unported.add(root)
                    self._sole = _SoleMarker(node, self.ctx.statement, [(module, note)], notes)
                    return
                first = release or ("", "")
                message = CUDA_ONLY_MESSAGES[kind].format(
                    module=module, when=when, note=note, distribution=first[0], first=first[1]
                )
                tier = Tier.REVIEW if kind in ("review", "release") else None
                self.report("NPU606", node, "; ".join([message, *notes]), tier=tier)
            return

    def leave_Module(self, original_node: cst.Module) -> None:
        """The file's one marker for the unported packages it imports unguarded at module level: all
        the engine keeps of the file (``Report.sole``), which is left as written."""
        if self._sole is not None:
            self.report_in(self._sole.statement, "NPU606", self._sole.node, self._sole.message(), sole=True)
        failing = self.options.file.failing_import
        if self._sole is None and failing is not None and not failing.written and original_node.body:
            first = original_node.body[0]  # a module of a package whose `__init__` fails: no import of its own
            if failing.left_as_written:
                self.report_in(first, "NPU606", first, PACKAGE_MESSAGE.format(what=failing.what_fails), sole=True)
            else:
                self.report_in(first, "NPU606", first, PORTED_PACKAGE_MESSAGE.format(what=failing.what_fails))

    def _none_name(self) -> str:
        """The name that the None-binding fallback around the current statement leaves called where nothing tests it."""
        index = TreeIndex.of(self.ctx)
        owners = (self.ctx.statement, *index.ancestors(self.ctx.statement)) if self.ctx.statement is not None else ()
        bodies = (getattr(owner, "body", None) for owner in owners)
        return next((self._none_called[body] for body in bodies if body in self._none_called), "")

    def _only_classes_read(self, node: cst.CSTNode) -> bool:
        """Every use of the names ``node`` (an import) binds, in its function (or the module), reads a
        class of the module without calling it: MedicalGPT's ``find_all_linear_names`` imports
        bitsandbytes to test ``isinstance(module, bnb.nn.Linear4bit)``, which runs on any host."""
        if not isinstance(node, (cst.Import, cst.ImportFrom)) or isinstance(node.names, cst.ImportStar):
            return False
        index = TreeIndex.of(self.ctx)
        statement = index.statement_of(node)
        scope = index.function.get(statement) or self.ctx.module
        bound = {bound_name(alias, node) for alias in node.names}
        uses = [name for name in iter_nodes(scope, cst.Name) if name.value in bound and not index.within(name, node)]
        called = {c.func.value for c in iter_nodes(scope, cst.Call) if isinstance(c.func, cst.Name)}
        return all(class_read(index, name, called) for name in uses)  # none: an unused import runs nothing

    def _again_in_function(self, node: cst.CSTNode, root: str, compiled: bool) -> bool:
        """An import the file has a marker for already, in a function that has none for it: of a
        compiled CUDA extension in another class or outside one (Megatron's ``get_batch_per_block``
        imports ``scaled_masked_softmax_cuda`` as the autograd Function's ``forward`` does: each fails
        when it runs; its ``backward`` only after ``forward``), or of a package of :data:`MIGRATED_AT_USES`
        binding more than the names those rules report (audiocraft's ``from xformers.ops import
        LowerTriangularMask`` in a method, under a module-level ``from xformers import ops``): the
        function fails when it runs, after the migration too."""
        reported = MIGRATED_AT_USES.get(root)
        if (reported is None and not compiled) or not self._running or (self._running[-1], root) in self._marked_in:
            return False
        if reported is None and (self._owner(), root) in self._marked_in:
            return False  # an autograd Function's `backward` after its marked `forward`: one failure
        if reported is not None and isinstance(node, (cst.Import, cst.ImportFrom)):
            return isinstance(node.names, cst.ImportStar) or any(
                (bound_object(alias, node) or "") not in reported for alias in node.names
            )
        return True

    def _owner(self) -> cst.ClassDef | None:
        """The class around the current statement (None: none)."""
        return TreeIndex.of(self.ctx).enclosing_class(self.ctx.statement)

    def _module_level(self) -> bool:
        """The current statement is one of the module's own (not in a function, a class or a block)."""
        return not self._running and any(top is self.ctx.statement for top in self.ctx.module.body)

    def _module_level_handler(self) -> bool:
        """The current statement is in an ``except`` block of a module-level ``try`` (stable-dreamfusion's
        ``except ImportError: from .backend import _backend``, the project fact's failing import there)."""
        enclosing = TreeIndex.of(self.ctx).enclosing(self.ctx.statement) if self.ctx.statement is not None else []
        return (
            not self._running
            and len(enclosing) == 1
            and enclosing[0][1] == "handler"
            and enclosing[0][0] in self.ctx.module.body
        )


@dataclass
class _SoleMarker:
    """The marker saying a file cannot run on an NPU host: the unported packages it imports unguarded
    at module level (``tensorrt`` before ``tensorrt_llm``), each with its note, in import order; at
    the first one's import."""

    node: cst.CSTNode
    statement: cst.CSTNode | None
    modules: list[tuple[str, str]]  # (module, note)
    notes: list[str] = field(default_factory=list)  # about the first import (a hollow fallback, a port)

    def message(self) -> str:
        names = " and ".join(f"`{module}`" for module, _ in self.modules)
        message = "; ".join([UNPORTED_MESSAGE.format(modules=names, note=self.modules[0][1]), *self.notes])
        for module, note in self.modules[1:]:
            if note not in message:
                message += f"; `{module}`: {note}"
        return message


def _written(node: cst.Import | cst.ImportFrom) -> list[str]:
    """The modules an import statement may import, as written (``..ops``, ``..ops.scan``: the name
    the project fact ``optional_modules`` gives its failing import by)."""
    if isinstance(node, cst.Import):
        return [dotted_name(alias.name) or "" for alias in node.names]
    names = [] if isinstance(node.names, cst.ImportStar) else [dotted_name(alias.name) or "" for alias in node.names]
    return written_imports(len(node.relative), dotted_name(node.module) or "" if node.module else "", names)


def _by_pin(
    found: tuple[str, str], distribution: str, first: str, pins: tuple[tuple[str, str], ...]
) -> tuple[str | None, str]:
    """(kind, note) of a module whose package runs on an NPU from ``distribution`` ``first`` on, by the
    project's pin: no kind where it guarantees that release, ``found``'s naming the pin where it allows
    none (``liger-kernel==0.5.2``), else ``release`` (a review: no pin, or one allowing older releases)."""
    if pin_at_least(pins, distribution, first):
        return None, found[1]
    spec = pin_predates(pins, distribution, first)
    if spec is not None:
        return found[0], f"the project pins `{distribution}{spec}`, older than {first}; {found[1]}"
    return "release", found[1]


def _import_ported(node: cst.CSTNode) -> dict[str, str]:
    """The names an import binds that are ported at the import alone (flash-attn's pure-PyTorch helpers,
    einops functions it re-exports) -> what they are (kernel_rewrites.import_port)."""
    if not isinstance(node, (cst.Import, cst.ImportFrom)) or isinstance(node.names, cst.ImportStar):
        return {}
    bound = {bound_name(alias, node): import_port(bound_object(alias, node) or "") for alias in node.names}
    return {name: kind for name, kind in bound.items() if kind is not None}


def _cuda_turned_off(call: cst.Call) -> bool:
    """``cuda=False`` among the arguments: the library's own switch to its CPU path."""
    return any(
        arg.keyword is not None and arg.keyword.value == "cuda" and literal(arg.value) is False for arg in call.args
    )
