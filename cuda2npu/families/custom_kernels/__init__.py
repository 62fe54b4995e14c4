"""Custom CUDA code no rewrite can port (NPU602–NPU607, tier manual): extensions and Triton
kernels, CUDA-only imports and the fallbacks around them, distribution lookups."""
