"""No half-migrated apex (issue 12, class 6): a rewrite that replaces an apex object finds its
other uses — the flags set next to its import, the wrapped DDP model's apex-only members, the
loss scaler of an amp.initialize — and migrates them all or keeps apex with a manual finding."""

from __future__ import annotations

import re

import libcst as cst
import pytest
from helpers import dedent, migrate_text, options_of

from cuda2npu.core.diagnostics import Tier


def migrate(source: str, **options):
    """(migrated text, findings) — also checks the output parses and is a fixed point."""
    opts = options_of(**options)
    text, result = migrate_text(dedent(source), opts)
    cst.parse_module(text)
    again, _ = migrate_text(text, opts)
    assert again == text, "a second migrate changed the output"
    return text, result.findings


def manual(findings, code: str) -> list[str]:
    return [f.message for f in findings if f.code == code and f.tier is Tier.MANUAL]


# --- flags set next to an apex import ---------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        """
        try:
            from apex.normalization import FusedRMSNorm
            has_apex = True
        except ImportError:
            has_apex = False
        """,
        """
        try:
            from apex.normalization import FusedRMSNorm
        except ImportError:
            HAS_APEX = False
        else:
            HAS_APEX = True
        """,
        """
        try:
            import apex  # only probes for apex
            from mylib.fused import FusedNorm
            HAVE_APEX: bool = True
            NormImpl = FusedNorm
        except ImportError:
            from torch.nn import LayerNorm as NormImpl
            HAVE_APEX: bool = False
        """,
        """
        has_apex = True
        try:
            from apex.normalization import FusedRMSNorm
        except ImportError:
            has_apex = False
            FusedRMSNorm = None
        """,
    ],
    ids=["flag-in-body", "flag-in-else", "probe-import", "flag-in-handler"],
)
@pytest.mark.parametrize("apex", ["native", "ascend"])
@pytest.mark.parametrize("read", [True, False], ids=["flag-read", "flag-unread"])
def test_an_import_whose_try_sets_a_flag_stays(source, apex, read):
    flag = re.search(r"(\w+)(?::\s*bool)?\s*=\s*False", source).group(1)
    use = f"if {flag}:\n    print('apex')\n" if read else ""
    source = (
        "import torch\n\n" + dedent(source) + "\nnorm = FusedRMSNorm(8) if 'FusedRMSNorm' in dir() else None\n" + use
    )
    text, findings = migrate(source, apex=apex)
    kept = [line for line in dedent(source).splitlines() if "import apex" in line or "from apex" in line]
    assert all(line in text for line in kept), "the import that makes the flag truthful must stay"
    # with Ascend's apex the import succeeds where it is installed; a flag nothing reads asks nothing
    marked = apex == "native" and read
    assert any("set in the same `try`" in m for m in manual(findings, "NPU330")) == marked
    assert ("# TODO(cuda2npu): NPU330" in text) == marked


def test_a_try_without_flags_still_loses_its_migrated_import():
    text, findings = migrate("""
        import torch

        norm = None
        try:
            from apex.normalization import FusedLayerNorm
            norm = FusedLayerNorm(64, eps=1e-5)
        except ImportError:
            norm = torch.nn.LayerNorm(64, eps=1e-5)
    """)
    assert "apex" not in text
    assert "norm = torch.nn.LayerNorm(64, eps=1e-5)\nexcept ImportError:" in text
    assert not manual(findings, "NPU330")


def test_an_alias_of_a_class_defined_in_the_try_is_not_a_flag():
    text, _ = migrate("""
        import torch

        try:
            from apex.normalization import FusedLayerNorm as ApexLayerNorm

            class HookedLayerNorm(ApexLayerNorm):
                pass

            LayerNormImpl = HookedLayerNorm
        except ImportError:
            LayerNormImpl = None
    """)
    assert "apex" not in text and "class HookedLayerNorm(torch.nn.LayerNorm):" in text


def test_a_flag_with_apex_uses_left_reports_only_the_uses():
    """The import stays for the uses (NPU310 says why); the flag stays truthful, no second item."""
    text, findings = migrate("""
        import torch

        try:
            from apex import amp
            has_apex = True
        except ImportError:
            amp = None
            has_apex = False

        class ApexScaler:
            def __call__(self, loss, optimizer):
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    scaled_loss.backward()
                optimizer.step()

            def state_dict(self):
                return amp.state_dict()
    """)
    assert "    from apex import amp\n    has_apex = True\n" in text
    assert manual(findings, "NPU310") and not manual(findings, "NPU330")


# --- amp.initialize whose loss is scaled elsewhere --------------------------------------


def test_initialize_without_scale_loss_in_the_file_is_manual():
    text, findings = migrate("""
        import torch
        from apex import amp
        from mylib.scalers import ApexScaler

        def setup(model, optimizer):
            model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
            return model, optimizer, ApexScaler()
    """)
    assert 'amp.initialize(model, optimizer, opt_level="O1")' in text and "from apex import amp" in text
    assert any("no amp.scale_loss is in this file" in m for m in manual(findings, "NPU310"))


def test_initialize_for_inference_only_is_still_migrated():
    text, _ = migrate("""
        import torch
        from apex import amp

        model = amp.initialize(model, opt_level="O1")
    """)
    assert "amp" not in text


# --- apex DDP's own members ---------------------------------------------------------------


def test_allreduce_toggles_become_the_no_sync_flag():
    text, findings = migrate("""
        import torch
        from apex.parallel import DistributedDataParallel as DDP

        class Trainer:
            def __init__(self, model):
                self.model = DDP(model)

            def step(self, batch, sync):
                if sync:
                    self.model.enable_allreduce()
                else:
                    self.model.disable_allreduce()
                self.model(batch).sum().backward()
    """)
    assert "self.model.require_backward_grad_sync = True" in text
    assert "self.model.require_backward_grad_sync = False" in text
    assert "apex" not in text and "allreduce" not in text
    assert any("no_sync()" in f.message for f in findings if f.code == "NPU322" and f.applied)


@pytest.mark.parametrize(
    ("use", "reason"),
    [
        ("model.needs_refresh = True", "`model.needs_refresh` is apex DDP's own"),
        ("model.sync_bucket_structure()", "`model.sync_bucket_structure` is apex DDP's own"),
        ("if model.delay_allreduce: pass", "`model.delay_allreduce` is apex DDP's own"),
        ("flag = model.disable_allreduce()", "`model.disable_allreduce` is apex DDP's own"),
    ],
    ids=["attribute", "method", "read", "toggle-in-expression"],
)
def test_other_apex_only_members_keep_apex_ddp(use, reason):
    text, findings = migrate(f"""
        import torch
        from apex.parallel import DistributedDataParallel as DDP

        model = DDP(model)
        {use}
        if isinstance(model, DDP):
            model = model.module
    """)
    assert "model = DDP(model)" in text and "isinstance(model, DDP)" in text
    assert any(reason in m for m in manual(findings, "NPU322"))


def test_a_toggle_on_a_model_from_a_helper_keeps_apex_ddp():
    text, findings = migrate("""
        import torch
        from apex.parallel import DistributedDataParallel as DDP

        def wrap(model):
            return DDP(model)

        ddp = wrap(model)
        ddp.disable_allreduce()
    """)
    assert "return DDP(model)" in text and "ddp.disable_allreduce()" in text
    assert manual(findings, "NPU322")


def test_a_toggle_is_left_alone_when_its_ddp_stays_for_another_reason():
    text, _ = migrate("""
        import torch
        from apex.parallel import DistributedDataParallel as DDP

        model = DDP(model, gradient_predivide_factor=8.0)
        model.disable_allreduce()
    """)
    assert "model.disable_allreduce()" in text and "require_backward_grad_sync" not in text


def test_a_subclass_using_apex_members_keeps_its_base():
    text, findings = migrate("""
        import torch
        from apex.parallel import DistributedDataParallel

        class LazyDDP(DistributedDataParallel):
            def forward(self, *inputs, sync=True):
                if not sync:
                    self.disable_allreduce()
                return super().forward(*inputs)
    """)
    assert "class LazyDDP(DistributedDataParallel):" in text
    assert any("subclass kept" in m for m in manual(findings, "NPU322"))


def test_a_wrapper_method_of_the_same_name_is_not_apex_ddp():
    text, _ = migrate("""
        import torch
        from apex.parallel import DistributedDataParallel as DDP

        class Flow:
            def setup(self, net):
                self.core = DDP(net)

            def disable_allreduce(self):
                self.core.disable_allreduce()
    """)
    assert "self.core.require_backward_grad_sync = False" in text and "apex" not in text


@pytest.mark.parametrize(
    ("value", "expected"), [("True", "True"), ("args.delay_allreduce", "args.delay_allreduce"), ("False", None)]
)
def test_delay_allreduce_keeps_unused_parameters_working(value, expected):
    text, _ = migrate(f"""
        import torch
        from apex.parallel import DistributedDataParallel as DDP

        model = DDP(model, delay_allreduce={value})
    """)
    if expected is None:
        assert "find_unused_parameters" not in text
    else:
        assert f"find_unused_parameters={expected})" in text


@pytest.mark.parametrize(
    ("use", "reason"),
    [
        ("if amp is None:\n    raise ImportError('install apex')", "`amp` here is read as a value"),
        (
            "print(amp._amp_state.loss_scalers[0].loss_scale())",
            "`amp._amp_state.loss_scalers` here uses apex.amp beyond",
        ),
        ("scale = amp.scale_loss", "`amp.scale_loss` here uses apex.amp beyond"),
    ],
    ids=["availability-test", "internal-state", "function-as-value"],
)
def test_other_uses_of_apex_amp_keep_all_of_it(use, reason):
    text, findings = migrate(
        dedent("""
        import torch
        try:
            from apex import amp
        except ImportError:
            amp = None

        model, optimizer = amp.initialize(model, optimizer)
        for x, y in loader:
            loss = criterion(model(x), y)
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
            optimizer.step()
    """)
        + use
        + "\n"
    )
    assert "amp.initialize(model, optimizer)" in text and "with amp.scale_loss(" in text
    assert any(reason in m for m in manual(findings, "NPU310"))


# --- the precision policy where it has nothing to decide -----------------------------------


def test_a_disabled_autocast_gets_no_dtype():
    text, findings = migrate("""
        import torch

        with torch.amp.autocast("cuda", enabled=False):
            y = rope(x.float())
    """)
    assert 'with torch.amp.autocast("npu", enabled=False):' in text
    assert "NPU340" not in {f.code for f in findings}


@pytest.mark.parametrize(
    ("training", "reported"),
    [
        ("", False),
        ("loss.backward()\noptimizer.step()\n", True),
        # LLM-Pruner (round 32): gradients for importance scores, a pruner's step, no optimizer
        ("loss.backward()\npruner.step()\nmodel.zero_grad()\n", False),
    ],
)
def test_a_float16_model_is_reported_only_where_it_trains(training, reported):
    _, findings = migrate("import torch\n\nmodel = load(path)\nmodel.half()\nloss = model(x).sum()\n" + training)
    assert ("NPU342" in {f.code for f in findings}) is reported


@pytest.mark.parametrize(
    ("switches", "reported"),
    [
        ("net.requires_grad_(requires_grad=False)\n", False),
        ("net.requires_grad_(False)\nnet.requires_grad_()\n", True),
        ("for p in net.parameters():\n    p.requires_grad_(False)\n", False),
        ("net.requires_grad_(flag)\n", True),
        ("other.requires_grad_(False)\n", True),
    ],
    ids=["keyword", "thawed", "parameter-loop", "not-literal", "other-model"],
)
def test_a_float16_model_is_reported_unless_its_gradients_stay_off(switches, reported):
    _, findings = migrate("import torch\n\nnet = Net().half()\n" + switches + "net(x).sum().backward()\nopt.step()\n")
    assert ("NPU342" in {f.code for f in findings}) is reported


def test_names_that_merely_spell_amp_are_not_uses_of_apex_amp():
    text, _ = migrate("""
        import torch
        from apex import amp

        def build(model):
            return Trainer(model, amp=args.amp)

        model, optimizer = amp.initialize(model, optimizer)
        for x, y in loader:
            loss = criterion(model(x), y)
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
            optimizer.step()
    """)
    assert "apex" not in text and "amp.initialize" not in text and "loss.backward()" in text
    assert "return Trainer(model, amp=args.amp)" in text
