"""Behaviour of the apex / mixed-precision rules (NPU3xx) beyond the catalogue examples and goldens:
the forward-region detection and its manual cases, import cleanup, the scaler's placement, the
ascend strategy, tier and code selection, and idempotence."""

from __future__ import annotations

import libcst as cst
import pytest
from helpers import dedent, migrate_text, options_of

from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.options import Options


def migrate(source: str, **options):
    """(migrated text, {code: [findings]}) — also checks the output parses and is a fixed point."""
    opts = options_of(**options)
    text, result = migrate_text(dedent(source), opts)
    cst.parse_module(text)
    again, second = migrate_text(text, opts)
    assert again == text, "a second migrate changed the output"
    assert not [f for f in second.findings if f.fixable], "a fixable finding remains"
    findings: dict[str, list] = {}
    for finding in result.findings:
        findings.setdefault(finding.code, []).append(finding)
    return text, findings


LOOP = """
    import torch
    from apex import amp

    model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
    for x, y in loader:
        optimizer.zero_grad()
        x = x.cuda()
        output = model(x)
        loss = criterion(output, y)
        with amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
        optimizer.step()
"""


# --- forward regions ---------------------------------------------------------------------------


def test_region_runs_from_the_first_model_call_to_the_loss():
    text, findings = migrate(LOOP)
    assert (
        dedent("""
        for x, y in loader:
            optimizer.zero_grad()
            x = x.npu()
            with torch.autocast("npu", dtype=torch.bfloat16):
                output = model(x)
                loss = criterion(output, y)
            loss.backward()
            optimizer.step()
    """)
        in text
    )
    assert "apex" not in text and "amp." not in text
    assert {"NPU310", "NPU311", "NPU312", "NPU330"} <= set(findings)


def test_each_scale_loss_of_a_block_gets_its_own_region():
    text, _ = migrate(
        """
        import torch
        from apex import amp

        [netD, netG], [optD, optG] = amp.initialize([netD, netG], [optD, optG], num_losses=2)
        for real, noise in loader:
            out = netD(real)
            err_real = criterion(out, ones)
            with amp.scale_loss(err_real, optD, loss_id=0) as scaled:
                scaled.backward()
            fake = netG(noise)
            err_fake = criterion(netD(fake), zeros)
            with amp.scale_loss(err_fake, [optD, optG], loss_id=1) as scaled:
                scaled.backward()
            optD.step()
            optG.step()
    """,
        precision="fp16",
    )
    assert text.count('with torch.autocast("npu", dtype=torch.float16):') == 2
    assert "scaler.scale(err_real).backward()" in text and "scaler.scale(err_fake).backward()" in text
    assert text.index("scaler.step(optD)") < text.index("scaler.step(optG)") < text.index("scaler.update()")
    assert text.count("scaler.update()") == 1


def test_region_search_climbs_out_of_the_if_around_scale_loss():
    text, _ = migrate("""
        import torch
        from apex import amp

        def train(args, model, optimizer, batches):
            if args.fp16:
                model, optimizer = amp.initialize(model, optimizer, opt_level=args.opt_level)
            for batch in batches:
                loss = model(**batch)[0]
                if args.accumulate > 1:
                    loss = loss / args.accumulate
                if args.fp16:
                    with amp.scale_loss(loss, optimizer) as scaled_loss:
                        scaled_loss.backward()
                else:
                    loss.backward()
                optimizer.step()
    """)
    assert (
        "    for batch in batches:\n"
        '        with torch.autocast("npu", dtype=torch.bfloat16, enabled=args.fp16):\n'
        "            loss = model(**batch)[0]\n"
        "            if args.accumulate > 1:\n"
        "                loss = loss / args.accumulate\n"
        "        loss.backward()\n"  # `if args.fp16: <scale_loss> else: loss.backward()`: one branch left
        "        optimizer.step()\n"
    ) in text
    assert "if args.fp16:\n        model" not in text  # the emptied guard is gone


def test_a_wrapped_model_counts_as_the_model():
    text, _ = migrate("""
        import torch
        from apex import amp

        model, optimizer = amp.initialize(model, optimizer)
        ddp_model = torch.nn.parallel.DistributedDataParallel(model)
        for x in loader:
            loss = ddp_model(x).sum()
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
    """)
    assert '    with torch.autocast("npu", dtype=torch.bfloat16):\n        loss = ddp_model(x).sum()\n' in text


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (
            """
            import torch
            from apex import amp

            model, optimizer = amp.initialize(model, optimizer)

            def backward(loss):
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    scaled_loss.backward()
                optimizer.step()
            """,
            "is not computed before it in this block",
        ),
        (
            """
            import torch
            from apex import amp

            model, optimizer = amp.initialize(model, optimizer)
            for batch in loader:
                loss = compute_loss(batch)
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    scaled_loss.backward()
                optimizer.step()
            """,
            "no call of `model`",
        ),
        (
            """
            import torch
            from apex import amp

            model, optimizer = amp.initialize(model, optimizer, opt_level="O3")
            """,
            "O3 is pure float16 training",
        ),
        (
            """
            import torch
            from apex import amp

            model, optimizer = amp.initialize(model, optimizer)
            for x in loader:
                loss = model(x)
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    print(scaled_loss.item())
                    scaled_loss.backward()
            """,
            "is used for more than",
        ),
    ],
    ids=["loss-from-another-function", "model-in-a-helper", "O3", "scaled-loss-reused"],
)
def test_uncertain_amp_is_manual_and_untouched(source, reason):
    text, findings = migrate(source)
    manual = [f for code in ("NPU310", "NPU312", "NPU311") for f in findings.get(code, []) if f.tier is Tier.MANUAL]
    assert manual and any(reason in f.message for f in manual)
    assert not any(f.applied for code in ("NPU310", "NPU311", "NPU312", "NPU313") for f in findings.get(code, []))
    assert "from apex import amp" in text and "amp.initialize(" in text
    assert "# TODO(cuda2npu): NPU310" in text


def test_noqa_on_one_part_keeps_all_of_apex_amp():
    text, _ = migrate(LOOP.replace('opt_level="O1")', 'opt_level="O1")  # noqa: NPU310'))
    assert "amp.initialize(" in text and "with amp.scale_loss(loss, optimizer) as scaled_loss:" in text


def test_o0_is_float32_training_without_autocast():
    text, _ = migrate(LOOP.replace('"O1"', '"O0"'), precision="fp16")
    assert "autocast" not in text and "GradScaler" not in text
    assert "    loss.backward()\n    optimizer.step()" in text


# --- the GradScaler (fp16 / keep) ---------------------------------------------------------------


def test_scaler_replaces_initialize_and_wraps_steps_and_clipping():
    text, _ = migrate(
        """
        import torch
        from apex import amp

        model, optimizer = amp.initialize(model, optimizer, opt_level="O2")
        for x, y in loader:
            loss = criterion(model(x), y)
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
    """,
        precision="fp16",
    )
    assert "scaler = torch.npu.amp.GradScaler(init_scale=2.0**14)\nfor x, y in loader:" in text
    assert (
        "    scaler.scale(loss).backward()\n"
        "    scaler.unscale_(optimizer)\n"
        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
        "    scaler.step(optimizer)\n"
        "    scaler.update()\n"
    ) in text


def test_keep_precision_keeps_float16_and_the_default_initial_scale():
    text, _ = migrate(LOOP, precision="keep")
    assert "scaler = torch.npu.amp.GradScaler()" in text
    assert 'torch.autocast("npu", dtype=torch.float16)' in text


def test_static_loss_scale_becomes_a_static_scaler():
    text, _ = migrate(LOOP.replace('opt_level="O1"', 'opt_level="O1", loss_scale=128.0'), precision="fp16")
    assert "torch.npu.amp.GradScaler(init_scale=128.0, dynamic=False)" in text


def test_scaler_shared_by_two_functions_goes_to_module_level():
    text, _ = migrate(
        """
        import torch
        from apex import amp

        def main(model, optimizer):
            model, optimizer = amp.initialize(model, optimizer)
            train(model, optimizer)

        def train(model, optimizer):
            for x in loader:
                loss = model(x).sum()
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    scaled_loss.backward()
                optimizer.step()
    """,
        precision="fp16",
    )
    assert "\nscaler = torch.npu.amp.GradScaler(init_scale=2.0**14)\n" in text
    assert text.index("scaler = ") < text.index("def main(")
    assert "        scaler.step(optimizer)\n        scaler.update()" in text


def test_local_guard_with_a_shared_scaler_is_manual():
    _, findings = migrate(
        """
        import torch
        from apex import amp

        def main(args, model, optimizer):
            if args.fp16:
                model, optimizer = amp.initialize(model, optimizer)
            train(model, optimizer)

        def train(model, optimizer):
            for x in loader:
                loss = model(x).sum()
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    scaled_loss.backward()
                optimizer.step()
    """,
        precision="fp16",
    )
    assert any("`enabled` condition (args.fp16) is local" in f.message for f in findings["NPU310"])


def test_missing_optimizer_step_is_manual_under_fp16_only():
    source = LOOP.replace("    optimizer.step()\n", "    trainer_step()\n")
    _, findings = migrate(source, precision="fp16")
    assert any("`optimizer.step()` not found" in f.message for f in findings["NPU310"])
    text, _ = migrate(source)  # bf16: no scaler, the step does not matter
    assert "loss.backward()" in text


# --- imports ---------------------------------------------------------------------------------


def test_import_cleanup():
    text, findings = migrate("""
        import torch
        from apex.optimizers import FusedAdagrad, FusedAdam, FusedLAMB, FusedSGD

        try:
            from apex.normalization import FusedLayerNorm as LayerNorm
        except ImportError:
            from torch.nn import LayerNorm

        try:
            from apex.parallel import DistributedDataParallel as ApexDDP
        except ImportError:
            ApexDDP = None

        adam = FusedAdam(params, lr=1e-3)
        lamb = FusedLAMB(params, lr=1e-3)
        adagrad = FusedAdagrad(params, lr=1e-3, adagrad_w_mode=True)
        norm = LayerNorm(8)
        wrapped = ApexDDP(model) if ApexDDP is not None else model
    """)
    assert "from apex.optimizers import FusedAdagrad\n" in text  # FusedAdam, FusedLAMB, the unused FusedSGD go
    assert "lamb = apex_npu_optimizers.FusedLAMB(params, lr=1e-3)" in text  # the generated module's (NPU302)
    # a guarded import whose fallback is what an NPU host runs: left as written
    assert "except ImportError:\n    from torch.nn import LayerNorm\n" in text and "norm = LayerNorm(8)" in text
    assert "except ImportError:\n    ApexDDP = None" in text  # a guard keeps working: no manual finding
    kept = [f for f in findings["NPU330"] if f.tier is Tier.MANUAL]
    assert [f.message.split(":")[0] for f in kept] == ["apex import stays"]
    assert "FusedAdagrad" in kept[0].message


def test_torch_import_is_added_for_the_rewritten_code():
    text, _ = migrate("""
        from torch.cuda.amp import autocast

        with autocast():
            y = model(x)
    """)
    assert "\nimport torch\n" in text
    assert "with autocast(dtype=torch.bfloat16):" in text


# --- optimizers ------------------------------------------------------------------------------


def test_fused_adam_states_apex_defaults_that_differ():
    text, findings = migrate("""
        import torch
        from apex.optimizers import FusedAdam

        a = FusedAdam(params, lr=1e-3)
        b = FusedAdam(params, 1e-3, adam_w_mode=False)
        c = FusedAdam(params, lr=1e-3, weight_decay=0.1, set_grad_none=True, capturable=False)
    """)
    assert "a = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0)" in text
    assert "b = torch.optim.Adam(params, 1e-3)" in text
    assert "c = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1)" in text
    assert all(f.tier is Tier.REVIEW for f in findings["NPU301"])


def test_fused_optimizers_become_torch_optim_and_say_why_not_npu_fused():
    """Whatever wraps the model elsewhere (FSDP, Megatron's fp16 optimizer) may replace .data/.grad,
    which the NpuFused classes' one fused buffer does not survive: torch.optim, no torch_npu import."""
    text, findings = migrate("""
        import torch
        from apex.optimizers import FusedAdam as Adam
        from apex.optimizers import FusedSGD as SGD

        optimizer = Adam(param_groups, lr=1e-4, weight_decay=0.1)
        fallback = SGD(param_groups, lr=0.1, momentum=0.9)
        optimizer = Float16OptimizerWithFloat16Params(optimizer, clip_grad=1.0)
    """)
    assert "optimizer = torch.optim.AdamW(param_groups, lr=1e-4, weight_decay=0.1)" in text
    assert "fallback = torch.optim.SGD(param_groups, lr=0.1, momentum=0.9)" in text
    assert "torch_npu" not in text and "apex" not in text
    for finding in [*findings["NPU301"], *findings["NPU303"]]:
        assert "torch.optim, the same algorithm, rather than torch_npu.optim.NpuFused" in finding.message
        assert "one buffer at the first step and breaks when p.data/p.grad are replaced" in finding.message


def test_ascend_strategy_keeps_apex_with_npu_names():
    text, findings = migrate(
        """
        import torch
        from apex import amp
        from apex.normalization import FusedLayerNorm
        from apex.optimizers import FusedAdam

        norm = FusedLayerNorm(8)
        optimizer = FusedAdam(model.parameters(), lr=1e-3)
        model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
    """,
        apex="ascend",
    )
    assert "from apex.optimizers import NpuFusedAdamW" in text and "from apex.optimizers import FusedAdam" not in text
    assert "optimizer = NpuFusedAdamW(model.parameters(), lr=1e-3, weight_decay=0.0)" in text
    assert any("do not replace p.data/p.grad" in f.message for f in findings["NPU301"])  # NpuFused constraints
    assert 'amp.initialize(model, optimizer, opt_level="O1", combine_grad=True)' in text
    assert "norm = FusedLayerNorm(8)" in text
    assert not [f for f in findings.get("NPU330", []) if f.tier is Tier.MANUAL]


# --- precision policy ------------------------------------------------------------------------


def test_migrated_autocast_is_not_flagged_again():
    source = """
        import torch

        with torch.autocast("npu", dtype=torch.bfloat16):
            y = model(x)
    """
    text, findings = migrate(source)
    assert text == dedent(source) and not findings


def test_precision_policies_on_cuda_autocast():
    source = """
        import torch

        scaler = torch.cuda.amp.GradScaler()
        with torch.autocast("cuda", dtype=torch.float16):
            y = model(x)
    """
    bf16, _ = migrate(source)
    fp16, _ = migrate(source, precision="fp16")
    keep, _ = migrate(source, precision="keep")
    assert 'torch.autocast("npu", dtype=torch.bfloat16)' in bf16 and "GradScaler()" in bf16
    assert 'torch.autocast("npu", dtype=torch.float16)' in fp16 and "GradScaler(init_scale=2.0**14)" in fp16
    assert 'torch.autocast("npu", dtype=torch.float16)' in keep and "GradScaler()" in keep


# --- options: tiers, selection, check mode -----------------------------------------------------


def test_imports_stay_when_the_fixes_using_them_are_above_max_tier():
    text, _ = migrate(
        """
        import torch
        from apex.normalization import FusedLayerNorm
        from apex.optimizers import FusedAdam

        norm = FusedLayerNorm(8)
        optimizer = FusedAdam(params)
    """,
        max_tier=Tier.NUMERIC,
    )
    assert "torch.nn.LayerNorm(8)" in text and "from apex.normalization" not in text
    assert "optimizer = FusedAdam(params)" in text and "from apex.optimizers import FusedAdam" in text


def test_selecting_one_code_leaves_imports_alone():
    text, findings = migrate(
        """
        import torch
        from apex import amp
        from apex.optimizers import FusedAdam

        optimizer = FusedAdam(params)
        model, optimizer = amp.initialize(model, optimizer)
    """,
        select=("NPU301",),
    )
    assert set(findings) == {"NPU301"}
    assert "from apex.optimizers import FusedAdam" in text and "amp.initialize" in text


def test_check_mode_reports_without_changing():
    source = dedent(LOOP)
    text, result = migrate_text(source, Options(fix=False))
    assert text == source
    assert {"NPU310", "NPU311", "NPU312", "NPU330"} <= {f.code for f in result.findings}
