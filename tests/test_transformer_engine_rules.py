"""Behaviour of the TransformerEngine rules (NPU411–NPU418) beyond the catalogue examples and goldens."""

from __future__ import annotations

import libcst as cst
from helpers import dedent, migrate_text

from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.options import Options


def findings(result, code):
    return [f for f in result.findings if f.code == code]


def test_every_te_only_argument_gets_its_own_entry():
    source = dedent(
        """
        import torch
        import transformer_engine.pytorch as te

        layer = te.Linear(8, 8, params_dtype=torch.float16, sequence_parallel=False, init_method=None, ub_name=None)
        """
    )
    after, result = migrate_text(source)
    assert 'torch.nn.Linear(8, 8, dtype=torch.float16, device="npu")' in after
    messages = sorted(f.message.split("`")[1] for f in findings(result, "NPU413"))
    assert messages == ["init_method=", "params_dtype=", "sequence_parallel=", "ub_name="]
    assert all(f.applied for f in findings(result, "NPU413"))


def test_manual_module_keeps_every_argument_and_the_import():
    source = dedent(
        """
        import transformer_engine.pytorch as te

        layer = te.Linear(8, 8, params_dtype=None, zero_centered_gamma=True)
        """
    )
    after, result = migrate_text(source)
    assert "layer = te.Linear(8, 8, params_dtype=None, zero_centered_gamma=True)" in after
    assert [f.tier for f in findings(result, "NPU412")] == [Tier.MANUAL]
    assert not findings(result, "NPU413") and not findings(result, "NPU416")


def test_multiline_call_keeps_its_layout():
    source = dedent(
        """
        import torch
        import transformer_engine.pytorch as te

        layer = te.Linear(
            8,
            8,
            tp_size=1,
        )
        """
    )
    after, _ = migrate_text(source)
    assert 'torch.nn.Linear(\n    8,\n    8,\n    device="npu",\n)' in after
    cst.parse_module(after)


def test_recipe_chain_and_imports_go_when_unused():
    source = dedent(
        """
        import torch
        import transformer_engine.pytorch as te
        from transformer_engine.common.recipe import DelayedScaling, Format


        def step(model, x):
            fmt = Format.E4M3
            fp8_recipe = DelayedScaling(fp8_format=fmt)
            with te.fp8_autocast(fp8_recipe=fp8_recipe):
                return model(x)
        """
    )
    after, result = migrate_text(source)
    assert "transformer_engine" not in after and "fmt" not in after and "fp8_recipe" not in after
    assert 'with torch.autocast("npu", dtype=torch.bfloat16):' in after
    assert not any(f.code == "NPU003" for f in result.findings)


def test_recipe_still_used_elsewhere_is_kept():
    source = dedent(
        """
        import torch
        import transformer_engine.pytorch as te
        from transformer_engine.common import recipe

        fp8_recipe = recipe.DelayedScaling()


        def step(model, x):
            with te.fp8_autocast(fp8_recipe=fp8_recipe):
                return model(x, fp8_recipe)
        """
    )
    after, _ = migrate_text(source)
    assert "fp8_recipe = recipe.DelayedScaling()" in after
    assert "from transformer_engine.common import recipe" in after


def test_check_mode_reports_every_construct():
    source = dedent(
        """
        import torch
        import transformer_engine.pytorch as te

        layer = te.LayerNorm(8)
        with te.fp8_autocast():
            pass
        """
    )
    after, result = migrate_text(source, Options(fix=False))
    assert after == source
    # NPU606: the module-level TE import, which fails on an NPU host as the file is
    assert sorted(f.code for f in result.findings) == ["NPU411", "NPU412", "NPU606"]


def test_function_level_import_is_removed_but_never_empties_a_body():
    source = dedent(
        """
        import torch


        def build():
            import transformer_engine.pytorch as te
            return te.LayerNorm(8)


        def only_import():
            import transformer_engine.pytorch as te
        """
    )
    after, _ = migrate_text(source)
    assert 'def build():\n    return torch.nn.LayerNorm(8, device="npu")' in after
    assert "def only_import():\n    # TODO(cuda2npu): NPU606" in after  # the import fails when it runs
    assert after.endswith("\n    import transformer_engine.pytorch as te\n")


def test_te_ops_api_is_not_mistaken_for_modules():
    source = dedent(
        """
        import transformer_engine.pytorch as te

        layer = te.ops.Linear(8, 8)
        """
    )
    _, result = migrate_text(source)
    assert sorted(f.code for f in result.findings) == ["NPU417", "NPU606"]  # te.ops stays, and so its import


def test_removed_statements_keep_the_blank_lines_before_them():
    source = dedent(
        """
        import os

        import transformer_engine.pytorch as te
        from transformer_engine.common import recipe
        import torch


        class Block(torch.nn.Module):
            pass


        fp8 = recipe.DelayedScaling()
        with te.fp8_autocast(enabled=True, fp8_recipe=fp8):
            pass
        """
    )
    after, _ = migrate_text(source)
    assert after.startswith("import os\n\nimport torch\nimport torch_npu\n")  # the import groups stay apart
    assert "class Block(torch.nn.Module):\n    pass\n\n\nwith torch.autocast(" in after


def test_linear_with_return_bias_takes_the_generated_class_with_any_te_argument():
    """Every argument te.Linear accepts is known to the generated-Linear path too (checked by name)."""
    from cuda2npu.families.transformer_engine.generated import FUSED
    from cuda2npu.families.transformer_engine.rules import LINEAR_PARAMS

    assert set(LINEAR_PARAMS) <= set(FUSED["Linear"].params)
    source = dedent(
        """
        import transformer_engine.pytorch as te

        proj = te.Linear(8, 8, return_bias=True, skip_weight_param_allocation=False, save_original_input=False)
        """
    )
    after, result = migrate_text(source)
    assert "proj = te_npu_modules.Linear(8, 8, return_bias=True)" in after
    assert sorted(f.message.split("`")[1] for f in findings(result, "NPU413")) == [
        "save_original_input=",
        "skip_weight_param_allocation=",
    ]


def _recipe_messages(result):
    return [f.message for f in findings(result, "NPU415")]


def test_a_recipe_name_reused_in_another_function_does_not_keep_it():
    """accelerate's FP8 benchmarks: each function has its own `FP8_RECIPE_KWARGS` (Python scoping)."""
    source = dedent(
        """
        import transformer_engine.common.recipe as te_recipe
        import transformer_engine.pytorch as te
        from transformer_engine.common.recipe import DelayedScaling


        def baseline(model, x):
            FP8_RECIPE_KWARGS = {"fp8_format": te_recipe.Format.HYBRID, "amax_history_len": 32}
            fp8_recipe = DelayedScaling(**FP8_RECIPE_KWARGS)
            with te.fp8_autocast(enabled=True, fp8_recipe=fp8_recipe):
                return model(x)


        def integration(make_handler):
            FP8_RECIPE_KWARGS = {"fp8_format": "HYBRID", "amax_history_len": 32}
            return make_handler(**FP8_RECIPE_KWARGS)
        """
    )
    after, result = migrate_text(source)
    assert "transformer_engine" not in after and "fp8_recipe" not in after
    assert after.count("FP8_RECIPE_KWARGS") == 2  # the other function's dict and its use stay
    assert all(f.applied for f in findings(result, "NPU415"))


def test_names_an_assignment_binds_are_no_reads():
    source = dedent(
        """
        import transformer_engine.pytorch as te
        from transformer_engine.common.recipe import DelayedScaling


        def step(model, x, preset):
            fp8_recipe = DelayedScaling()
            with te.fp8_autocast(fp8_recipe=fp8_recipe):
                y = model(x)
            dtype, fp8_recipe = preset
            return y, dtype
        """
    )
    after, result = migrate_text(source)
    assert "DelayedScaling" not in after and "dtype, fp8_recipe = preset" in after
    assert not any(f.tier == Tier.MANUAL for f in findings(result, "NPU415"))


def test_a_kept_recipe_names_the_use_that_keeps_it():
    source = dedent(
        """
        import transformer_engine.pytorch as te
        from transformer_engine.common.recipe import DelayedScaling


        def make_recipe(margin):
            fp8_recipe = DelayedScaling(margin=margin)
            return fp8_recipe


        def run(model, x, log):
            fp8_recipe = DelayedScaling()
            log(fp8_recipe)
            with te.fp8_autocast(fp8_recipe=fp8_recipe):
                return model(x)
        """
    )
    after, result = migrate_text(source)
    messages = _recipe_messages(result)
    assert len(messages) == 2 and all(f.tier == Tier.MANUAL for f in findings(result, "NPU415"))
    assert (
        "function `make_recipe` building an FP8 recipe kept: this file does not call it; other files may import it"
        in messages[0]
    )
    assert "`fp8_recipe` kept: it is also passed to `log(...)`" in messages[1]
    assert (
        after.count("DelayedScaling(") == 2 and "from transformer_engine.common.recipe import DelayedScaling" in after
    )


def test_a_recipe_if_goes_whole_and_an_impure_one_stays():
    source = dedent(
        """
        import transformer_engine.pytorch as te
        from transformer_engine.common import recipe


        def step(model, x, args, pick):
            if args.hybrid:
                fmt = recipe.Format.HYBRID
            elif args.e5m2:
                fmt = recipe.Format.E5M2
            else:
                fmt = recipe.Format.E4M3
            if pick():
                other = recipe.DelayedScaling()
            with te.fp8_autocast(fp8_recipe=recipe.DelayedScaling(fp8_format=fmt)):
                return model(x)
        """
    )
    after, result = migrate_text(source)
    assert "fmt" not in after and "args.hybrid" not in after and "pass" not in after
    # `pick()` may have side effects: the `if` stays, and its recipe line would empty its block
    assert "    if pick():\n" in after and "other = recipe.DelayedScaling()" in after
    kept = [f for f in findings(result, "NPU415") if f.tier == Tier.MANUAL]
    assert len(kept) == 1 and "unused, but it is the only statement of its block" in kept[0].message


def test_class_attributes_and_globals_are_not_removed_by_name():
    source = dedent(
        """
        import transformer_engine.pytorch as te
        from transformer_engine.common.recipe import DelayedScaling

        RECIPE = None


        class Trainer:
            recipe = DelayedScaling()

            def step(self, model, x):
                with te.fp8_autocast(fp8_recipe=self.recipe):
                    return model(x)


        def configure():
            global RECIPE
            RECIPE = DelayedScaling()


        def report():
            return RECIPE
        """
    )
    after, result = migrate_text(source)
    assert "    recipe = DelayedScaling()" in after  # read as `self.recipe`: never removed by name
    assert any("`recipe` kept: it is a class attribute" in m for m in _recipe_messages(result))
    assert "    RECIPE = DelayedScaling()" in after
    assert any("`RECIPE` kept: it is also returned" in m for m in _recipe_messages(result))


def test_a_recipe_stored_on_self_goes_when_only_the_autocast_reads_it():
    source = dedent(
        """
        import transformer_engine.pytorch as te
        from transformer_engine.common import recipe


        class Block:
            def __init__(self, args):
                self.fp8 = args.fp8
                self.fp8_recipe = recipe.DelayedScaling(margin=args.fp8_margin)

            def forward(self, x):
                with te.fp8_autocast(enabled=True, fp8_recipe=self.fp8_recipe):
                    return x
        """
    )
    after, result = migrate_text(source)
    assert "transformer_engine" not in after and "fp8_recipe" not in after
    (removed,) = findings(result, "NPU415")
    assert removed.applied and removed.tier == Tier.REVIEW and "no other file reads the attribute" in removed.message


def test_a_recipe_attribute_read_elsewhere_stays_with_the_use_named():
    source = dedent(
        """
        import transformer_engine.pytorch as te
        from transformer_engine.common import recipe


        class Block:
            def __init__(self, args):
                self.fp8_recipe = recipe.DelayedScaling(margin=args.fp8_margin)

            def forward(self, x):
                with te.fp8_autocast(enabled=True, fp8_recipe=self.fp8_recipe):
                    return x


        def describe(block, log):
            log(getattr(block, "fp8_recipe"))
        """
    )
    after, result = migrate_text(source)
    assert "self.fp8_recipe = recipe.DelayedScaling(margin=args.fp8_margin)" in after
    assert "from transformer_engine.common import recipe" in after
    (kept,) = findings(result, "NPU415")
    assert kept.tier == Tier.MANUAL
    assert "`self.fp8_recipe` kept: it is also passed to `getattr(...)`" in kept.message


def test_an_autocast_left_manual_keeps_its_recipe():
    """`enabled` with side effects: the autocast stays, so does the recipe it reads (no NPU415 finding)."""
    source = dedent(
        """
        import transformer_engine.pytorch as te
        from transformer_engine.common.recipe import DelayedScaling


        def step(model, x, flags):
            fp8_recipe = DelayedScaling()
            with te.fp8_autocast(enabled=next(flags), fp8_recipe=fp8_recipe):
                return model(x)
        """
    )
    after, result = migrate_text(source)
    assert "fp8_recipe = DelayedScaling()" in after and "te.fp8_autocast(enabled=next(flags)" in after
    assert not findings(result, "NPU415")


def test_a_removed_recipe_other_files_may_import_is_a_review_item():
    source = dedent(
        """
        import transformer_engine.pytorch as te
        from transformer_engine.common.recipe import DelayedScaling, Format

        fp8_recipe = DelayedScaling(fp8_format=Format.HYBRID)
        _eval_recipe = DelayedScaling(fp8_format=Format.E4M3)


        def step(model, x):
            local_recipe = DelayedScaling()
            with te.fp8_autocast(fp8_recipe=local_recipe):
                y = model(x)
            with te.fp8_autocast(fp8_recipe=_eval_recipe):
                y = model(y)
            with te.fp8_autocast(fp8_recipe=fp8_recipe):
                return model(y)
        """
    )
    after, result = migrate_text(source)
    assert "transformer_engine" not in after and "DelayedScaling" not in after
    tiers = {f.message.split("`")[1]: f.tier for f in findings(result, "NPU415")}
    assert tiers == {"fp8_recipe": Tier.REVIEW, "_eval_recipe": Tier.EXACT, "local_recipe": Tier.EXACT}
    (public,) = [f for f in findings(result, "NPU415") if f.tier == Tier.REVIEW]
    assert public.message.endswith("removed: review that no other file imports it")
