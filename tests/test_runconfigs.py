"""Run configurations (YAML, JSON, TOML read by the code): reported by check, edited by migrate (NPU72x)."""

from __future__ import annotations

import json
import textwrap

import pytest
from cli_helpers import cli, write

from cuda2npu.filekinds.runconfig_code import config_keys, consumed_keys
from cuda2npu.filekinds.runconfig_entries import yaml_entries, yaml_flow_entries
from cuda2npu.filekinds.runconfig_files import is_run_config

READER = """
import torch
import yaml

cfg = yaml.safe_load(open("config.yaml"))
model = torch.nn.Linear(2, 2).to(cfg["device"])
torch.distributed.init_process_group(backend=cfg.get("dist_backend"))
"""


def findings(path, *options):
    """(file name, line, code, tier) of the NPU72x findings of ``check``."""
    data = json.loads(cli("check", path, "--format", "json", *options).stdout)
    found = [(d["path"].rsplit("/", 1)[-1], d["line"], d["code"], d["tier"]) for d in data["diagnostics"]]
    return sorted(f for f in found if f[2].startswith("NPU72"))


def test_keys_the_code_passes_to_a_device_or_backend_are_edited_byte_for_byte(tmp_path):
    write(tmp_path / "train.py", READER)
    yaml_text = '# run\r\ndevice: "cuda:0"   # GPU 0\r\nsteps: 10\r\ntrain:\r\n  dist_backend: nccl\r\n'
    (tmp_path / "config.yaml").write_bytes(b"\xef\xbb\xbf" + yaml_text.encode())
    toml = write(tmp_path / "conf" / "run.toml", "[run]\ndevice = 'cuda'  # x\nother = \"cuda\"\n")
    js = write(tmp_path / "conf" / "run.json", '{"device": "cuda", "name": "cuda", "dist_backend": "nccl"}\n')
    assert findings(tmp_path) == [
        ("config.yaml", 2, "NPU721", "exact"),
        ("config.yaml", 5, "NPU722", "exact"),
        ("run.json", 1, "NPU721", "exact"),
        ("run.json", 1, "NPU722", "exact"),
        ("run.toml", 2, "NPU721", "exact"),
    ]
    assert cli("migrate", tmp_path).exit_code == 0
    expected = yaml_text.replace('"cuda:0"', '"npu:0"').replace("nccl", "hccl")
    assert (tmp_path / "config.yaml").read_bytes() == b"\xef\xbb\xbf" + expected.encode()
    assert toml.read_text() == "[run]\ndevice = 'npu'  # x\nother = \"cuda\"\n"
    assert js.read_text() == '{"device": "npu", "name": "cuda", "dist_backend": "hccl"}\n'
    assert findings(tmp_path) == []
    assert cli("migrate", tmp_path, "--check").exit_code == 0


FLOW_YAML = """# a run, gpt-neox style: one flow mapping
{
   # parallelism
   "pipe_parallel_size": 1,
   "zero_optimization": {"stage": 1, "overlap_comm": True,},
   "note": "a # in a string",
   'quoted': 'it''s',
   plain_key: plain value,
   "distributed_backend": "nccl",  # the collective backend
}
"""


def test_a_yaml_flow_mapping_with_comments_and_trailing_commas_is_read():
    entries = {e.path: e for e in yaml_entries(FLOW_YAML)}
    assert entries[("zero_optimization", "overlap_comm")].value == "True"
    assert entries[("note",)].value == "a # in a string"
    assert entries[("quoted",)].value is None and not entries[("quoted",)].editable  # an escape: not read
    assert entries[("plain_key",)].value == "plain value"
    backend = entries[("distributed_backend",)]
    assert (backend.value, backend.quote, backend.line, FLOW_YAML[backend.start : backend.end]) == (
        "nccl",
        '"',
        9,
        '"nccl"',
    )
    assert yaml_flow_entries("{ unclosed: 1\n") is None and yaml_flow_entries("key: value\n") is None


def test_a_flow_mapping_run_config_is_edited_byte_for_byte(tmp_path):
    write(tmp_path / "train.py", READER.replace('cfg.get("dist_backend")', 'cfg["distributed_backend"]'))
    config = write(tmp_path / "config.yaml", FLOW_YAML)
    assert findings(tmp_path) == [("config.yaml", 9, "NPU722", "exact")]
    cli("migrate", tmp_path)
    assert config.read_text() == FLOW_YAML.replace('"nccl"', '"hccl"')


def test_device_named_keys_nobody_is_seen_reading_get_one_review_finding_per_project(tmp_path):
    write(tmp_path / "train.py", "import torch\n")
    text = 'model: resnet\ndevice: "cuda"\nkernel: cuda\n'
    for i in range(5):
        write(tmp_path / "configs" / f"exp{i}.yaml", text)
    write(tmp_path / "configs" / "exp.json", '{"device": "cuda"}')
    write(tmp_path / "configs" / "run.toml", 'backend = "nccl"\n')
    assert findings(tmp_path) == [
        ("exp.json", 1, "NPU721", "review"),
        ("run.toml", 1, "NPU722", "review"),
    ]  # the five YAML files share the JSON's finding: one per key and value
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    [device] = [d for d in data["diagnostics"] if d["code"] == "NPU721"]
    assert "the same in 5 other config files" in device["message"]
    cli("migrate", tmp_path)
    assert (tmp_path / "configs" / "exp.json").read_text() == '{"device": "cuda"}'  # JSON: reported only
    assert (tmp_path / "configs" / "exp0.yaml").read_text() == text  # the unmarked copies stay as they were
    marked = (tmp_path / "configs" / "run.toml").read_text()
    assert marked.startswith("# TODO(cuda2npu): NPU722 review: `backend: nccl` names a CUDA backend")
    cli("migrate", tmp_path)
    assert (tmp_path / "configs" / "run.toml").read_text() == marked  # no second marker


def test_yaml_marker_is_indented_like_its_key_and_markers_can_be_turned_off(tmp_path):
    write(tmp_path / "a.py", "import torch\n")
    cfg = write(tmp_path / "cfg.yml", "trainer:\n  train_device: cuda\n")
    cli("migrate", tmp_path, "--no-review-markers")
    assert cfg.read_text() == "trainer:\n  train_device: cuda\n"
    cli("migrate", tmp_path)
    assert cfg.read_text().splitlines()[1].startswith("  # TODO(cuda2npu): NPU721 review: `train_device: cuda`")


def test_values_the_line_reader_does_not_own_are_left_alone(tmp_path):
    write(tmp_path / "train.py", READER)
    text = textwrap.dedent(
        """\
        base: &base
          device: cuda
        flow: {device: cuda}
        text: |
          device: cuda
        multi: first
          device: cuda
        escaped: "cu\\x64a"
        device: cuda  # noqa: NPU721
        """
    )
    cfg = write(tmp_path / "config.yaml", text)
    assert findings(tmp_path) == []
    cli("migrate", tmp_path)
    assert cfg.read_text() == text


@pytest.mark.parametrize(
    ("relative", "expected"),
    [
        ("configs/exp.yaml", True),
        ("ds_config.json", True),
        ("settings.toml", True),
        (".github/workflows/ci.yml", False),
        (".gitlab-ci.yml", False),
        (".pre-commit-config.yaml", False),
        ("environment-gpu.yml", False),
        ("GEdit-Bench/qwen25vl_environment.yml", False),  # a conda environment file (Step1X-Edit, round 45)
        ("configs/environments.yaml", False),
        ("pyproject.toml", False),
        ("web/package.json", False),
        ("tsconfig.build.json", False),
        (".vscode/settings.json", False),
        ("docs/mkdocs.yml", False),
        ("notebook.ipynb", False),
        ("cuda2npu.toml", False),
    ],
)
def test_which_files_are_run_configurations(relative, expected):
    from pathlib import Path

    assert is_run_config(Path(relative)) is expected


def test_tooling_and_large_files_are_not_read(tmp_path):
    write(tmp_path / "train.py", READER)
    write(tmp_path / ".github" / "workflows" / "ci.yml", "device: cuda\n")
    big = tmp_path / "data.json"
    big.write_text('{"device": "cuda", "pad": "' + "x" * (1 << 20) + '"}')
    assert findings(tmp_path) == []


def test_config_keys_know_attention_keys_and_the_trainer_taking_deepspeed_configs(tmp_path):
    reader = (
        b"p = HfArgumentParser(ModelArguments)\nm = load(name, attn_implementation=model_args.attn_implementation)\n"
    )
    assert config_keys({tmp_path / "a.py": reader}) == (("attention", "attn_implementation"), ("trainer", "deepspeed"))
    builder = b'args = TrainingArguments(output_dir="o", fp16=fp16, deepspeed=deepspeed)\n'
    assert config_keys({tmp_path / "b.py": builder}) == (("trainer", "deepspeed"),)
    assert config_keys({tmp_path / "c.py": b'args = TrainingArguments(output_dir="o")\n'}) == ()


def test_consumed_keys_follow_reads_into_device_and_backend_consumers():
    source = """
        device = cfg.get("infer_device", "cuda")
        x.to(device)
        y = torch.zeros(2, device=self.config.train.dev)
        torch.device(opt.gpu if torch.cuda.is_available() else "cpu")
        dist.init_process_group(cfg["backend"], rank=0)
        z.to(batch.device)
        w.to(other["device"] + ":0")
    """
    assert consumed_keys(textwrap.dedent(source)) == {
        ("device", "infer_device"),
        ("device", "dev"),
        ("device", "gpu"),
        ("backend", "backend"),
    }


DS_CONFIG = """
{
  "train_micro_batch_size_per_gpu": "auto",
  "fp16": {
    "enabled": true,
    "loss_scale": 0,
    "initial_scale_power": 16
  },
  "zero_optimization": {
    "stage": 3,
    "offload_param": {"device": "nvme", "nvme_path": "/nvme"},
    "zero_quantized_gradients": true
  }
}
"""


def test_deepspeed_fp16_block_becomes_bf16_under_the_bf16_policy(tmp_path):
    ds = write(tmp_path / "ds_config.json", DS_CONFIG, newline="\r\n")
    assert findings(tmp_path) == [
        ("ds_config.json", 3, "NPU723", "numeric"),
        ("ds_config.json", 11, "NPU724", "manual"),
    ]
    assert findings(tmp_path, "--precision", "fp16") == [("ds_config.json", 11, "NPU724", "manual")]
    cli("migrate", tmp_path)
    expected = (
        textwrap.dedent(DS_CONFIG)
        .lstrip("\n")
        .replace(
            '"fp16": {\n    "enabled": true,\n    "loss_scale": 0,\n    "initial_scale_power": 16\n  }',
            '"bf16": {\n    "enabled": true\n  }',
        )
    )
    assert ds.read_bytes() == expected.replace("\n", "\r\n").encode()
    assert findings(tmp_path) == [("ds_config.json", 9, "NPU724", "manual")]
    cli("migrate", tmp_path)
    assert ds.read_bytes() == expected.replace("\n", "\r\n").encode()


@pytest.mark.parametrize(
    ("config", "after"),
    [
        (  # an existing disabled bf16 block is switched on, fp16 off
            '{"zero_optimization": {"stage": 2}, "fp16": {"enabled": true, "loss_scale": 0}, "bf16": {"enabled": false}}',
            '{"zero_optimization": {"stage": 2}, "fp16": {"enabled": false, "loss_scale": 0}, "bf16": {"enabled": true}}',
        ),
        (
            '{"zero_optimization": {}, "fp16": {"enabled": true}}',
            '{"zero_optimization": {}, "bf16": {"enabled": true}}',
        ),
        ('{"zero_optimization": {}, "fp16": {"enabled": "auto"}}', None),  # the HF Trainer decides: untouched
        ('{"zero_optimization": {}, "fp16": {"enabled": true, "auto_cast": true}}', None),  # review, not rewritten
        ('{"fp16": {"enabled": true}}', None),  # not a DeepSpeed configuration
    ],
)
def test_deepspeed_fp16_shapes(tmp_path, config, after):
    ds = write(tmp_path / "train.json", config)
    cli("migrate", tmp_path)
    assert ds.read_text() == (after or config)


def test_accelerate_config(tmp_path):
    text = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\ngpu_ids: all\nmixed_precision: 'fp16'\nuse_cpu: false\n"
    cfg = write(tmp_path / "accelerate_config.yaml", text)
    sagemaker = write(tmp_path / "sm.yaml", "compute_environment: AMAZON_SAGEMAKER\ndistributed_type: MULTI_GPU\n")
    assert findings(tmp_path) == [
        ("accelerate_config.yaml", 2, "NPU725", "exact"),
        ("accelerate_config.yaml", 4, "NPU726", "numeric"),
    ]
    cli("migrate", tmp_path, "--precision", "fp16")
    assert cfg.read_text() == text.replace("MULTI_GPU", "MULTI_NPU")
    cli("migrate", tmp_path)
    assert cfg.read_text() == text.replace("MULTI_GPU", "MULTI_NPU").replace("'fp16'", "'bf16'")
    assert sagemaker.read_text() == "compute_environment: AMAZON_SAGEMAKER\ndistributed_type: MULTI_GPU\n"


def test_accelerate_mixed_precision_with_a_deepspeed_file_is_kept_for_review(tmp_path):
    """accelerate raises when `mixed_precision` and the DeepSpeed file's fp16/bf16 differ, and the
    JSON cannot carry a marker: the YAML keeps fp16 and says why (smollm's slurm templates)."""
    text = (
        "compute_environment: LOCAL_MACHINE\ndeepspeed_config:\n  deepspeed_config_file: ds_config.json\n"
        "  zero3_init_flag: false\ndistributed_type: DEEPSPEED\nmixed_precision: fp16\n"
    )
    cfg = write(tmp_path / "accelerate_config.yaml", text)
    ds = write(tmp_path / "ds_config.json", '{"fp16": {"enabled": true}, "zero_optimization": {"stage": 2}}\n')
    assert findings(tmp_path) == [
        ("accelerate_config.yaml", 6, "NPU726", "review"),
        ("ds_config.json", 1, "NPU723", "review"),
    ]
    cli("migrate", tmp_path)
    assert cfg.read_text() == text.replace(
        "mixed_precision: fp16",
        "# TODO(cuda2npu): NPU726 review: accelerate's `mixed_precision: fp16` kept: `deepspeed_config_file: ds_config.json` sets the precision too, and accelerate raises ValueError when they differ; for BF16 (native on Atlas A2) change both together, or make the DeepSpeed file's fp16/bf16 `enabled` \"auto\" (fp16 runs on Ascend too)\nmixed_precision: fp16",
    )
    assert ds.read_text() == '{"fp16": {"enabled": true}, "zero_optimization": {"stage": 2}}\n'


def test_deepspeed_bf16_block_without_enabled_and_cuda_only_optimizer_are_reported(tmp_path):
    text = '{"zero_optimization": {}, "fp16": {"enabled": true}, "bf16": {}, "optimizer": {"type": "Lamb"}}'
    ds = write(tmp_path / "ds_config.json", text)
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    found = {(d["code"], d["fixable"]) for d in data["diagnostics"]}
    assert found == {("NPU723", False), ("NPU724", False)}
    cli("migrate", tmp_path)
    assert ds.read_text() == text


TRAINER_PARSER = """
from transformers import HfArgumentParser, TrainingArguments

(args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
"""
EXPLICIT_FP16 = '{"zero_optimization": {"stage": 2}, "fp16": {"enabled": true}, "bf16": {"enabled": false}}\n'


def test_deepspeed_config_the_hf_trainer_matches_against_fp16_flags_that_stay_is_reviewed(tmp_path):
    # TrainingArguments(fp16=True, bf16=False) keeps fp16 (NPU906 review): the Trainer would raise on a bf16 config
    write(
        tmp_path / "train.py",
        'from transformers import TrainingArguments\n\nargs = TrainingArguments(output_dir="o", fp16=True, bf16=False, deepspeed="ds.json")\n',
    )
    ds = write(tmp_path / "ds.json", EXPLICIT_FP16)
    assert findings(tmp_path) == [("ds.json", 1, "NPU723", "review")]
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    [review] = [d for d in data["diagnostics"] if d["code"] == "NPU723"]
    assert "change both together" in review["message"] and "TrainingArguments" in review["message"]
    cli("migrate", tmp_path)
    assert ds.read_text() == EXPLICIT_FP16


def test_deepspeed_config_follows_the_shell_fp16_flag_only_where_that_flag_is_rewritten(tmp_path):
    write(tmp_path / "train.py", TRAINER_PARSER)
    switched = write(tmp_path / "configs" / "ds_a.json", EXPLICIT_FP16)
    no_bf16 = write(tmp_path / "configs" / "ds_b.json", '{"zero_optimization": {}, "fp16": {"enabled": true}}\n')
    kept = write(tmp_path / "configs" / "ds_c.json", EXPLICIT_FP16)
    raw = write(tmp_path / "configs" / "ds_raw.json", '{"zero_optimization": {}, "fp16": {"enabled": true}}\n')
    write(
        tmp_path / "scripts" / "run.sh",
        """
        deepspeed train.py \\
          --deepspeed configs/ds_a.json \\
          --fp16
        deepspeed train.py --deepspeed configs/ds_b.json --fp16 true
        deepspeed train.py --deepspeed configs/ds_c.json --bf16 false
        """,
    )
    assert findings(tmp_path) == [
        ("ds_a.json", 1, "NPU723", "numeric"),  # the command's --fp16 becomes --bf16 (NPU906): both change
        ("ds_b.json", 1, "NPU723", "review"),  # NPU906 reviews that --fp16 (no bf16 block): both stay
        ("ds_c.json", 1, "NPU723", "review"),  # --bf16 false: the flags stay fp16
        ("ds_raw.json", 1, "NPU723", "review"),  # no command seen, but the code hands configs to TrainingArguments
    ]
    cli("migrate", tmp_path)
    assert switched.read_text() == EXPLICIT_FP16.replace(
        'true}, "bf16": {"enabled": false', 'false}, "bf16": {"enabled": true'
    )
    assert (tmp_path / "scripts" / "run.sh").read_text().splitlines()[2] == "  --bf16"
    assert no_bf16.read_text() == '{"zero_optimization": {}, "fp16": {"enabled": true}}\n'
    assert kept.read_text() == EXPLICIT_FP16
    assert raw.read_text() == '{"zero_optimization": {}, "fp16": {"enabled": true}}\n'


def test_r16_a_command_with_no_precision_flag_does_not_hold_a_shared_config_in_fp16(tmp_path):
    """BELLE: one explicit-fp16 config passed by a Trainer command (`--fp16`, rewritten to `--bf16`) and
    by an inference backend taking no precision flag: the config changes with the flag, as the
    Trainer's consistency check needs (it was kept, and `--bf16` met `"fp16": {"enabled": true}`)."""
    write(tmp_path / "train.py", TRAINER_PARSER)
    write(tmp_path / "serve.py", "import deepspeed\n")
    shared = write(tmp_path / "configs" / "ds.json", EXPLICIT_FP16)
    script = write(
        tmp_path / "scripts" / "run.sh",
        """
        deepspeed serve.py --deepspeed configs/ds.json --ckpt_path m
        torchrun train.py --deepspeed configs/ds.json --fp16
        """,
    )
    cli("migrate", tmp_path)
    assert script.read_text().splitlines()[1] == "torchrun train.py --deepspeed configs/ds.json --bf16"
    assert '"fp16": {"enabled": false}, "bf16": {"enabled": true}' in shared.read_text()


def test_deepspeed_config_without_a_trainer_still_follows_the_policy(tmp_path):
    write(tmp_path / "train.py", 'import deepspeed\n\nengine = deepspeed.initialize(config="ds.json")\n')
    ds = write(tmp_path / "ds.json", EXPLICIT_FP16)
    assert findings(tmp_path) == [("ds.json", 1, "NPU723", "numeric")]
    cli("migrate", tmp_path)
    assert '"bf16": {"enabled": true}' in ds.read_text()


MEGATRON_ARGS = """
import argparse

import deepspeed


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fp16", action="store_true")
    return deepspeed.add_config_arguments(parser).parse_args()
"""


def test_megatron_deepspeed_configs_stay_with_the_programs_own_fp16_flag(tmp_path):
    """Megatron-DeepSpeed: the entry point builds fp16 parameters from its own `--fp16` while
    DeepSpeed casts the model to its config's precision: the config is not switched alone, and the
    Megatron flag is not TrainingArguments' (no NPU906)."""
    write(tmp_path / "megatron" / "__init__.py", "")
    write(tmp_path / "megatron" / "arguments.py", MEGATRON_ARGS)
    write(tmp_path / "pretrain_gpt.py", "from megatron.arguments import parse_args\n\nargs = parse_args()\n")
    launched = write(tmp_path / "examples" / "ds_config_gpt.json", EXPLICIT_FP16)
    tests_only = write(tmp_path / "tests" / "ds_config.json", EXPLICIT_FP16)
    script = write(
        tmp_path / "examples" / "run.sh",
        "deepspeed ../pretrain_gpt.py --fp16 --deepspeed --deepspeed_config ds_config_gpt.json\n",
    )
    assert findings(tmp_path) == [
        ("ds_config.json", 1, "NPU723", "review"),  # the project's own --fp16 decides: both change together
        ("ds_config_gpt.json", 1, "NPU723", "review"),  # the command keeps Megatron's --fp16
    ]
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    messages = {d["path"].rsplit("/", 1)[-1]: d["message"] for d in data["diagnostics"] if d["code"] == "NPU723"}
    assert "run.sh:1 passes it" in messages["ds_config_gpt.json"] and "Megatron" in messages["ds_config.json"]
    assert not [d for d in data["diagnostics"] if d["code"] == "NPU906"]
    cli("migrate", tmp_path)
    assert launched.read_text() == EXPLICIT_FP16 and tests_only.read_text() == EXPLICIT_FP16
    assert (
        script.read_text() == "deepspeed ../pretrain_gpt.py --fp16 --deepspeed --deepspeed_config ds_config_gpt.json\n"
    )


FA2_READER = """
from dataclasses import dataclass

from transformers import AutoModelForCausalLM, HfArgumentParser


@dataclass
class ModelArguments:
    attn_implementation: str = "eager"


(model_args,) = HfArgumentParser(ModelArguments).parse_yaml_file("configs/train.yaml")
model = AutoModelForCausalLM.from_pretrained("m", attn_implementation=model_args.attn_implementation)
"""


def findings_of(path, code_prefix, *options):
    data = json.loads(cli("check", path, "--format", "json", *options).stdout)
    found = [(d["path"].rsplit("/", 1)[-1], d["line"], d["code"], d["tier"]) for d in data["diagnostics"]]
    return sorted(f for f in found if f[2].startswith(code_prefix))


def test_flash_attention_2_in_a_run_config_the_code_reads_becomes_sdpa_below_the_npu_release(tmp_path):
    write(tmp_path / "requirements.txt", "transformers==4.44.2\n")
    write(tmp_path / "scripts" / "train.py", FA2_READER)
    text = "model_name_or_path: m\nattn_implementation: flash_attention_2   # fast\nbf16: true\n"
    cfg = write(tmp_path / "configs" / "train.yaml", text)
    packed = write(
        tmp_path / "configs" / "packed.yaml", 'attn_implementation: "flash_attention_2"\npadding_free: true\n'
    )
    js = write(
        tmp_path / "configs" / "run.json",
        '{"attention": "flash_attention_2", "attn_implementation": "flash_attention_2"}',
    )
    assert findings_of(tmp_path, "NPU90") == [
        ("packed.yaml", 1, "NPU903", "manual"),  # padding-free packing: SDPA < 4.51 ignores the packed position_ids
        ("run.json", 1, "NPU901", "numeric"),
        ("train.yaml", 2, "NPU901", "numeric"),
    ]
    cli("migrate", tmp_path)
    assert cfg.read_text() == text.replace("flash_attention_2", "sdpa")
    assert js.read_text() == '{"attention": "flash_attention_2", "attn_implementation": "sdpa"}'
    assert packed.read_text().startswith("# TODO(cuda2npu): NPU903 ")
    assert packed.read_text().endswith('attn_implementation: "flash_attention_2"\npadding_free: true\n')
    assert findings_of(tmp_path, "NPU901") == []


def test_r16_a_run_config_naming_a_gemma2_model_gets_eager(tmp_path):
    """Gemma-2's logit softcapping is dropped by transformers' sdpa and applied by eager: a config
    naming a Gemma-2 checkpoint gets `eager` (RLHF-Reward-Modeling, round 16)."""
    write(tmp_path / "requirements.txt", "transformers==4.44.2\n")
    write(tmp_path / "scripts" / "train.py", FA2_READER)
    text = "model_name_or_path: google/gemma-2-9b-it\nattn_implementation: flash_attention_2\n"
    cfg = write(tmp_path / "configs" / "train.yaml", text)
    cli("migrate", tmp_path)
    assert cfg.read_text() == text.replace("flash_attention_2", "eager")


def test_flash_attention_2_unread_key_is_reviewed_and_a_new_enough_pin_keeps_it(tmp_path):
    write(tmp_path / "requirements.txt", "transformers==4.44.2\n")
    write(tmp_path / "train.py", "import torch\n")
    text = "attn_implementation: flash_attention_2\n"
    for name in ("a.yaml", "b.yaml"):
        write(tmp_path / "recipes" / name, text)
    assert findings_of(tmp_path, "NPU901") == [("a.yaml", 1, "NPU901", "review")]  # one for the project
    write(tmp_path / "requirements.txt", "transformers>=4.51.0\n")
    assert findings_of(tmp_path, "NPU901") == []


QUANT_READER = """
import yaml
from transformers import AutoModelForCausalLM

cfg = yaml.safe_load(open("configs/qlora.yaml"))
model = AutoModelForCausalLM.from_pretrained(cfg["model"], load_in_4bit=cfg["load_in_4bit"])
"""


def test_bitsandbytes_flags_in_a_run_config_are_marked(tmp_path):
    """`load_in_4bit: true` the code hands to `from_pretrained(load_in_4bit=...)`: bitsandbytes has no
    Ascend kernels (NPU907, review, marked); `false` asks nothing; an unread `load_in_8bit: true`
    is reported once per project."""
    write(tmp_path / "train.py", QUANT_READER)
    cfg = write(tmp_path / "configs" / "qlora.yaml", "model: m\nload_in_4bit: true\nlora_r: 8\n")
    write(tmp_path / "configs" / "full.yaml", "model: m\nload_in_4bit: false\n")
    write(tmp_path / "configs" / "other.json", '{"load_in_8bit": true}')
    assert findings_of(tmp_path, "NPU907") == [
        ("other.json", 1, "NPU907", "review"),
        ("qlora.yaml", 2, "NPU907", "review"),
        ("train.py", 5, "NPU907", "review"),  # the keyword in the code, as without a config
    ]
    cli("migrate", tmp_path)
    lines = cfg.read_text().splitlines()
    assert lines[1].startswith("# TODO(cuda2npu): NPU907 review: `load_in_4bit: true` quantizes with bitsandbytes")
    assert lines[2] == "load_in_4bit: true"


def test_r22_a_nested_device_map_names_a_device(tmp_path):
    """alpaca_eval's model configs: `model_kwargs: {device_map: 'cuda'}` reaches `from_pretrained`;
    `device_map: auto` names no device."""
    write(tmp_path / "run.py", "import torch\n")
    write(
        tmp_path / "models" / "configs.yaml",
        "m:\n  completions_kwargs:\n    model_kwargs:\n      device_map: 'cuda'\n      other_map: cuda\n",
    )
    write(tmp_path / "models" / "auto.yaml", "m:\n  model_kwargs:\n    device_map: auto\n")
    assert findings(tmp_path) == [("configs.yaml", 4, "NPU721", "review")]


def test_hyphenated_backend_and_device_keys_are_named_like_their_underscored_spelling(tmp_path):
    # round 24 (pythia's GPT-NeoX configs): `"distributed-backend": "nccl"` is GPT-NeoX's
    # `distributed_backend`; no code in the checkout reads it (the trainer is a submodule)
    write(tmp_path / "train.py", "import torch\n")
    text = '{\n  "distributed-backend": "nccl",\n  "eval-device": "cuda",\n  "attention-dropout": 0\n}\n'
    write(tmp_path / "models" / "160M.yml", text)
    assert findings(tmp_path) == [("160M.yml", 2, "NPU722", "review"), ("160M.yml", 3, "NPU721", "review")]
