"""Writes data/tiny/{train,valid,test}.txt (deterministic sentences over a small vocabulary) for
main.py --data data/tiny: no download, tokenized and evaluated in a moment."""

import os
import random

WORDS = "the a model of language learns to predict next word in text from its context and history".split()
LINES = {"train": 80, "valid": 20, "test": 20}
rng = random.Random(0)
os.makedirs(os.path.join("data", "tiny"), exist_ok=True)
for split, count in LINES.items():
    with open(os.path.join("data", "tiny", f"{split}.txt"), "w", encoding="utf8") as target:
        for _ in range(count):
            target.write(" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))) + "\n")
