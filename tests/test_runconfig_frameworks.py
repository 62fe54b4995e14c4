"""Run configurations read by training frameworks (cuda2npu/filekinds/runconfig_frameworks.py):
axolotl's YAML (NPU728 attention, NPU727 ``optimizer``, NPU907 quantization, NPU904 ``tf32``) and
a model config's ``attn_impl: flash`` / ``triton`` (NPU728)."""

from __future__ import annotations

import json

from cli_helpers import cli, write

from cuda2npu.filekinds.runconfig_entries import yaml_entries
from cuda2npu.filekinds.runconfig_frameworks import is_axolotl_config
from cuda2npu.filekinds.runconfigs import _top_level

CODES = ("NPU728", "NPU727", "NPU907", "NPU904", "NPU901")


def diagnostics(path, *options):
    data = json.loads(cli("check", path, "--format", "json", *options).stdout)
    return [d for d in data["diagnostics"] if d["code"] in CODES]


def findings(path, *options):
    """(file name, line, code, tier) of the findings of the framework keys."""
    return sorted((d["path"].rsplit("/", 1)[-1], d["line"], d["code"], d["tier"]) for d in diagnostics(path, *options))


AXOLOTL = """\
base_model: org/llama-like
model_type: AutoModelForCausalLM

load_in_8bit: false
load_in_4bit: true   # QLoRA
adapter: qlora

datasets:
  - path: org/sft-data
    type: sharegpt
    split: "train"

sequence_len: 4096
sample_packing: true
micro_batch_size: 1
num_epochs: 3
#optimizer: adamw_bnb_8bit
optimizer: paged_adamw_32bit
lr_scheduler: cosine

bf16: auto
fp16: false
tf32: true

xformers_attention:
flash_attention: true
sdp_attention: false
special_tokens:
  pad_token: <|end_of_text|>
"""


def test_an_axolotl_config_gets_its_npu_decisions_byte_for_byte(tmp_path):
    write(tmp_path / "README.md", "torchrun -m axolotl.cli.train sft/llama.yml\n")
    config = tmp_path / "sft" / "llama.yml"
    config.parent.mkdir()
    config.write_bytes(AXOLOTL.replace("\n", "\r\n").encode())
    assert findings(tmp_path) == [
        ("llama.yml", 5, "NPU907", "manual"),  # axolotl rejects quantization on NPU: a person chooses
        ("llama.yml", 18, "NPU727", "numeric"),  # optimizer is TrainingArguments' optim
        ("llama.yml", 23, "NPU904", "numeric"),
        ("llama.yml", 26, "NPU728", "manual"),  # with sample_packing: eager attention mixes packed samples
    ]
    by_code = {d["code"]: d["message"] for d in diagnostics(tmp_path)}
    assert "check_npu_config" in by_code["NPU728"] and "sample_packing: false" in by_code["NPU728"]
    assert "`adapter: qlora` needs load_in_4bit" in by_code["NPU907"]
    cli("migrate", tmp_path)
    lines = config.read_bytes().decode().split("\r\n")
    assert lines[4].startswith("# TODO(cuda2npu): NPU907 axolotl's `load_in_4bit: true` quantizes")
    assert lines[5] == "load_in_4bit: true   # QLoRA"
    assert lines[26].startswith("# TODO(cuda2npu): NPU728 axolotl's `flash_attention: true` selects flash-attn")
    expected = (
        AXOLOTL.replace("optimizer: paged_adamw_32bit", "optimizer: adamw_torch")
        .replace("tf32: true", "tf32: false")
        .replace("load_in_4bit: true", lines[4] + "\nload_in_4bit: true")
        .replace("flash_attention: true", lines[26] + "\nflash_attention: true")
    )
    assert config.read_bytes() == expected.replace("\n", "\r\n").encode()  # comments, order, CRLF kept
    again = config.read_bytes()
    cli("migrate", tmp_path)
    assert config.read_bytes() == again  # idempotent: no second marker, nothing left to edit
    assert findings(tmp_path) == [("llama.yml", 6, "NPU907", "manual"), ("llama.yml", 28, "NPU728", "manual")]


def test_axolotl_attention_choices_without_packing_are_review_items(tmp_path):
    write(tmp_path / "train.py", "import torch\n")
    write(
        tmp_path / "examples" / "a.yaml",
        """\
        base_model: m
        micro_batch_size: 2
        sequence_len: 2048
        sdp_attention: true
        optimizer: adamw_bnb_8bit
        """,
    )
    write(
        tmp_path / "examples" / "b.yaml",
        """\
        base_model: m
        datasets:
          - path: d
            type: alpaca
        num_epochs: 1
        sample_packing: false
        s2_attention: true
        xformers_attention: True
        optimizer: ao_adamw_8bit
        """,
    )
    write(
        tmp_path / "examples" / "c.yaml",
        """\
        base_model: m
        micro_batch_size: 2
        num_epochs: 1
        sample_packing: true
        attn_implementation: flash_attention_2
        optimizer: adamw_torch
        load_in_8bit: false
        """,
    )
    assert findings(tmp_path) == [
        ("a.yaml", 4, "NPU728", "review"),
        ("a.yaml", 5, "NPU727", "manual"),  # 8-bit states: no torch optimizer computes them
        ("b.yaml", 7, "NPU728", "review"),
        ("b.yaml", 8, "NPU728", "review"),
        ("b.yaml", 9, "NPU727", "manual"),  # axolotl's own 8-bit optimizer: rejected for its `bit`
        ("c.yaml", 5, "NPU728", "manual"),  # axolotl's attn_implementation: eager, not NPU901's sdpa
    ]
    assert ("c.yaml", 5, "NPU901", "review") in findings(tmp_path, "--ignore", "NPU728")  # the generic item stays


NOT_AXOLOTL = {
    # TrainingArguments-like YAML: no base_model
    "trainer.yaml": "output_dir: out\nlearning_rate: 1e-5\nflash_attention: true\noptimizer: paged_adamw_32bit\n",
    # base_model with one axolotl key only (Ludwig-like: the rest is nested)
    "ludwig.yaml": "model_type: llm\nbase_model: m\nsequence_len: 512\ntrainer:\n  num_epochs: 1\nflash_attention: true\n",
}


def test_the_same_keys_outside_an_axolotl_config_are_left_alone(tmp_path):
    write(tmp_path / "train.py", "import torch\n")
    for name, text in NOT_AXOLOTL.items():
        write(tmp_path / "configs" / name, text)
    assert findings(tmp_path) == []
    cli("migrate", tmp_path)
    assert {name: (tmp_path / "configs" / name).read_text() for name in NOT_AXOLOTL} == NOT_AXOLOTL


TRAIN_PY = """
import sys

from transformers import HfArgumentParser, TrainingArguments

(args,) = HfArgumentParser(TrainingArguments).parse_yaml_file(yaml_file=sys.argv[1])
"""


def test_an_axolotl_config_also_read_as_training_arguments_gets_one_finding_per_key(tmp_path):
    write(tmp_path / "sft.py", TRAIN_PY)
    text = "base_model: m\noutput_dir: o\nmicro_batch_size: 1\nnum_epochs: 1\nlearning_rate: 1e-5\ntf32: true\n"
    config = write(tmp_path / "axolotl.yaml", text)
    [tf32] = diagnostics(tmp_path)
    assert (tf32["code"], tf32["line"]) == ("NPU904", 6) and tf32["message"].startswith("axolotl's `tf32: true`")
    cli("migrate", tmp_path)
    assert config.read_text() == text.replace("tf32: true", "tf32: false")


def test_is_axolotl_config():
    def axolotl(text):
        entries = yaml_entries(text)
        return is_axolotl_config(_top_level(entries), entries)

    assert axolotl("base_model: m\nmicro_batch_size: 1\nsample_packing: true\n")
    assert axolotl("base_model: m\ndatasets:\n  - path: d\n    type: alpaca\nnum_epochs: 2\n")
    assert not axolotl("base_model: m\ndatasets:\n  - path: d\nnum_epochs: 2\n")  # datasets without type
    assert not axolotl("model_name_or_path: m\nmicro_batch_size: 1\nsample_packing: true\n")


MODEL_CONFIG = """\
model:
  name: mosaic_llama
  d_model: 2048
  attn_impl: flash   # fast
  l0_module:
    target_sparsity: 0.5
"""


def test_attn_impl_flash_or_triton_is_reviewed_once_per_value(tmp_path):
    write(tmp_path / "train.py", "import torch\n")
    for size in ("1b", "3b", "7b"):
        write(tmp_path / "configs" / f"{size}.yaml", MODEL_CONFIG)
    mpt = write(
        tmp_path / "configs" / "mpt.yaml",
        "model:\n  name: mpt_causal_lm\n  attn_config:\n    attn_impl: triton\n    alibi: true\n",
    )
    write(tmp_path / "hf" / "config.json", '{"attn_config": {"attn_impl": "triton"}, "model_type": "mpt"}\n')
    portable = "model:\n  attn_config:\n    attn_impl: torch\nflow: {attn_impl: flash}\n"
    write(tmp_path / "configs" / "cpu.yaml", portable)
    assert findings(tmp_path) == [
        ("1b.yaml", 4, "NPU728", "review"),  # stands for 3b and 7b
        ("mpt.yaml", 4, "NPU728", "review"),  # stands for hf/config.json (JSON: no marker anyway)
    ]
    [flash] = [d for d in diagnostics(tmp_path) if d["path"].endswith("1b.yaml")]
    assert "`torch`" in flash["message"] and "the same in 2 other config files" in flash["message"]
    cli("migrate", tmp_path)
    marked = (tmp_path / "configs" / "1b.yaml").read_text()
    assert marked.splitlines()[3].startswith("  # TODO(cuda2npu): NPU728 review: `attn_impl: flash` selects flash-attn")
    assert marked.replace(marked.splitlines()[3] + "\n", "") == MODEL_CONFIG  # the value is never rewritten
    assert (tmp_path / "configs" / "3b.yaml").read_text() == MODEL_CONFIG
    assert mpt.read_text().splitlines()[3].startswith("    # TODO(cuda2npu): NPU728 review: `attn_impl: triton`")
    assert mpt.read_text().endswith("attn_impl: triton\n    alibi: true\n")
    assert (tmp_path / "configs" / "cpu.yaml").read_text() == portable
    cli("migrate", tmp_path)
    assert (tmp_path / "configs" / "1b.yaml").read_text() == marked


DRAFT_CONFIG = """\
model:
  target_model_path: Qwen/Qwen3-8B
training:
  attention_backend: flex_attention
  num_epochs: 10
inference:
  sglang_attention_backend: fa4   # Blackwell
"""


def test_flex_attention_and_sglang_cuda_backends_are_reviewed_once_per_value(tmp_path):
    """SpecForge (round 38): 51 example configs say `attention_backend: flex_attention` (FlexAttention
    raises on an NPU device) and some name SGLang's CUDA-only attention backends; `sdpa`, `ascend` and
    a `flex_attention` under another key are left alone."""
    write(tmp_path / "train.py", "import torch\n")
    for name in ("qwen3-8b", "llama3-8b"):
        write(tmp_path / "configs" / f"{name}.yaml", DRAFT_CONFIG)
    npu = "training:\n  attention_backend: sdpa\ninference:\n  sglang_attention_backend: ascend\nmask: flex_attention\n"
    write(tmp_path / "configs" / "qwen3-8b-npu.yaml", npu)
    assert findings(tmp_path) == [("llama3-8b.yaml", 4, "NPU728", "review"), ("llama3-8b.yaml", 7, "NPU728", "review")]
    flex, sglang = sorted(diagnostics(tmp_path), key=lambda d: d["line"])
    assert "FlexAttention" in flex["message"] and "the same in 1 other config file" in flex["message"]
    assert "`ascend`" in sglang["message"]
    cli("migrate", tmp_path)
    marked = (tmp_path / "configs" / "llama3-8b.yaml").read_text().splitlines()
    assert marked[3].startswith("  # TODO(cuda2npu): NPU728 review: `attention_backend: flex_attention` selects")
    assert (
        marked[4] == "  attention_backend: flex_attention"
        and marked[8] == "  sglang_attention_backend: fa4   # Blackwell"
    )
    assert (tmp_path / "configs" / "qwen3-8b.yaml").read_text() == DRAFT_CONFIG
    assert (tmp_path / "configs" / "qwen3-8b-npu.yaml").read_text() == npu


def test_r53_a_lightning_trainers_gpu_accelerator_in_a_run_config_is_marked(tmp_path):
    """safari (round 53): Hydra's `configs/trainer/default.yaml` builds `pytorch_lightning.Trainer` with
    `accelerator: gpu`, and experiment files set it under `trainer:`; Lightning has no NPU accelerator. One
    finding a file; none outside a Trainer, nor in a project whose dependencies name no Lightning."""
    write(tmp_path / "configs" / "trainer" / "default.yaml", "devices: 1\naccelerator: gpu\nmax_epochs: 200\n")
    write(tmp_path / "configs" / "experiment" / "base.yaml", "trainer:\n  accelerator: gpu\n  devices: 8\n")
    write(tmp_path / "configs" / "model" / "mlp.yaml", "_target_: mlp.Model\naccelerator: gpu\n")
    write(tmp_path / "configs" / "full.yaml", "_target_: pytorch_lightning.Trainer\naccelerator: cuda\n")

    def lightning_findings():
        data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
        return sorted(
            (d["path"].rsplit("/", 1)[-1], d["line"], d["tier"]) for d in data["diagnostics"] if d["code"] == "NPU951"
        )

    assert lightning_findings() == []
    write(tmp_path / "requirements.txt", "pytorch-lightning==1.8.6\n")
    assert lightning_findings() == [
        ("base.yaml", 2, "manual"),
        ("default.yaml", 2, "manual"),
        ("full.yaml", 2, "manual"),
    ]
