"""cuda2npu: migrate PyTorch CUDA projects to Huawei Ascend NPUs."""

__version__ = "0.1.0"
