"""flash-attn and SDPA rules (npu_fusion_attention)."""
