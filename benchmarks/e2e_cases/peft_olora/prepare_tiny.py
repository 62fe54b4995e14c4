"""Tiny local instruction data (``tiny_alpaca/train.json``) and a tiny local Llama for PEFT's OLoRA example."""

import json
import os
import sys

sys.path.insert(0, os.environ["CUDA2NPU_E2E_CASES"])
from tiny_hf import PAIRS, build_tiny_llama  # noqa: E402

os.makedirs("tiny_alpaca", exist_ok=True)
with open("tiny_alpaca/train.json", "w") as handle:
    json.dump([{"instruction": question, "input": "", "output": answer} for question, answer in PAIRS], handle)
build_tiny_llama()
