"""``flash_attn.layers`` stand-in: only :mod:`.rotary`'s functional API."""
