"""Run configurations of training frameworks whose own keys choose CUDA-only code: axolotl's YAML and
the attention choice of MosaicML llm-foundry's model configs (their facts and sources:
docs/reference/run_configs.md §7).

- axolotl (``axolotl.cli.train config.yml``): a YAML with ``base_model`` and at least two of
  axolotl's own top-level keys (``AXOLOTL_KEYS``: ``micro_batch_size``, ``sequence_len``,
  ``sample_packing``, ``num_epochs``, ``datasets`` whose items say ``type:``, ...), which
  ``TrainingArguments`` YAML does not have. axolotl >= 0.6.0 rejects on an NPU host
  (``check_npu_config``) the attention flags ``flash_attention`` / ``sdp_attention`` /
  ``s2_attention``, an ``optimizer`` named with ``bit``, ``load_in_8bit`` / ``load_in_4bit`` and
  ``tf32``; from 0.17.0 also ``attn_implementation: flash_attention_2`` / ``flash_attention_3`` /
  ``sdpa``. ``xformers_attention`` imports xFormers, which cannot be installed there.
  An attention choice is NPU728 (review: turning it off gives the model's eager attention; manual
  with ``sample_packing: true``, where eager attention no longer keeps the packed samples apart),
  ``optimizer`` NPU727 (the decision ``TrainingArguments``' ``optim`` gets:
  cuda2npu/families/transformers/optimizer_names.py; other names with ``bit``: manual), a
  quantization flag NPU907 (manual), ``tf32: true`` NPU904 (→ ``false``).
- llm-foundry / MPT (and models written after them): ``attn_impl: flash`` / ``triton`` (also under
  ``attn_config:``) selects flash-attn's or a Triton kernel, both CUDA-only; ``torch`` is the
  portable path. NPU728, a review item: the key is a model's choice the project's code may read in
  its own way, one finding per key and value in a run.
- A Lightning ``Trainer``'s ``accelerator: gpu`` (under ``trainer:``, or a file building
  ``pytorch_lightning.Trainer`` by ``_target_``, or in a Hydra ``trainer/`` group) in a project whose
  dependencies name Lightning: NPU951, manual (Lightning has no NPU accelerator; NPU951 says so of the
  Python ``Trainer`` too).
- Any run config: ``flex_attention`` at an attention-backend key (torch's FlexAttention raises for an
  NPU tensor) and SGLang's CUDA-only ``attention_backend`` values (``fa3``, ``flashinfer``, ...; the
  NPU's is ``ascend``): NPU728, review items likewise.

The functions return :class:`Flag` s, which cuda2npu/filekinds/runconfigs.py turns into its items.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cuda2npu.core.diagnostics import Tier
from cuda2npu.families.transformers.optimizer_names import optim_decision
from cuda2npu.filekinds.runconfig_entries import Entry
from cuda2npu.filekinds.runconfig_trainer import false_text, is_true

KERNEL_CHOICE = "NPU728"
PREFILTER_WORDS = (
    r"flash_attention|sdp_attention|s2_attention|xformers_attention|attn_impl|optimizer|load_in_[48]bit"
    r"|attention_backend|attn_backend|accelerator"
)
LIGHTNING_CODE = "NPU951"
LIGHTNING_TRAINER = re.compile(r"(?:pytorch_)?lightning(?:\.pytorch)?(?:\.trainer(?:\.trainer)?)?\.Trainer")
LIGHTNING_MESSAGE = (
    "`accelerator: {value}` for a Lightning Trainer, which has no Ascend NPU accelerator: it raises on an NPU host "
    "(its GPUs are CUDA and MPS); give the Trainer an `Accelerator` of your own that runs on torch.npu (Lightning's "
    "Accelerator API), or run the loop with plain torch"
)

# --- axolotl -----------------------------------------------------------------------------------

AXOLOTL_SIGNAL = "base_model"
AXOLOTL_KEYS = {  # axolotl's top-level keys that TrainingArguments (and its YAML) does not have
    "micro_batch_size",
    "sequence_len",
    "sample_packing",
    "num_epochs",
    "val_set_size",
    "dataset_prepared_path",
    "train_on_inputs",
    "pad_to_sequence_len",
    "lora_target_linear",
    "lora_model_dir",
    "eval_sample_packing",
    "lr_scheduler",
}
DATASETS = "datasets"  # counts as one of AXOLOTL_KEYS when its items say `type:` (the prompt format)
PACKING = "sample_packing"
CHECK = "axolotl >= 0.6.0 raises NotImplementedError for it on an NPU host (its config check `check_npu_config`)"
ATTENTION_FLAGS = {
    "flash_attention": f"selects flash-attn's kernels (CUDA-only): {CHECK}, and older releases import flash_attn for it",
    "sdp_attention": f"selects torch's SDPA, which runs on Ascend, but {CHECK}",
    "s2_attention": (
        f"selects shifted-sparse attention, which axolotl builds on flash-attn only: {CHECK} (0.17.0 dropped the "
        "option); without it the attention is full (more memory at long sequences)"
    ),
    "xformers_attention": "imports xFormers, which cannot be installed on an NPU host (its kernels are CUDA ones)",
}
ATTENTION_KEY = "attn_implementation"  # axolotl >= 0.12's key; from 0.17.0 the flags above map to it
AXOLOTL_REJECTED = {"flash_attention_2", "flash_attention_3", "sdpa"}
PACKING_NOTE = (
    "; with `sample_packing: true` eager attention does not keep the packed samples apart (axolotl warns that "
    "packing without flash or SDP attention 'does not handle cross-attention'): also set `sample_packing: false` "
    "(padded batches, more steps), or accept that packed samples attend to each other"
)
QUANTIZATION = (
    f"quantizes the model with bitsandbytes: {CHECK} ('Quantification is currently not supported in Ascend npu'), "
    "and bitsandbytes has no Ascend kernels: set it false and load the model unquantized (more device memory; "
    "`adapter: qlora` needs load_in_4bit, so make it `lora`)"
)
TF32 = (
    f"makes TrainingArguments raise on an NPU host (TF32 needs an Ampere GPU), and {CHECK}: false; the NPU's HF32 "
    "(torch.npu.matmul.allow_hf32) is a different format, enable it yourself if you want it"
)
BIT_OPTIMIZER = (
    "names an optimizer with quantized or bitsandbytes states, and axolotl >= 0.6.0 raises NotImplementedError on "
    "an NPU host for every optimizer named with `bit` (`check_npu_config`): choose another (`adamw_torch`: 32-bit "
    "states, more memory)"
)

# --- llm-foundry / MPT -----------------------------------------------------------------------------

KERNEL_KEY = "attn_impl"
KERNELS = {
    "flash": "flash-attn's kernels (llm-foundry's `flash_attn_fn` raises RuntimeError without flash-attn)",
    "triton": (
        "a FlashAttention kernel of `triton_pre_mlir`, a CUDA-only Triton fork (llm-foundry <= 0.6.0 raises "
        "RuntimeError without it and names `attn_impl: torch` as the other choice; 0.7.0 dropped `triton`)"
    ),
}


# --- attention backends named in any run config ----------------------------------------------------

# `attn_implementation` (transformers), `attention_backend` / `attn_backend` (training frameworks), and
# SGLang's engine option under any prefix (SpecForge's `sglang_attention_backend`)
BACKEND_KEY = re.compile(r"attn_implementation|attn_backend|(?:\w+_)?attention_backend")
FLEX = (
    "selects torch's FlexAttention, which raises on an NPU host (torch's `_validate_device` accepts cuda, cpu, "
    "xpu, hpu and mps devices; transformers' `is_torch_flex_attn_available` is False with torch_npu)"
)
SGLANG_KEY = re.compile(r"(?:\w+_)?attention_backend")
SGLANG_CUDA_BACKENDS = {  # SGLang's `--attention-backend` kernels built for NVIDIA GPUs; `ascend` is the NPU's
    "flashinfer": "FlashInfer's CUDA kernels",
    "fa3": "FlashAttention 3 (Hopper GPUs)",
    "fa4": "FlashAttention 4 (NVIDIA GPUs)",
    "flashmla": "DeepSeek's FlashMLA (Hopper GPUs)",
    "cutlass_mla": "CUTLASS MLA kernels (NVIDIA GPUs)",
    "trtllm_mla": "TensorRT-LLM's MLA kernels (NVIDIA GPUs)",
    "trtllm_mha": "TensorRT-LLM's attention kernels (NVIDIA GPUs)",
}


def attention_backend_flags(entries: list[Entry]) -> list[Flag]:
    """``attention_backend: flex_attention`` (SpecForge's 51 example configs, round 38) and SGLang's
    CUDA-only attention backends (``sglang_attention_backend: fa4``) at any depth: review items, one per
    key and value in a run (the value is what the project's code, or the engine it launches, accepts)."""
    flags = []
    for entry in entries:
        if entry.value == "flex_attention" and BACKEND_KEY.fullmatch(entry.key):
            message = (
                f"`{entry.key}: flex_attention` {FLEX}; choose `sdpa` (or `eager`) if the code reading this "
                "config accepts it"
            )
        elif entry.value in SGLANG_CUDA_BACKENDS and SGLANG_KEY.fullmatch(entry.key):
            message = (
                f"`{entry.key}: {entry.value}` selects {SGLANG_CUDA_BACKENDS[entry.value]}, which do not run on an NPU "
                "host: SGLang's attention backend there is `ascend` (if this is SGLang's option); check which "
                "values the program reading this config accepts"
            )
        else:
            continue
        flags.append(Flag(KERNEL_CHOICE, entry, message, Tier.REVIEW, shared=True))
    return flags


@dataclass(frozen=True)
class Flag:
    """A run-config value a framework reads: its code, tier and message, and the scalar's new text
    (``new``: an edit; None: reported and marked). ``shared``: one finding per key and value in a run."""

    code: str
    entry: Entry
    message: str
    tier: Tier
    new: str | None = None
    shared: bool = False


def is_axolotl_config(top: dict[str, Entry | None], entries: list[Entry]) -> bool:
    """A YAML with ``base_model`` and two of axolotl's own top-level keys (``top``: runconfigs' top-level entries)."""
    if AXOLOTL_SIGNAL not in top:
        return False
    own = AXOLOTL_KEYS.intersection(top)
    typed_datasets = any(e.path[0] == DATASETS and e.path[1:] == ("type",) for e in entries if len(e.path) == 2)
    return len(own) + typed_datasets >= 2


def axolotl_flags(top: dict[str, Entry | None]) -> list[Flag]:
    """The settings of an axolotl config that fail on an NPU host."""
    flags = _attention_flags(top)
    flags += _optimizer_flags(top.get("optimizer"))
    for key in ("load_in_8bit", "load_in_4bit"):
        entry = top.get(key)
        if entry is not None and is_true(entry):
            flags.append(Flag("NPU907", entry, f"axolotl's `{key}: {entry.value}` {QUANTIZATION}", Tier.MANUAL))
    tf32 = top.get("tf32")
    if tf32 is not None and tf32.editable and is_true(tf32):
        flags.append(Flag("NPU904", tf32, f"axolotl's `tf32: {tf32.value}` {TF32}", Tier.NUMERIC, false_text(tf32)))
    return flags


def _attention_flags(top: dict[str, Entry | None]) -> list[Flag]:
    """axolotl's attention choices rejected on an NPU host: a choice of the user (eager attention instead)."""
    packing = top.get(PACKING) is not None and is_true(top[PACKING])
    flags = []
    for key, why in ATTENTION_FLAGS.items():
        entry = top.get(key)
        if entry is None or not is_true(entry):
            continue
        message = f"axolotl's `{key}: {entry.value}` {why}: set it false (the model's eager attention)"
        flags.append(_with_packing(entry, message, packing and key != "s2_attention"))
    entry = top.get(ATTENTION_KEY)
    if entry is not None and entry.value in AXOLOTL_REJECTED:
        message = (
            f"axolotl's `{ATTENTION_KEY}: {entry.value}`: axolotl >= 0.17.0 raises NotImplementedError for it on an "
            "NPU host (`check_npu_config`); older releases hand it to transformers (flash_attention_2 runs on Ascend "
            "from transformers 4.51.0): `eager` runs under every release"
        )
        flags.append(_with_packing(entry, message, packing))
    return flags


def _with_packing(entry: Entry, message: str, packing: bool) -> Flag:
    """A review flag, or a manual one where eager attention would change what packed samples see."""
    if packing:
        return Flag(KERNEL_CHOICE, entry, message + PACKING_NOTE, Tier.MANUAL)
    return Flag(KERNEL_CHOICE, entry, message, Tier.REVIEW)


def _optimizer_flags(entry: Entry | None) -> list[Flag]:
    """axolotl's ``optimizer`` (handed to ``TrainingArguments``' ``optim``): NPU727's decision."""
    if entry is None or not entry.editable or not isinstance(entry.value, str):
        return []
    shown = f"axolotl's `optimizer: {entry.value}` (TrainingArguments' `optim`)"
    decision = optim_decision(entry.value, shown)
    if decision is not None:
        rejected = (
            " (axolotl >= 0.6.0 rejects every optimizer named with `bit` on an NPU host)"
            if "bit" in entry.value
            else ""
        )
        tier = Tier.MANUAL if decision[0] is None else Tier.NUMERIC
        return [Flag("NPU727", entry, decision[1] + rejected, tier, decision[0])]
    if "bit" in entry.value:
        return [Flag("NPU727", entry, f"{shown} {BIT_OPTIMIZER}", Tier.MANUAL)]
    return []


def lightning_trainer_flags(entries: list[Entry], in_trainer_group: bool) -> list[Flag]:
    """NPU951 for ``accelerator: gpu`` (or ``cuda``) of a Lightning ``Trainer`` a run config builds: under a
    ``trainer:`` key, in a file whose ``_target_`` is Lightning's Trainer, or in a Hydra ``trainer/`` config
    group (``in_trainer_group``; safari's ``configs/trainer/default.yaml`` under pytorch-lightning 1.8.6, round
    53). One finding a file (manual): the Trainer is the one thing to change."""
    target = next((e for e in entries if e.path == ("_target_",)), None)
    whole = in_trainer_group or (target is not None and LIGHTNING_TRAINER.fullmatch(str(target.value)) is not None)
    for entry in entries:
        value = str(entry.value).lower() if entry.editable else ""
        if entry.key != "accelerator" or value not in ("gpu", "cuda"):
            continue
        if whole and len(entry.path) == 1 or "trainer" in entry.path[:-1]:
            return [Flag(LIGHTNING_CODE, entry, LIGHTNING_MESSAGE.format(value=entry.value), Tier.MANUAL)]
    return []


def kernel_choice_flags(entries: list[Entry]) -> list[Flag]:
    """``attn_impl: flash`` / ``triton`` at any depth (llm-foundry's ``attn_config.attn_impl``, a model's ``attn_impl``)."""
    flags = []
    for entry in entries:
        if entry.key != KERNEL_KEY or entry.value not in KERNELS:
            continue
        message = (
            f"`{entry.key}: {entry.value}` selects {KERNELS[entry.value]}, which cannot run on an NPU host: "
            "`torch` is llm-foundry's portable attention (torch ops; a model that only tests for "
            f"'{entry.value}' takes its other path for `torch` too); check which values the model reading this "
            "config accepts"
        )
        flags.append(Flag(KERNEL_CHOICE, entry, message, Tier.REVIEW, shared=True))
    return flags
