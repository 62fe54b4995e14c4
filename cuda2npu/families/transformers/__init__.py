"""Hugging Face transformers on Ascend NPU (NPU901–NPU906): attention implementations, TrainingArguments
switches and device maps that only work on CUDA for the transformers releases a project pins
(facts: docs/reference/transformers.md)."""
