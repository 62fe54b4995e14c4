"""Tiny instruction data and a tiny local Llama for stanford_alpaca's train.py (no hub, no GPU)."""

import json
import os
import runpy
import sys

EXAMPLES = [
    {"instruction": "Give three tips for staying healthy.", "input": "", "output": "Eat well, exercise, sleep."},
    {"instruction": "What is the capital of France?", "input": "", "output": "Paris."},
    {"instruction": "Add the numbers.", "input": "2 and 3", "output": "5"},
    {"instruction": "Name a colour.", "input": "", "output": "Blue."},
] * 4

with open("tiny_alpaca.json", "w") as handle:
    json.dump(EXAMPLES, handle)
sys.argv = ["tiny_hf.py", "tiny-llama"]
runpy.run_path(os.path.join(os.environ["CUDA2NPU_E2E_CASES"], "tiny_hf.py"), run_name="__main__")
