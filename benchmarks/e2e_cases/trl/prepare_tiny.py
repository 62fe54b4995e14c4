"""A tiny local text dataset (``tiny_sft/train.jsonl``) and a tiny local Llama for TRL's sft.py."""

import json
import os
import sys

sys.path.insert(0, os.environ["CUDA2NPU_E2E_CASES"])
from tiny_hf import PAIRS, build_tiny_llama  # noqa: E402

os.makedirs("tiny_sft", exist_ok=True)
with open("tiny_sft/train.jsonl", "w") as handle:
    handle.writelines(
        json.dumps({"text": f"Question: {question} Answer: {answer}"}) + "\n" for question, answer in PAIRS
    )
build_tiny_llama()
