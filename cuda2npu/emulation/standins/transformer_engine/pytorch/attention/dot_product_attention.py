"""``transformer_engine.pytorch.DotProductAttention`` stand-in (``NVIDIA/TransformerEngine``
``transformer_engine/pytorch/attention/dot_product_attention/dot_product_attention.py`` and
``.../utils.py`` ``get_full_mask`` / ``get_alibi``).

Layouts (``qkv_format``): ``sbhd`` [s, b, h, d], ``bshd`` [b, s, h, d], ``thd`` [t, h, d] with
``cu_seqlens_q``/``cu_seqlens_kv`` (int32, b + 1). The output merges heads:
``sbhd`` -> [s_q, b, h*d_v], ``bshd`` -> [b, s_q, h*d_v], ``thd`` -> [t_q, h*d_v].
``softmax_scale`` defaults to ``1/sqrt(kv_channels)`` (the key size if ``kv_channels`` is a
tuple); key/value have ``num_gqa_groups`` heads (query head ``i`` uses group
``i // (heads // groups)``); ``attention_dropout`` applies only in training mode.

Masks (``attn_mask_type``, overridable in ``forward``; ``"causal,padding"`` spellings are
normalised like TE does):

* ``causal`` / ``padding_causal``: upper-triangular mask aligned to the TOP-LEFT corner
  (query ``i`` sees keys ``j <= i``); ``causal_bottom_right`` /
  ``padding_causal_bottom_right`` align it to the bottom-right corner
  (``j <= i + s_kv - s_q``, per sequence for padded/thd inputs).
* ``padding``: ``attention_mask`` is a bool tensor [b, 1, 1, s] (self-attention) or a tuple of
  [b, 1, 1, s_q] and [b, 1, 1, s_kv] masks, where **True means masked out**; alternatively
  ``cu_seqlens_q``/``cu_seqlens_kv`` give the valid prefix lengths.
* ``arbitrary``: ``attention_mask`` broadcastable to [b, h, s_q, s_kv], True = masked out.
* ``window_size=(left, right)`` (-1 = unbounded): query ``i`` sees keys in
  ``[i + off - left, i + off + right]``, ``off = s_kv - s_q`` when aligned bottom-right
  (``bottom_right_diagonal``, default: False for ``causal``/``padding_causal``, True
  otherwise) and 0 top-left. Causal mask types force ``right = 0``.
* ``core_attention_bias_type``: ``post_scale_bias`` (``S = QK^T*scale + bias``),
  ``pre_scale_bias`` (``S = (QK^T + bias)*scale``), ``alibi`` (``-slope * |i + off - j|`` with
  TE's default slopes ``2^(-8k/n)``... when ``alibi_slopes`` is None), or ``no_bias``.

Query rows with no visible key (padding positions, fully masked rows) output 0, as TE's
flash-attention and cuDNN backends do (TE's unfused fallback fills -10000 before softmax
instead). ``inference_params`` (KV cache), padding between packed sequences
(``cu_seqlens_*_padded``), FP8 outputs, context parallelism, ``softmax_type`` other than
``"vanilla"`` and ``return_max_logit`` raise NotImplementedError. Arguments after
``window_size`` are keyword-only in the stand-in.
"""

from __future__ import annotations

import math

import torch

from cuda2npu.emulation.controls import attention_called, drop_probability
from cuda2npu.emulation.standins.flash_attn._masked_attention import masked_attention

from ..module.base import StandinModule, check_options

MASK_TYPES = (
    "no_mask",
    "padding",
    "causal",
    "padding_causal",
    "causal_bottom_right",
    "padding_causal_bottom_right",
    "arbitrary",
)
BIAS_TYPES = ("no_bias", "pre_scale_bias", "post_scale_bias", "alibi")


def normalize_mask_type(attn_mask_type: str) -> str:
    mask_type = attn_mask_type.replace(",", "_")
    mask_type = "padding_causal" if mask_type == "causal_padding" else mask_type
    if mask_type not in MASK_TYPES:
        raise AssertionError(f"attn_mask_type {attn_mask_type} not supported")
    return mask_type


def resolve_window(mask_type: str, window_size) -> tuple[int, int]:
    """TE ``check_set_window_size``: causal types force ``right = 0``; None means unbounded."""
    if "causal" in mask_type:
        return (-1 if window_size is None else window_size[0], 0)
    return (-1, -1) if window_size is None else tuple(window_size)


def default_alibi_slopes(num_heads: int) -> torch.Tensor:
    """TE ``get_alibi`` default slopes for ``num_heads`` heads."""
    n = 2 ** math.floor(math.log2(num_heads))
    slopes = torch.pow(2.0 ** (-8.0 / n), torch.arange(1, 1 + n))
    if n < num_heads:
        extra = torch.pow(2.0 ** (-4.0 / n), torch.arange(1, 1 + 2 * (num_heads - n), 2))
        slopes = torch.cat([slopes, extra])
    return slopes.float()


def _valid_tokens(mask: torch.Tensor, batch: int) -> torch.Tensor:
    return ~mask.reshape(batch, -1).bool()


def _prefix_tokens(cu_seqlens: torch.Tensor, seqlen: int) -> torch.Tensor:
    lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).to(torch.long)
    return torch.arange(seqlen, device=cu_seqlens.device).unsqueeze(0) < lengths.unsqueeze(1)


class DotProductAttention(StandinModule):
    """TE ``DotProductAttention`` (see module docstring); no parameters, TE's ``_extra_state``."""

    def __init__(
        self,
        num_attention_heads,
        kv_channels,
        num_gqa_groups=None,
        attention_dropout=0.0,
        qkv_format="sbhd",
        attn_mask_type="causal",
        window_size=None,
        *,
        bottom_right_diagonal=None,
        layer_number=None,
        attention_type="self",
        softmax_scale=None,
        softmax_type="vanilla",
        return_max_logit=False,
        **options,
    ):
        super().__init__()
        check_options("DotProductAttention", options)
        if softmax_type != "vanilla":
            raise NotImplementedError(f"DotProductAttention(softmax_type={softmax_type!r}) has no CPU stand-in")
        if return_max_logit:
            raise NotImplementedError("DotProductAttention(return_max_logit=True) has no CPU stand-in")
        self.num_attention_heads = num_attention_heads
        self.num_gqa_groups = num_attention_heads if num_gqa_groups is None else num_gqa_groups
        if num_attention_heads % self.num_gqa_groups != 0:
            raise AssertionError("The number of attention heads must be divisible by the number of GQA groups!")
        self.kv_channels = kv_channels
        key_size = kv_channels if isinstance(kv_channels, int) else kv_channels[0]
        self.softmax_scale = 1.0 / math.sqrt(key_size) if softmax_scale is None else softmax_scale
        self.attention_dropout = attention_dropout
        self.qkv_format = qkv_format
        self.attn_mask_type = normalize_mask_type(attn_mask_type)
        self.window_size = window_size
        self.bottom_right_diagonal = bottom_right_diagonal
        self.layer_number = 1 if layer_number is None else layer_number
        self.attention_type = attention_type

    def forward(
        self,
        query_layer,
        key_layer,
        value_layer,
        attention_mask=None,
        qkv_format=None,
        cu_seqlens_q=None,
        cu_seqlens_kv=None,
        cu_seqlens_q_padded=None,
        cu_seqlens_kv_padded=None,
        max_seqlen_q=None,
        max_seqlen_kv=None,
        attn_mask_type=None,
        window_size=None,
        checkpoint_core_attention=False,
        core_attention_bias_type="no_bias",
        core_attention_bias=None,
        alibi_slopes=None,
        fast_zero_fill=True,
        inference_params=None,
        pad_between_seqs=None,
        fp8_output=False,
    ):
        if inference_params is not None:
            raise NotImplementedError("DotProductAttention(inference_params=...) (KV cache) has no CPU stand-in")
        if pad_between_seqs or any(
            p is not None and not torch.equal(p, c)
            for p, c in ((cu_seqlens_q_padded, cu_seqlens_q), (cu_seqlens_kv_padded, cu_seqlens_kv))
        ):
            raise NotImplementedError("DotProductAttention with padding between packed sequences")
        if fp8_output:
            raise NotImplementedError("DotProductAttention(fp8_output=True) has no CPU stand-in")
        if core_attention_bias_type not in BIAS_TYPES:
            raise AssertionError(f"core_attention_bias_type {core_attention_bias_type} not supported")
        qkv_format = qkv_format or self.qkv_format
        mask_type = normalize_mask_type(attn_mask_type or self.attn_mask_type)
        window = resolve_window(mask_type, self.window_size if window_size is None else window_size)
        bottom_right = self.bottom_right_diagonal
        if bottom_right is None:
            bottom_right = mask_type not in ("causal", "padding_causal")
        settings = dict(
            mask_type=mask_type,
            window=window,
            bottom_right=bottom_right,
            bias_type=core_attention_bias_type,
            bias=core_attention_bias,
            alibi_slopes=alibi_slopes,
            dropout_p=self.attention_dropout if self.training else 0.0,
        )
        attention_called("te_dot_product_attention", settings["dropout_p"], self.softmax_scale)
        settings["dropout_p"] = drop_probability(settings["dropout_p"])
        if qkv_format == "thd":
            return self._packed(query_layer, key_layer, value_layer, cu_seqlens_q, cu_seqlens_kv, settings)
        if qkv_format not in ("sbhd", "bshd"):
            raise ValueError(f"qkv_format {qkv_format} not supported")
        q, k, v = query_layer, key_layer, value_layer
        if qkv_format == "sbhd":
            q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
        batch, seqlen_q, seqlen_kv = q.shape[0], q.shape[1], k.shape[1]
        valid_q = torch.ones(batch, seqlen_q, dtype=torch.bool, device=q.device)
        valid_kv = torch.ones(batch, seqlen_kv, dtype=torch.bool, device=q.device)
        if "padding" in mask_type:
            if attention_mask is not None:
                q_mask, kv_mask = (
                    attention_mask if isinstance(attention_mask, (tuple, list)) else (attention_mask, attention_mask)
                )
                valid_q, valid_kv = _valid_tokens(q_mask, batch), _valid_tokens(kv_mask, batch)
            elif cu_seqlens_q is not None and cu_seqlens_kv is not None:
                valid_q, valid_kv = _prefix_tokens(cu_seqlens_q, seqlen_q), _prefix_tokens(cu_seqlens_kv, seqlen_kv)
            else:
                raise AssertionError("padding masks need attention_mask or cu_seqlens_q/cu_seqlens_kv")
        keep = valid_q[:, None, :, None] & valid_kv[:, None, None, :]
        if mask_type == "arbitrary":
            keep = keep & ~attention_mask.bool()
        out = self._attend(q, k, v, keep, valid_q.sum(-1), valid_kv.sum(-1), settings)
        if qkv_format == "sbhd":
            out = out.transpose(0, 1)
        return out.reshape(*out.shape[:2], -1)

    def _packed(self, q, k, v, cu_seqlens_q, cu_seqlens_kv, settings):
        if cu_seqlens_q is None or cu_seqlens_kv is None:
            raise AssertionError("qkv_format='thd' requires cu_seqlens_q and cu_seqlens_kv")
        starts_q, starts_kv = cu_seqlens_q.tolist(), cu_seqlens_kv.tolist()
        outs = []
        for b in range(len(starts_q) - 1):
            q_b = q[starts_q[b] : starts_q[b + 1]].unsqueeze(0)
            k_b = k[starts_kv[b] : starts_kv[b + 1]].unsqueeze(0)
            v_b = v[starts_kv[b] : starts_kv[b + 1]].unsqueeze(0)
            lengths_q = torch.tensor([q_b.shape[1]], device=q.device)
            lengths_kv = torch.tensor([k_b.shape[1]], device=q.device)
            keep = torch.ones(1, 1, q_b.shape[1], k_b.shape[1], dtype=torch.bool, device=q.device)
            outs.append(self._attend(q_b, k_b, v_b, keep, lengths_q, lengths_kv, settings)[0])
        tail = q.new_zeros(q.shape[0] - starts_q[-1], q.shape[1], v.shape[-1])
        out = torch.cat(outs + [tail], dim=0)
        return out.reshape(out.shape[0], -1)

    def _attend(self, q, k, v, keep, lengths_q, lengths_kv, settings):
        """Attention for [b, s, h, d] tensors; ``keep`` [b, 1|h, s_q, s_kv] before window/causal."""
        seqlen_q, seqlen_kv = q.shape[1], k.shape[1]
        offset = (lengths_kv - lengths_q) if settings["bottom_right"] else torch.zeros_like(lengths_q)
        rows = torch.arange(seqlen_q, device=q.device).view(1, 1, -1, 1)
        cols = torch.arange(seqlen_kv, device=q.device).view(1, 1, 1, -1)
        diagonal = rows + offset.view(-1, 1, 1, 1)
        left, right = settings["window"]
        if left >= 0:
            keep = keep & (cols >= diagonal - left)
        if right >= 0:
            keep = keep & (cols <= diagonal + right)
        bias = None
        if settings["bias_type"] == "post_scale_bias":
            bias = settings["bias"].float()
        elif settings["bias_type"] == "pre_scale_bias":
            bias = settings["bias"].float() * self.softmax_scale
        elif settings["bias_type"] == "alibi":
            slopes = settings["alibi_slopes"]
            slopes = default_alibi_slopes(self.num_attention_heads) if slopes is None else slopes.float()
            slopes = slopes.to(q.device).reshape(-1, self.num_attention_heads, 1, 1)
            bias = -slopes * (cols - diagonal).abs().float()
        with torch.autocast(q.device.type, enabled=False):
            return masked_attention(
                q, k, v, keep, softmax_scale=self.softmax_scale, bias=bias, dropout_p=settings["dropout_p"]
            ).out
