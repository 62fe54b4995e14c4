"""validate entries: TransformerEngine layers as TE's quickstart guide (docs/examples) builds them
on a CUDA GPU: a block of TE's fused modules, te.TransformerLayer, and the guide's own attention."""

import torch
import transformer_engine.pytorch as te

HIDDEN, FFN, HEADS, SEQ, BATCH = 64, 128, 4, 16, 2


class FusedTEBlock(torch.nn.Module):
    """LayerNormLinear (QKV) → attention → Linear → LayerNormMLP, with residuals; ``attention`` is
    TE's DotProductAttention, or the guide's plain-PyTorch one from quickstart_utils."""

    def __init__(self, guide_attention=False):
        super().__init__()
        self.kv_channels = HIDDEN // HEADS
        self.ln_qkv = te.LayerNormLinear(HIDDEN, 3 * HIDDEN, eps=1e-5, bias=True)
        if guide_attention:
            from quickstart_utils import DotProductAttention

            self.attention = DotProductAttention(HEADS, self.kv_channels, attention_dropout=0.0)
        else:
            self.attention = te.DotProductAttention(HEADS, self.kv_channels, attention_dropout=0.0)
        self.projection = te.Linear(HIDDEN, HIDDEN, bias=True)
        self.ln_mlp = te.LayerNormMLP(HIDDEN, FFN, eps=1e-5, bias=True)

    def forward(self, x, attention_mask):
        qkv = self.ln_qkv(x).view(x.size(0), x.size(1), HEADS, 3 * self.kv_channels)
        q, k, v = torch.split(qkv, self.kv_channels, dim=3)
        x = x + self.projection(self.attention(q, k, v, attention_mask))
        return x + self.ln_mlp(x)


def _inputs():
    x = torch.randn(SEQ, BATCH, HIDDEN).cuda()
    mask = torch.triu(torch.ones(SEQ, SEQ, dtype=torch.bool), diagonal=1).cuda()
    return x, mask


def _adam(model):
    return torch.optim.Adam(model.parameters(), lr=1e-3)


def fused_block():
    x, mask = _inputs()
    return FusedTEBlock().cuda(), (x, mask), _adam


def guide_attention_block():
    """The same block around quickstart_utils.DotProductAttention (a file that also uses TE's FP8 API)."""
    x, mask = _inputs()
    return FusedTEBlock(guide_attention=True).cuda(), (x, mask), _adam


def transformer_layer():
    layer = te.TransformerLayer(
        HIDDEN, FFN, HEADS, hidden_dropout=0.0, attention_dropout=0.0, self_attn_mask_type="causal"
    )
    x, _ = _inputs()
    return layer.cuda(), (x,), _adam
