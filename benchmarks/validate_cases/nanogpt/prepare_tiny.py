"""Writes data/tiny/{train,val}.bin (uint16 tokens, as nanoGPT's prepare.py scripts do) and meta.pkl
for nanoGPT's own train.py; deterministic, no download, no numpy."""

import array
import os
import pickle
import random

vocab_size = 96
os.makedirs(os.path.join("data", "tiny"), exist_ok=True)
rng = random.Random(0)
for split, count in (("train", 8192), ("val", 1024)):
    tokens = array.array("H", (rng.randrange(vocab_size) for _ in range(count)))
    with open(os.path.join("data", "tiny", f"{split}.bin"), "wb") as handle:
        tokens.tofile(handle)
with open(os.path.join("data", "tiny", "meta.pkl"), "wb") as handle:
    pickle.dump({"vocab_size": vocab_size}, handle)
