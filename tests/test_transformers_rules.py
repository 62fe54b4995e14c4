"""The transformers family through the command line: project pins, and the Trainer flags of shell launch scripts."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from cli_helpers import cli, write

TRAINER = """
from transformers import HfArgumentParser, Trainer, TrainingArguments

(args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
"""

LAUNCH = """
#!/bin/bash
torchrun --nproc_per_node 8 train.py \\
    --tf32 True \\
    --fp16 \\
    --attn_implementation flash_attention_2 \\
    --output_dir out  # keep this comment
python other.py --tf32 --fp16 True
python train.py --tf32 False --fp16 $FP16 --attn_implementation "flash_attention_2"
python train.py --tf32 true  # noqa: NPU904
"""

MIGRATED = """
#!/bin/bash
torchrun --nproc_per_node 8 train.py \\
    --tf32 False \\
    --bf16 \\
    --attn_implementation sdpa \\
    --output_dir out  # keep this comment
# TODO(cuda2npu): NPU904 review: `--tf32 True` makes TrainingArguments raise on an NPU host (no TF32 there, every release): False, if this flag is TrainingArguments'
# TODO(cuda2npu): NPU906 review: `--fp16` under the bf16 policy: `--bf16` (BF16 is the NPU's native mixed-precision type), if this flag is TrainingArguments'
python other.py --tf32 --fp16 True
python train.py --tf32 False --fp16 $FP16 --attn_implementation "sdpa"
python train.py --tf32 true  # noqa: NPU904
"""


def diagnostics(root, *extra):
    data = json.loads(cli("check", root, "--format", "json", *extra).stdout)
    return [(d["path"].rsplit("/", 1)[-1], d["line"], d["column"], d["code"]) for d in data["diagnostics"]]


def launch_project(tmp_path, pin=None):
    write(tmp_path / "train.py", TRAINER)
    write(tmp_path / "other.py", "import argparse\n")
    if pin is not None:
        write(tmp_path / "requirements.txt", f"transformers{pin}\n")
    return write(tmp_path / "scripts" / "launch.sh", LAUNCH)


def test_launch_flags_are_reported_with_positions(tmp_path):
    launch_project(tmp_path)
    found = [d for d in diagnostics(tmp_path) if d[0] == "launch.sh"]
    assert found == [
        ("launch.sh", 3, 5, "NPU904"),
        ("launch.sh", 4, 5, "NPU906"),
        ("launch.sh", 5, 5, "NPU901"),
        ("launch.sh", 7, 17, "NPU904"),  # other.py parses no TrainingArguments: review only
        ("launch.sh", 7, 24, "NPU906"),
        ("launch.sh", 8, 43, "NPU901"),
    ]


def test_launch_flags_are_rewritten_once(tmp_path):
    script = launch_project(tmp_path)
    cli("migrate", tmp_path)
    assert script.read_text() == textwrap.dedent(MIGRATED).lstrip("\n")
    cli("migrate", tmp_path)
    assert script.read_text() == textwrap.dedent(MIGRATED).lstrip("\n")


def test_a_pin_with_the_npu_flash_attention_path_keeps_flash_attention_2(tmp_path):
    script = launch_project(tmp_path, pin=">=4.51,<5")
    model = write(
        tmp_path / "model.py",
        'from transformers import AutoModel\nm = AutoModel.from_pretrained("m", attn_implementation="flash_attention_2")\n',
    )
    before = model.read_text()
    assert "NPU901" not in {d[3] for d in diagnostics(tmp_path)}
    cli("migrate", tmp_path)
    assert model.read_text() == before
    assert "flash_attention_2" in script.read_text() and "--tf32 False" in script.read_text()


def test_an_older_pin_rewrites_flash_attention_2(tmp_path):
    launch_project(tmp_path, pin="==4.46.3")
    model = write(
        tmp_path / "model.py",
        'from transformers import AutoModel\nm = AutoModel.from_pretrained("m", attn_implementation="flash_attention_2")\n',
    )
    cli("migrate", tmp_path)
    assert 'attn_implementation="sdpa"' in model.read_text()


def test_fp16_policy_keeps_fp16_flags(tmp_path):
    script = launch_project(tmp_path)
    cli("migrate", tmp_path, "--precision", "fp16")
    assert "--fp16 \\" in script.read_text() and "--tf32 False" in script.read_text()


def test_a_transformers_pin_before_bf16_on_npu_keeps_fp16_flags(tmp_path):
    """transformers < 4.34 raises on bf16=True with an NPU device: --fp16 stays. From 4.32 (the
    Trainer knows the NPU) fp16 runs as it is, unreported (Qwen-VL, round 19); before 4.32 the
    Trainer does not know the NPU at all, fp16 alike: reviewed."""
    script = launch_project(tmp_path)
    write(tmp_path / "requirements.txt", "transformers==4.32.0\n")
    cli("migrate", tmp_path)
    text = script.read_text()
    assert "--fp16 \\" in text and "--bf16" not in text and "NPU906" not in text
    old = launch_project(tmp_path / "old")
    write(tmp_path / "old" / "requirements.txt", "transformers==4.31.0\n")
    cli("migrate", tmp_path / "old")
    assert (
        "NPU906 review: `--fp16` kept under the bf16 policy: the pin `transformers==4.31.0` predates 4.32.0"
        in old.read_text()
    )


def test_optim_flags_of_bitsandbytes_optimizers(tmp_path):
    """--optim paged_adamw_32bit is torch's AdamW in bitsandbytes: adamw_torch where the flag is
    TrainingArguments'; 8-bit states are a person's choice; another program's flag is for review."""
    write(tmp_path / "train.py", TRAINER)
    script = write(
        tmp_path / "finetune.sh",
        """
        python train.py --optim paged_adamw_32bit --lr 1e-4
        python train.py --optim=paged_adamw_8bit
        python other.py --optim paged_adamw_32bit
        python train.py --optim adamw_torch
        """,
    )
    codes = [(d[1], d[3]) for d in diagnostics(tmp_path) if d[0] == "finetune.sh"]
    assert codes == [(1, "NPU727"), (2, "NPU727"), (3, "NPU727")]
    cli("migrate", tmp_path)
    lines = script.read_text().splitlines()
    assert lines[0] == "python train.py --optim adamw_torch --lr 1e-4"
    assert lines[1].startswith("# TODO(cuda2npu): NPU727 `--optim paged_adamw_8bit` builds a bitsandbytes optimizer")
    assert lines[2] == "python train.py --optim=paged_adamw_8bit"
    assert lines[3].startswith("# TODO(cuda2npu): NPU727 review: `--optim paged_adamw_32bit` builds")
    assert lines[4:] == ["python other.py --optim paged_adamw_32bit", "python train.py --optim adamw_torch"]


def test_packing_programs_keep_flash_attention_2_with_a_manual_item(tmp_path):
    write(tmp_path / "train.py", TRAINER + "from transformers import DataCollatorWithFlattening\n")
    script = write(tmp_path / "launch.sh", "python train.py --attn_implementation=flash_attention_2\n")
    assert [d[3] for d in diagnostics(tmp_path) if d[0] == "launch.sh"] == ["NPU903"]
    cli("migrate", tmp_path)
    lines = script.read_text().splitlines()
    assert lines[0].startswith("# TODO(cuda2npu): NPU903 `--attn_implementation flash_attention_2` with padding-free")
    assert lines[1:] == ["python train.py --attn_implementation=flash_attention_2"]


def test_check_writes_nothing(tmp_path):
    script = launch_project(tmp_path)
    cli("check", tmp_path)
    assert script.read_text() == textwrap.dedent(LAUNCH).lstrip("\n")


def test_fp16_with_a_deepspeed_config_without_bf16_block_is_for_review(tmp_path):
    """The Trainer fills DeepSpeed's "auto" blocks from the flags: --bf16 with no bf16 block in the
    config turns fp16 off and leaves bf16 off (fp32 training), so the flag is not rewritten alone."""
    write(tmp_path / "train.py", TRAINER)
    write(tmp_path / "ds_auto.json", '{"fp16": {"enabled": "auto"}, "zero_optimization": {"stage": 2}}\n')
    write(tmp_path / "ds_both.json", '{"fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"}}\n')
    script = write(
        tmp_path / "run.sh",
        """
        deepspeed train.py --deepspeed ds_auto.json --fp16
        deepspeed train.py --deepspeed=ds_both.json --fp16
        """,
    )
    result = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    fp16 = {d["line"]: d for d in result["diagnostics"] if d["path"].endswith("run.sh") and d["code"] == "NPU906"}
    assert not fp16[1]["fixable"] and "ds_auto.json, which has none" in fp16[1]["message"]
    assert fp16[2]["fixable"]
    cli("migrate", tmp_path)
    lines = script.read_text().splitlines()
    assert lines[0].startswith("# TODO(cuda2npu): NPU906 review: `--fp16` under the bf16 policy")
    assert lines[1:] == [
        "deepspeed train.py --deepspeed ds_auto.json --fp16",
        "deepspeed train.py --deepspeed=ds_both.json --bf16",
    ]


def test_flash_attention_2_stays_where_the_project_patches_its_internals(tmp_path):
    """VILA packs sequences by replacing transformers' `_get_unpad_data` (another module): under SDPA
    that patch is never called, so packed samples would attend to each other. `flash_attention_2`
    stays, a manual NPU903 at it; without the patch it becomes "sdpa"."""
    write(
        tmp_path / "pkg" / "packing.py",
        """
        import transformers


        def _get_unpad_data(attention_mask, *args, **kwargs):
            return attention_mask


        def patch():
            transformers.modeling_flash_attention_utils._get_unpad_data = _get_unpad_data
        """,
    )
    train = write(
        tmp_path / "train.py",
        'from transformers import AutoModelForCausalLM\n\nm = AutoModelForCausalLM.from_pretrained("m", attn_implementation="flash_attention_2")\n',
    )
    cli("migrate", tmp_path)
    text = train.read_text()
    assert 'attn_implementation="flash_attention_2"' in text
    assert "NPU903 " in text and "pkg/packing.py: transformers.modeling_flash_attention_utils._get_unpad_data" in text
    assert "move the patch there" not in text  # it patches where transformers >= 4.51 calls it
    (tmp_path / "pkg" / "packing.py").write_text("import transformers\n")
    train.write_text(
        'from transformers import AutoModelForCausalLM\n\nm = AutoModelForCausalLM.from_pretrained("m", attn_implementation="flash_attention_2")\n'
    )
    cli("migrate", tmp_path)
    assert 'attn_implementation="sdpa"' in train.read_text()


def test_r26_a_replaced_flash_attention_2_forward_keeps_the_flag(tmp_path):
    """SnapKV replaces `LlamaFlashAttention2.forward` with its KV-cache compression: under SDPA or eager
    it never runs, and transformers >= 4.51 has no such class. `use_flash_attention_2=True` and
    `attn_implementation="flash_attention_2"` stay, each with a manual item naming the patch."""
    write(
        tmp_path / "snapkv" / "monkeypatch.py",
        """
        import transformers


        def replace_llama():
            transformers.models.llama.modeling_llama.LlamaFlashAttention2.forward = lambda self, *a: None
        """,
    )
    load = (
        "from transformers import AutoModelForCausalLM\n\n"
        'a = AutoModelForCausalLM.from_pretrained("m", use_flash_attention_2=True)\n'
        'b = AutoModelForCausalLM.from_pretrained("m", attn_implementation="flash_attention_2")\n'
    )
    pred = write(tmp_path / "pred.py", load)
    cli("migrate", tmp_path)
    text = pred.read_text()
    assert "".join(line for line in text.splitlines(keepends=True) if "TODO(cuda2npu)" not in line) == load
    assert text.count("where the project replaces a FlashAttention2 class's forward") == 2
    assert "snapkv/monkeypatch.py: transformers.models.llama.modeling_llama.LlamaFlashAttention2.forward" in text


def test_r27_a_flash_attention_2_forward_replaced_with_the_sdpa_one_is_not_a_reason_to_keep_the_flag(tmp_path):
    """PyramidKV replaces the eager, FlashAttention2 and SDPA classes' forwards alike: under SDPA its
    compression runs too, so `attn_implementation="flash_attention_2"` becomes "sdpa" as elsewhere
    (keeping it was wrong: ImportError at `from_pretrained` under its transformers 4.44 pin)."""
    write(
        tmp_path / "pyramidkv" / "monkeypatch.py",
        """
        import transformers


        def replace_llama():
            transformers.models.llama.modeling_llama.LlamaAttention.forward = lambda self, *a: None
            transformers.models.llama.modeling_llama.LlamaFlashAttention2.forward = lambda self, *a: None
            transformers.models.llama.modeling_llama.LlamaSdpaAttention.forward = lambda self, *a: None
        """,
    )
    pred = write(
        tmp_path / "run_longbench.py",
        'from transformers import AutoModelForCausalLM\n\nm = AutoModelForCausalLM.from_pretrained("m", attn_implementation="flash_attention_2")\n',
    )
    cli("migrate", tmp_path)
    text = pred.read_text()
    assert 'attn_implementation="sdpa"' in text and "replaces a FlashAttention2 class's forward" not in text


def test_a_flash_attention_patch_concerns_its_own_sub_project_only(tmp_path):
    """smollm: the packing patch of one sub-project (vision/smolvlm2, its own pyproject.toml) says
    nothing of another's attention (vision/m4): there flash_attention_2 becomes "sdpa" as usual."""
    write(tmp_path / "vision" / "smolvlm2" / "pyproject.toml", '[project]\nname = "smolvlm"\n')
    write(
        tmp_path / "vision" / "smolvlm2" / "packing.py",
        "import transformers\n\ntransformers.modeling_flash_attention_utils._get_unpad_data = len\n",
    )
    load = 'from transformers import AutoModelForCausalLM\n\nm = AutoModelForCausalLM.from_pretrained("m", attn_implementation="flash_attention_2")\n'
    own = write(tmp_path / "vision" / "smolvlm2" / "train.py", load)
    other = write(tmp_path / "vision" / "m4" / "train.py", load)
    cli("migrate", tmp_path)
    assert "NPU903 " in own.read_text() and 'attn_implementation="flash_attention_2"' in own.read_text()
    assert 'attn_implementation="sdpa"' in other.read_text() and "NPU903" not in other.read_text()


def test_a_project_function_handed_flash_attention_2_in_a_transformers_project(tmp_path):
    """LLaVA's train_mem.py: `train(attn_implementation="flash_attention_2")`, the project's own
    function passing it to from_pretrained, in a file that does not import transformers: the
    project's dependency on transformers says whose option it is."""
    entry = 'from pkg.train import train\n\nif __name__ == "__main__":\n    train(attn_implementation="flash_attention_2")\n'
    write(tmp_path / "pyproject.toml", '[project]\nname = "pkg"\ndependencies = ["transformers==4.37.2"]\n')
    script = write(tmp_path / "train_mem.py", entry)
    cli("migrate", tmp_path)
    assert 'train(attn_implementation="sdpa")' in script.read_text()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "pkg"\ndependencies = ["torch"]\n')
    script.write_text(entry)
    cli("migrate", tmp_path)
    assert script.read_text() == entry  # no transformers in the project: another library's option


def test_an_attention_option_handed_on_to_another_program(tmp_path):
    """LongRoPE's evolution/search.py (round 34): `--attn-implementation` defaults to flash_attention_2 and
    is handed on to `evaluate.py` on its command line; the option's name says whose value it is. An
    option of another name stays."""
    write(tmp_path / "requirements.txt", "transformers==4.40.0\n")
    search = write(
        tmp_path / "search.py",
        "import argparse\nimport subprocess\n\nparser = argparse.ArgumentParser()\n"
        'parser.add_argument("--attn-implementation", type=str, default="flash_attention_2")\n'
        'parser.add_argument("--kernel", type=str, default="flash_attention_2")\nargs = parser.parse_args()\n'
        'subprocess.run(["python", "evaluate.py", "--attn-implementation", args.attn_implementation])\n',
    )
    cli("migrate", tmp_path)
    text = search.read_text()
    assert '"--attn-implementation", type=str, default="sdpa"' in text
    assert '"--kernel", type=str, default="flash_attention_2"' in text


def test_migrate_out_takes_each_sub_projects_own_pins(tmp_path):
    """InternVL: sub-projects pinning transformers 4.37.2 and 4.55.0 side by side. `migrate --out`
    reads each file's facts from its own sub-project, as `check` does (merged, the pins would
    guarantee 4.55 everywhere and keep flash_attention_2 where 4.37 raises)."""
    load = 'from transformers import AutoModel\n\nm = AutoModel.from_pretrained("m", attn_implementation="flash_attention_2")\n'
    write(
        tmp_path / "src" / "old" / "pyproject.toml",
        '[project]\nname = "old"\ndependencies = ["transformers==4.37.2"]\n',
    )
    write(
        tmp_path / "src" / "new" / "pyproject.toml",
        '[project]\nname = "new"\ndependencies = ["transformers==4.55.0"]\n',
    )
    write(tmp_path / "src" / "old" / "train.py", load)
    write(tmp_path / "src" / "new" / "train.py", load)
    cli("migrate", tmp_path / "src", "--out", tmp_path / "out")
    assert 'attn_implementation="sdpa"' in (tmp_path / "out" / "old" / "train.py").read_text()
    assert (tmp_path / "out" / "new" / "train.py").read_text() == load


def test_r22_a_patch_of_the_model_modules_must_move_with_the_pin(tmp_path):
    """dart-math patches `_get_unpad_data` in the llama/mistral modeling modules; transformers >= 4.51
    calls it from modeling_flash_attention_utils, so NPU903's advice says the patch must move."""
    write(
        tmp_path / "dart_math" / "train.py",
        """
        import importlib


        def get_unpad_data(attention_mask):
            return attention_mask


        def monkey_patch4pack(name):
            model_module = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
            model_module._get_unpad_data = get_unpad_data
        """,
    )
    write(tmp_path / "requirements.txt", "transformers<4.43\n")
    train = write(
        tmp_path / "pipeline" / "train.py",
        'from transformers import AutoModelForCausalLM\n\nm = AutoModelForCausalLM.from_pretrained("m", attn_implementation="flash_attention_2")\n',
    )
    cli("migrate", tmp_path)
    text = train.read_text()
    assert "dart_math/train.py: model_module._get_unpad_data" in text and "move the patch there with the pin" in text


def test_r28_device_map_auto_under_an_accelerate_older_than_npu_memory_sizing_is_reviewed(tmp_path):
    """Spec-Bench (round 28) and MGM (round 26) pin `accelerate==0.21.0` and load with
    `device_map="auto"`: that accelerate sizes no NPU memory, so the model lands on the CPU. One review
    a file; nothing under a pin allowing 0.26.0."""
    load = (
        "from transformers import AutoModelForCausalLM\n\n"
        'a = AutoModelForCausalLM.from_pretrained("m", device_map="auto")\n'
        'b = AutoModelForCausalLM.from_pretrained("n", device_map="auto")\n'
    )
    write(tmp_path / "infer.py", load)
    write(tmp_path / "requirements.txt", "accelerate==0.21.0\n")
    found = [d for d in json.loads(cli("check", tmp_path, "--format", "json").stdout)["diagnostics"]]
    assert [(d["code"], d["line"]) for d in found] == [("NPU905", 3)]
    assert "accelerate>=0.26.0" in found[0]["message"]
    write(tmp_path / "requirements.txt", "accelerate>=0.26.0\n")
    assert [d for d in diagnostics(tmp_path) if d[3] == "NPU905"] == []


def test_r31_device_map_auto_through_a_project_loader_is_reviewed_too(tmp_path):
    """REST (round 31): `RestModel.from_pretrained(path, device_map="auto")` in a file that does not
    import transformers; the project's loader passes `**kwargs` on to transformers', so the old
    accelerate sizes no NPU memory there either. A device string there becomes "npu", for review: which
    device the loader makes of it is not seen (Monkey's evaluation scripts, round 52, load a transformers
    subclass this way: the string was left on CUDA)."""
    write(tmp_path / "rest" / "__init__.py", "")
    write(
        tmp_path / "rest" / "model.py",
        "from transformers import LlamaForCausalLM\n\n\nclass RestModel:\n    @classmethod\n"
        "    def from_pretrained(cls, path, **kwargs):\n        return LlamaForCausalLM.from_pretrained(path, **kwargs)\n",
    )
    write(
        tmp_path / "eval.py",
        "from rest.model import RestModel\n\n"
        'model = RestModel.from_pretrained("m", device_map="auto")\n'
        'other = RestModel.from_pretrained("m", device_map="cuda:1")\n',
    )
    write(tmp_path / "requirements.txt", "accelerate==0.24.1\n")
    found = [d for d in diagnostics(tmp_path) if d[3] == "NPU905"]
    assert [(d[0], d[1]) for d in found] == [("eval.py", 3), ("eval.py", 4)]
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    reviewed = next(d for d in data["diagnostics"] if d["code"] == "NPU905" and d["line"] == 4)
    assert "`RestModel.from_pretrained` is the project's loader" in reviewed["message"]
    write(tmp_path / "requirements.txt", "accelerate>=0.26.0\n")
    assert [(d[0], d[1]) for d in diagnostics(tmp_path) if d[3] == "NPU905"] == [("eval.py", 4)]


def test_r31_a_quantization_flag_no_file_sets_on_asks_nothing(tmp_path):
    """x-attention's VLMEvalKit (round 31): `InternVLChat(..., load_in_8bit=False)` hands the flag to
    `from_pretrained`, and the config builds it through `partial(InternVLChat, model_path=...)`: no file
    sets the flag on, so the 13 NPU907 markers asked nothing. One file passing True brings it back."""
    write(
        tmp_path / "vlmeval" / "internvl.py",
        "from transformers import AutoModel\n\n\nclass InternVLChat:\n"
        "    def __init__(self, model_path, load_in_8bit=False):\n"
        "        self.model = AutoModel.from_pretrained(model_path, load_in_8bit=load_in_8bit)\n",
    )
    write(
        tmp_path / "vlmeval" / "config.py",
        'from functools import partial\n\nfrom vlmeval.internvl import InternVLChat\n\nmodels = {"v": partial(InternVLChat, model_path="m")}\n',
    )
    assert [d for d in diagnostics(tmp_path) if d[3] == "NPU907"] == []
    write(
        tmp_path / "run.py",
        'from vlmeval.internvl import InternVLChat\n\nmodel = InternVLChat("m", load_in_8bit=True)\n',
    )
    assert [(d[0], d[3]) for d in diagnostics(tmp_path) if d[3] == "NPU907"] == [("internvl.py", "NPU907")]


def test_r38_a_project_model_class_without_sdpa_gets_eager(tmp_path):
    """Mantis (round 38): the project's copy of a model declares FlashAttention-2 but not SDPA (through its
    own PreTrainedModel subclass), and a training script's field default reaches its from_pretrained, also
    through `MODEL_CLASS = ...` and `**kwargs`: transformers raises for "sdpa" there, so it becomes "eager".
    A class declaring `_supports_sdpa` (or one deriving from transformers' model) keeps "sdpa"."""
    write(
        tmp_path / "mymodels" / "modeling_fuyu.py",
        "from transformers import PreTrainedModel\n\n\nclass FuyuPreTrainedModel(PreTrainedModel):\n"
        "    _supports_flash_attn_2 = True\n\n\nclass MFuyuForCausalLM(FuyuPreTrainedModel):\n    pass\n\n\n"
        "class WithSdpa(FuyuPreTrainedModel):\n    _supports_sdpa = True\n",
    )
    field = (
        "from dataclasses import dataclass, field\n\nfrom transformers import TrainingArguments\n"
        "from mymodels.modeling_fuyu import {cls}\n\n\n@dataclass\nclass ModelArguments:\n"
        '    attn_implementation: str = field(default="flash_attention_2")\n\n\n'
        "def load(model_args):\n    MODEL_CLASS = {cls}\n"
        '    kwargs = {{"attn_implementation": model_args.attn_implementation}}\n'
        '    return MODEL_CLASS.from_pretrained("m", **kwargs)\n'
    )
    fuyu = write(tmp_path / "train_fuyu.py", field.format(cls="MFuyuForCausalLM"))
    other = write(tmp_path / "train_other.py", field.format(cls="WithSdpa"))
    cli("migrate", tmp_path)
    assert 'field(default="eager")' in fuyu.read_text()
    assert 'field(default="sdpa")' in other.read_text()


def test_r39_a_replaced_flash_attention_method_is_a_replaced_forward_not_a_packing_patch(tmp_path):
    """LongVA's sequence-parallel (zigzag ring / Ulysses) attention replaces the FlashAttention2 class's
    `_flash_attention_forward` method, and its scripts call a model with `position_ids` and no mask: the
    kept flag's marker names the replaced forward, not a packing patch (round 39: 7 wrong markers told to
    train without packing)."""
    write(
        tmp_path / "easy_context" / "monkey_patch.py",
        "import transformers\n\n\ndef apply():\n"
        "    transformers.models.llama.modeling_llama.LlamaFlashAttention2._flash_attention_forward = None\n",
    )
    script = write(
        tmp_path / "eval.py",
        "from transformers import AutoModelForCausalLM\n\n"
        'model = AutoModelForCausalLM.from_pretrained("m", _attn_implementation="flash_attention_2")\n'
        "out = model(ids, position_ids=pos, attention_mask=None)\n",
    )
    cli("migrate", tmp_path)
    text = script.read_text()
    assert "where the project replaces a FlashAttention2 class's forward" in text
    assert "packed sequences" not in text and '_attn_implementation="flash_attention_2"' in text


def test_r47_the_flag_loading_the_projects_own_flash_classes_says_turn_it_off(tmp_path):
    """yarn (round 47): `model_cls.from_pretrained(..., use_flash_attention_2=...)` where `model_cls` is one of
    the project's copied Llama and Mistral classes, whose FlashAttention-2 code imports flash-attn itself: no
    transformers release runs it on an NPU host, and the Mistral copy refuses SDPA. The marker says so (not
    "require transformers >= 4.51"), also for a command-line value and where the variable may be transformers'
    class; a value that is False everywhere is left; a class whose file does not import flash-attn keeps the
    general advice."""
    modeling = (
        "from transformers import PreTrainedModel\n{imports}\n\nclass {name}PreTrainedModel(PreTrainedModel):\n"
        "    _supports_flash_attn_2 = True\n{sdpa}\n\nclass {name}ForCausalLM({name}PreTrainedModel):\n    pass\n"
    )
    flash = "try:\n    from flash_attn import flash_attn_func\nexcept ImportError:\n    pass\n"
    write(tmp_path / "pkg" / "__init__.py", "")
    write(
        tmp_path / "pkg" / "llama.py", modeling.format(imports=flash, name="Llama", sdpa="    _supports_sdpa = True\n")
    )
    write(tmp_path / "pkg" / "mistral.py", modeling.format(imports=flash, name="Mistral", sdpa=""))
    write(tmp_path / "pkg" / "plain.py", modeling.format(imports="", name="Plain", sdpa=""))
    write(tmp_path / "requirements.txt", "transformers>=4.36.2\n")
    train = write(
        tmp_path / "finetune.py",
        "from transformers import AutoModelForCausalLM\n\n\ndef main(args):\n"
        "    if args.llama:\n        from pkg.llama import LlamaForCausalLM\n        model_cls = LlamaForCausalLM\n"
        "    elif args.mistral:\n        from pkg.mistral import MistralForCausalLM\n        model_cls = MistralForCausalLM\n"
        "    else:\n        model_cls = AutoModelForCausalLM\n"
        '    model = model_cls.from_pretrained("m", use_flash_attention_2=args.flash_attention)\n'
        '    off = model_cls.from_pretrained("m", use_flash_attention_2=False)\n',
    )
    plain = write(
        tmp_path / "plain_run.py",
        "from transformers import AutoConfig\n\nfrom pkg.plain import PlainForCausalLM\n\n"
        'model = PlainForCausalLM.from_pretrained("m", use_flash_attention_2=True)\n',
    )
    found = [
        d for d in json.loads(cli("check", tmp_path, "--format", "json").stdout)["diagnostics"] if d["code"] == "NPU902"
    ]
    assert [(Path(d["path"]).name, d["line"]) for d in found] == [("finetune.py", 13), ("plain_run.py", 5)]
    own, general = found
    assert "may load the project's model classes LlamaForCausalLM, MistralForCausalLM" in own["message"]
    assert "whatever the transformers release" in own["message"]
    assert "(not MistralForCausalLM: no SDPA support)" in own["message"]
    assert "require transformers >= 4.51.0" not in own["message"]
    assert "require transformers >= 4.51.0" in general["message"]
    cli("migrate", tmp_path)
    assert cli("migrate", tmp_path).stdout == cli("migrate", tmp_path).stdout
    assert "use_flash_attention_2=args.flash_attention" in train.read_text()
    assert "use_flash_attention_2=True" in plain.read_text()
