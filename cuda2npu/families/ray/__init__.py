"""Ray rules (NPU921–NPU928): GPUs requested from Ray's scheduler and Ray Tune, Ray Train and Ray collectives.

Facts and their upstream sources: docs/reference/ray.md.
"""
