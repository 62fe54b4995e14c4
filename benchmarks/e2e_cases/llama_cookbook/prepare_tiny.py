"""A tiny local Llama for llama-cookbook's finetuning.py (its custom dataset is tiny_dataset.py)."""

import os
import runpy
import sys

sys.argv = ["tiny_hf.py", "tiny-llama"]
runpy.run_path(os.path.join(os.environ["CUDA2NPU_E2E_CASES"], "tiny_hf.py"), run_name="__main__")
