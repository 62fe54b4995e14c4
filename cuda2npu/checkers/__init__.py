"""Rule implementations, one module per family; importing this package registers them all."""

from cuda2npu.checkers import (  # noqa: F401
    cuda_api,
    custom_kernels,
    device,
    device_strings,
    distributed,
    env_vars,
)
