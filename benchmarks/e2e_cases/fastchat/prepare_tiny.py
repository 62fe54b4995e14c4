"""Tiny ShareGPT-style conversations and a tiny local Llama for FastChat's training scripts."""

import json
import os
import runpy
import sys

CONVERSATIONS = [
    {
        "id": f"tiny-{index}",
        "conversations": [
            {"from": "human", "value": question},
            {"from": "gpt", "value": answer},
        ],
    }
    for index, (question, answer) in enumerate(
        [
            ("Give three tips for staying healthy.", "Eat well, exercise and sleep."),
            ("What is the capital of France?", "Paris."),
            ("Add 2 and 3.", "5."),
            ("Name a colour.", "Blue."),
        ]
        * 4
    )
]

with open("tiny_sharegpt.json", "w") as handle:
    json.dump(CONVERSATIONS, handle)
sys.argv = ["tiny_hf.py", "tiny-llama"]
runpy.run_path(os.path.join(os.environ["CUDA2NPU_E2E_CASES"], "tiny_hf.py"), run_name="__main__")
