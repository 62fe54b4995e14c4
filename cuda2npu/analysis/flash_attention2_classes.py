"""A project's own FlashAttention2 attention classes that an NPU host never builds.

A modeling file copied from transformers (Context-Memory's ``ccm_mistral.py``, transformers 4.37's
``modeling_mistral.py`` with the project's edits) keeps transformers' table of attention classes,
``{"eager": MistralAttention, "flash_attention_2": MistralFlashAttention2, "sdpa": ...}``, and builds
the class ``config._attn_implementation`` names. transformers selects ``flash_attention_2`` on an NPU
host only from 4.51.0 (:data:`FA2_ON_NPU`, docs/reference/transformers.md §1); under a pin allowing an
older release, NPU901 moves every request for it to "sdpa" or "eager", so such a class is never built
there and edits in it change nothing anyone runs (round 31: 9 noise hunks in Context-Memory, 23 in
KVCache-Factory's). Not a class the file builds itself (``MistralFlashAttention2(config)``), nor one
another class of the file derives from.
"""

from __future__ import annotations

import libcst as cst

from cuda2npu.core.literals import string_value
from cuda2npu.core.names import dotted_name
from cuda2npu.core.pins import pin_at_least
from cuda2npu.core.traversal import iter_nodes

FA2_ON_NPU = "4.51.0"  # flash_attention_2 runs on torch_npu's npu_fusion_attention (docs/reference/transformers.md §1)
FA2 = "flash_attention_2"


def unselected_flash_attention2(ctx) -> list[cst.ClassDef]:
    """The file's classes that only transformers' attention table builds under ``flash_attention_2``,
    where the project's transformers pin does not guarantee :data:`FA2_ON_NPU`."""
    if pin_at_least(ctx.options.project.pins, "transformers", FA2_ON_NPU) is True:
        return []
    tabled = {
        dotted_name(element.value)
        for table in iter_nodes(ctx.module, cst.Dict)
        for element in table.elements
        if isinstance(element, cst.DictElement) and string_value(element.key) == FA2
    }
    every_class = list(iter_nodes(ctx.module, cst.ClassDef))
    classes = [c for c in every_class if c.name.value in tabled]
    if not classes:
        return []
    built = {dotted_name(call.func) for call in iter_nodes(ctx.module, cst.Call)}
    bases = {dotted_name(base.value) for c in every_class for base in c.bases}
    return [c for c in classes if c.name.value not in built and c.name.value not in bases]
