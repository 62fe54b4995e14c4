"""validate entries: x-transformers decoders at toy size, as its README builds them on a CUDA GPU."""

import torch
from x_transformers import Decoder, Encoder, TransformerWrapper

NUM_TOKENS, SEQ = 64, 16


def _adam(model):
    return torch.optim.Adam(model.parameters(), lr=1e-3)


def decoder():
    """A GPT-like decoder with rotary embeddings, SwiGLU feed-forward and flash (SDPA) attention."""
    model = TransformerWrapper(
        num_tokens=NUM_TOKENS,
        max_seq_len=SEQ,
        attn_layers=Decoder(dim=32, depth=2, heads=2, rotary_pos_emb=True, ff_glu=True, attn_flash=True),
    ).cuda()
    tokens = torch.randint(0, NUM_TOKENS, (2, SEQ)).cuda()
    return model, (tokens,), _adam


def encoder():
    """A BERT-like encoder with a padding mask, RMSNorm and the non-flash attention path."""
    model = TransformerWrapper(
        num_tokens=NUM_TOKENS,
        max_seq_len=SEQ,
        attn_layers=Encoder(dim=32, depth=2, heads=2, use_rmsnorm=True, attn_dim_head=8),
    ).cuda()
    tokens = torch.randint(0, NUM_TOKENS, (2, SEQ)).cuda()
    mask = torch.ones(2, SEQ, dtype=torch.bool).cuda()
    mask[1, SEQ // 2 :] = False
    return model, {"x": tokens, "mask": mask}, _adam
