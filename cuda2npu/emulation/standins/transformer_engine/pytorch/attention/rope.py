"""``transformer_engine.pytorch.attention.rope`` stand-in (``NVIDIA/TransformerEngine``
``transformer_engine/pytorch/attention/rope.py``).

``RotaryPositionEmbedding(dim, ...)(max_seq_len, offset=0)`` returns the angles
``[s, 1, 1, dim]``: position ``i + offset`` (interpolated when asked) times
``inv_freq = base ** (-arange(0, dim, 2) / dim)``, the half-width angles concatenated twice
(``cat(f, f)``) or, with ``interleaved``, each repeated in place. ``inv_freq`` is a persistent
buffer, as in TE. ``apply_rotary_pos_emb(t, freqs, tensor_format, ...)`` is TE's unfused path:
``t * cos + rotate_half(t) * sin`` on the first ``freqs.shape[-1]`` channels, cos/sin rounded to
t's dtype, the rest passed through; ``thd`` restarts positions at every sequence of
``cu_seqlens``. ``start_positions`` and context parallelism raise NotImplementedError.
"""

from __future__ import annotations

import torch

__all__ = ["RotaryPositionEmbedding", "apply_rotary_pos_emb"]


class RotaryPositionEmbedding(torch.nn.Module):
    def __init__(
        self,
        dim,
        rotary_percent=1.0,
        seq_len_interpolation_factor=None,
        pretrained_max_position_embeddings=None,
        rotary_base=10000.0,
        interleaved=False,
    ):
        super().__init__()
        if rotary_percent < 1.0:
            dim = int(dim * rotary_percent)
        self.seq_len_interpolation_factor = seq_len_interpolation_factor
        self.pretrained_max_position_embeddings = pretrained_max_position_embeddings
        self.interleaved = interleaved
        self.register_buffer("inv_freq", 1.0 / rotary_base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))

    def forward(self, max_seq_len, offset=0):
        positions = torch.arange(max_seq_len, dtype=torch.float32, device=self.inv_freq.device) + offset
        if self.pretrained_max_position_embeddings is not None and self.seq_len_interpolation_factor is not None:
            if max_seq_len > self.pretrained_max_position_embeddings * self.seq_len_interpolation_factor:
                positions = positions / (max_seq_len / self.pretrained_max_position_embeddings)
            else:
                positions = positions / self.seq_len_interpolation_factor
        angles = positions[:, None] * self.inv_freq[None, :]
        emb = angles.repeat_interleave(2, dim=-1) if self.interleaved else torch.cat([angles, angles], dim=-1)
        return emb[:, None, None, :]


def _rotate_half(x, interleaved):
    if not interleaved:
        first, second = x.chunk(2, dim=-1)
        return torch.cat((-second, first), dim=-1)
    return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)


def _rotate(t, freqs, interleaved):
    """t [s, b, h, d] (sequence first) by freqs [>= s, 1, 1, d2]."""
    freqs = freqs[: t.shape[0]]
    cos, sin = freqs.cos().to(t.dtype), freqs.sin().to(t.dtype)
    rot_dim = freqs.shape[-1]
    rotated, passed = t[..., :rot_dim], t[..., rot_dim:]
    return torch.cat([rotated * cos + _rotate_half(rotated, interleaved) * sin, passed], dim=-1)


def apply_rotary_pos_emb(
    t,
    freqs,
    tensor_format="sbhd",
    start_positions=None,
    interleaved=False,
    fused=False,
    cu_seqlens=None,
    cp_size=1,
    cp_rank=0,
):
    if start_positions is not None or cp_size != 1:
        raise NotImplementedError("apply_rotary_pos_emb stand-in: start_positions and context parallelism")
    if tensor_format == "sbhd":
        return _rotate(t, freqs, interleaved)
    if tensor_format == "bshd":
        return _rotate(t.transpose(0, 1), freqs, interleaved).transpose(0, 1)
    if tensor_format != "thd":
        raise ValueError(f"Unsupported tensor_format: {tensor_format}.")
    assert cu_seqlens is not None, "cu_seqlens must not be None when tensor_format is 'thd'."
    lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).tolist()
    parts = [_rotate(x.unsqueeze(1), freqs, interleaved).squeeze(1) for x in torch.split(t[: sum(lengths)], lengths)]
    return torch.cat(parts + [t[sum(lengths) :]])
