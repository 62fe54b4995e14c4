"""TransformerEngine rules and the generated modules they use."""
