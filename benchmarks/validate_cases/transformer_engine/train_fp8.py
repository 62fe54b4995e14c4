"""A te.TransformerLayer trained for a few steps under FP8 autocast with a delayed-scaling recipe,
the way TE's quickstart guide trains on a CUDA GPU; inputs drawn on the CPU."""

import argparse

import torch
import transformer_engine.pytorch as te
from transformer_engine.common.recipe import DelayedScaling, Format

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=2)
args = parser.parse_args()

torch.manual_seed(0)
hidden, ffn, heads, seq, batch = 64, 128, 4, 16, 2
layer = te.TransformerLayer(hidden, ffn, heads, hidden_dropout=0.0, attention_dropout=0.0)
layer.to(dtype=torch.float32).cuda()
optimizer = torch.optim.AdamW(layer.parameters(), lr=1e-3)
recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")

for step in range(args.steps):
    x = torch.randn(seq, batch, hidden).cuda()
    with te.fp8_autocast(enabled=True, fp8_recipe=recipe):
        y = layer(x)
    loss = y.float().pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    torch.cuda.synchronize()
    print(f"step {step}: loss {loss.item():.5f}")
