"""A tiny local Llama for llama-cookbook's finetuning.py, and its tiny texts (read by tiny_dataset.py)."""

import json
import os
import sys

sys.path.insert(0, os.environ["CUDA2NPU_E2E_CASES"])
from tiny_hf import PAIRS, build_tiny_llama  # noqa: E402

with open("tiny_texts.json", "w") as handle:
    json.dump([f"Question: {question} Answer: {answer}" for question, answer in PAIRS], handle)
build_tiny_llama()
