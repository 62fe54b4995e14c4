"""Which calls are transformers', and where a value passed to one comes from in the same file.

A value is followed, never guessed: a literal is itself; a name is followed to its assignments and
parameter default in the function using it (else at module level); ``args.field`` to the argparse
``--field`` default and the class field ``field = ...`` / ``field(default=...)`` of this file;
``a if c else b`` to both sides; an attribute of an imported module (``torch.float16``) is itself.
Anything else is a value whose meaning is unknown (no source).
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.analysis.argparse_reads import option_dest
from cuda2npu.core.literals import field_default, string_value
from cuda2npu.core.names import module_qualified
from cuda2npu.core.statements import TreeIndex
from cuda2npu.core.traversal import iter_nodes

HF_PACKAGES = ("transformers",)
ARGUMENT_CLASSES = ("TrainingArguments", "Seq2SeqTrainingArguments")  # the Trainer's arguments
CONSTANTS = ("True", "False", "None")
NO_MODEL = ("Config", "Tokenizer", "TokenizerFast", "Processor", "FeatureExtractor")  # loaders building no model


def is_hf_call(resolver, call: cst.Call) -> bool:
    """A call of something transformers defines (``AutoModel.from_pretrained``, ``TrainingArguments``)."""
    name = resolver.qualified_name(call.func)
    return name is not None and name.split(".")[0] in HF_PACKAGES


def loads_no_model(qualified: str) -> bool:
    """``AutoConfig.from_pretrained``, a tokenizer's, a processor's: it builds no model."""
    owner, _, method = qualified.rpartition(".")
    return method == "from_pretrained" and owner.rpartition(".")[2].endswith(NO_MODEL)


def loads_through_hf(ctx, call: cst.Call) -> bool:
    """``X.from_pretrained(...)`` in a file importing transformers, X not named as a config, tokenizer or
    processor: a project's subclass of a transformers model (Lumina-mGPT's ``ChameleonForConditionalGeneration``,
    ``StreamLlamaForCausalLM``) or one chosen as a value (``model_class.model``) loads through transformers'."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value != "from_pretrained":
        return False
    owner = func.value.attr.value if isinstance(func.value, cst.Attribute) else getattr(func.value, "value", "")
    return (
        isinstance(owner, str)
        and not owner.lower().endswith(tuple(word.lower() for word in NO_MODEL))
        and imports_hf(ctx)
    )


def imports_hf(ctx) -> bool:
    """Whether the file of ``ctx`` imports transformers anywhere (its dict keys such as
    ``attn_implementation`` are then HF's); computed once per file."""
    return ctx.file_state(_imports_hf)


def _imports_hf(ctx) -> bool:
    return any(
        qualified.split(".")[0] in HF_PACKAGES
        for scope in ctx.resolver.scopes.values()
        for names in scope.imports.values()
        for qualified in names
    )


def is_plain_dict_call(resolver, call: cst.Call) -> bool:
    """``dict(...)`` of the builtin (no ``dict`` bound in the file)."""
    return isinstance(call.func, cst.Name) and call.func.value == "dict" and not resolver.is_bound("dict")


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    return next((arg for arg in call.args if arg.keyword is not None and arg.keyword.value == name), None)


def subscript_key(target: cst.BaseExpression) -> str | None:
    """The string key of ``kwargs["key"]`` (a keyword a ``**kwargs`` dict will pass)."""
    if isinstance(target, cst.Subscript) and len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index):
        return string_value(target.slice[0].slice.value)
    return None


def statement_of(ctx, node: cst.CSTNode) -> cst.CSTNode | None:
    """The statement holding ``node`` (where its marker goes)."""
    return TreeIndex.of(ctx).statement_of(node)


def sources(ctx, value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The expressions ``value`` takes its value from in this file (itself when it is a literal)."""
    if isinstance(value, cst.IfExp):
        return sources(ctx, value.body) + sources(ctx, value.orelse)
    if isinstance(value, cst.Name) and value.value not in CONSTANTS:
        return [found for expr in _name_values(ctx, value) for found in sources(ctx, expr)]
    if isinstance(value, cst.Attribute) and not _module_attribute(ctx, value):
        return _field_defaults(ctx, value.attr.value)
    return [value]


def _module_attribute(ctx, value: cst.Attribute) -> bool:
    """``torch.float16``: an attribute of an imported module is itself, not an argparse field."""
    return module_qualified(ctx.resolver.module_scope, value) is not None


def string_sources(ctx, value: cst.BaseExpression, wanted: str) -> list[cst.SimpleString]:
    """The string literals equal to ``wanted`` that ``value`` can take."""
    return [s for s in sources(ctx, value) if isinstance(s, cst.SimpleString) and string_value(s) == wanted]


def _name_values(ctx, name: cst.Name) -> list[cst.BaseExpression]:
    """The values ``name`` is bound to: in its function (parameter defaults, assignments), else, when
    the function binds no such name, at module level."""
    index = TreeIndex.of(ctx)
    statement = statement_of(ctx, name)
    function = index.function.get(statement) if statement is not None else None
    if function is not None:
        params = [p for p in function.params.params + function.params.kwonly_params if _is(p.name, name)]
        local = _assigned_values(ctx, function, name, module_level=False)
        if params or local:
            return [p.default for p in params if p.default is not None] + local
    return _assigned_values(ctx, ctx.module, name, module_level=True)


def _assigned_values(ctx, scope: cst.CSTNode, name: cst.Name, module_level: bool) -> list[cst.BaseExpression]:
    index = TreeIndex.of(ctx)
    found = []
    for node in iter_nodes(scope, (cst.Assign, cst.AnnAssign)):
        if module_level and index.function.get(statement_of(ctx, node)) is not None:
            continue  # a function's local, not the module's name
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        if node.value is not None and any(_is(t, name) for t in targets):
            found.append(node.value)
    return found


def _is(node: cst.CSTNode, name: cst.Name) -> bool:
    return isinstance(node, cst.Name) and node.value == name.value


def _field_defaults(ctx, field: str) -> list[cst.BaseExpression]:
    """Defaults of ``--field`` argparse options and of class fields named ``field`` in this file."""
    found: list[cst.BaseExpression] = []
    for call in TreeIndex.of(ctx).calls:
        if (
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "add_argument"
            and option_dest(call) == field
        ):
            default = keyword(call, "default")
            if default is not None:
                found.append(default.value)
    for cls in iter_nodes(ctx.module, cst.ClassDef):
        for statement in cls.body.body:
            small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) else None
            if isinstance(small, cst.AnnAssign) and _is(small.target, cst.Name(field)) and small.value is not None:
                default = field_default(small.value)
                if default is not None:
                    found.append(default)
    return found
