"""transformers' naive model parallelism in a project that never turns it on (project fact
``parallelizes``, cuda2npu/analysis/naive_model_parallel.py): the `if self.model_parallel:` branches of
a copied T5 modeling file stay as written (Context-Memory's ccm_t5.py, round 32)."""

from __future__ import annotations

from cli_helpers import cli, write

T5_STACK = """import torch
from transformers.models.t5.modeling_t5 import T5PreTrainedModel


class T5Stack(T5PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.model_parallel = False

    def parallelize(self, device_map=None):
        self.first_device = "cpu" if "cpu" in self.device_map.keys() else "cuda:" + str(min(self.device_map.keys()))
        self.model_parallel = True

    def forward(self, hidden_states):
        if self.model_parallel:
            torch.cuda.set_device(self.first_device)
        hidden_states = hidden_states.to("cuda")
        if self.model_parallel and hidden_states is not None:
            hidden_states = hidden_states.to("cuda:" + str(1))
        return hidden_states
"""


def test_branches_of_naive_model_parallelism_stay_where_nothing_turns_it_on(tmp_path):
    stack = write(tmp_path / "arch" / "ccm_t5.py", T5_STACK)
    write(tmp_path / "train.py", "from arch.ccm_t5 import T5Stack\n\nmodel = T5Stack(config)\n")
    cli("migrate", tmp_path)
    text = stack.read_text()
    assert "torch.cuda.set_device(self.first_device)" in text and '"cuda:" + str(1)' in text
    assert '"cuda:" + str(min(self.device_map.keys()))' in text  # parallelize() itself is never called
    assert 'hidden_states.to("npu")' in text


def test_they_are_migrated_where_the_project_calls_parallelize(tmp_path):
    stack = write(tmp_path / "arch" / "ccm_t5.py", T5_STACK)
    write(tmp_path / "train.py", "from arch.ccm_t5 import T5Stack\n\nmodel = T5Stack(config)\nmodel.parallelize()\n")
    cli("migrate", tmp_path)
    text = stack.read_text()
    assert "torch.npu.set_device(self.first_device)" in text and '"npu:" + str(1)' in text
