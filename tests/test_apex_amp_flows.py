"""apex.amp in the shapes real training scripts have (issue 15, item 1).

* NVIDIA BERT's choice of a loss scale (``if args.loss_scale == 0: amp.initialize(...,
  loss_scale="dynamic") else: amp.initialize(..., loss_scale=args.loss_scale)``): one
  amp.initialize whose arguments the tests choose, migrated with no apex left;
* amp.initialize and amp.scale_loss in different functions or methods (trainer classes);
* ``amp.initialize(model)`` without an optimizer (inference), ``[]`` as optimizers;
* apex's loss-scale semantics (``"dynamic"``, None, a number, a name read at run time), checked
  numerically: the original runs on the apex stand-in, the migrated code on the emulated NPU;
* what stays manual (with a marker, never half-migrated): alternatives that are not one choice,
  gradient reads between micro-batches under float16, a condition the other function cannot see.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import textwrap

import libcst as cst
import pytest
from cli_helpers import REPO
from helpers import dedent, migrate_text, options_of

from cuda2npu.core.diagnostics import Tier
from cuda2npu.core.options import Options

APEX_LEFT = re.compile(r"^\s*(from apex|import apex)|(?<![\w.])amp\.", re.MULTILINE)  # not torch.npu.amp.


def migrate(source: str, **options):
    """(migrated text, findings); the output parses and a second run changes nothing."""
    opts = options_of(**options)
    text, result = migrate_text(dedent(source), opts)
    cst.parse_module(text)
    again, _ = migrate_text(text, opts)
    assert again == text, "a second migrate changed the output"
    return text, result.findings


def manual(findings, code: str = "NPU310") -> list[str]:
    return [f.message for f in findings if f.code == code and f.tier is Tier.MANUAL]


def messages(findings, code: str) -> list[str]:
    return [f.message for f in findings if f.code == code]


def assert_kept(text: str, findings) -> None:
    """All or nothing: every amp call stays, apex stays imported, and the reason is marked."""
    assert "from apex import amp" in text and "amp.initialize(" in text
    assert manual(findings) and "# TODO(cuda2npu): NPU310" in text


BERT = """
    import torch
    from apex import amp


    def main(args):
        model = build().cuda()
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
        if args.fp16:
            if args.loss_scale == 0:
                model, optimizer = amp.initialize(model, optimizer, opt_level="O2", keep_batchnorm_fp32=False,
                                                  loss_scale="dynamic")
            else:
                model, optimizer = amp.initialize(model, optimizer, opt_level="O2", keep_batchnorm_fp32=False, loss_scale=args.loss_scale)
        for step, batch in enumerate(loader):
            loss = model(*batch)
            if args.fp16:
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    scaled_loss.backward()
            else:
                loss.backward()
            if (step + 1) % args.accumulation == 0:
                torch.nn.utils.clip_grad_norm_(amp.master_params(optimizer), 1.0)
                optimizer.step()
                optimizer.zero_grad()
"""


# --- amp.initialize in the branches of an `if` --------------------------------------------


def test_bert_loss_scale_choice_migrates_with_no_apex_left():
    text, findings = migrate(BERT)
    assert not APEX_LEFT.search(text), text
    assert "if args.loss_scale == 0" not in text  # the choice only chose apex arguments
    assert (
        'with torch.autocast("npu", dtype=torch.bfloat16, enabled=args.fp16):\n            loss = model(*batch)' in text
    )
    assert not manual(findings)
    init = " ".join(messages(findings, "NPU310"))
    assert "the 2 amp.initialize calls of `if args.loss_scale == 0:` are one choice" in init
    assert "`keep_batchnorm_fp32` (autocast runs batch norm in float32)" in init  # dropped with a note


def test_bert_under_fp16_chooses_the_scaler_as_apex_chose_the_loss_scale():
    text, findings = migrate(BERT, precision="fp16")
    assert not APEX_LEFT.search(text), text
    creation = dedent("""
        if args.loss_scale == 0:
            scaler = torch.npu.amp.GradScaler(init_scale=2.0**14, enabled=args.fp16)
        else:
            scaler = torch.npu.amp.GradScaler(init_scale=2.0**14 if args.loss_scale in (None, "dynamic") else float(args.loss_scale), dynamic=args.loss_scale in (None, "dynamic"), enabled=args.fp16)
        for step, batch in enumerate(loader):
    """)
    assert textwrap.indent(creation, "    ") in text  # instead of `if args.fp16:`: the step needs it either way
    assert "scaler.unscale_(optimizer)\n            torch.nn.utils.clip_grad_norm_(" in text
    assert "scaler.step(optimizer)\n            scaler.update()" in text
    assert not manual(findings)


def test_elif_chain_of_three_alternatives():
    text, _ = migrate(
        """
        import torch
        from apex import amp

        if args.static:
            model, optimizer = amp.initialize(model, optimizer, opt_level="O1", loss_scale=128)
        elif args.scale_from_config:
            model, optimizer = amp.initialize(model, optimizer, opt_level="O1", loss_scale=cfg.loss_scale)
        else:
            model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
        for x, y in loader:
            loss = criterion(model(x), y)
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
            optimizer.step()
    """,
        precision="keep",
    )
    assert not APEX_LEFT.search(text), text
    assert (
        dedent("""
        if args.static:
            scaler = torch.npu.amp.GradScaler(init_scale=128, dynamic=False)
        elif args.scale_from_config:
            scaler = torch.npu.amp.GradScaler(init_scale=2.0**16 if cfg.loss_scale in (None, "dynamic") else float(cfg.loss_scale), dynamic=cfg.loss_scale in (None, "dynamic"))
        else:
            scaler = torch.npu.amp.GradScaler()
    """)
        in text
    )


@pytest.mark.parametrize(
    ("branches", "reason"),
    [
        (
            "if args.loss_scale == 0:\n    model, optimizer = amp.initialize(model, optimizer, loss_scale='dynamic')\n"
            "if args.static:\n    model, optimizer = amp.initialize(model, optimizer, loss_scale=128)\n",
            "called more than once",
        ),
        (
            "if args.loss_scale == 0:\n    model, optimizer = amp.initialize(model, optimizer, loss_scale='dynamic')\n"
            "elif args.static:\n    model, optimizer = amp.initialize(model, optimizer, loss_scale=128)\n",
            "called more than once",
        ),
        (
            "if args.loss_scale == 0:\n    print('dynamic')\n    model, optimizer = amp.initialize(model, optimizer)\n"
            "else:\n    model, optimizer = amp.initialize(model, optimizer, loss_scale=args.loss_scale)\n",
            "called more than once",
        ),
        (
            "if args.loss_scale == 0:\n    model, optimizer = amp.initialize(model, optimizer, opt_level='O1')\n"
            "else:\n    model, optimizer = amp.initialize(model, optimizer, opt_level='O2')\n",
            "differ in more than their loss scaling",
        ),
        (
            "if use_dynamic():\n    model, optimizer = amp.initialize(model, optimizer)\n"
            "else:\n    model, optimizer = amp.initialize(model, optimizer, loss_scale=8)\n",
            "not a plain condition",
        ),
    ],
    ids=["two-ifs", "no-else", "other-statement", "opt-levels-differ", "test-calls"],
)
def test_initialize_calls_that_are_not_one_choice_stay(branches, reason):
    source = (
        "import torch\nfrom apex import amp\n\n"
        + branches
        + textwrap.dedent("""
        for x, y in loader:
            loss = criterion(model(x), y)
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
            optimizer.step()
    """)
    )
    text, findings = migrate(source)
    assert_kept(text, findings)
    assert "with amp.scale_loss(" in text
    assert any(reason in m for m in manual(findings)), manual(findings)


# --- loss-scale arguments ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("loss_scale", "precision", "expected"),
    [
        ('"dynamic"', "fp16", "init_scale=2.0**14"),
        ('"dynamic"', "keep", ""),
        ("None", "fp16", "init_scale=2.0**14"),
        ("128", "fp16", "init_scale=128, dynamic=False"),
        ('"128.0"', "keep", "init_scale=128.0, dynamic=False"),
        (
            "args.loss_scale",
            "keep",
            'init_scale=2.0**16 if args.loss_scale in (None, "dynamic") else float(args.loss_scale), '
            'dynamic=args.loss_scale in (None, "dynamic")',
        ),
        ('cfg["loss_scale"]', "fp16", "init_scale=2.0**14"),  # not evaluated twice: dynamic, with a note
    ],
)
def test_loss_scale_becomes_the_scaler_arguments(loss_scale, precision, expected):
    text, findings = migrate(
        f"""
        import torch
        from apex import amp

        model, optimizer = amp.initialize(model, optimizer, loss_scale={loss_scale})
        for x, y in loader:
            loss = criterion(model(x), y)
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
            optimizer.step()
    """,
        precision=precision,
    )
    assert f"scaler = torch.npu.amp.GradScaler({expected})\n" in text
    if loss_scale.startswith("cfg"):
        assert any('loss_scale=cfg["loss_scale"] not carried over' in m for m in messages(findings, "NPU310"))


def test_a_module_level_scaler_does_not_read_the_locals_of_main():
    """apex imagenet main_amp.py: `args` is local to main(), the scaler is global (another function steps)."""
    text, findings = migrate(
        """
        import torch
        from apex import amp

        def main():
            args = parse()
            model, optimizer = amp.initialize(build(), make_optimizer(), opt_level=args.opt_level, loss_scale=args.loss_scale)
            for epoch in range(args.epochs):
                train(model, optimizer)

        def train(model, optimizer):
            for x, y in loader:
                loss = criterion(model(x), y)
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    scaled_loss.backward()
                optimizer.step()
    """,
        precision="fp16",
    )
    assert "\nscaler = torch.npu.amp.GradScaler(init_scale=2.0**14)\n" in text
    assert any("loss_scale=args.loss_scale not carried over" in m for m in messages(findings, "NPU310"))


# --- different functions and methods ---------------------------------------------------------


TRAINER = """
    import torch
    from apex import amp

    class Trainer:
        def train(self, model, optimizer):
            if self.args.fp16:
                if not is_apex_available():
                    raise ImportError("Please install apex")
                model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
            for step, inputs in enumerate(self.loader):
                self.training_step(model, inputs, optimizer)
                if (step + 1) % self.args.accumulation == 0:
                    torch.nn.utils.clip_grad_norm_(amp.master_params(optimizer), 1.0)
                    optimizer.step()
                    {extra}

        def training_step(self, model, inputs, optimizer):
            loss = model(**inputs)[0]
            if self.args.fp16:
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    scaled_loss.backward()
            else:
                loss.backward()
"""


def test_trainer_methods_share_a_scaler_on_self():
    text, findings = migrate(TRAINER.replace("{extra}", "model.zero_grad()"), precision="fp16")
    assert not APEX_LEFT.search(text), text
    assert "is_apex_available" not in text  # the check only guarded apex
    assert "        self.scaler = torch.npu.amp.GradScaler(init_scale=2.0**14, enabled=self.args.fp16)\n" in text
    assert "self.scaler.scale(loss).backward()" in text
    assert "self.scaler.unscale_(optimizer)\n                torch.nn.utils.clip_grad_norm_(" in text
    assert "self.scaler.step(optimizer)\n                self.scaler.update()" in text
    assert (
        'with torch.autocast("npu", dtype=torch.float16, enabled=self.args.fp16):\n            loss = model(**inputs)[0]'
        in text
    )
    assert any("no longer needs apex" in m for m in messages(findings, "NPU310"))


def test_the_scaler_attribute_does_not_take_an_existing_one():
    text, _ = migrate(
        TRAINER.replace("{extra}", "self.scaler.update()  # the native path's own scaler"), precision="fp16"
    )
    assert "self.amp_scaler = torch.npu.amp.GradScaler(" in text and "self.amp_scaler.scale(loss).backward()" in text


def test_availability_assert_is_removed_and_other_checks_stay():
    text, _ = migrate("""
        import torch
        from apex import amp

        def main(args):
            if args.fp16:
                assert has_apex, "apex is needed for --fp16"
                if not args.ok:
                    raise ValueError("not ok")
                model, optimizer = amp.initialize(model, optimizer)
            for x, y in loader:
                loss = criterion(model(x), y)
                with amp.scale_loss(loss, optimizer) as scaled_loss:
                    scaled_loss.backward()
                optimizer.step()
    """)
    assert "has_apex" not in text and 'raise ValueError("not ok")' in text


def test_a_condition_read_through_a_parameter_is_an_assumption_in_the_finding():
    text, findings = migrate("""
        import torch
        from apex import amp

        def train_step(model, batch, optimizer, args):
            loss = model(batch).mean()
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
            optimizer.step()

        def main(args):
            if args.amp:
                model, optimizer = amp.initialize(build(), make_optimizer())
            for batch in loader:
                train_step(model, batch, optimizer, args)
    """)
    assert not APEX_LEFT.search(text)
    assert 'with torch.autocast("npu", dtype=torch.bfloat16, enabled=args.amp):' in text
    assert any("reads `args` of this function, taken to be" in m for m in messages(findings, "NPU312"))


def test_a_condition_the_other_function_cannot_see_keeps_apex():
    text, findings = migrate("""
        import torch
        from apex import amp

        def train_step(model, batch, optimizer):
            loss = model(batch).mean()
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
            optimizer.step()

        def main(args):
            if args.amp:
                model, optimizer = amp.initialize(build(), make_optimizer())
            for batch in loader:
                train_step(model, batch, optimizer)
    """)
    assert_kept(text, findings)
    assert any("`args` is local to the function calling amp.initialize" in m for m in manual(findings))


# --- gradients read between micro-batches (float16) -----------------------------------------


SQUAD_CLIPPER = """
    import torch
    from apex import amp

    model, optimizer = amp.initialize(model, optimizer, opt_level="O2")
    for step, batch in enumerate(loader):
        loss = model(*batch) / accumulation
        with amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
        {clip}
        if (step + 1) % accumulation == 0:
            {inner}
            optimizer.step()
            optimizer.zero_grad()
"""


def test_a_clipper_run_every_micro_batch_is_manual_under_fp16_only():
    source = SQUAD_CLIPPER.replace("{clip}", "clipper.step(amp.master_params(optimizer))").replace("{inner}", "pass")
    text, findings = migrate(source, precision="fp16")
    assert_kept(text, findings)
    assert any("reads the gradients outside the block of `optimizer.step()`" in m for m in manual(findings))
    text, findings = migrate(source)  # bf16: no scaler, the parameters are the master parameters
    assert not APEX_LEFT.search(text) and not manual(findings)
    assert 'clipper.step((p for group in optimizer.param_groups for p in group["params"]))' in text


def test_master_params_read_before_the_step_get_unscaled_first():
    source = SQUAD_CLIPPER.replace("{clip}", "pass").replace("{inner}", "clipper.step(amp.master_params(optimizer))")
    text, findings = migrate(source, precision="fp16")
    assert not APEX_LEFT.search(text) and not manual(findings)
    assert "        scaler.unscale_(optimizer)\n        clipper.step((p for group in" in text


# --- amp.initialize without an optimizer -----------------------------------------------------


def test_inference_wraps_the_model_calls_that_follow():
    text, findings = migrate("""
        import torch
        from apex import amp

        def evaluate(args, model, loader):
            if args.amp:
                model = amp.initialize(model, opt_level="O2", keep_batchnorm_fp32=True)
            with torch.no_grad():
                for x in loader:
                    logits = model(x)
                    probs = logits.softmax(-1)
                    top = model(x.flip(0)).argmax(-1)
            return probs, top
    """)
    assert not APEX_LEFT.search(text)
    wrapped = textwrap.indent(
        dedent("""
        with torch.autocast("npu", dtype=torch.bfloat16, enabled=args.amp):
            logits = model(x)
        probs = logits.softmax(-1)
        with torch.autocast("npu", dtype=torch.bfloat16, enabled=args.amp):
            top = model(x.flip(0)).argmax(-1)
    """),
        " " * 12,
    )
    assert wrapped in text, text
    assert any("`keep_batchnorm_fp32` (autocast runs batch norm in float32)" in m for m in messages(findings, "NPU310"))


def test_empty_optimizers_are_no_optimizers_and_a_model_run_elsewhere_is_said_so():
    text, findings = migrate("""
        import torch
        from apex import amp

        def load(path):
            model = torch.load(path)
            model, _ = amp.initialize(model, [], opt_level="O1")
            return model
    """)
    assert not APEX_LEFT.search(text) and "model, _ = model, []" in text
    assert any(
        "no call of the model follows it in this function" in m and "now runs in float32" in m
        for m in messages(findings, "NPU310")
    )


# --- loss-scale semantics, numerically --------------------------------------------------------

HEADER = """
import torch
from apex import amp
"""

TRAIN = {
    "train_chain": HEADER
    + '''

def train(args, batches):
    """NVIDIA BERT's choice: 0 means dynamic loss scaling, anything else a static scale."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1, bias=False).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    if args.fp16:
        if args.loss_scale == 0:
            model, optimizer = amp.initialize(model, optimizer, opt_level="O1", loss_scale="dynamic", verbosity=0)
        else:
            model, optimizer = amp.initialize(model, optimizer, opt_level="O1", loss_scale=args.loss_scale, verbosity=0)
    for x, y, factor in batches:
        optimizer.zero_grad()
        output = model(x.cuda())
        loss = ((output.float() - y.cuda()) ** 2).mean() * factor
        if args.fp16:
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
        else:
            loss.backward()
        optimizer.step()
    return model.weight.detach().cpu()
''',
    "train_flag": HEADER
    + '''

def train(args, batches):
    """apex imagenet's --loss-scale (a string or None) passed through."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1, bias=False).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = amp.initialize(model, optimizer, opt_level="O1", loss_scale=args.loss_scale, verbosity=0)
    for x, y, factor in batches:
        optimizer.zero_grad()
        loss = ((model(x.cuda()).float() - y.cuda()) ** 2).mean() * factor
        with amp.scale_loss(loss, optimizer) as scaled_loss:
            scaled_loss.backward()
        optimizer.step()
    return model.weight.detach().cpu()
''',
}

RUN = """
import json, sys, types
import torch

side, where = sys.argv[1], sys.argv[2]
if side == "cuda":
    from cuda2npu.emulation import emulate_cuda
    emulate_cuda()
else:
    from cuda2npu.emulation import emulate_npu
    emulate_npu()
    created = []

    class Recording(torch.npu.amp.GradScaler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            created.append(self)

    torch.npu.amp.GradScaler = Recording
sys.path.insert(0, where)
import train_chain, train_flag

gen = torch.Generator().manual_seed(1)
batches = [(0.1 * torch.randn(8, 4, generator=gen), 0.1 * torch.randn(8, 1, generator=gen), factor)
           for factor in (1.0, 1.0, float("inf"), 1.0)]  # the third step overflows
results = {}
for module, values in ((train_chain, (0, 128.0)), (train_flag, (None, "dynamic", "64"))):
    for value in values:
        weight = module.train(types.SimpleNamespace(fp16=True, loss_scale=value), batches)
        if side == "cuda":
            from apex.amp._amp_state import _amp_state
            scale = _amp_state.loss_scalers[0].loss_scale()
        else:
            scale = float(created[-1].get_scale())
        results[f"{module.__name__}:{value}"] = {"weight": weight.flatten().tolist(), "scale": scale}
print(json.dumps(results))
"""


def _run(side: str, where) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", RUN, side, str(where)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _sgd_reference(batches_used: list[int]) -> list[float]:
    """Plain float64 SGD on the same data, over the given steps only (what a skipped step leaves)."""
    import torch

    torch.manual_seed(0)
    weight = torch.nn.Linear(4, 1, bias=False).weight.detach().double().clone()
    gen = torch.Generator().manual_seed(1)
    batches = [(0.1 * torch.randn(8, 4, generator=gen), 0.1 * torch.randn(8, 1, generator=gen)) for _ in range(4)]
    for index in batches_used:
        x, y = (t.double() for t in batches[index])
        grad = 2 * ((x @ weight.T - y) * x).mean(0, keepdim=True)
        weight = weight - 0.1 * grad
    return weight.flatten().tolist()


@pytest.fixture(scope="module")
def loss_scale_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("amp_loss_scale")
    (root / "original").mkdir()
    for name, source in TRAIN.items():
        (root / "original" / f"{name}.py").write_text(source)
    runs = {"original": _run("cuda", root / "original")}
    for precision in ("keep", "fp16"):
        (root / precision).mkdir()
        for name, source in TRAIN.items():
            migrated, _ = migrate_text(source, Options(precision=precision), path=f"{name}.py")
            assert not APEX_LEFT.search(migrated), migrated
            (root / precision / f"{name}.py").write_text(migrated)
        runs[precision] = _run("npu", root / precision)
    return runs


DYNAMIC = ["train_chain:0", "train_flag:None", "train_flag:dynamic"]
STATIC = {"train_chain:128.0": 128.0, "train_flag:64": 64.0}


def test_dynamic_loss_scales_skip_the_overflowing_step_as_apex(loss_scale_runs):
    reference = _sgd_reference([0, 1, 3])
    for case in DYNAMIC:
        for side in ("original", "keep", "fp16"):
            weight = loss_scale_runs[side][case]["weight"]
            assert weight == pytest.approx(reference, rel=1e-2, abs=1e-4), (side, case)
        assert loss_scale_runs["keep"][case] == loss_scale_runs["original"][case]  # same start (2**16), same backoff
        assert loss_scale_runs["original"][case]["scale"] == 2.0**15
        assert loss_scale_runs["fp16"][case]["scale"] == 2.0**13  # --precision fp16 starts at 2**14 (NPU341)


def test_static_loss_scales_stay_and_do_not_skip_as_apex(loss_scale_runs):
    for case, scale in STATIC.items():
        for side in ("original", "keep", "fp16"):
            run = loss_scale_runs[side][case]
            assert run["scale"] == scale, (side, case)
            assert not any(math.isfinite(w) for w in run["weight"]), (side, case)  # the inf step was applied
