"""validate entry: minGPT's GPT at toy size on the device its Trainer picks ('auto': CUDA when present)."""

import torch
from mingpt.model import GPT

device = "cuda" if torch.cuda.is_available() else "cpu"


def build():
    config = GPT.get_default_config()
    config.model_type = None
    config.n_layer, config.n_head, config.n_embd = 2, 2, 32
    config.vocab_size, config.block_size = 64, 16
    config.embd_pdrop = config.resid_pdrop = config.attn_pdrop = 0.0
    model = GPT(config).to(device)
    tokens = torch.randint(0, 64, (4, 17))
    idx, targets = tokens[:, :-1].contiguous().to(device), tokens[:, 1:].contiguous().to(device)
    return model, (idx, targets), lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3)
