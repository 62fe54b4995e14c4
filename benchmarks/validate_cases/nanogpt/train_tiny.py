"""A 2-layer nanoGPT trained for a few steps the way nanoGPT's train.py trains on one CUDA GPU:
autocast, GradScaler, fused AdamW, gradient clipping, pinned batches copied with non_blocking.
Tokens are drawn on the CPU (the same on every device), so no data files are needed."""

import argparse
from contextlib import nullcontext

import torch
from model import GPT, GPTConfig

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=2)
parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
parser.add_argument("--device", default="cuda")
args = parser.parse_args()

batch_size, block_size = 4, 16
torch.manual_seed(1337)
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
device_type = "cuda" if "cuda" in args.device else "cpu"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]
ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type, dtype=ptdtype)

config = GPTConfig(block_size=block_size, vocab_size=96, n_layer=2, n_head=2, n_embd=32, dropout=0.0, bias=False)
data = torch.randint(0, config.vocab_size, (4096,), generator=torch.Generator().manual_seed(0))


def get_batch():
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i : i + block_size] for i in ix])
    y = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix])
    if device_type == "cuda":
        return x.pin_memory().to(args.device, non_blocking=True), y.pin_memory().to(args.device, non_blocking=True)
    return x.to(args.device), y.to(args.device)


model = GPT(config).to(args.device)
scaler = torch.cuda.amp.GradScaler(enabled=(args.dtype == "float16"))
optimizer = model.configure_optimizers(0.1, 1e-3, (0.9, 0.95), device_type)

for step in range(args.steps):
    X, Y = get_batch()
    with ctx:
        logits, loss = model(X, Y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    if device_type == "cuda":
        torch.cuda.synchronize()
    print(f"step {step}: loss {loss.item():.4f}")
