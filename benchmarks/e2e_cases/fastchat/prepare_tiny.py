"""Tiny ShareGPT-style conversations and a tiny local Llama for FastChat's training scripts."""

import json
import os
import sys

sys.path.insert(0, os.environ["CUDA2NPU_E2E_CASES"])
from tiny_hf import PAIRS, build_tiny_llama  # noqa: E402

conversations = [
    {"id": f"tiny-{index}", "conversations": [{"from": "human", "value": question}, {"from": "gpt", "value": answer}]}
    for index, (question, answer) in enumerate(PAIRS)
]
with open("tiny_sharegpt.json", "w") as handle:
    json.dump(conversations, handle)
build_tiny_llama()
