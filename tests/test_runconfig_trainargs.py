"""TrainingArguments written as JSON/YAML run configurations (cuda2npu/filekinds/runconfig_trainer.py):
``optim`` (NPU727), ``fp16`` (NPU906) and ``tf32`` (NPU904), reported by check, edited by migrate."""

from __future__ import annotations

import json
import textwrap

from cli_helpers import cli, write

from cuda2npu.filekinds.runconfig_code import trainer_files

TRAIN_PY = """
import sys

from transformers import HfArgumentParser, TrainingArguments

(args,) = HfArgumentParser(TrainingArguments).parse_json_file(json_file=sys.argv[1])
"""
CODES = ("NPU727", "NPU906", "NPU904")


def diagnostics(path, *options):
    data = json.loads(cli("check", path, "--format", "json", *options).stdout)
    return [d for d in data["diagnostics"] if d["code"] in CODES]


def findings(path, *options):
    """(file name, line, code, tier) of the findings of the TrainingArguments keys."""
    return sorted((d["path"].rsplit("/", 1)[-1], d["line"], d["code"], d["tier"]) for d in diagnostics(path, *options))


QLORA = """
{
    "output_dir": "output/run",
    "per_device_train_batch_size": 1,
    "gradient_accumulation_steps": 16,
    "learning_rate": 2e-4,
    "optim": "paged_adamw_32bit",
    "fp16": true,
    "tf32": true,
    "seed": 42
}
"""


def test_training_arguments_json_chosen_at_run_time_is_edited_byte_for_byte(tmp_path):
    write(tmp_path / "train.py", TRAIN_PY)
    run = write(tmp_path / "configs" / "qlora.json", QLORA, newline="\r\n")
    eight = write(
        tmp_path / "configs" / "eight.json",
        '{"output_dir": "o", "num_train_epochs": 1, "logging_steps": 10, "optim": "paged_adamw_8bit"}\n',
    )
    kept = (
        '{"output_dir": "o", "learning_rate": 1e-5, "save_strategy": "steps", "optim": "adamw_torch", "fp16": false}\n'
    )
    torch_optim = write(tmp_path / "configs" / "torch.json", kept)
    # `optim` in a file no parser reads and without TrainingArguments' keys: not a TrainingArguments config
    other = write(tmp_path / "bench" / "opt.json", '{"optim": "paged_adamw_32bit", "fp16": true, "tf32": true}\n')
    assert findings(tmp_path) == [
        ("eight.json", 1, "NPU727", "manual"),  # 8-bit states: no torch optimizer computes them
        ("qlora.json", 6, "NPU727", "numeric"),
        ("qlora.json", 7, "NPU906", "numeric"),
        ("qlora.json", 8, "NPU904", "numeric"),
    ]
    assert cli("migrate", tmp_path).exit_code == 0
    expected = (
        textwrap.dedent(QLORA)
        .lstrip("\n")
        .replace('"paged_adamw_32bit"', '"adamw_torch"')
        .replace('"fp16": true', '"bf16": true')
        .replace('"tf32": true', '"tf32": false')
    )
    assert run.read_bytes() == expected.replace("\n", "\r\n").encode()
    assert eight.read_text().endswith('"optim": "paged_adamw_8bit"}\n')  # JSON: reported only
    assert torch_optim.read_text() == kept
    assert other.read_text() == '{"optim": "paged_adamw_32bit", "fp16": true, "tf32": true}\n'
    assert findings(tmp_path) == [("eight.json", 1, "NPU727", "manual")]
    cli("migrate", tmp_path)
    assert run.read_bytes() == expected.replace("\n", "\r\n").encode()


def test_training_arguments_need_a_project_reading_them_from_files(tmp_path):
    write(tmp_path / "train.py", "import json\n\nconfig = json.load(open('run.json'))\n")
    text = textwrap.dedent(QLORA).lstrip("\n")
    run = write(tmp_path / "run.json", text)
    assert findings(tmp_path) == []
    cli("migrate", tmp_path)
    assert run.read_text() == text


def test_a_yaml_file_the_parser_is_given_is_read_whatever_its_keys(tmp_path):
    write(
        tmp_path / "scripts" / "train.py",
        """
        from transformers import HfArgumentParser, Seq2SeqTrainingArguments

        RECIPE = "recipes/run.yaml"
        (args,) = HfArgumentParser(Seq2SeqTrainingArguments).parse_yaml_file(RECIPE)
        """,
    )
    recipe = write(tmp_path / "recipes" / "run.yaml", "optim: paged_lion_8bit   # small\nfp16: true\ntf32: false\n")
    assert findings(tmp_path) == [("run.yaml", 1, "NPU727", "manual"), ("run.yaml", 2, "NPU906", "numeric")]
    cli("migrate", tmp_path)
    lines = recipe.read_text().splitlines()
    assert lines[0].startswith("# TODO(cuda2npu): NPU727 `optim: paged_lion_8bit` builds a bitsandbytes optimizer")
    assert lines[1:] == ["optim: paged_lion_8bit   # small", "bf16: true", "tf32: false"]
    cli("migrate", tmp_path)
    assert recipe.read_text().splitlines()[1:] == lines[1:]  # no second marker
    assert recipe.read_text().count("TODO(cuda2npu)") == 1


def test_fp16_stays_fp16_where_bf16_cannot_follow(tmp_path):
    write(tmp_path / "train.py", TRAIN_PY)
    write(tmp_path / "requirements.txt", "transformers>=4.36\n")
    base = '"output_dir": "o", "learning_rate": 1e-5, "num_train_epochs": 1, "fp16": true'
    both = write(tmp_path / "configs" / "both.json", f'{{{base}, "bf16": false}}\n')
    ds_plain = '{"zero_optimization": {"stage": 3}, "fp16": {"enabled": "auto"}}'
    ds_ready = '{"zero_optimization": {"stage": 3}, "fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"}}'
    ds_explicit = '{"zero_optimization": {"stage": 2}, "fp16": {"enabled": true}, "bf16": {"enabled": false}}'
    write(tmp_path / "ds" / "z3.json", ds_plain)
    write(tmp_path / "ds" / "z3_bf16.json", ds_ready)
    write(tmp_path / "ds" / "z2.json", ds_explicit)
    plain = [
        write(tmp_path / "configs" / f"plain{i}.json", f'{{{base}, "deepspeed": "./ds/z3.json"}}\n') for i in range(3)
    ]
    ready = write(tmp_path / "configs" / "ready.json", f'{{{base}, "deepspeed": "ds/z3_bf16.json"}}\n')
    explicit = write(tmp_path / "configs" / "explicit.json", f'{{{base}, "deepspeed": "ds/z2.json"}}\n')
    inline = write(tmp_path / "configs" / "inline.json", f'{{{base}, "deepspeed": {ds_ready}}}\n')
    found = diagnostics(tmp_path)
    assert sorted((d["path"].rsplit("/", 1)[-1], d["tier"]) for d in found) == [
        ("both.json", "review"),
        ("explicit.json", "review"),
        ("inline.json", "numeric"),
        ("plain0.json", "review"),  # one finding for the three configs naming ds/z3.json
        ("ready.json", "numeric"),
    ]
    [shared] = [d for d in found if d["path"].endswith("plain0.json")]
    assert "ds/z3.json" in shared["message"] and "the same in 2 other config files" in shared["message"]
    cli("migrate", tmp_path)
    assert both.read_text() == f'{{{base}, "bf16": false}}\n'
    assert explicit.read_text() == f'{{{base}, "deepspeed": "ds/z2.json"}}\n'
    assert [p.read_text() for p in plain] == [f'{{{base}, "deepspeed": "./ds/z3.json"}}\n'] * 3
    switched = base.replace('"fp16"', '"bf16"')
    assert ready.read_text() == f'{{{switched}, "deepspeed": "ds/z3_bf16.json"}}\n'
    assert inline.read_text() == f'{{{switched}, "deepspeed": {ds_ready}}}\n'


def test_fp16_stays_under_an_old_transformers_pin_or_the_fp16_policy(tmp_path):
    write(tmp_path / "train.py", TRAIN_PY)
    write(tmp_path / "requirements.txt", "transformers==4.31.0\n")
    write(tmp_path / "run.json", '{"output_dir": "o", "learning_rate": 1e-5, "logging_steps": 5, "fp16": true}\n')
    [review] = diagnostics(tmp_path)
    assert (review["code"], review["tier"]) == ("NPU906", "review") and "4.34.0" in review["message"]
    write(tmp_path / "requirements.txt", "transformers==4.33.0\n")  # knows the NPU, rejects bf16: fp16 runs
    assert findings(tmp_path) == []
    write(tmp_path / "requirements.txt", "transformers==4.34.0\n")
    assert findings(tmp_path) == [("run.json", 1, "NPU906", "numeric")]
    assert findings(tmp_path, "--precision", "fp16") == []


def test_trainer_file_facts(tmp_path):
    parser = b"""
from transformers import HfArgumentParser, TrainingArguments

p = HfArgumentParser((ModelArguments, TrainingArguments))
a, b = p.parse_json_file(json_file="configs/run.json")
recipe = "recipes/sft.yaml"
c = p.parse_yaml_file(recipe)
d = p.parse_json_file(json_file=os.path.abspath(sys.argv[1]))
"""
    assert trainer_files({tmp_path / "a.py": parser}) == {
        ("trainer", "files"),
        ("trainer_file", "configs/run.json"),
        ("trainer_file", "recipes/sft.yaml"),
    }
    assert (
        trainer_files(
            {tmp_path / "b.py": b"args = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()\n"}
        )
        == set()
    )
    assert (
        trainer_files({tmp_path / "c.py": b"(m,) = HfArgumentParser(ModelArguments).parse_json_file('m.json')\n"})
        == set()
    )


LLMTUNE = """\
training:
  training_args:
    num_train_epochs: 1
    per_device_train_batch_size: 4
    optim: "paged_adamw_32bit"
    logging_steps: 1
    tf32: true # [Ampere+]
  sft_args:
    max_seq_length: 1024
"""


def test_r53_a_training_args_mapping_below_the_top_is_read_in_a_transformers_project(tmp_path):
    """llmtune (round 53): `training: training_args:` is passed on as `TrainingArguments(**...)`; its
    `optim` and `tf32` are TrainingArguments'. Not in a project whose dependencies name no transformers."""
    config = write(tmp_path / "config.yml", LLMTUNE)
    assert findings(tmp_path) == []
    write(tmp_path / "requirements.txt", "transformers>=4.40\n")
    assert findings(tmp_path) == [("config.yml", 5, "NPU727", "numeric"), ("config.yml", 7, "NPU904", "numeric")]
    cli("migrate", tmp_path)
    assert config.read_text() == LLMTUNE.replace('"paged_adamw_32bit"', '"adamw_torch"').replace(
        "tf32: true", "tf32: false"
    )
