"""ColossalAI rules (keep mode and native mode)."""
