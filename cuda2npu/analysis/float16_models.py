"""Models a file makes float16: ``model.half()``, ``Net().cuda().half()``, ``model.to(torch.float16)``,
``from_pretrained(..., torch_dtype=torch.float16)`` (directly or through a ``**kwargs`` dict), and the
names they go by. Read by the precision policy (NPU340, NPU342) and by the TrainingArguments fp16 flag
(NPU906): weights made float16 keep float16 training."""

from __future__ import annotations

import os
import re
from pathlib import Path

import libcst as cst

from cuda2npu.analysis.failing_modules import importers_of
from cuda2npu.analysis.hf_sources import statement_of
from cuda2npu.analysis.python_files import PythonFiles
from cuda2npu.core.literals import string_value
from cuda2npu.core.names import dotted_name, is_torch_dtype
from cuda2npu.core.nodes import code_of
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes

DTYPE_KEYS = ("torch_dtype", "dtype")  # from_pretrained's dtype keyword (transformers renamed it `dtype` in 4.56)
MOVES = ("cuda", "npu", "to", "cpu", "train", "eval", "float")  # calls a model goes through unchanged
# a float16 dtype spelled as a string (DeepSpeed-MII's `mii_config = {"dtype": "fp16"}`)
FLOAT16_NAMES = ("fp16", "float16", "half", "torch.float16")
# a float16 default dtype for what is built after it, or LAVIS' conversion of a whole model's weights
FLOAT16_DEFAULT = re.compile(
    rb"set_default_tensor_type\(\s*['\"]?torch\.cuda\.HalfTensor['\"]?\s*\)"
    rb"|set_default_dtype\(\s*torch\.(?:float16|half)\s*\)|\bconvert_weights_to_fp16\("
)
# a tensor named after the module that makes it (`encoder_hidden_states`, `text_encoder_output`, `layer_logits`:
# PixArt's `.half()` of text embeddings, round 45)
TENSOR_NAME = re.compile(
    r"(?:^|_)(?:states?|outputs?|embeds?|embeddings?|features?|feats?|logits|hidden|tokens?|ids|mask|inputs?)$",
    re.IGNORECASE,
)
MODEL_NAME = re.compile(
    r"model|net|module|encoder|decoder|backbone|generator|discriminator|transformer|layer", re.IGNORECASE
)


def float16_models(ctx) -> list[tuple[cst.Call, set[str]]]:
    """(cast, the names its model goes by) of each model the file makes float16, wherever it is made:
    ``model.half()``, ``Net().cuda().half()``, ``model.to(torch.float16)``,
    ``AutoModel.from_pretrained(..., torch_dtype=torch.float16)`` (names: ``model_names``); not
    ``model.half().float()``, which only rounds the values (yolov5) and trains in float32."""
    parents = TreeIndex.of(ctx).parents
    half_kwargs = _float16_kwargs(ctx)
    found = []
    for call in iter_nodes(ctx.module, cst.Call):
        half = half_cast(ctx.resolver, call) and _loaded_model(unmoved(call.func.value))
        loaded = (dotted_name(call.func) or "").endswith("from_pretrained") and any(
            (
                arg.keyword is not None
                and arg.keyword.value in DTYPE_KEYS
                and is_torch_dtype(ctx.resolver, arg.value, "float16", "half")
            )
            or (arg.star == "**" and code_of(arg.value) in half_kwargs)
            for arg in call.args
        )
        restored = method_name(parents.get(parents.get(call))) == "float"
        if (half or loaded) and not restored:
            statement = statement_of(ctx, call)
            names = model_names(call, statement)
            names |= _kept_as_attributes(ctx, statement, names)
            found.append((call, names | _properties_returning(ctx, names)))
    return found


def _properties_returning(ctx, names: set[str]) -> set[str]:
    """The ``self.<property>`` of the file's properties that return one of ``names`` (lmms-eval's
    XComposer2.5: ``self._model = ....half()`` and ``@property def model(self): return self._model``,
    with ``autocast`` over ``self.model.chat(...)``, round 37), also through a call
    (``return self.accelerator.unwrap_model(self._model)``)."""
    found = set()
    for function in iter_nodes(ctx.module, cst.FunctionDef):
        if not any(dotted_name(d.decorator) == "property" for d in function.decorators):
            continue
        returned = [r.value for r in iter_nodes(function.body, cst.Return) if r.value is not None]
        if returned and any(code_of(node) in names for value in returned for node in iter_nodes(value, cst.Attribute)):
            found.add(f"self.{function.name.value}")
    return found


def _kept_as_attributes(ctx, statement: cst.CSTNode, names: set[str]) -> set[str]:
    """The ``self.<attr>`` that the function around ``statement`` assigns one of ``names`` to:
    VLMEvalKit's XComposer2 wrappers run ``model.half()``, then ``self.model = model`` in ``__init__``,
    and autocast over ``self.model`` in ``generate`` (round 29)."""
    function = TreeIndex.of(ctx).function.get(statement)
    if function is None:
        return set()
    return {
        code_of(target.target)
        for assign in iter_nodes(function.body, cst.Assign)
        if isinstance(assign.value, cst.Name) and assign.value.value in names
        for target in assign.targets
        if isinstance(target.target, cst.Attribute) and code_of(target.target.value) == "self"
    }


def float16_defaults(files: PythonFiles, root: Path | None) -> tuple[tuple[str, str], ...]:
    """``(real path, "llama_adapter.py: torch.set_default_tensor_type(torch.cuda.HalfTensor)")`` for each
    file of the project that makes float16 the default dtype of what it builds (also LAVIS'
    ``convert_weights_to_fp16``), and for each file importing one, also through other files: a project
    float16 by design (LLaMA-Adapter, LaVIN, VPGTrans), whose autocasts run over float16 weights built in
    other files (a project fact; NPU340 keeps float16 there). Not the files that reach none: VGen's
    vendored open_clip converts the reward model only, not the UNet its training scripts build (round 44)."""
    sources = {}
    for path, text in files.items():
        match = FLOAT16_DEFAULT.search(text)
        if match is not None:
            shown = path.relative_to(root).as_posix() if root is not None and path.is_relative_to(root) else path.name
            sources[path] = f"{shown}: {match.group().decode().rstrip('(')}"
    if not sources:
        return ()
    reached = importers_of(files, set(sources))
    return tuple(sorted((os.path.realpath(path), sources[source]) for path, source in reached.items()))


def checkpoint_dtype_loads(ctx) -> list[cst.Call]:
    """The ``from_pretrained(..., torch_dtype="auto")`` calls of the file: the weights take the
    checkpoint's dtype, float16 for many (AQLM's quantized checkpoints), which the code does not say."""
    return [
        call
        for call in iter_nodes(ctx.module, cst.Call)
        if (dotted_name(call.func) or "").endswith("from_pretrained")
        and any(
            a.keyword is not None and a.keyword.value in DTYPE_KEYS and string_value(a.value) == "auto"
            for a in call.args
        )
    ]


def float16_dtype_set(ctx) -> str | None:
    """Where the file makes a model float16 or names float16 as its dtype, for a message (None when it
    does not): a cast of :func:`float16_models`, else a ``dtype`` / ``torch_dtype`` keyword or dict key
    holding ``torch.float16`` or a float16 string (DeepSpeed-MII's ``mii_config = {"dtype": "fp16"}``)."""
    casts = ctx.file_state(float16_models)
    if casts:
        return shown_cast(ctx.resolver, casts[0][0])
    for node in iter_nodes(ctx.module, (cst.Arg, cst.DictElement)):
        key = node.keyword.value if isinstance(node, cst.Arg) and node.keyword is not None else None
        key = string_value(node.key) if isinstance(node, cst.DictElement) else key
        if key in DTYPE_KEYS and (
            is_torch_dtype(ctx.resolver, node.value, "float16", "half") or string_value(node.value) in FLOAT16_NAMES
        ):
            return f"{key}={code_of(node.value)}"
    return None


def _float16_kwargs(ctx) -> set[str]:
    """The names of the dicts the file fills with a float16 ``torch_dtype`` (``kwargs["torch_dtype"] =
    torch.float16``, ``kwargs = {"torch_dtype": torch.float16}``, ``dict(torch_dtype=torch.float16)``):
    ``from_pretrained(..., **kwargs)`` loads a float16 model (InternLM-XComposer's memory model)."""
    found = set()
    for assign in iter_nodes(ctx.module, cst.Assign):
        value = assign.value
        for target in (t.target for t in assign.targets):
            if isinstance(target, cst.Subscript) and len(target.slice) == 1:
                key = target.slice[0].slice
                if (
                    isinstance(key, cst.Index)
                    and string_value(key.value) in DTYPE_KEYS
                    and is_torch_dtype(ctx.resolver, value, "float16", "half")
                ):
                    found.add(code_of(target.value))
            elif isinstance(target, cst.Name) and _holds_float16_dtype(ctx, value):
                found.add(target.value)
    return found


def _holds_float16_dtype(ctx, value: cst.BaseExpression) -> bool:
    """``{"torch_dtype": torch.float16, ...}`` or ``dict(torch_dtype=torch.float16, ...)``."""
    if isinstance(value, cst.Dict):
        pairs = [(string_value(e.key), e.value) for e in value.elements if isinstance(e, cst.DictElement)]
    elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict":
        pairs = [(a.keyword.value, a.value) for a in value.args if a.keyword is not None]
    else:
        return False
    return any(key in DTYPE_KEYS and is_torch_dtype(ctx.resolver, v, "float16", "half") for key, v in pairs)


def shown_cast(resolver, cast: cst.Call) -> str:
    """``cast`` for a message, its arguments elided: ``AutoModel.from_pretrained(...).half()``,
    ``model.to(torch.float16)``, ``AutoModel.from_pretrained(..., torch_dtype=torch.float16)``."""
    suffix = half_cast(resolver, cast)
    if suffix is None:
        return f"{dotted_name(cast.func)}(..., torch_dtype=torch.float16)"
    root = unmoved(cast.func.value)
    model = f"{dotted_name(root.func)}(...)" if isinstance(root, cst.Call) else code_of(root)
    return f"{model}{suffix}"


def model_names(cast: cst.Call, statement: cst.CSTNode) -> set[str]:
    """The names (as code) the model ``cast`` casts goes by: the receiver of its chain (``model`` in
    ``model.npu().half()``) and the targets of the assignment of that chain (``net = Net().half()``)."""
    names = {code_of(unmoved(cast))}
    assign = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) else None
    if isinstance(assign, cst.Assign):
        link = assign.value
        while link is not cast and method_name(link) in (*MOVES, "half"):
            link = link.func.value
        if link is cast:
            names.update(code_of(target.target) for target in assign.targets)
    return names


def half_cast(resolver, call: cst.Call) -> str | None:
    """``".half()"`` for ``x.half()``, ``".to(torch.float16)"`` for ``x.to(torch.float16)`` (any
    position, ``torch.half`` too); None for any other call."""
    method = method_name(call)
    if method == "half" and not call.args:
        return ".half()"
    if method == "to" and any(is_torch_dtype(resolver, a.value, "float16", "half") for a in call.args):
        return ".to(torch.float16)"
    return None


def method_name(node: cst.BaseExpression) -> str | None:
    """``eval`` for ``model.eval()``; None for anything but a method call."""
    return node.func.attr.value if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) else None


def unmoved(node: cst.BaseExpression) -> cst.BaseExpression:
    """The model a chain of moves and casts starts from: ``model`` for ``model.cuda().half()``."""
    while method_name(node) in (*MOVES, "half"):
        node = node.func.value
    return node


def _loaded_model(node: cst.BaseExpression) -> bool:
    """A model (``looks_like_model``) or one loaded by a hub call (``AutoModel.from_pretrained(...)``)."""
    loaded = isinstance(node, cst.Call) and (dotted_name(node.func) or "").endswith("from_pretrained")
    return loaded or looks_like_model(node)


def looks_like_model(node: cst.BaseExpression) -> bool:
    """``model``, ``self.net``, ``netG``, a class instantiation ``Net(...)``, or one moved: ``Net().cuda()``."""
    if isinstance(node, cst.Call):
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in MOVES:
            return looks_like_model(node.func.value)
        name = (dotted_name(node.func) or "").rsplit(".", 1)[-1]
        return name[:1].isupper()
    name = (dotted_name(node) or "").rsplit(".", 1)[-1]
    return bool(name) and bool(MODEL_NAME.search(name)) and not TENSOR_NAME.search(name)
