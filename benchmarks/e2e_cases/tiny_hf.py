"""A tiny Llama checkpoint and tokenizer on local disk, and tiny instruction data, for the e2e
cases built on transformers.

    python tiny_hf.py OUT_DIR [TEXT_FILE]

Writes ``OUT_DIR`` (config, random weights, a BPE tokenizer trained on ``TEXT_FILE`` or a built-in
text): nothing comes from a model hub, so the cases run offline. 2 layers, hidden size 32, 4 heads
(2 key/value heads): seconds per step on a CPU. The cases' ``prepare_tiny.py`` scripts import it
(``CUDA2NPU_E2E_CASES`` names this directory) for :func:`build` and :data:`PAIRS`, which each writes in
its project's data format.
"""

from __future__ import annotations

import sys
from pathlib import Path

# (instruction, answer) pairs, 16 examples
PAIRS = [
    ("Give three tips for staying healthy.", "Eat well, exercise and sleep."),
    ("What is the capital of France?", "Paris."),
    ("Add 2 and 3.", "5."),
    ("Name a colour.", "Blue."),
] * 4
TEXT = (
    "Below is an instruction that describes a task. Write a response that appropriately completes "
    "the request. Give three tips for staying healthy. Eat a balanced diet, exercise regularly and "
    "sleep well. What is the capital of France? The capital of France is Paris. "
) * 20


def build(out: Path, text: str) -> None:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<unk>", "<s>", "</s>", "[PAD]"]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.train_from_iterator([text], trainers.BpeTrainer(vocab_size=256, special_tokens=specials))
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="[PAD]"
    )
    wrapped.model_max_length = 128
    wrapped.save_pretrained(out)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(wrapped),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=wrapped.bos_token_id,
        eos_token_id=wrapped.eos_token_id,
        pad_token_id=wrapped.pad_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(out)


def build_tiny_llama(directory: str = "tiny-llama") -> None:
    """The tiny model and tokenizer in ``directory``, on the built-in text."""
    build(Path(directory), TEXT)


if __name__ == "__main__":
    target = Path(sys.argv[1])
    build(target, Path(sys.argv[2]).read_text() if len(sys.argv) > 2 else TEXT)
