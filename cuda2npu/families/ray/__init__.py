"""Ray rules (NPU921–NPU927): GPUs requested from Ray's scheduler, Ray Train and Ray collectives.

Facts and their upstream sources: docs/reference/ray.md.
"""
