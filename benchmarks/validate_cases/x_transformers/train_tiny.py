"""An x-transformers decoder trained for a few steps with its AutoregressiveWrapper, the way its
train_enwik8.py trains on a CUDA GPU (gradient clipping, Adam), on random tokens drawn on the CPU."""

import argparse

import torch
from x_transformers import AutoregressiveWrapper, Decoder, TransformerWrapper

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=2)
args = parser.parse_args()

torch.manual_seed(0)
model = TransformerWrapper(
    num_tokens=64, max_seq_len=16, attn_layers=Decoder(dim=32, depth=2, heads=2, rotary_pos_emb=True)
)
model = AutoregressiveWrapper(model).cuda()
optim = torch.optim.Adam(model.parameters(), lr=1e-3)
data = torch.randint(0, 64, (64, 17))

for step in range(args.steps):
    model.train()
    batch = data[torch.randint(0, len(data), (4,))].cuda()
    loss = model(batch)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    optim.step()
    optim.zero_grad()
    print(f"step {step}: loss {loss.item():.4f}")
