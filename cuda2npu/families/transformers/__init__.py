"""Hugging Face transformers on Ascend NPU (NPU901–NPU907): attention implementations, TrainingArguments
switches, device maps and bitsandbytes quantization that only work on CUDA for the transformers
releases a project pins (facts: docs/reference/transformers.md)."""
