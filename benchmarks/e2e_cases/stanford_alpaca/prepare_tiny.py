"""Tiny instruction data and a tiny local Llama for stanford_alpaca's train.py (no hub, no GPU)."""

import json
import os
import sys

sys.path.insert(0, os.environ["CUDA2NPU_E2E_CASES"])
from tiny_hf import PAIRS, build_tiny_llama  # noqa: E402

with open("tiny_alpaca.json", "w") as handle:
    json.dump([{"instruction": question, "input": "", "output": answer} for question, answer in PAIRS], handle)
build_tiny_llama()
