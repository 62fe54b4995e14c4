"""apex rules: amp, fused optimizers, fused modules, imports."""
