"""Tiny local instruction data (``tiny_alpaca/train.json``) and a tiny local Llama for PEFT's OLoRA example."""

import json
import os
import runpy
import sys

EXAMPLES = [
    {"instruction": "Give three tips for staying healthy.", "input": "", "output": "Eat well, exercise, sleep."},
    {"instruction": "What is the capital of France?", "input": "", "output": "Paris."},
    {"instruction": "Add the numbers 2 and 3.", "input": "", "output": "5"},
    {"instruction": "Name a colour.", "input": "", "output": "Blue."},
] * 4

os.makedirs("tiny_alpaca", exist_ok=True)
with open("tiny_alpaca/train.json", "w") as handle:
    json.dump(EXAMPLES, handle)
sys.argv = ["tiny_hf.py", "tiny-llama"]
runpy.run_path(os.path.join(os.environ["CUDA2NPU_E2E_CASES"], "tiny_hf.py"), run_name="__main__")
