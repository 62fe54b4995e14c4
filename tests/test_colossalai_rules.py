"""ColossalAI rules (NPU5xx): behaviour the catalogue examples and goldens do not pin down.

Each test migrates a small script under one strategy and checks the text and the findings; every
migration is also checked to be stable (a second run changes nothing) and to parse.
"""

from __future__ import annotations

import inspect

import libcst as cst
import pytest
from helpers import dedent, migrate_text, without_markers

from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.options import Options

KEEP = Options()
NATIVE = Options(colossalai="native")


def migrate(text: str, options: Options = KEEP):
    source = dedent(text)
    after, result = migrate_text(source, options)
    cst.parse_module(after)
    again, _ = migrate_text(after, options)
    assert again == after, "a second migrate must change nothing"
    return after, result


def codes(result) -> list[str]:
    return [f.code for f in result.findings]


def finding(result, code: str):
    return next(f for f in result.findings if f.code == code)


# ------------------------------------------------------------------------------------------ keep


def test_launch_positional_backend_is_left_to_the_nccl_rule():
    after, result = migrate(
        """
        import colossalai

        colossalai.launch_from_torch("nccl", 42)
        """
    )
    assert 'colossalai.launch_from_torch("hccl", 42)' in after  # NPU201, not a second backend
    assert "backend=" not in after
    assert after.count("set_accelerator") == 1


def test_launch_old_signature_with_config_gets_the_backend_keyword():
    after, _ = migrate(
        """
        from colossalai import launch

        launch(config, 0, 1, "localhost", 29500)
        """
    )
    assert 'launch(config, 0, 1, "localhost", 29500, backend="hccl")' in after


def test_launch_ambiguous_positional_call_only_selects_the_accelerator():
    after, _ = migrate(
        """
        import colossalai

        colossalai.launch_from_torch(backend_name)
        """
    )
    assert "colossalai.launch_from_torch(backend_name)" in after
    assert 'colossalai.accelerator.set_accelerator("npu")' in after


def test_existing_set_accelerator_is_not_duplicated():
    source = """
    import colossalai
    from colossalai.accelerator import set_accelerator

    set_accelerator("npu")
    colossalai.launch_from_torch(seed=1)
    """
    after, _ = migrate(source)
    assert after.count("set_accelerator(") == 1


def test_launch_in_a_branch_selects_the_accelerator_in_that_branch():
    after, _ = migrate(
        """
        import colossalai

        def setup(args):
            if args.slurm:
                colossalai.launch_from_slurm(host=args.host, port=args.port)
            else:
                colossalai.launch_from_torch()
        """
    )
    assert after.count('colossalai.accelerator.set_accelerator("npu")') == 2
    assert 'launch_from_slurm(host=args.host, port=args.port, backend="hccl")' in after


@pytest.mark.parametrize("policy", ["fp16", "keep"])
def test_plugin_precision_follows_the_policy(policy):
    source = """
    from colossalai.booster.plugin import LowLevelZeroPlugin

    plugin = LowLevelZeroPlugin(stage=2, precision="fp16")
    """
    after, result = migrate(source, Options(precision=policy))
    assert after == dedent(source)
    assert "NPU504" not in codes(result)


def test_plugin_precision_from_a_variable_is_reported_not_rewritten():
    source = """
    from colossalai.booster.plugin import LowLevelZeroPlugin

    plugin = LowLevelZeroPlugin(stage=2, precision=args.mixed_precision)
    """
    after, result = migrate(source)
    assert without_markers(after) == dedent(source)  # reported, marked for review, not rewritten
    report = finding(result, "NPU504")
    assert not report.fixable and "args.mixed_precision" in report.message


def test_booster_kwargs_dict_mixed_precision_is_reported():
    _, result = migrate(
        """
        from colossalai.booster import Booster

        booster_kwargs = {"mixed_precision": "fp16"}
        booster = Booster(plugin=plugin, **booster_kwargs)
        """
    )
    assert "GradScaler" in finding(result, "NPU504").message


def test_gemini_keeps_hybrid_adam_and_reports_it():
    source = """
    from colossalai.booster.plugin import GeminiPlugin
    from colossalai.nn.optimizer import HybridAdam

    plugin = GeminiPlugin(precision="bf16")
    optimizer = HybridAdam(model.parameters(), lr=1e-3)
    """
    after, result = migrate(source)
    assert "HybridAdam(model.parameters(), lr=1e-3)" in after
    messages = [f.message for f in result.findings if f.code == "NPU503"]
    assert any("kept" in m and "GeminiPlugin" in m for m in messages)


def test_shardformer_switch_from_a_variable_is_reported():
    source = """
    from colossalai.booster.plugin import HybridParallelPlugin

    plugin = HybridParallelPlugin(tp_size=1, pp_size=1, precision="bf16", enable_jit_fused=args.jit)
    """
    after, result = migrate(source)
    assert without_markers(after) == dedent(source)  # reported, marked for review, not rewritten
    assert "must be False" in finding(result, "NPU506").message


def test_ring_attention_is_manual():
    after, result = migrate(
        """
        from colossalai.booster.plugin import HybridParallelPlugin

        plugin = HybridParallelPlugin(
            tp_size=1, pp_size=1, sp_size=4, precision="bf16", enable_sequence_parallelism=True,
            sequence_parallelism_mode="ring_attn",
        )
        """
    )
    manual = [f for f in result.findings if f.code == "NPU507" and f.tier is Tier.MANUAL]
    assert manual and "flash_attn" in manual[0].message
    assert "# TODO(cuda2npu): NPU507" in after


def test_booster_without_plugin_is_manual():
    _, result = migrate(
        """
        from colossalai.booster import Booster

        booster = Booster(device="cuda")
        """
    )
    assert finding(result, "NPU508").tier is Tier.MANUAL


# ------------------------------------------------------------------------------------ optimizers


def test_positional_arguments_follow_each_class_signature():
    after, _ = migrate(
        """
        import torch
        from colossalai.nn.optimizer import FusedAdam, HybridAdam

        a = HybridAdam(p, 1e-3, True, (0.9, 0.99), 1e-6, 0.1, False)
        b = FusedAdam(p, 1e-3, True, (0.9, 0.99), 1e-6, False, 0.1)
        """
    )
    expected = "torch.optim.Adam(p, lr=1e-3, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.1)"
    assert after.count(expected) == 2


def test_optimizer_rewrite_adds_import_torch_when_missing():
    after, _ = migrate(
        """
        from colossalai.nn.optimizer import HybridAdam

        optimizer = HybridAdam(params, lr=1e-3)
        """
    )
    assert after == dedent(
        """
        import torch

        optimizer = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0)
        """
    )


def test_multiline_call_keeps_its_layout():
    after, _ = migrate(
        """
        import torch
        from colossalai.nn.optimizer import HybridAdam

        optimizer = HybridAdam(
            model.parameters(),
            lr=1e-3,
            weight_decay=0.1,
        )
        """
    )
    assert "optimizer = torch.optim.AdamW(\n    model.parameters(),\n    lr=1e-3,\n    weight_decay=0.1,\n)" in after


def test_review_fixes_respect_max_tier_and_add_no_import():
    source = """
    from colossalai.nn.optimizer import HybridAdam

    optimizer = HybridAdam(params, lr=1e-3)
    """
    after, result = migrate(source, Options(max_tier=Tier.EXACT))
    assert without_markers(after) == dedent(source)  # reported, marked for review, not rewritten
    assert finding(result, "NPU503").fixable is False


def test_a_taken_name_blocks_the_rewrite_instead_of_shadowing_it():
    source = """
    from colossalai.utils import get_current_device

    get_accelerator = "mine"
    device = get_current_device()
    """
    after, result = migrate(source)
    assert without_markers(after) == dedent(source)  # reported, marked for review, not rewritten
    assert "taken" in finding(result, "NPU502").message


def test_ignoring_the_unused_import_rule_keeps_the_import():
    after, _ = migrate(
        """
        import torch
        from colossalai.utils import get_current_device

        x = torch.zeros(1, device=get_current_device())
        """,
        Options(ignore=("NPU510",)),
    )
    assert "from colossalai.utils import get_current_device" in after


def test_check_mode_reports_without_changing():
    source = """
    from colossalai.nn.optimizer import HybridAdam

    optimizer = HybridAdam(params, lr=1e-3)
    """
    after, result = migrate_text(dedent(source), Options(fix=False))
    assert after == dedent(source)
    assert "NPU503" in codes(result)


# ----------------------------------------------------------------------------------------- native


def test_native_device_inside_fstring_uses_the_other_quote():
    after, _ = migrate(
        """
        import torch
        from colossalai.utils import get_current_device

        print(f"running on {get_current_device()}")
        """,
        NATIVE,
    )
    assert """print(f"running on {torch.device('npu', torch.npu.current_device())}")""" in after


def test_native_plugin_chosen_at_run_time_gets_the_set_up_of_each():
    after, result = migrate(
        """
        from colossalai.booster import Booster
        from colossalai.booster.plugin import LowLevelZeroPlugin, TorchDDPPlugin

        def main(args, model, optimizer):
            if args.zero:
                plugin = LowLevelZeroPlugin(stage=1)
            else:
                plugin = TorchDDPPlugin(broadcast_buffers=False)
            booster = Booster(plugin=plugin)
            model, optimizer, *_ = booster.boost(model, optimizer)
            booster.save_optimizer(optimizer, "optim.pt")
        """,
        NATIVE,
    )
    assert 'plugin = "low_level_zero"\n    else:\n        plugin = "torch_ddp"' in after
    assert (
        "    model = model.npu()\n"
        '    if plugin == "low_level_zero":\n'
        "        model = DistributedDataParallel(model)\n"
        "        optimizer = ZeroRedundancyOptimizer(optimizer.param_groups, optimizer_class=type(optimizer), "
        "**optimizer.defaults)\n"
        '    elif plugin == "torch_ddp":\n'
        "        model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)\n"
        "        model = DistributedDataParallel(model, broadcast_buffers=False)\n"
    ) in after
    # only ZeRO shards the optimizer state: gathered first where it is a ZeroRedundancyOptimizer
    assert (
        "    if isinstance(optimizer, ZeroRedundancyOptimizer):\n        optimizer.consolidate_state_dict(to=0)"
        in after
    )
    assert "Booster" not in after and "colossalai" not in after
    assert "NPU513" not in codes(result)


def test_native_plugin_chosen_by_a_conditional_expression():
    after, _ = migrate(
        """
        from colossalai.booster import Booster
        from colossalai.booster.plugin import LowLevelZeroPlugin, TorchDDPPlugin

        def main(args, model, optimizer, criterion):
            plugin = LowLevelZeroPlugin(stage=2) if args.zero2 else TorchDDPPlugin()
            booster = Booster(plugin=plugin)
            model, optimizer, criterion, _, _ = booster.boost(model, optimizer, criterion)
        """,
        NATIVE,
    )
    assert 'plugin = "low_level_zero" if args.zero2 else "torch_ddp"' in after
    assert 'if plugin == "low_level_zero":' in after and 'elif plugin == "torch_ddp":' in after


def test_native_choice_with_a_plugin_without_rewrite_keeps_the_whole_file():
    after, result = migrate(
        """
        import colossalai
        from colossalai.booster import Booster
        from colossalai.booster.plugin import GeminiPlugin, TorchDDPPlugin

        def main(args, model, optimizer):
            colossalai.launch_from_torch(seed=42)
            if args.plugin == "torch_ddp":
                plugin = TorchDDPPlugin()
            elif args.plugin == "gemini":
                plugin = GeminiPlugin(placement_policy="static")
            booster = Booster(plugin=plugin)
            model, optimizer, *_ = booster.boost(model, optimizer)
        """,
        NATIVE,
    )
    report = finding(result, "NPU513")
    assert report.tier is Tier.MANUAL
    assert "chosen at run time among TorchDDPPlugin, GeminiPlugin; GeminiPlugin has no plain-PyTorch" in report.message
    assert "never half native" in report.message
    keep, _ = migrate(after, KEEP)
    assert without_markers(after) == without_markers(keep)  # what --colossalai keep writes, plus the manual item
    assert 'colossalai.launch_from_torch(seed=42, backend="hccl")' in after
    assert "plugin = TorchDDPPlugin()" in after and "DistributedDataParallel" not in without_markers(after)


@pytest.mark.parametrize(
    ("plugins", "reason"),
    [
        (("TorchDDPPlugin()", "TorchDDPPlugin(find_unused_parameters=True)"), "different options"),
        (("TorchDDPPlugin()", "make_plugin()"), "make_plugin has no plain-PyTorch rewrite"),
    ],
)
def test_native_choice_that_cannot_be_replaced_is_reported(plugins, reason):
    after, result = migrate(
        f"""
        from colossalai.booster import Booster
        from colossalai.booster.plugin import TorchDDPPlugin

        def main(args, model, optimizer):
            plugin = {plugins[0]} if args.a else {plugins[1]}
            booster = Booster(plugin=plugin)
            model, optimizer, *_ = booster.boost(model, optimizer)
        """,
        NATIVE,
    )
    assert reason in finding(result, "NPU513").message
    assert "booster.boost(model, optimizer)" in after and "DistributedDataParallel" not in without_markers(after)


def test_native_choice_boosted_where_the_choice_is_not_visible_is_reported():
    after, result = migrate(
        """
        from colossalai.booster import Booster
        from colossalai.booster.plugin import LowLevelZeroPlugin, TorchDDPPlugin

        def build(booster, model, optimizer):
            model, optimizer, *_ = booster.boost(model, optimizer)
            return model, optimizer

        def main(args, model, optimizer):
            plugin = LowLevelZeroPlugin() if args.zero else TorchDDPPlugin()
            booster = Booster(plugin=plugin)
            model, optimizer = build(booster, model, optimizer)
        """,
        NATIVE,
    )
    assert "`build`, where `plugin` (the plugin chosen at run time) is not visible" in finding(result, "NPU513").message
    assert "booster.boost(model, optimizer)" in after and "ZeroRedundancyOptimizer" not in after


def test_native_without_the_booster_rewrite_selected_keeps_the_file():
    after, result = migrate(
        """
        import colossalai
        from colossalai.booster import Booster
        from colossalai.booster.plugin import TorchDDPPlugin

        colossalai.launch_from_torch(seed=1)
        booster = Booster(plugin=TorchDDPPlugin())
        """,
        Options(colossalai="native", select=("NPU511", "NPU513")),
    )
    assert "NPU512 (the plain-PyTorch booster rewrite) is not selected" in finding(result, "NPU513").message
    assert "colossalai.launch_from_torch(seed=1)" in after and "init_process_group" not in after


@pytest.mark.parametrize(
    ("use", "reason"),
    [
        ("booster.execute_pipeline(it, model, criterion, optimizer)", "execute_pipeline"),
        ("booster.save_model(model, 'ckpt', shard=True)", "sharded"),
        ("log(booster)", "log"),
    ],
)
def test_native_booster_with_an_unknown_use_is_not_touched(use, reason):
    source = f"""
    from colossalai.booster import Booster
    from colossalai.booster.plugin import TorchDDPPlugin

    def main(model, optimizer, criterion, it):
        booster = Booster(plugin=TorchDDPPlugin())
        model, optimizer, *_ = booster.boost(model, optimizer)
        {use}
    """
    after, result = migrate(source, NATIVE)
    assert reason in finding(result, "NPU513").message
    assert "Booster(plugin=TorchDDPPlugin())" in after and "DistributedDataParallel" not in after


def test_native_zero_with_gradient_clipping_is_manual():
    _, result = migrate(
        """
        from colossalai.booster import Booster
        from colossalai.booster.plugin import LowLevelZeroPlugin

        booster = Booster(plugin=LowLevelZeroPlugin(stage=2, max_norm=1.0))
        model, optimizer, *_ = booster.boost(model, optimizer)
        """,
        NATIVE,
    )
    assert "clip_grad_norm_" in finding(result, "NPU513").message


def test_native_zero_stage_2_rewrite_explains_the_difference():
    after, result = migrate(
        """
        import torch
        from colossalai.booster import Booster
        from colossalai.booster.plugin import LowLevelZeroPlugin

        booster = Booster(plugin=LowLevelZeroPlugin(stage=2, precision="fp32"))
        model, optimizer, *_ = booster.boost(model, optimizer)
        booster.save_optimizer(optimizer, "optim.pt")
        """,
        NATIVE,
    )
    assert (
        "optimizer = ZeroRedundancyOptimizer(optimizer.param_groups, optimizer_class=type(optimizer), **optimizer.defaults)"
        in after
    )
    assert "optimizer.consolidate_state_dict(to=0)\nif torch.distributed.get_rank() == 0:" in after
    boost = next(f for f in result.findings if f.code == "NPU512" and "booster.boost" in f.message)
    assert "stage 2 also shards gradients" in boost.message and "autocast" not in boost.message


def test_native_wrapper_methods_and_helper_calls():
    after, result = migrate(
        """
        import torch
        from colossalai.booster import Booster
        from colossalai.booster.plugin import TorchDDPPlugin


        def step(booster, loss, optimizer):
            booster.backward(loss / 4, optimizer)


        def main(model, optimizer, loss):
            booster = Booster(plugin=TorchDDPPlugin())
            model, optimizer, *_ = booster.boost(model, optimizer)
            step(booster, loss, optimizer)
            step(booster=booster, loss=loss, optimizer=optimizer)
            optimizer.clip_grad_by_norm(1.0)
            torch.save(model.unwrap().state_dict(), "m.pt")
        """,
        NATIVE,
    )
    assert "def step(loss, optimizer):\n    (loss / 4).backward()" in after
    assert "step(loss, optimizer)\n" in after and "step(loss=loss, optimizer=optimizer)" in after
    assert "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)" in after
    assert "torch.save(model.module.state_dict()" in after
    assert "NPU513" not in codes(result)


def test_native_wrapper_method_out_of_reach_is_reported():
    _, result = migrate(
        """
        from colossalai.booster import Booster
        from colossalai.booster.plugin import TorchDDPPlugin


        def update(opt):
            opt.clip_grad_by_norm(1.0)


        def main(model, optimizer):
            booster = Booster(plugin=TorchDDPPlugin())
            model, optimizer, *_ = booster.boost(model, optimizer)
            update(optimizer)
        """,
        NATIVE,
    )
    assert "clip_grad_by_norm" in finding(result, "NPU513").message


def test_native_launch_with_legacy_config_is_manual():
    _, result = migrate(
        """
        import colossalai

        colossalai.launch_from_torch(config=dict(parallel=dict(tensor=dict(size=2))))
        """,
        NATIVE,
    )
    assert finding(result, "NPU511").tier is Tier.MANUAL


def test_native_launch_reuses_existing_imports():
    after, _ = migrate(
        """
        import os
        import colossalai
        import numpy
        import torch.distributed as dist

        colossalai.launch_from_torch()
        """,
        NATIVE,
    )
    assert 'dist.init_process_group(backend="hccl")' in after
    assert "numpy.random.seed(1024)" in after and "import numpy as np" not in after
    assert after.count("import os") == 1 and "import colossalai" not in after


def test_keep_rules_do_nothing_under_native_and_the_other_way_round():
    source = """
    from colossalai.booster.plugin import GeminiPlugin

    plugin = GeminiPlugin(placement_policy="auto", precision="bf16")
    """
    after, result = migrate(source, NATIVE)
    assert after.count('placement_policy="auto"') == 1 and "NPU505" not in codes(result)
    _, result = migrate(source)
    assert not {"NPU511", "NPU512", "NPU513"} & set(codes(result))


# ------------------------------------------------------------------------------------------ misc


def test_cached_visitor_methods_match_libcst():
    from cuda2npu.core.rulebase import REGISTRY, RuleContext
    from cuda2npu.families import enabled_rules
    from cuda2npu.families.colossalai.common import ColossalRule

    enabled_rules(KEEP)
    ctx = RuleContext(cst.parse_module("x = 1\n"), KEEP)
    for cls in REGISTRY:
        if issubclass(cls, ColossalRule):
            rule = cls(ctx)
            expected = {
                name
                for name, member in inspect.getmembers(rule, inspect.ismethod)
                if name.startswith(("visit_", "leave_")) and not getattr(member, "_is_no_op", False)
            }
            assert set(rule.get_visitors()) == expected, cls.__name__


def test_cli_strategy_option(tmp_path):
    from click.testing import CliRunner

    from cuda2npu.commands.cli import main

    script = tmp_path / "train.py"
    script.write_text("import colossalai\n\ncolossalai.launch_from_torch(seed=3)\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["migrate", "--colossalai", "native", "--diff", str(script)])
    assert result.exit_code in (0, 1), result.output
    assert '+torch.distributed.init_process_group(backend="hccl")' in result.output


def test_native_booster_used_in_a_closure_is_not_touched():
    source = """
    from colossalai.booster import Booster
    from colossalai.booster.plugin import TorchDDPPlugin

    def main(model, optimizer):
        booster = Booster(plugin=TorchDDPPlugin())
        model, optimizer, *_ = booster.boost(model, optimizer)
        backward = lambda loss: booster.backward(loss, optimizer)
    """
    after, result = migrate(source, NATIVE)
    assert "nested function" in finding(result, "NPU513").message
    assert "Booster(plugin=TorchDDPPlugin())" in after
