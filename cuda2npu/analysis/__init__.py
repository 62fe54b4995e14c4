"""What two or more rule families share, below them: analyses of a file or a project (code that never
runs on an NPU host, code that already handles the NPU, CUDA feature gates, the project's imports and
the modules that fail to import), the table of CUDA-only packages, and the builders of portable
expressions and kernel rewrites. Families import this layer and the core, never each other.
"""
