"""A tiny local text dataset (``tiny_sft/train.jsonl``) and a tiny local Llama for TRL's sft.py."""

import json
import os
import runpy
import sys

TEXTS = [
    "Question: Give three tips for staying healthy. Answer: Eat well, exercise and sleep.",
    "Question: What is the capital of France? Answer: Paris.",
    "Question: Add 2 and 3. Answer: 5.",
    "Question: Name a colour. Answer: Blue.",
] * 4

os.makedirs("tiny_sft", exist_ok=True)
with open("tiny_sft/train.jsonl", "w") as handle:
    handle.writelines(json.dumps({"text": text}) + "\n" for text in TEXTS)
sys.argv = ["tiny_hf.py", "tiny-llama"]
runpy.run_path(os.path.join(os.environ["CUDA2NPU_E2E_CASES"], "tiny_hf.py"), run_name="__main__")
