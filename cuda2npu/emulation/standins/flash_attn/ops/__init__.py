"""``flash_attn.ops`` stand-in: the RMSNorm and rotary entry points cuda2npu rewrites."""
