"""``apex.optimizers.FusedMixedPrecisionLamb`` (NVIDIA/apex ``apex/optimizers/fused_mixed_precision_lamb.py``, ``csrc/multi_tensor_lamb_mp.cu``): the
generated companion's class (cuda2npu/templates/apex_npu_optimizers.py, whose docstring says what it
computes and where it differs from apex), so both sides of a validation run one implementation of
apex's semantics, which tests/test_apex_optimizers_numeric.py checks against an independent
reference written from apex's kernels."""

from cuda2npu.templates.apex_npu_optimizers import FusedMixedPrecisionLamb

__all__ = ["FusedMixedPrecisionLamb"]
