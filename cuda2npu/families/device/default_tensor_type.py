"""NPU113: ``torch.set_default_tensor_type(torch.cuda.HalfTensor)`` (or ``'torch.cuda.FloatTensor'``).

torch checks the type against its own legacy tensor types only (``PyTensorType_Check`` over torch's
``tensor_types`` in ``torch/csrc/tensor/python_tensor.cpp``): the CPU and CUDA ones. torch_npu binds
``torch.npu.HalfTensor`` as a class of its own and does not patch the function, so the renamed call
raises ``TypeError: invalid type object`` on an NPU host (docs/reference/torch_npu.md §4.2). The
statement becomes ``torch.set_default_dtype(<dtype>)`` and ``torch.set_default_device("npu")``
(torch ≥ 2.0; a project pinning an older torch gets a manual item), torch's own replacement for the deprecated
function; for review, because the legacy
constructors (``torch.Tensor(3)``) do not follow ``set_default_device`` (in a file building fairscale's
model-parallel layers, which make their weights with them, the dtype call alone). The attribute is NPU103's
elsewhere and the string NPU111's; here this rule answers for both.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.npu_aware import is_cuda_alternative
from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.literals import string_value
from cuda2npu.core.nodes import statement
from cuda2npu.core.pins import pin_predates
from cuda2npu.core.rulebase import Rule, register
from cuda2npu.core.statements import TreeIndex, is_expression_statement
from cuda2npu.core.traversal import iter_nodes

SETTER = "torch.set_default_tensor_type"
DEFAULT_DEVICE_TORCH = "2.0"  # torch.set_default_device's first release
DTYPES = {  # the floating-point legacy types torch accepts as the default (others raise on CUDA too)
    "FloatTensor": "torch.float32",
    "HalfTensor": "torch.float16",
    "BFloat16Tensor": "torch.bfloat16",
    "DoubleTensor": "torch.float64",
}


def cuda_tensor_type(ctx, arg: cst.BaseExpression) -> str | None:
    """``HalfTensor`` for ``torch.cuda.HalfTensor`` / ``'torch.cuda.HalfTensor'``, else None."""
    return _tensor_type(ctx, arg, "torch.cuda")


def _tensor_type(ctx, arg: cst.BaseExpression, module: str) -> str | None:
    """``HalfTensor`` for ``<module>.HalfTensor`` or its string, else None."""
    name = string_value(arg) if isinstance(arg, cst.SimpleString) else ctx.resolver.qualified_name(arg)
    owner, _, kind = (name or "").rpartition(".")
    return kind if owner == module and kind in DTYPES else None


def default_type_argument(ctx, call: cst.Call) -> cst.BaseExpression | None:
    """The CUDA tensor type ``call`` (``torch.set_default_tensor_type(...)``) sets as the default, else None."""
    if ctx.resolver.qualified_name(call.func) != SETTER or len(call.args) != 1 or call.args[0].star:
        return None
    value = call.args[0].value
    return value if cuda_tensor_type(ctx, value) is not None else None


@register
class CudaDefaultTensorType(Rule):
    codes = ("NPU113",)
    triggers = (r"set_default_tensor_type",)
    requires = (r"cuda\.\w+Tensor",)

    def visit_Call(self, node: cst.Call) -> None:
        value = default_type_argument(self.ctx, node)
        if value is None:
            self._restore(node)
            return
        if is_cuda_alternative(self.ctx, node):
            return
        kind = cuda_tensor_type(self.ctx, value)
        dtype = DTYPES[kind]
        why = (
            f"`torch.set_default_tensor_type` accepts torch's own CPU and CUDA types only: `torch.npu.{kind}` "
            "raises TypeError on an NPU host"
        )
        line = self.ctx.statement
        alone = is_expression_statement(line, node)
        if (old := pin_predates(self.options.project.pins, "torch", DEFAULT_DEVICE_TORCH)) is not None:
            self.report(  # nerf-pytorch's `torch==1.11.0` (round 65): no `torch.set_default_device` there
                "NPU113",
                line if alone else node,
                f"{why}; `torch.set_default_device` needs torch {DEFAULT_DEVICE_TORCH}, and the project pins "
                f"torch{old}: call `torch.set_default_dtype({dtype})` and move the model and the tensors it makes to "
                'the NPU (`.to("npu")`), or raise the torch pin',
                tier=Tier.MANUAL,
            )
            return
        if not alone:
            self.report(
                "NPU113",
                node,
                f'{why}; call `torch.set_default_dtype({dtype})` and `torch.set_default_device("npu")` instead',
                tier=Tier.MANUAL,
            )
            return
        if self.ctx.file_state(_builds_fairscale_layers):
            self.report(
                "NPU113",
                line,
                f"{why}: `torch.set_default_dtype({dtype})` instead, without a default NPU device: fairscale's "
                "model-parallel layers make their weights with legacy constructors (`torch.Tensor(n, m)`, on the CPU "
                "whatever the default device) and their full weight with `torch.empty` (on the default device), and "
                "on an NPU host `torch.cat` of NPU slices into a CPU weight raises; move the model to the NPU once "
                'it is built (`model.to("npu")`)',
                lambda updated: _replacement(updated, dtype, None),
            )
            return
        self.report(
            "NPU113",
            line,
            f'{why}: `torch.set_default_dtype({dtype})` and `torch.set_default_device("npu")` instead '
            "(legacy constructors such as `torch.Tensor(n)` do not follow the default device)",
            lambda updated: _replacement(updated, dtype),
        )

    def _alternative_to_cuda_default(self, line: cst.CSTNode) -> bool:
        """``line`` is in the ``else`` (or ``elif``) of an ``if`` whose body sets a CUDA default (codellama's
        ``if device == "cuda": ... else: torch.set_default_tensor_type(torch.HalfTensor)``, round 49)."""
        return any(
            isinstance(owner, cst.If) and role == "orelse" and _cuda_default_in(self.ctx, owner.body)
            for owner, role in TreeIndex.of(self.ctx).enclosing(line)
        )

    def _restore(self, node: cst.Call) -> None:
        """``torch.set_default_tensor_type(torch.FloatTensor)`` restoring the CPU default after a CUDA one
        (LLaMA-Adapter's ``torch.cuda.HalfTensor`` while the model is built): the CUDA one becomes
        ``set_default_device("npu")``, which the CPU type no longer undoes, so this one resets the device too."""
        if self.ctx.resolver.qualified_name(node.func) != SETTER or len(node.args) != 1 or node.args[0].star:
            return
        kind = _tensor_type(self.ctx, node.args[0].value, "torch")
        line = self.ctx.statement
        if kind is None or not is_expression_statement(line, node):
            return
        if not self.ctx.file_state(_sets_cuda_default) or self.ctx.file_state(_builds_fairscale_layers):
            return
        if pin_predates(self.options.project.pins, "torch", DEFAULT_DEVICE_TORCH) is not None:
            return  # the CUDA default stays as written there (a manual item): nothing to undo
        if self._alternative_to_cuda_default(line):
            return  # `else: torch.set_default_tensor_type(torch.HalfTensor)`: what runs instead of the CUDA one
        self.report(
            "NPU113",
            line,
            f"`torch.set_default_tensor_type(torch.{kind})` restores the CPU default after this file's CUDA one, "
            f'which becomes `torch.set_default_device("npu")`: reset the device too, or every tensor made after '
            f'it stays on the NPU: `torch.set_default_dtype({DTYPES[kind]})` and `torch.set_default_device("cpu")`',
            lambda updated: _replacement(updated, DTYPES[kind], "cpu"),
        )


def _cuda_default_in(ctx, block: cst.CSTNode) -> bool:
    return any(default_type_argument(ctx, call) is not None for call in iter_nodes(block, cst.Call))


def _builds_fairscale_layers(ctx) -> bool:
    """Whether the file imports fairscale's model-parallel layers (codellama's ``generation.py``), whose
    weights legacy constructors make (computed once per file)."""
    return ctx.text is not None and b"fairscale.nn.model_parallel" in ctx.text


def _sets_cuda_default(ctx) -> bool:
    """Whether the file sets a CUDA tensor type as the default somewhere (computed once per file)."""
    return _cuda_default_in(ctx, ctx.module)


def _replacement(updated: cst.SimpleStatementLine, dtype: str, device: str | None = "npu"):
    """``torch.set_default_dtype(dtype)`` and, unless ``device`` is None, ``torch.set_default_device(device)``."""
    first = statement(f"torch.set_default_dtype({dtype})").with_changes(leading_lines=updated.leading_lines)
    if device is None:
        return first.with_changes(trailing_whitespace=updated.trailing_whitespace)
    second = statement(f'torch.set_default_device("{device}")').with_changes(
        trailing_whitespace=updated.trailing_whitespace
    )
    return cst.FlattenSentinel([first, second])
