"""The validation harness: run the original and the migrated model on the same weights and inputs
and compare outputs, gradients and one optimizer step (``cuda2npu validate``)."""
