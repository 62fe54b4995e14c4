"""The rule families, one subpackage or module each; importing this package registers every rule.

Rules run in registration order, which is this import order (an import also registers the rules of
the family modules it imports first).
"""

from cuda2npu.core.options import Options
from cuda2npu.core.rulebase import REGISTRY, Rule, enabled_in
from cuda2npu.families import (
    advisories,  # noqa: F401
    custom_kernels,  # noqa: F401
    distributed,  # noqa: F401
    precision,  # noqa: F401
    suppression,  # noqa: F401
)
from cuda2npu.families.apex import amp, imports, kernels, modules, optim  # noqa: F401
from cuda2npu.families.attention import flash, sdpa  # noqa: F401
from cuda2npu.families.colossalai import common, keep, native  # noqa: F401
from cuda2npu.families.device import (  # noqa: F401
    cuda_api,  # noqa: F401
    device,
    device_strings,
    env_vars,  # noqa: F401
)
from cuda2npu.families.transformer_engine import rules  # noqa: F401


def enabled_rules(options: Options) -> list[type[Rule]]:
    """Rule classes with at least one enabled code, in the order they run."""
    return enabled_in(REGISTRY, options)
