"""``flash_attn.ops.triton`` stand-in: :mod:`.layer_norm` (``rms_norm_fn``) and :mod:`.rotary` (``apply_rotary``)."""
