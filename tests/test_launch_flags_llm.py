"""Launch flags of the LLM stack in shell scripts: ``ray start --num-gpus`` (NPU921) and the vLLM
weight-sync backend flags of OpenRLHF-style trainers (NPU201)."""

from __future__ import annotations

import json
import textwrap

from cli_helpers import cli, write

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
