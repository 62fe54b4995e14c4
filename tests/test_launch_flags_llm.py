"""Launch flags of the LLM stack in shell scripts: ``ray start --num-gpus`` (NPU921) and the vLLM
weight-sync backend flags of OpenRLHF-style trainers (NPU201)."""

from __future__ import annotations

import json
import os
import textwrap

from cli_helpers import cli, write

from cuda2npu.analysis.attention_choices import attention_parameters, attention_switches
from cuda2npu.analysis.python_files import PythonFiles

SCRIPT = r"""
#!/bin/bash
ray start --head --node-ip-address 0.0.0.0 --num-gpus 8
ray start --address=$HEAD --num-gpus=$NUM_GPUS --block
ray start --head \
    --num-gpus 4 \
    --dashboard-host=0.0.0.0
ray start --head --num-gpus 0
ray start --head --num-gpus 8 --resources='{"NPU": 8}'
ray start --head --num-gpus 8 --resources='{"ssd": 1}'
ssh worker "ray start --num-gpus 8"
ray start --head --num-gpus "$(nproc)"
ray start --head && python train.py --num-gpus 8
ray start --num-gpus 2  # noqa: NPU921
# ray start --num-gpus 8
python train.py --vllm_sync_backend nccl --vllm.sync_backend=nccl
python train.py --vllm_sync_backend gloo --vllm-sync-backend "nccl"
"""

MIGRATED = r"""
#!/bin/bash
ray start --head --node-ip-address 0.0.0.0 --resources='{"NPU": 8}'
ray start --address=$HEAD --resources="{\"NPU\": $NUM_GPUS}" --block
ray start --head \
    --resources='{"NPU": 4}' \
    --dashboard-host=0.0.0.0
ray start --head --num-gpus 0
ray start --head --num-gpus 8 --resources='{"NPU": 8}'
# TODO(cuda2npu): NPU921 `--num-gpus 8` registers GPUs, which an Ascend host has none of: ask for `{"NPU": n}` in its `--resources` JSON by hand (Ray's resource name of Ascend cards; `ray start` counts them by itself without it)
ray start --head --num-gpus 8 --resources='{"ssd": 1}'
# TODO(cuda2npu): NPU921 `--num-gpus 8` registers GPUs, which an Ascend host has none of: ask for `{"NPU": n}` in a `--resources` JSON by hand (Ray's resource name of Ascend cards; `ray start` counts them by itself without it)
ssh worker "ray start --num-gpus 8"
# TODO(cuda2npu): NPU921 `--num-gpus` registers GPUs, which an Ascend host has none of: ask for `{"NPU": n}` in a `--resources` JSON by hand (Ray's resource name of Ascend cards; `ray start` counts them by itself without it)
ray start --head --num-gpus "$(nproc)"
ray start --head && python train.py --num-gpus 8
ray start --num-gpus 2  # noqa: NPU921
# ray start --num-gpus 8
# TODO(cuda2npu): NPU201 review: `--vllm_sync_backend nccl` is the backend of the trainer → vLLM weight-sync group, and NCCL does not run on Ascend; name `hccl` only where the program hands it to torch.distributed (OpenRLHF releases before its vLLM PyNcclCommunicator sync of 2025-08), with vllm-ascend serving: Ray's collective groups (`--vllm_sync_with_ray`) have no HCCL backend (NPU926), and later OpenRLHF syncs through vLLM's PyNcclCommunicator whatever the flag says (NPU932)
python train.py --vllm_sync_backend nccl --vllm.sync_backend=nccl
# TODO(cuda2npu): NPU201 review: `--vllm-sync-backend nccl` is the backend of the trainer → vLLM weight-sync group, and NCCL does not run on Ascend; name `hccl` only where the program hands it to torch.distributed (OpenRLHF releases before its vLLM PyNcclCommunicator sync of 2025-08), with vllm-ascend serving: Ray's collective groups (`--vllm_sync_with_ray`) have no HCCL backend (NPU926), and later OpenRLHF syncs through vLLM's PyNcclCommunicator whatever the flag says (NPU932)
python train.py --vllm_sync_backend gloo --vllm-sync-backend "nccl"
"""


def diagnostics(root):
    data = json.loads(cli("check", root, "--format", "json").stdout)
    return [(d["line"], d["column"], d["code"], d["tier"]) for d in data["diagnostics"] if d["path"].endswith(".sh")]


def test_findings_with_positions_and_tiers(tmp_path):
    write(tmp_path / "launch.sh", SCRIPT)
    assert diagnostics(tmp_path) == [
        (2, 44, "NPU921", "exact"),
        (3, 27, "NPU921", "exact"),
        (5, 5, "NPU921", "exact"),
        (9, 18, "NPU921", "manual"),  # its --resources asks for something else: merged by hand
        (10, 23, "NPU921", "manual"),  # quoted: the rewrite's quotes would end the string
        (11, 18, "NPU921", "manual"),  # a value not spelled out
        (15, 17, "NPU201", "review"),
        (15, 42, "NPU201", "review"),
        (16, 42, "NPU201", "review"),
    ]


def test_ray_start_is_rewritten_once_and_the_rest_stays(tmp_path):
    script = write(tmp_path / "launch.sh", SCRIPT)
    cli("migrate", tmp_path)
    assert script.read_text() == textwrap.dedent(MIGRATED).lstrip("\n")
    cli("migrate", tmp_path)
    assert script.read_text() == textwrap.dedent(MIGRATED).lstrip("\n")


def test_the_sync_backend_message_says_what_the_value_does(tmp_path):
    write(tmp_path / "launch.sh", "python train.py --vllm_sync_backend nccl\n")
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    [message] = [d["message"] for d in data["diagnostics"]]
    assert "hccl" in message and "torch.distributed" in message and "NPU926" in message and "NPU932" in message


def test_applied_shell_edits_are_not_left_for_a_human(tmp_path):
    write(tmp_path / "launch.sh", "ray start --head --num-gpus 8\n")
    result = cli("migrate", tmp_path)
    assert "need a human" not in result.stdout + result.stderr


def test_flag_edits_variable_renames_and_markers_go_together(tmp_path):
    """One job script (a Slurm batch file) with a GPU request, a launch flag, a CUDA device mask and a
    GPU count from nvidia-smi: the flag and the variable are rewritten, the count is marked above the
    command, the request above its directive."""
    write(tmp_path / "train.py", "from transformers import HfArgumentParser, TrainingArguments\n")
    script = write(
        tmp_path / "slurm" / "train.slurm",
        """
        #!/bin/bash
        #SBATCH --gres=gpu:2
        CUDA_VISIBLE_DEVICES=0,1 torchrun \\
            --nproc_per_node $(nvidia-smi -L | wc -l) ../train.py \\
            --tf32 True
        """,
    )
    assert [d[2] for d in diagnostics_of(tmp_path, "train.slurm")] == ["NPU716", "NPU711", "NPU712", "NPU904"]
    cli("migrate", tmp_path)
    lines = script.read_text().splitlines()
    assert lines[1].startswith("# TODO(cuda2npu): NPU716 review: `--gres=gpu:2` asks Slurm for the GRES named `gpu`")
    assert lines[3].startswith("# TODO(cuda2npu): NPU712 `nvidia-smi` is not installed on an Ascend host")
    assert lines[4:] == [
        "ASCEND_RT_VISIBLE_DEVICES=0,1 torchrun \\",
        "    --nproc_per_node $(nvidia-smi -L | wc -l) ../train.py \\",
        "    --tf32 False",
    ]
    before = script.read_text()
    cli("migrate", tmp_path)
    assert script.read_text() == before


def diagnostics_of(root, name):
    data = json.loads(cli("check", root, "--format", "json").stdout)
    return [(d["line"], d["column"], d["code"], d["tier"]) for d in data["diagnostics"] if d["path"].endswith(name)]


BACKEND_SCRIPT = r"""
gpt_options=" \
       --mode finetune \
       --distributed-backend nccl \
       --lr-decay-style cosine \
"
python train.py --distributed_backend=nccl --dist-backend "nccl" --ddp_backend nccl
python train.py --distributed-backend gloo --distributed-backend $BACKEND --rdzv_backend=c10d
python bench.py --backend nccl
OPTS+=" --process-group-backend nccl"
python train.py --distributed-backend nccl  # noqa: NPU201
"""

BACKEND_MIGRATED = r"""
gpt_options=" \
       --mode finetune \
       --distributed-backend hccl \
       --lr-decay-style cosine \
"
python train.py --distributed_backend=hccl --dist-backend "hccl" --ddp_backend hccl
python train.py --distributed-backend gloo --distributed-backend $BACKEND --rdzv_backend=c10d
# TODO(cuda2npu): NPU201 review: `--backend nccl`: NCCL does not run on Ascend; if the program hands this flag to torch.distributed, pass `hccl` (the backend torch_npu registers)
python bench.py --backend nccl
OPTS+=" --process-group-backend hccl"
python train.py --distributed-backend nccl  # noqa: NPU201
"""


def test_distributed_backend_flags_become_hccl(tmp_path):
    """Megatron-LM / SwissArmyTransformer's `--distributed-backend nccl` reaches init_process_group:
    `hccl`, also inside an option string expanded later; a bare `--backend` may be another program's."""
    script = write(tmp_path / "finetune.sh", BACKEND_SCRIPT)
    assert diagnostics(tmp_path) == [
        (3, 8, "NPU201", "exact"),
        (6, 17, "NPU201", "exact"),
        (6, 44, "NPU201", "exact"),
        (6, 66, "NPU201", "exact"),
        (8, 17, "NPU201", "review"),
        (9, 9, "NPU201", "exact"),
    ]
    cli("migrate", tmp_path)
    assert script.read_text() == textwrap.dedent(BACKEND_MIGRATED).lstrip("\n")
    cli("migrate", tmp_path)
    assert script.read_text() == textwrap.dedent(BACKEND_MIGRATED).lstrip("\n")


def test_r49_megatrons_backend_flag_for_a_program_outside_the_project_is_reviewed(tmp_path):
    """octopack (round 49): a script running bigscience's Megatron-DeepSpeed from outside the repository; its
    `--distributed-backend` takes `choices=['nccl', 'gloo']`, so `hccl` made argparse exit. Reported, kept;
    the same flag for the project's own Megatron entry point (whose choices cuda2npu rewrites) becomes hccl."""
    launch = (
        "MEGATRON_DEEPSPEED_REPO=/work/Megatron-DeepSpeed\ncd $MEGATRON_DEEPSPEED_REPO\n"
        "python -u -m torch.distributed.run finetune_t0.py --distributed-backend nccl\n"
    )
    script = write(tmp_path / "external" / "train.sh", launch)
    assert diagnostics_of(tmp_path / "external", "train.sh") == [(3, 51, "NPU201", "review")]
    # its `--fp16` in a variable the launch expands is Megatron's own (NPU906 asked nothing: 9 noise markers)
    write(tmp_path / "mtf" / "train.sh", 'GPT_ARGS=" \\\n    --fp16 \\\n    "\ndeepspeed finetune_mtf.py $GPT_ARGS\n')
    assert diagnostics_of(tmp_path / "mtf", "train.sh") == []
    cli("migrate", tmp_path / "external")
    assert "--distributed-backend nccl" in script.read_text()
    own = tmp_path / "own"
    write(
        own / "finetune_t0.py",
        "import argparse\n\nparser = argparse.ArgumentParser()\n"
        "parser.add_argument('--distributed-backend', default='nccl', choices=['nccl', 'gloo'])\n",
    )
    script = write(own / "train.sh", launch)
    assert diagnostics_of(own, "train.sh") == [(3, 51, "NPU201", "exact")]


def test_distributed_backend_is_kept_under_portable(tmp_path):
    script = write(tmp_path / "finetune.sh", "torchrun pretrain.py --distributed-backend nccl\n")
    assert diagnostics_of(tmp_path, "finetune.sh") == [(1, 22, "NPU201", "exact")]
    cli("migrate", tmp_path, "--portable")
    assert script.read_text().splitlines() == [
        "# TODO(cuda2npu): NPU201 review: `--distributed-backend nccl` kept for CUDA hosts (portable output): on "
        "Ascend hosts pass `hccl` (NCCL does not run there)",
        "torchrun pretrain.py --distributed-backend nccl",
    ]


def test_device_flags_of_the_projects_programs_become_npu(tmp_path):
    """`--devices cuda:0 cuda:1` passed to a project script that declares `--devices`: its torch
    devices, `npu:0 npu:1`; another program's flag is reported; other values stay."""
    write(
        tmp_path / "eval.py",
        'import argparse\n\nparser = argparse.ArgumentParser()\nparser.add_argument("--devices", nargs="+")\nparser.add_argument("--device")\n',
    )
    script = write(
        tmp_path / "eval.sh",
        """
        python eval.py --devices cuda:0 cuda:1 --batch 8
        python eval.py --device=cuda --devices "cuda:3"
        lm_eval --model hf --device cuda:0
        python eval.py --device cpu --devices $DEVICES
        """,
    )
    assert diagnostics_of(tmp_path, "eval.sh") == [
        (1, 16, "NPU104", "exact"),
        (2, 16, "NPU104", "exact"),
        (2, 30, "NPU104", "exact"),
        (3, 20, "NPU104", "review"),
    ]
    cli("migrate", tmp_path)
    migrated = script.read_text().splitlines()
    assert migrated[:2] == [
        "python eval.py --devices npu:0 npu:1 --batch 8",
        'python eval.py --device=npu --devices "npu:3"',
    ]
    assert migrated[2].startswith("# TODO(cuda2npu): NPU104 review: `--device cuda:0` names CUDA devices")
    assert migrated[3:] == ["lm_eval --model hf --device cuda:0", "python eval.py --device cpu --devices $DEVICES"]
    cli("migrate", tmp_path)
    assert script.read_text().splitlines() == migrated


def test_a_prefixed_device_flag_is_a_device_flag_too(tmp_path):
    """R1-V's `--vllm_device "cuda:4"` (TRL's vLLM generation device, a dataclass field: no `"--vllm_device"`
    in the program) is reported; a project program declaring `--ref-device` gets `npu`; counts stay."""
    write(tmp_path / "grpo.py", "from trl import GRPOConfig\n")
    write(tmp_path / "ref.py", 'import argparse\n\nargparse.ArgumentParser().add_argument("--ref-device")\n')
    script = write(
        tmp_path / "run.sh",
        """
        torchrun grpo.py --vllm_device "cuda:4" --num_devices 4
        python ref.py --ref-device cuda:1
        """,
    )
    assert diagnostics_of(tmp_path, "run.sh") == [(1, 18, "NPU104", "review"), (2, 15, "NPU104", "exact")]
    cli("migrate", tmp_path)
    lines = script.read_text().splitlines()
    assert lines[0].startswith('# TODO(cuda2npu): NPU104 review: `--vllm_device "cuda:4"` names CUDA devices')
    assert lines[1:] == ['torchrun grpo.py --vllm_device "cuda:4" --num_devices 4', "python ref.py --ref-device npu:1"]


def test_megatron_entry_points_keep_their_precision_flags(tmp_path):
    """`--fp16` / `--tf32` handed to Megatron-LM's pretrain_gpt.py (a submodule the project does not
    carry) are Megatron's own: nothing to report, while an unknown program's stays a review item."""
    script = write(
        tmp_path / "train.sh",
        """
        torchrun third_party/Megatron-LM/pretrain_gpt.py --fp16 --num-layers 2
        python pretrain_bert.py --fp16
        python unknown_trainer.py --fp16
        """,
    )
    assert diagnostics_of(tmp_path, "train.sh") == [(3, 27, "NPU906", "review")]
    cli("migrate", tmp_path)
    assert script.read_text().splitlines()[:2] == [
        "torchrun third_party/Megatron-LM/pretrain_gpt.py --fp16 --num-layers 2",
        "python pretrain_bert.py --fp16",
    ]


def test_r24_flags_in_a_quoted_variable_are_its_launched_programs(tmp_path):
    """Round 24 (Megatron-DeepSpeed's examples): the flags sit in a multi-line quoted variable the
    launch command expands. They are the launched program's (Megatron's `--fp16`: nothing to ask),
    and a marker for an unknown program's goes above the assignment, never inside the string."""
    text = textwrap.dedent(
        """
        BERT_ARGS="
            --num-layers 24 \\
            --fp16
        "
        OTHER_ARGS="
            --lr 1e-4 # a '#' in a string: no comment
            --fp16
        "
        echo "step #1"
        torchrun pretrain_bert.py $BERT_ARGS
        python unknown_trainer.py ${OTHER_ARGS}
        """
    )
    script = write(tmp_path / "train.sh", text)
    assert diagnostics_of(tmp_path, "train.sh") == [(7, 5, "NPU906", "review")]
    cli("migrate", tmp_path)
    lines = script.read_text().splitlines()
    assert lines[4].startswith("# TODO(cuda2npu): NPU906") and lines[5] == 'OTHER_ARGS="'
    assert [line for line in lines if not line.startswith("# TODO")] == text.lstrip("\n").splitlines()


R14_FP16_TRAINER = """
from transformers import HfArgumentParser, TrainingArguments

(args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
"""
R14_FP16_AUTO = '{"fp16": {"enabled": "auto", "loss_scale": 0}, "zero_optimization": {"stage": 2}}\n'
R14_FP16_BOTH = '{"fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 2}}\n'

R14_FP16_SCRIPT = r"""
ds_auto=configs/ds_auto.json
export DS_BOTH="configs/ds_both.json"
twice=configs/ds_auto.json
twice=configs/ds_other.json
from_arg=$1
missing=configs/ds_missing.json
torchrun train.py --deepspeed ${ds_auto} --fp16
torchrun train.py --deepspeed "$ds_auto" \
    --fp16
torchrun train.py --deepspeed=$ds_auto --fp16 True
torchrun train.py --deepspeed ${DS_BOTH} --fp16
torchrun train.py --deepspeed $twice --fp16
torchrun train.py --deepspeed ${from_arg} --fp16
torchrun train.py --deepspeed ${missing} --fp16
torchrun train.py --deepspeed ${ds_auto}/x.json --fp16
torchrun train.py --deepspeed '$ds_auto' --fp16
"""


def test_r14_fp16_a_deepspeed_config_named_through_a_shell_variable_is_read(tmp_path):
    """`--deepspeed ${ds_config}` with `ds_config=x.json` in the script: the config is read as for a
    literal path (from the project root here, the script being in scripts/), so `--fp16` stays a
    review item where it has no bf16 block; a variable set twice, from an argument or to a file the
    project does not have names a config that cannot be read, a review item too (FastChat's
    `--deepspeed $PATH_TO_DEEPSPEED_CONFIG`, round 36); one not expanded names no config (rewritten)."""
    write(tmp_path / "train.py", R14_FP16_TRAINER)
    write(tmp_path / "configs" / "ds_auto.json", R14_FP16_AUTO)
    write(tmp_path / "configs" / "ds_both.json", R14_FP16_BOTH)
    write(tmp_path / "configs" / "ds_other.json", R14_FP16_AUTO)
    script = write(tmp_path / "scripts" / "run.sh", R14_FP16_SCRIPT)
    result = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    fp16 = {d["line"]: d for d in result["diagnostics"] if d["path"].endswith("run.sh") and d["code"] == "NPU906"}
    assert {line: d["tier"] for line, d in fp16.items()} == {
        7: "review",
        9: "review",
        10: "review",
        11: "numeric",
        12: "review",
        13: "review",
        14: "review",
        15: "numeric",
        16: "numeric",
    }
    assert "configs/ds_auto.json (`${ds_auto}`), which has none" in fp16[7]["message"]
    cli("migrate", tmp_path)
    lines = script.read_text().splitlines()
    marker = "# TODO(cuda2npu): NPU906 review: `--fp16` under the bf16 policy"
    assert [line for line in lines if line.startswith(marker)] == [lines[i] for i in (6, 8, 11, 14, 16, 18)]
    assert [line for line in lines if not line.startswith("#")][6:] == [
        "torchrun train.py --deepspeed ${ds_auto} --fp16",
        'torchrun train.py --deepspeed "$ds_auto" \\',
        "    --fp16",
        "torchrun train.py --deepspeed=$ds_auto --fp16 True",
        "torchrun train.py --deepspeed ${DS_BOTH} --bf16",
        "torchrun train.py --deepspeed $twice --fp16",
        "torchrun train.py --deepspeed ${from_arg} --fp16",
        "torchrun train.py --deepspeed ${missing} --fp16",
        "torchrun train.py --deepspeed ${ds_auto}/x.json --bf16",
        "torchrun train.py --deepspeed '$ds_auto' --bf16",
    ]
    migrated = script.read_text()
    cli("migrate", tmp_path)
    assert script.read_text() == migrated


def test_r14_fp16_float16_weights_keep_the_fp16_flag_unless_a_bf16_block_casts_them(tmp_path):
    """`--torch_dtype float16` loads the weights in float16, which `--bf16` does not change (no loss
    scaling then): a review item, but where the command's DeepSpeed config has a bf16 block (DeepSpeed
    casts the model to it); other dtypes are rewritten."""
    write(tmp_path / "train.py", R14_FP16_TRAINER)
    write(tmp_path / "ds_both.json", R14_FP16_BOTH)
    script = write(
        tmp_path / "run.sh",
        """
        torchrun train.py --fp16 --torch_dtype float16
        torchrun train.py --fp16 --torch_dtype=float16 --deepspeed ds_both.json
        torchrun train.py --fp16 --torch_dtype bfloat16
        torchrun train.py --fp16 --torch_dtype "float16_x"
        """,
    )
    result = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    fp16 = {d["line"]: d for d in result["diagnostics"] if d["path"].endswith("run.sh") and d["code"] == "NPU906"}
    assert {line: d["tier"] for line, d in fp16.items()} == {1: "review", 2: "numeric", 3: "numeric", 4: "numeric"}
    assert "`--torch_dtype bfloat16` in place of this command's `--torch_dtype float16`" in fp16[1]["message"]
    cli("migrate", tmp_path)
    assert script.read_text().splitlines()[1:] == [
        "torchrun train.py --fp16 --torch_dtype float16",
        "torchrun train.py --bf16 --torch_dtype=float16 --deepspeed ds_both.json",
        "torchrun train.py --bf16 --torch_dtype bfloat16",
        'torchrun train.py --bf16 --torch_dtype "float16_x"',
    ]


def test_r14_fp16_a_variable_named_config_changes_with_its_commands_flags(tmp_path):
    """The config a command names through a shell variable follows that command's flags (NPU723):
    switched to bf16 where its `--fp16` becomes `--bf16`, kept where the flag stays (the HF Trainer
    raises when an explicit `enabled` differs from the flags)."""
    write(tmp_path / "train.py", R14_FP16_TRAINER)
    explicit = '{"zero_optimization": {"stage": 2}, "fp16": {"enabled": true}, "bf16": {"enabled": false}}\n'
    fp16_only = '{"zero_optimization": {"stage": 2}, "fp16": {"enabled": true}}\n'
    switched = write(tmp_path / "ds_switched.json", explicit)
    kept = write(tmp_path / "ds_kept.json", fp16_only)
    script = write(
        tmp_path / "run.sh",
        """
        a=ds_switched.json
        b=ds_kept.json
        deepspeed train.py --deepspeed $a --fp16
        deepspeed train.py --deepspeed ${b} --fp16
        """,
    )
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    found = sorted((d["path"].rsplit("/", 1)[-1], d["code"], d["tier"]) for d in data["diagnostics"])
    assert found == [
        ("ds_kept.json", "NPU723", "review"),
        ("ds_switched.json", "NPU723", "numeric"),
        ("run.sh", "NPU906", "numeric"),
        ("run.sh", "NPU906", "review"),
    ]
    cli("migrate", tmp_path)
    assert switched.read_text() == explicit.replace(
        'true}, "bf16": {"enabled": false', 'false}, "bf16": {"enabled": true'
    )
    assert kept.read_text() == fp16_only
    assert script.read_text().splitlines()[2] == "deepspeed train.py --deepspeed $a --bf16"
    assert script.read_text().splitlines()[4] == "deepspeed train.py --deepspeed ${b} --fp16"


R14_ATTN_TRAIN = """
from trl import TrlParser

from pkg.modules import *


def get_module(model_name):
    if "internvl" in model_name.lower():
        return InternVLModule
    return QwenModule
"""

R14_ATTN_INTERNVL = """
from transformers import AutoModel


class InternVLModule:
    def model_class(self, model_id, init_kwargs):
        # InternVL's remote code takes its own switch, and falls back to eager without flash-attn
        if "flash_attention_2" in init_kwargs.get("attn_implementation", ""):
            init_kwargs["use_flash_attn"] = True
            init_kwargs.pop("attn_implementation")
        return AutoModel
"""

R14_ATTN_QWEN = """
from transformers import Qwen2VLForConditionalGeneration


class QwenModule:
    def model_class(self, model_id, init_kwargs):
        return Qwen2VLForConditionalGeneration
"""


def r14_attn_project(root):
    """VLM-R1's shape: one trainer for several models, whose InternVL adapter turns
    `attn_implementation="flash_attention_2"` into InternVL's own `use_flash_attn` switch."""
    write(root / "pyproject.toml", '[project]\nname = "pkg"\ndependencies = ["transformers==4.49.0"]\n')
    write(root / "src" / "pkg" / "__init__.py", "")
    write(
        root / "src" / "pkg" / "modules" / "__init__.py", "from .internvl_module import *\nfrom .qwen_module import *\n"
    )
    write(root / "src" / "pkg" / "modules" / "internvl_module.py", R14_ATTN_INTERNVL)
    write(root / "src" / "pkg" / "modules" / "qwen_module.py", R14_ATTN_QWEN)
    write(root / "src" / "pkg" / "train.py", R14_ATTN_TRAIN)
    write(root / "tools" / "convert.py", "import argparse\n")


def test_r14_attn_a_flag_the_projects_own_switch_reads_is_kept_for_review(tmp_path):
    """The InternVL run's `--attn_implementation flash_attention_2` reaches the project's adapter,
    which tests the value itself: `sdpa` would pass it to a remote-code class that refuses it, while
    the original becomes InternVL's `use_flash_attn` (eager without flash-attn). Kept, a review item,
    also where the launched file is not found (the way is not known) but the script names InternVL.
    The Qwen run of the same trainer, and an InternVL flag handed to a project file that does not
    import the adapter, become `sdpa` as before."""
    r14_attn_project(tmp_path)
    internvl = write(
        tmp_path / "run_scripts" / "r14_attn_internvl.sh",
        """
        model_path="OpenGVLab/InternVL2_5-4B-MPO"
        torchrun --nproc_per_node 8 src/pkg/train.py \\
            --model_name_or_path $model_path \\
            --attn_implementation flash_attention_2
        cd "$REPO_HOME/elsewhere" && torchrun src/pkg/train_copy.py --attn_implementation flash_attention_2
        python tools/convert.py --attn_implementation flash_attention_2
        """,
    )
    qwen = write(
        tmp_path / "run_scripts" / "r14_attn_qwen.sh",
        """
        torchrun src/pkg/train.py --model_name_or_path Qwen/Qwen2.5-VL-3B-Instruct --attn_implementation flash_attention_2
        """,
    )
    found = json.loads(cli("check", tmp_path, "--format", "json").stdout)["diagnostics"]
    flags = sorted((d["path"].rsplit("/", 1)[-1], d["line"], d["code"], d["tier"]) for d in found if ".sh" in d["path"])
    assert flags == [
        ("r14_attn_internvl.sh", 4, "NPU901", "review"),
        ("r14_attn_internvl.sh", 5, "NPU901", "review"),
        ("r14_attn_internvl.sh", 6, "NPU901", "numeric"),
        ("r14_attn_qwen.sh", 1, "NPU901", "numeric"),
    ]
    message = next(d["message"] for d in found if d["path"].endswith("r14_attn_internvl.sh") and d["line"] == 4)
    assert "(src/pkg/modules/internvl_module.py:7)" in message and "`use_flash_attn`" in message
    cli("migrate", tmp_path)
    lines = internvl.read_text().splitlines()
    assert lines[0] == 'model_path="OpenGVLab/InternVL2_5-4B-MPO"'
    assert lines[4] == "    --attn_implementation flash_attention_2"
    assert lines[5].startswith("# TODO(cuda2npu): NPU901 review: `--attn_implementation flash_attention_2` kept")
    assert lines[6].endswith("torchrun src/pkg/train_copy.py --attn_implementation flash_attention_2")
    assert lines[7] == "python tools/convert.py --attn_implementation sdpa"
    assert qwen.read_text().endswith("--attn_implementation sdpa\n")
    before = internvl.read_text()
    cli("migrate", tmp_path)
    assert internvl.read_text() == before


def test_r14_attn_a_switch_in_the_launched_program_concerns_all_its_runs(tmp_path):
    """A switch in the trainer itself (no model it is picked for): every run of that trainer is kept
    for review; a comparison in code that answers `sdpa` too, or of transformers' own
    `config._attn_implementation` (set once transformers accepted the value), is no switch."""
    write(tmp_path / "requirements.txt", "transformers==4.40.0\n")
    write(
        tmp_path / "train.py",
        """
        from transformers import AutoModel, HfArgumentParser


        def load(args):
            kwargs = {}
            if args.attn_implementation == "flash_attention_2":
                kwargs["use_flash_attn"] = True
            return AutoModel.from_pretrained(args.model, trust_remote_code=True, **kwargs)
        """,
    )
    write(
        tmp_path / "finetune.py",
        """
        from transformers import AutoModel, HfArgumentParser


        def load(args, config):
            if args.attn_implementation in ("flash_attention_2", "eager"):
                kwargs = {"attn_implementation": args.attn_implementation}
            else:
                kwargs = {"attn_implementation": "sdpa"}
            model = AutoModel.from_pretrained(args.model, **kwargs)
            if model.config._attn_implementation == "flash_attention_2":
                model.config.use_cache = False
            return model
        """,
    )
    script = write(
        tmp_path / "r14_attn_generic.sh",
        """
        python train.py --attn_implementation flash_attention_2
        python finetune.py --attn_implementation flash_attention_2
        """,
    )
    cli("migrate", tmp_path)
    lines = script.read_text().splitlines()
    assert lines[0].startswith("# TODO(cuda2npu): NPU901 review: `--attn_implementation flash_attention_2` kept")
    assert "(train.py:6)" in lines[0]
    assert lines[1:] == [
        "python train.py --attn_implementation flash_attention_2",
        "python finetune.py --attn_implementation sdpa",
    ]


def test_r14_attn_the_project_facts_of_the_attention_implementation(tmp_path):
    """`attention_parameter`: the positional index of a function's (a class's `__init__`'s)
    `attn_implementation` parameter, a name defined with two indexes left out; the switches:
    each file on the way to a switch, with the words of the switch file's name the project picks it by."""
    texts = {
        tmp_path / "pkg" / "__init__.py": b"",
        tmp_path / "pkg" / "train.py": b"def train(attn_implementation=None):\n    pass\n",
        tmp_path / "pkg" / "loader.py": (
            b"class Loader:\n    def __init__(self, path, attn_implementation='eager'):\n        pass\n\n\n"
            b"def twice(attn_implementation):\n    pass\n"
        ),
        tmp_path / "pkg" / "other.py": b"def twice(name, attn_implementation):\n    pass\n",
        tmp_path / "pkg" / "glm_module.py": b'def kwargs(k):\n    return k.pop("flash_attention_2", None)\n',
        tmp_path / "run.py": b'import pkg.glm_module\n\nassert "GLM" in "GLM-4V"\n',
        tmp_path / "eval.py": b"import pkg.train\n",
    }
    files = PythonFiles(texts)
    assert attention_parameters(files) == (("Loader", 1), ("train", 0))
    root = os.path.realpath(tmp_path)
    shown = [
        (reacher.replace(root, ""), switch, words) for reacher, switch, words in attention_switches(files, tmp_path)
    ]
    assert shown == [
        ("/pkg/glm_module.py", "pkg/glm_module.py:2", "glm"),
        ("/run.py", "pkg/glm_module.py:2", "glm"),
    ]


def test_r14_attn_a_positional_value_for_another_files_parameter(tmp_path):
    """VideoLLaMA2's `train("flash_attention_2")` where the project's `train` (here in another file,
    LLaVA's layout) takes `attn_implementation` first: rewritten as the keyword form is; an argument
    in another position stays."""
    write(tmp_path / "requirements.txt", "transformers==4.40.0\n")
    write(tmp_path / "pkg" / "__init__.py", "")
    write(
        tmp_path / "pkg" / "train.py",
        """
        import transformers


        def train(attn_implementation=None, model_name="m"):
            return transformers.AutoModel.from_pretrained(model_name, attn_implementation=attn_implementation)
        """,
    )
    entry = write(
        tmp_path / "train_mem.py",
        """
        from pkg.train import train

        if __name__ == "__main__":
            train("flash_attention_2")
            train(None, "flash_attention_2")
        """,
    )
    cli("migrate", tmp_path)
    assert entry.read_text().splitlines()[3:] == ['    train("sdpa")', '    train(None, "flash_attention_2")']


def test_bf16_under_a_transformers_pin_that_rejects_it_on_the_npu(tmp_path):
    """LLM-Shearing's `sft.sh --bf16 True` under transformers 4.33.0: TrainingArguments raises on an
    NPU device before 4.34.0, so the flag is reviewed; under a newer pin, or set False, nothing is said."""
    write(tmp_path / "requirements.txt", "transformers==4.33.0\n")
    write(tmp_path / "sft.py", "from transformers import HfArgumentParser, TrainingArguments\n")
    script = write(tmp_path / "sft.sh", "python sft.py --bf16 True --tf32 False\npython sft.py --bf16 False\n")
    assert diagnostics_of(tmp_path, "sft.sh") == [(1, 15, "NPU906", "review")]
    cli("migrate", tmp_path)
    lines = script.read_text().splitlines()
    assert "`--bf16` makes TrainingArguments raise ValueError on an NPU host" in lines[0]
    assert "`transformers==4.33.0`" in lines[0] and lines[1:] == [
        "python sft.py --bf16 True --tf32 False",
        "python sft.py --bf16 False",
    ]
    write(tmp_path / "requirements.txt", "transformers==4.34.0\n")
    assert diagnostics_of(tmp_path, "sft.sh") == []


def test_a_remote_code_model_gets_eager_not_sdpa(tmp_path):
    """LMFlow's Phi-3-vision script: `--trust_remote_code` loads a model class that need not declare SDPA
    (transformers raises for one that does not): `eager`, which every model runs; without it, `sdpa`."""
    write(tmp_path / "requirements.txt", "transformers==4.40.0\ntorch>=2.1.1\n")
    write(tmp_path / "finetune.py", "from transformers import HfArgumentParser, TrainingArguments\n")
    script = write(
        tmp_path / "run.sh",
        """
        python finetune.py --trust_remote_code --attn_implementation flash_attention_2
        python finetune.py --trust_remote_code True --attn_implementation flash_attention_2
        python finetune.py --trust_remote_code False --attn_implementation flash_attention_2
        python finetune.py --attn_implementation flash_attention_2
        """,
    )
    cli("migrate", tmp_path)
    assert [line.rpartition(" ")[2] for line in script.read_text().splitlines()] == ["eager", "eager", "sdpa", "sdpa"]


def test_r16_a_gemma2_script_gets_eager_not_sdpa(tmp_path):
    """RLHF-Reward-Modeling: Gemma-2's attention softcaps its logits, which transformers' sdpa drops and
    eager applies: a script naming a Gemma-2 model gets `eager`; one naming Gemma-1's `gemma-2b` gets `sdpa`."""
    write(tmp_path / "requirements.txt", "transformers==4.44.2\ntorch>=2.1.1\n")
    write(tmp_path / "finetune.py", "from transformers import HfArgumentParser, TrainingArguments\n")
    gemma2 = write(
        tmp_path / "gemma2.sh",
        """
        MODEL=google/gemma-2-9b-it
        python finetune.py --model_name_or_path $MODEL \\
            --attn_implementation flash_attention_2
        """,
    )
    gemma1 = write(
        tmp_path / "gemma1.sh",
        "python finetune.py --model_name_or_path google/gemma-2b --attn_implementation flash_attention_2\n",
    )
    cli("migrate", tmp_path)
    assert gemma2.read_text().splitlines()[-1] == "    --attn_implementation eager"
    assert gemma1.read_text().endswith("--attn_implementation sdpa\n")


R15_FA2FLAG_PROGRAM = """
from dataclasses import dataclass

import transformers


@dataclass
class TrainingArguments(transformers.TrainingArguments):
    use_flash_attention_2: bool = False
"""


def test_r15_fa2flag_a_true_flash_attention_2_flag_is_marked_not_rewritten(tmp_path):
    """VL-RLHF's `--use_flash_attention_2 True` for a TrainingArguments subclass whose code hands the field
    to `from_pretrained` (raising ImportError on an NPU host under transformers 4.41) and may read it
    itself: a manual item above the command, the flag kept; `False`, a shell variable, or another flag
    spelled alike are not reported."""
    write(tmp_path / "requirements.txt", "transformers==4.41.0\n")
    write(tmp_path / "src" / "dpo.py", R15_FA2FLAG_PROGRAM)
    text = textwrap.dedent(
        """
        accelerate launch src/dpo.py \\
            --use_flash_attention_2 True \\
            --bf16 True
        python src/dpo.py --use-flash-attention-2
        python src/dpo.py --use_flash_attention_2 False
        python src/dpo.py --use_flash_attention_2 $FA2
        python src/dpo.py --use_flash_attn True --use_flash_attention_2=0
        """
    ).lstrip("\n")
    script = write(tmp_path / "scripts" / "dpo.sh", text)
    assert diagnostics_of(tmp_path, "dpo.sh") == [(2, 5, "NPU902", "manual"), (4, 19, "NPU902", "manual")]
    cli("migrate", tmp_path)
    lines = script.read_text().splitlines()
    assert lines[0].startswith("# TODO(cuda2npu): NPU902 `--use_flash_attention_2 True`: where the program hands")
    assert "`transformers==4.41.0`" in lines[0] and "pass `--use_flash_attention_2 False`" in lines[0]
    assert 'attn_implementation="sdpa"' in lines[0] and "require transformers >= 4.51.0" in lines[0]
    assert lines[4].startswith("# TODO(cuda2npu): NPU902 `--use-flash-attention-2`: ")
    assert [line for line in lines if not line.startswith("# TODO")] == text.lstrip("\n").splitlines()
    before = script.read_text()
    cli("migrate", tmp_path)
    assert script.read_text() == before


def test_r15_fa2flag_nothing_where_the_pin_runs_flash_attention_on_the_npu(tmp_path):
    """transformers >= 4.51 runs flash_attention_2 on the NPU (npu_fusion_attention): the flag stays unreported;
    under a pin before 4.36 there is no `attn_implementation` to suggest, only turning the flag off."""
    write(tmp_path / "train.py", R15_FA2FLAG_PROGRAM)
    write(tmp_path / "run.sh", "python train.py --use_flash_attention_2 True\n")
    write(tmp_path / "requirements.txt", "transformers>=4.51.0\n")
    assert diagnostics_of(tmp_path, "run.sh") == []
    write(tmp_path / "requirements.txt", "transformers==4.35.2\n")
    data = json.loads(cli("check", tmp_path, "--format", "json").stdout)
    [message] = [d["message"] for d in data["diagnostics"] if d["path"].endswith("run.sh")]
    assert "pass `--use_flash_attention_2 False`, or require transformers >= 4.51.0" in message
    assert "attn_implementation" not in message


def test_r16_a_lightning_programs_accelerator_flag_is_marked(tmp_path):
    """RWKV's launch scripts: `--accelerator gpu --strategy deepspeed_stage_2` reach a Lightning
    Trainer, which has no NPU accelerator; the same flag for a program without Lightning is not ours."""
    write(tmp_path / "train.py", "from pytorch_lightning import Trainer\n")
    write(tmp_path / "other.py", "import argparse\n")
    script = write(
        tmp_path / "run.sh",
        """
        python train.py --micro_bsz 16 --accelerator gpu --devices 1 --strategy deepspeed_stage_2
        python other.py --accelerator gpu
        """,
    )
    data = json.loads(cli("check", script, "--format", "json").stdout)
    assert [(d["line"], d["code"], d["tier"]) for d in data["diagnostics"]] == [(1, "NPU951", "manual")]
    assert "DeepSpeed strategy" in data["diagnostics"][0]["message"]
    cli("migrate", tmp_path)
    lines = script.read_text().splitlines()
    assert lines[0].startswith("# TODO(cuda2npu): NPU951 `--accelerator gpu` reaches a Lightning program")
    assert lines[1:] == [
        "python train.py --micro_bsz 16 --accelerator gpu --devices 1 --strategy deepspeed_stage_2",
        "python other.py --accelerator gpu",
    ]


def test_r18_a_programs_own_fp16_flag_is_not_reviewed_as_training_arguments(tmp_path):
    """VisualGLM's SwissArmyTransformer finetuning (`sat.get_args` parses `--fp16`, and the script
    casts its images with `.half()` on it) and a program declaring `--fp16` with its own argparse:
    their flag is theirs, fp16 runs on Ascend; nothing is reported. A program that may hand it to
    TrainingArguments keeps the review."""
    write(tmp_path / "finetune_sat.py", "from sat import get_args\nargs = get_args()\n")
    write(
        tmp_path / "own.py",
        "import argparse\nimport transformers\np = argparse.ArgumentParser()\np.add_argument('--fp16', action='store_true')\n",
    )
    write(tmp_path / "maybe_hf.py", "import transformers\nfrom mypkg.args import parse\n")
    script = write(
        tmp_path / "run.sh",
        """
        deepspeed finetune_sat.py --fp16 --tf32 True
        deepspeed own.py --fp16
        deepspeed maybe_hf.py --fp16
        """,
    )
    data = json.loads(cli("check", script, "--format", "json").stdout)
    assert [(d["line"], d["code"]) for d in data["diagnostics"] if d["code"] in ("NPU904", "NPU906")] == [(3, "NPU906")]


def test_r23_fp16_of_a_program_not_seen_to_be_trainingarguments_under_an_old_pin(tmp_path):
    """DoRA's CLIP-ViL scripts: `--fp16` feeds apex.amp in a program that builds no TrainingArguments,
    under `transformers==4.2.1`: no NPU906 telling to raise the pin (NPU705 marks the pin itself); a
    program parsing TrainingArguments still gets it."""
    write(tmp_path / "requirements.txt", "transformers==4.2.1\n")
    write(tmp_path / "gqa.py", "import argparse\nfrom apex import amp\n")
    write(tmp_path / "sft.py", "from transformers import HfArgumentParser, TrainingArguments\n")
    write(tmp_path / "run.sh", "python gqa.py --fp16\npython sft.py --fp16\n")
    assert diagnostics_of(tmp_path, "run.sh") == [(2, 15, "NPU906", "review")]


def test_r30_a_device_index_from_a_shell_variable_is_a_device_too(tmp_path):
    """kvpress's `evaluate.sh` runs one process per GPU with `--device "cuda:$i"` (round 30)."""
    write(
        tmp_path / "evaluate.py",
        'import argparse\n\nparser = argparse.ArgumentParser()\nparser.add_argument("--device")\n',
    )
    script = write(
        tmp_path / "evaluate.sh",
        """
        for i in 0 1; do
          python evaluate.py --device "cuda:$i" &
          python evaluate.py --device cuda:${i}
        done
        """,
    )
    cli("migrate", tmp_path)
    text = script.read_text()
    assert '--device "npu:$i" &' in text and "--device npu:${i}" in text


def test_r33_fp16_of_a_program_unseen_in_a_project_without_training_arguments_is_its_own(tmp_path):
    """DejaVu (round 33): `ARGS="--model-type gptj --fp16 ..."` for a program the script does not name, in
    a project whose Python never names TrainingArguments: the flag cannot be transformers', so the 25
    NPU906 reviews asked nothing. A project that uses TrainingArguments keeps the review."""
    write(
        tmp_path / "dist_inference.py",
        "import argparse\n\np = argparse.ArgumentParser()\np.add_argument('--fp16', action='store_true')\n",
    )
    write(tmp_path / "job.sh", 'ARGS="--model-type gptj \\\n--fp16 \\\n--seed 42"\nssh host "python $SCRIPT $ARGS"\n')
    assert [d for d in diagnostics(tmp_path) if d[2] == "NPU906"] == []
    write(tmp_path / "train.py", "from transformers import HfArgumentParser, TrainingArguments\n")
    assert [d[2] for d in diagnostics(tmp_path) if d[2] == "NPU906"] == ["NPU906"]


def test_r65_fp16_of_a_shown_program_of_a_fairseq_project_is_its_own(tmp_path):
    """OFA (round 65): `torch.distributed.launch ... evaluate.py ... --fp16`, a program the script shows whose
    options come from its bundled fairseq's dataclass fields (`fp16: bool = field(...)`), in a project that never
    names TrainingArguments: the 76 NPU906 reviews asked nothing."""
    write(
        tmp_path / "fairseq" / "dataclass" / "configs.py",
        "from dataclasses import dataclass, field\n\n\n@dataclass\nclass CommonConfig:\n"
        '    fp16: bool = field(default=False, metadata={"help": "use FP16"})\n',
    )
    write(tmp_path / "evaluate.py", "from fairseq import options\n\nparser = options.get_generation_parser()\n")
    write(tmp_path / "run.sh", "python3 -m torch.distributed.launch --nproc_per_node=8 evaluate.py data --fp16\n")
    assert [d for d in diagnostics(tmp_path) if d[2] == "NPU906"] == []


def test_r51_an_optimizer_flag_carried_by_a_variable_is_reviewed_at_the_command(tmp_path):
    """KnowLM (round 51): `optim=paged_adamw_32bit` set once, then `--optim $optim`: the flag was not read.
    Reported (review) with what the variable holds and where to change it; nothing rewritten (the assignment
    may serve other commands); a variable set twice, or holding a torch optimizer, asks nothing."""
    launch = "optim=paged_adamw_32bit\nlr=1e-4\ndeepspeed finetune.py --optim $optim --lr $lr\n"
    script = write(tmp_path / "one" / "train.sh", launch)
    found = [d for d in json.loads(cli("check", tmp_path / "one", "--format", "json").stdout)["diagnostics"]]
    assert [(d["code"], d["line"], d["tier"]) for d in found] == [("NPU727", 3, "review")]
    assert "(`optim=paged_adamw_32bit`)" in found[0]["message"] and "set `optim=adamw_torch`" in found[0]["message"]
    cli("migrate", tmp_path / "one")
    lines = script.read_text().splitlines()
    assert lines[2].startswith("# TODO(cuda2npu): NPU727 review") and [*lines[:2], *lines[3:]] == launch.splitlines()
    write(tmp_path / "two" / "train.sh", "optim=paged_adamw_32bit\noptim=adamw_torch\npython t.py --optim ${optim}\n")
    write(tmp_path / "torch" / "train.sh", 'OPTIM=adamw_torch\npython t.py --optim="${OPTIM}"\n')
    for name in ("two", "torch"):
        assert json.loads(cli("check", tmp_path / name, "--format", "json").stdout)["diagnostics"] == [], name


def test_r52_fp16_full_eval_follows_fp16_to_bf16(tmp_path):
    """LoftQ's `glue/train_qa.sh` (round 52): `--fp16` became `--bf16` while `--fp16_full_eval` stayed, an
    evaluation in float16 beside bf16 training; TrainingArguments has `--bf16_full_eval` for it."""
    write(tmp_path / "train.py", "from transformers import HfArgumentParser, TrainingArguments\n")
    script = write(tmp_path / "run.sh", "python train.py --fp16 --fp16_full_eval --output_dir out\n")
    cli("migrate", tmp_path)
    assert script.read_text() == "python train.py --bf16 --bf16_full_eval --output_dir out\n"
    cli("migrate", tmp_path)
    assert script.read_text() == "python train.py --bf16 --bf16_full_eval --output_dir out\n"


def test_a_dotted_backend_flag_and_one_given_through_a_variable(tmp_path):
    """InspireMusic (round 58): `--ddp.dist_backend nccl` (a dotted option name) becomes `hccl`; given as
    `$dist_backend` where the script sets `dist_backend="nccl"`, it is reported at the flag (review), the value
    being the assignment's."""
    write(
        tmp_path / "run.sh",
        'dist_backend="nccl"\ntorchrun train.py --ddp.dist_backend $dist_backend\n'
        "torchrun train.py --ddp.dist_backend nccl\n",
    )
    assert diagnostics(tmp_path) == [(2, 19, "NPU201", "review"), (3, 19, "NPU201", "exact")]
