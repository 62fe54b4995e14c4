"""validate entry: nanoGPT's GPT at 2 layers, built and optimised as its train.py does on one CUDA GPU."""

import torch
from model import GPT, GPTConfig

device = "cuda"
device_type = "cuda" if "cuda" in device else "cpu"


def build():
    config = GPTConfig(block_size=16, vocab_size=96, n_layer=2, n_head=2, n_embd=32, dropout=0.0, bias=True)
    model = GPT(config).to(device)
    tokens = torch.randint(0, config.vocab_size, (4, config.block_size + 1), device=device)

    def optimizer(model):
        # fused AdamW where device_type == "cuda", as in nanoGPT's configure_optimizers
        return model.configure_optimizers(
            weight_decay=0.1, learning_rate=1e-3, betas=(0.9, 0.95), device_type=device_type
        )

    return model, (tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()), optimizer
